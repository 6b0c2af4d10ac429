"""Making a CLI's process, and handing out the ones started ahead from the launch plan."""
from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from crewbridge import spawn


@pytest.fixture(autouse=True)
def clean() -> Iterator[None]:
    yield
    spawn.recorded()
    spawn.end_ahead()


def spec(tmp_path, *argv: str, **env: str) -> spawn.Spec:
    return tuple(argv or ("cat",)), {**os.environ, **env}, str(tmp_path)


def ended(proc) -> None:
    proc.kill()
    proc.wait()


def test_a_cli_started_ahead_goes_to_the_first_request_for_exactly_its_command_environment_and_directory(tmp_path):
    argv, env, cwd = spec(tmp_path)
    spawn.ahead([(argv, env, cwd)])
    [(_, started)] = spawn._ahead
    proc, ahead = spawn.popen(list(argv), env=env, cwd=tmp_path)
    assert (proc, ahead) == (started, True)
    again, ahead = spawn.popen(list(argv), env=env, cwd=tmp_path)  # taken once: the next one is new
    assert not ahead and again.pid != proc.pid
    for each in (proc, again):
        ended(each)


@pytest.mark.parametrize("change", ["command", "environment", "directory"])
def test_any_other_request_gets_a_new_cli_and_end_ahead_ends_the_guess(change, tmp_path):
    spawn.ahead([spec(tmp_path, "cat", CREW_TEST="1")])
    [(_, guess)] = spawn._ahead
    argv, env, cwd = spec(tmp_path, "cat", CREW_TEST="1")
    if change == "command":
        argv = ("cat", "-")
    elif change == "environment":
        env = {**env, "CREW_TEST": "2"}
    else:
        cwd = str(tmp_path.parent)
    proc, ahead = spawn.popen(list(argv), env=env, cwd=cwd)
    assert not ahead and proc.pid != guess.pid
    spawn.end_ahead()
    assert guess.returncode is not None  # killed and reaped
    with pytest.raises(ProcessLookupError):
        os.killpg(guess.pid, 0)  # nothing of its group is left
    ended(proc)


def test_no_environment_means_crews_own(tmp_path):
    spawn.ahead([spec(tmp_path)])
    proc, ahead = spawn.popen(["cat"], env=None, cwd=tmp_path)
    assert ahead
    ended(proc)


def test_a_cli_that_cannot_start_is_left_out_ahead_and_reported_when_asked_for(tmp_path):
    missing = str(tmp_path / "no-such-cli")
    spawn.ahead([spec(tmp_path, missing)])
    assert spawn._ahead == []
    with pytest.raises(FileNotFoundError):
        spawn.popen([missing], env=None, cwd=tmp_path)


def test_recording_lists_what_was_asked_for_in_order(tmp_path):
    spawn.popen(["true"], env=None, cwd=tmp_path)[0].wait()  # before recording: not listed
    spawn.record()
    for argv in (["true"], ["true", "x"]):
        spawn.popen(argv, env={"A": "1"}, cwd=tmp_path)[0].wait()
    assert spawn.recorded() == [(("true",), {"A": "1"}, str(tmp_path)), (("true", "x"), {"A": "1"}, str(tmp_path))]
    assert spawn.recorded() == []  # recording stopped


def test_the_cli_runs_in_a_process_group_of_its_own_with_a_large_stdout_pipe(tmp_path):
    import fcntl

    proc, _ = spawn.popen(["cat"], env=None, cwd=tmp_path)
    assert os.getpgid(proc.pid) == proc.pid != os.getpgid(0)
    limit = int(open("/proc/sys/fs/pipe-max-size").read())
    assert fcntl.fcntl(proc.stdout.fileno(), fcntl.F_GETPIPE_SZ) == limit
    ended(proc)
