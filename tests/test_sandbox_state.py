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


def test_a_copy_in_the_view_holds_the_real_files_bytes_and_the_lock_beside_it_is_left_out(prepare, tmp_path):
    home = a_home(tmp_path)
    (home / "projects.json").write_text('{"projects": {"/w": "w"}}')
    (home / "projects.json.lock").mkdir()  # held by a run of the CLI still going, or one that was killed
    (home / "other.json").symlink_to(tmp_path / "secret")
    (tmp_path / "secret").write_text("a key")
    state = State(home=home, variable="CLI_HOME", copies=("projects.json", "absent.json", "other.json"))
    view = prepare(state).view
    assert view is not None
    copy = view / "projects.json"
    assert not copy.is_symlink() and copy.read_text() == '{"projects": {"/w": "w"}}'
    # no lock, nothing where there was no file, and a link is never followed: the CLI makes those anew
    assert sorted(p.name for p in view.iterdir()) == ["locks", "projects.json", "sessions", "settings.json"]


# What a CLI does to a registry it rewrites (gemini 0.61's projects.json, through proper-lockfile):
# resolve the path, make a lock folder beside the file, write a temp file, rename it over the file.
REWRITE = """
real=$(realpath "$CLI_HOME/projects.json")
mkdir "$real.lock" && echo locked
echo '{"projects": {"/new": "new"}}' > "$real.tmp" && mv "$real.tmp" "$real" && echo rewrote
rmdir "$real.lock" && echo unlocked
"""


def test_under_each_mechanism_a_cli_rewrites_its_copy_under_a_lock_and_the_real_file_stays(sandboxing, tmp_path):
    """Through a link, the lock beside the real file cannot be made: gemini waited for it for ever."""
    home = a_home(tmp_path)
    (home / "projects.json").write_text('{"projects": {"/w": "w"}}')
    work = tmp_path / "work"
    work.mkdir()
    said = {}
    for copies in ((), ("projects.json",)):
        state = State(home=home, variable="CLI_HOME", copies=copies)
        sandbox = sandboxing.cli("required", work, "execute", lambda env, state=state: state)
        proc, launch = spawn(
            ["sh", "-c", REWRITE],
            sandbox=sandbox,
            env={**os.environ, "HOME": str(tmp_path / "home")},
            cwd=work,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        said[copies] = proc.communicate()[0].decode().splitlines()
        launch.ended()
    assert said == {(): [], ("projects.json",): ["locked", "rewrote", "unlocked"]}
    assert (home / "projects.json").read_text() == '{"projects": {"/w": "w"}}'
    assert sorted(p.name for p in home.iterdir()) == ["locks", "projects.json", "sessions", "settings.json"]
