"""A CLI's state inside the sandbox: it writes only its data; it sees its state folder through a view
of links, in which what it makes or replaces is its own for one launch; the folder itself, every
file it reads as settings and every name it would read one under stay as they are, under each
mechanism."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from crewbridge.sandbox import State, spawn
from crewbridge.sandbox.state import Prepared
from crewbridge.sandbox.state import prepare as prepare_state


@pytest.fixture
def prepare():
    """prepare(state): crewbridge.sandbox.state.prepare, its views removed after the test (a launch's
    are removed by Launch.ended)."""
    made: list[Prepared] = []
    yield lambda state: made.append(prepare_state(state)) or made[-1]
    for prepared in made:
        if prepared.view is not None:
            shutil.rmtree(prepared.view)


def a_home(tmp_path: Path) -> Path:
    home = tmp_path / "home" / ".cli"
    (home / "sessions").mkdir(parents=True)
    (home / "settings.json").write_text('{"hooks": {}}\n')
    (home / "locks").mkdir()
    (home / "locks" / "old.lock").write_text("the user's own\n")
    return home


def test_the_view_links_every_entry_but_the_private_ones_and_names_itself_in_the_variable(prepare, tmp_path):
    home = a_home(tmp_path)
    state = State(
        home=home,
        variable="CLI_HOME",
        data=(home / "sessions", home / "logs"),
        data_files=(home / "id",),
        private=("locks",),
        also=((".cli.json", tmp_path / "home" / ".cli.json"),),
        view_env=(("CLI_DB", "db"),),
    )
    prepared = prepare(state)
    view = prepared.view
    assert view is not None and prepared.env == {"CLI_HOME": str(view), "CLI_DB": str(view / "db")}
    assert (home / "logs").is_dir() and (home / "id").read_text() == ""  # data made first, to be granted
    assert {p.name: os.readlink(p) for p in view.iterdir()} == {
        "sessions": str(home / "sessions"),
        "logs": str(home / "logs"),
        "id": str(home / "id"),
        "settings.json": str(home / "settings.json"),
        ".cli.json": str(tmp_path / "home" / ".cli.json"),  # a link even where it does not exist yet
    }
    assert prepared.writable == (home / "sessions", home / "logs", home / "id", view)


def test_a_variable_naming_the_folder_that_holds_the_state_folder_sees_the_rest_of_it_as_it_is(prepare, tmp_path):
    home = a_home(tmp_path)
    (tmp_path / "home" / ".agents").mkdir()
    prepared = prepare(State(home=home, variable="CLI_HOME", within=".cli", data=(home / "sessions",)))
    view = prepared.view
    assert view is not None and prepared.env == {"CLI_HOME": str(view)}
    assert os.readlink(view / ".agents") == str(tmp_path / "home" / ".agents")
    assert (view / ".cli").is_dir() and not (view / ".cli").is_symlink()
    assert os.readlink(view / ".cli" / "settings.json") == str(home / "settings.json")


def test_without_a_variable_there_is_no_view_only_data(prepare, tmp_path):
    prepared = prepare(State(data=(tmp_path / "state",), read_only=(tmp_path / "state" / "bin",)))
    assert prepared.view is None and prepared.env == {}
    assert prepared.writable == (tmp_path / "state",) and prepared.read_only == (tmp_path / "state" / "bin",)
    assert (tmp_path / "state" / "bin").is_dir()  # made, so that it cannot be planted


# What a sandboxed agent tries against the state folder of the CLI it runs in. Each line says what
# it did, when it could.
PLANT = """
echo session > "$CLI_HOME/sessions/s1" && echo wrote data
echo '{"mcpServers": {}}' > "$CLI_HOME/settings.json" 2>/dev/null && echo wrote settings through the link
echo '{"mcpServers": {}}' > "$REAL/settings.json" 2>/dev/null && echo wrote settings
echo PATH=/evil > "$REAL/.env" 2>/dev/null && echo planted .env
mkdir "$REAL/hooks" 2>/dev/null && echo planted hooks
echo x > "$REAL/locks/old.lock" 2>/dev/null && echo wrote a private entry
echo PATH=/evil > "$CLI_HOME/.env" && echo made .env in the view
echo '{"new": 1}' > "$CLI_HOME/new.json" && mv "$CLI_HOME/new.json" "$CLI_HOME/settings.json" &&
  echo replaced settings in the view
mkdir "$CLI_HOME/locks" && echo made locks in the view
ln "$REAL/settings.json" "$CLI_HOME/hard" 2>/dev/null && echo hard-linked settings
"""


def test_under_each_mechanism_the_cli_writes_its_data_and_nothing_it_reads_as_settings_survives(sandboxing, tmp_path):
    home = a_home(tmp_path)
    state = State(home=home, variable="CLI_HOME", data=(home / "sessions",), private=("locks",))
    work = tmp_path / "work"
    work.mkdir()
    sandbox = sandboxing.cli("required", work, "execute", lambda env: state)
    proc, launch = spawn(
        ["sh", "-c", PLANT],
        sandbox=sandbox,
        env={**os.environ, "HOME": str(tmp_path / "home"), "REAL": str(home)},
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    said = proc.communicate()[0].decode().splitlines()
    view = Path(launch.env["CLI_HOME"])
    assert said == ["wrote data", "made .env in the view", "replaced settings in the view", "made locks in the view"]
    launch.ended()
    assert (home / "sessions" / "s1").read_text() == "session\n"
    assert (home / "settings.json").read_text() == '{"hooks": {}}\n'
    assert sorted(p.name for p in home.iterdir()) == ["locks", "sessions", "settings.json"]
    assert (home / "locks" / "old.lock").read_text() == "the user's own\n"
    assert not view.exists()  # the view went with the process: no later start reads what it holds
