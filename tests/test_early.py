"""The agents' CLIs started before crew loads: `crew query|execute` arguments read without click,
and the launch plan, which starts last time's CLIs for the same mentions, place and configuration."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import click
import pytest

from crewbridge.cli import cli
from crewbridge.early import COMMANDS, OPTIONS, plans_file, read_args
from tests.crewcli import FakeModel, crew_env, executable, run_crew, running, write_config

AHEAD = "(started ahead, from the launch plan)"


@pytest.mark.parametrize("argv, expected", [
    (["query", "@claude hi"], ("query", "@claude hi", None)),
    (["execute", "@codex", "fix", "it"], ("execute", "@codex fix it", None)),
    (["query", "--json", "-y", "-v", "--timeout", "9", "--max-turns=3", "@a", "hi"], ("query", "@a hi", None)),
    (["query", "--config", "team.yaml", "@a hi"], ("query", "@a hi", "team.yaml")),
    (["query", "--config=team.yaml", "@a hi"], ("query", "@a hi", "team.yaml")),
    (["query", "--", "@a", "--json"], ("query", "@a --json", None)),
    (["query", "@a", "-"], ("query", "@a -", None)),
])
def test_plain_query_and_execute_arguments_are_read(argv, expected) -> None:
    assert read_args(argv) == expected


@pytest.mark.parametrize("argv", [
    [], ["--version"], ["chat", "@claude"], ["tools", "list"],
    ["query"], ["query", "--json"],  # no task
    ["query", "--help", "@a hi"], ["query", "-h", "@a hi"],  # help, not a run
    ["query", "-yv", "@a hi"], ["query", "--jsn", "@a hi"],  # what click reads differently or refuses
    ["query", "--json=1", "@a hi"],
])
def test_anything_else_is_left_to_click(argv) -> None:
    assert read_args(argv) is None


@pytest.mark.parametrize("name", COMMANDS)
def test_the_table_holds_the_options_click_defines(name) -> None:
    command = cli.commands[name]
    defined = {flag: not option.is_flag for option in command.params if isinstance(option, click.Option)
               for flag in option.opts + option.secondary_opts}
    defined = {flag: takes for flag, takes in defined.items() if flag not in ("-h", "--help")}
    assert defined == OPTIONS


# -- the launch plan ---------------------------------------------------------------------------------

@pytest.fixture
def fake(tmp_path) -> FakeModel:
    model = FakeModel(tmp_path / "bin")
    model.script("hello from fake")
    model.config = write_config(tmp_path / "team.yaml", providers={"fake": model.provider()},
                                agents={"fake": {"provider": "fake"}})
    return model


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    return crew_env(tmp_path / "home")


def query(fake: FakeModel, env: dict[str, str], cwd: Path, task: str = "@fake hello") -> str:
    """Run `crew query -v` on the fake agent; → the `$ command` lines crew --verbose showed."""
    done = run_crew(["query", "-v", "--config", str(fake.config), task], env=env, cwd=cwd)
    assert done.returncode == 0 and done.stdout == "hello from fake\n", done.stderr
    return "\n".join(line for line in done.stderr.splitlines() if " $ " in line)


def plans(env: dict[str, str]) -> dict:
    return json.loads(Path(plans_file(env)).read_text())


def test_a_second_run_takes_the_cli_its_plan_started_before_crew_loaded(fake, env, tmp_path):
    assert query(fake, env, tmp_path).endswith(f" $ {fake.path}")  # started before crew loaded, shown
    [plan] = plans(env).values()
    assert plan["stable"] and [spec["argv"] for spec in plan["specs"]] == [[str(fake.path)]]
    assert oct(Path(plans_file(env)).stat().st_mode & 0o777) == "0o600"  # commands and their environment
    assert AHEAD in query(fake, env, tmp_path, "@fake another task, same mention")
    assert len(fake.prompts) == 2  # one CLI a run: the one started ahead was the one used


def test_a_plan_is_for_the_same_mentions_mode_configuration_files_and_settings(fake, env, tmp_path):
    query(fake, env, tmp_path)
    assert AHEAD not in query(fake, env, tmp_path, "@fake:model hello")
    fake.config.write_text(fake.config.read_text())  # the same text, written again
    assert AHEAD not in query(fake, env, tmp_path)
    assert AHEAD not in query(fake, {**env, "CREW_LIVE": "0"}, tmp_path)
    assert AHEAD in query(fake, env, tmp_path)


def test_a_plan_serves_every_directory_with_the_same_configuration(env, tmp_path):
    def demo(directory: Path) -> str:
        directory.mkdir(exist_ok=True)
        done = run_crew(["query", "-v", "@demo hello"], env=env, cwd=directory)
        assert done.returncode == 0, done.stderr
        return done.stderr

    assert AHEAD not in demo(tmp_path / "one")
    assert AHEAD in demo(tmp_path / "two")  # the demo agent, started in "two": no configuration file here either
    (tmp_path / "three").mkdir()
    write_config(tmp_path / "three" / "crew.yaml", transcripts=False)
    assert AHEAD not in demo(tmp_path / "three")  # a project of its own
    assert AHEAD in demo(tmp_path / "three")


def test_a_plan_that_guessed_wrong_is_ended_unused_and_waits_for_two_runs_that_agree(fake, env, tmp_path):
    query(fake, env, tmp_path)
    guess = executable(tmp_path / "bin" / "guess", f"import os, sys\nopen({str(tmp_path / 'guess.pid')!r}, 'w')"
                       ".write(str(os.getpid()))\nsys.stdin.read()\n")
    written = plans(env)
    [plan] = written.values()
    plan["specs"][0]["argv"] = [str(guess)]
    Path(plans_file(env)).write_text(json.dumps(written))
    assert AHEAD not in query(fake, env, tmp_path)
    pid = int((tmp_path / "guess.pid").read_text())  # the plan's CLI was started …
    assert not running(pid)  # … and ended, unused
    [plan] = plans(env).values()
    assert (plan["specs"][0]["argv"], plan["stable"]) == ([str(fake.path)], False)
    assert AHEAD not in query(fake, env, tmp_path)  # the same commands as the run before: usable again
    assert AHEAD in query(fake, env, tmp_path)
    assert len(fake.prompts) == 4


@pytest.mark.parametrize("text", [
    "not json", "[]", '{"KEY": []}', '{"KEY": {"stable": true, "specs": "x"}}',
    '{"KEY": {"stable": true, "specs": [{"argv": [], "cwd": null, "env": {}, "unset": []}]}}',
    '{"KEY": {"stable": true, "specs": [{"argv": ["x"], "cwd": 1, "env": {}, "unset": []}]}}',
    '{"KEY": {"stable": true, "specs": [{"argv": ["x"], "cwd": null, "env": {"A": 1}, "unset": []}]}}',
    '{"KEY": {"stable": true, "specs": [{"argv": ["x"], "cwd": null, "env": {}, "unset": "PATH"}]}}',
    '{"KEY": {"stable": "yes", "specs": []}}',
])
def test_a_damaged_plans_file_is_ignored_and_written_anew(text, fake, env, tmp_path):
    query(fake, env, tmp_path)
    [key] = plans(env)
    Path(plans_file(env)).write_text(text.replace('"KEY"', json.dumps(key)))
    assert AHEAD not in query(fake, env, tmp_path)
    assert plans(env)[key]["specs"][0]["argv"] == [str(fake.path)]
    assert AHEAD in query(fake, env, tmp_path)


def test_a_plans_file_others_may_write_is_not_used(fake, env, tmp_path):
    query(fake, env, tmp_path)
    os.chmod(plans_file(env), 0o622)
    assert AHEAD not in query(fake, env, tmp_path)
    assert AHEAD in query(fake, env, tmp_path)  # written anew, as this user's alone


def test_without_a_writable_cache_crew_runs_as_before(fake, env, tmp_path):
    (tmp_path / "home").mkdir(exist_ok=True)
    (tmp_path / "home" / ".cache").write_text("a file, not a directory")
    assert AHEAD not in query(fake, env, tmp_path)
    assert AHEAD not in query(fake, env, tmp_path)


def test_the_plan_keeps_only_the_environment_crew_changed(fake, env, tmp_path):
    query(fake, {**env, "UNRELATED": "secret"}, tmp_path)
    text = Path(plans_file(env)).read_text()
    assert "secret" not in text and json.loads(text)  # crew's own environment is not copied
    assert AHEAD in query(fake, {**env, "UNRELATED": "other"}, tmp_path)  # and does not key the plan


def test_ctrl_c_right_after_the_plan_started_a_cli_ends_it(fake, env, tmp_path):
    import signal

    from tests.crewcli import end_group, start_crew

    waiter = executable(tmp_path / "bin" / "waiter", f"import os, sys, time\nopen({str(tmp_path / 'pid')!r}, 'a')"
                        ".write(f'{os.getpid()}\\n')\nsys.stdin.read()\ntime.sleep(60)\n")
    config = write_config(tmp_path / "wait.yaml", providers={"waiter": {"command": [str(waiter)]}},
                          agents={"waiter": {"provider": "waiter"}})
    args = ["query", "--config", str(config), "@waiter hello"]
    first = start_crew(args, env=env, cwd=tmp_path)
    try:
        while not (tmp_path / "pid").exists():
            time.sleep(0.01)
        first.send_signal(signal.SIGINT)
        assert first.wait(30) == 130
    finally:
        end_group(first)
    assert plans(env)  # written before the run began
    proc = start_crew(args, env=env, cwd=tmp_path)
    try:
        while len((tmp_path / "pid").read_text().split()) < 2:
            time.sleep(0.005)
        proc.send_signal(signal.SIGINT)  # as soon as the plan's CLI runs: crew is still loading
        _, err = proc.communicate(timeout=30)
    finally:
        end_group(proc)
    assert proc.returncode == 130 and err == "crew: interrupted\n"
    assert [pid for pid in map(int, (tmp_path / "pid").read_text().split()) if running(pid)] == []
