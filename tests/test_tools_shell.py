"""run_command: /bin/sh in the working directory, output captured, its process group ended."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from crewbridge.registry import ToolContext
from crewbridge.tools import builtin_registry

REGISTRY = builtin_registry()


def run(work: Path, data: dict[str, Any], *, limit: float = 30,
        max_output: int = 20_000) -> dict[str, Any]:
    """Call run_command with input `data` under crew's time `limit`."""
    ctx = ToolContext(work, timeout=limit, max_output=max_output)
    return REGISTRY.call("crew:run_command", data, ctx).to_dict()


def gone(pid: int) -> bool:
    """True once `pid` has exited (a zombie counts as exited); gives the kernel up to 5 s."""
    for _ in range(500):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.01)
    return False


def test_output_and_exit_code(tmp_path: Path) -> None:
    envelope = run(tmp_path, {"command": "echo hello"})
    assert envelope["success"] and envelope["metadata"]["truncated"] is False
    assert envelope["data"] == {"exit_code": 0, "output": "hello\n"}


def test_stdout_and_stderr_are_merged_in_order(tmp_path: Path) -> None:
    envelope = run(tmp_path, {"command": "echo out; echo err >&2; echo out2"})
    assert envelope["data"]["output"] == "out\nerr\nout2\n"


def test_a_failing_command_is_a_result_with_its_exit_code(tmp_path: Path) -> None:
    envelope = run(tmp_path, {"command": "echo nope >&2; exit 3"})
    assert envelope["success"] is True
    assert envelope["data"] == {"exit_code": 3, "output": "nope\n"}


def test_runs_in_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("from the workdir\n")
    assert run(tmp_path, {"command": "pwd; cat notes.txt"})["data"]["output"] == \
        f"{os.path.realpath(tmp_path)}\nfrom the workdir\n"


def test_stdin_is_empty_so_a_reader_does_not_hang(tmp_path: Path) -> None:
    assert run(tmp_path, {"command": "cat; echo after"})["data"] == \
        {"exit_code": 0, "output": "after\n"}


def test_timeout_kills_the_whole_group_and_keeps_the_output_so_far(tmp_path: Path) -> None:
    command = "echo started; sleep 30 & echo $! > child.pid; wait"
    envelope = run(tmp_path, {"command": command}, limit=0.5)
    assert envelope["success"] is False
    assert envelope["error"] == ("command timed out after 0.5s and was killed with its process "
                                 "group; output until then:\nstarted\n")
    assert gone(int((tmp_path / "child.pid").read_text()))


def test_requested_timeout_applies_and_is_capped_by_crews_limit(tmp_path: Path) -> None:
    assert "timed out after 0.3s" in run(tmp_path, {"command": "sleep 30", "timeout": 0.3})["error"]
    capped = run(tmp_path, {"command": "sleep 30", "timeout": 999}, limit=0.4)
    assert "timed out after 0.4s" in capped["error"]


def test_background_jobs_are_ended_when_the_command_returns(tmp_path: Path) -> None:
    command = "sleep 30 & echo $! > a.pid; sleep 30 >/dev/null 2>&1 & echo $! > b.pid"
    assert run(tmp_path, {"command": command})["data"] == {"exit_code": 0, "output": ""}
    assert gone(int((tmp_path / "a.pid").read_text()))
    assert gone(int((tmp_path / "b.pid").read_text()))


def test_a_process_that_left_the_group_does_not_hold_the_call(tmp_path: Path) -> None:
    envelope = run(tmp_path, {"command": "setsid sleep 30 & echo $! > escaped.pid; echo done"})
    escaped = int((tmp_path / "escaped.pid").read_text())
    try:
        assert envelope["data"] == {"exit_code": 0, "output": "done\n"}
    finally:
        os.kill(escaped, signal.SIGKILL)


def test_large_output_keeps_its_start_and_end_with_a_marker(tmp_path: Path) -> None:
    full = "".join(f"{n}\n" for n in range(1, 20001))
    envelope = run(tmp_path, {"command": "seq 1 20000"}, max_output=200)
    output = envelope["data"]["output"]
    assert envelope["metadata"]["truncated"] is True
    marker = f"[… truncated: {len(full) - 200} bytes not shown …]"
    assert output == f"{full[:100]}\n{marker}\n{full[-100:]}"


def test_output_that_fits_is_never_split_inside_a_character(tmp_path: Path) -> None:
    envelope = run(tmp_path, {"command": "printf 'ééééé'"}, max_output=10)  # 10 bytes, 5 + 5
    assert envelope["data"]["output"] == "ééééé" and envelope["metadata"]["truncated"] is False


@pytest.mark.parametrize("data, error", [
    ({"command": ""}, "invalid input for crew:run_command at $.command: '' should be non-empty"),
    ({"command": "touch ran", "timeout": 0}, "invalid input for crew:run_command at $.timeout: "
                                              "0 is less than or equal to the minimum of 0"),
    ({"cmd": "touch ran"},
     "invalid input for crew:run_command at $: 'command' is a required property"),
])
def test_invalid_input_is_refused_before_running(tmp_path: Path, data: dict[str, Any],
                                                 error: str) -> None:
    assert run(tmp_path, data)["error"] == error
    assert not (tmp_path / "ran").exists()


def test_missing_working_directory_is_a_clear_error(tmp_path: Path) -> None:
    envelope = run(tmp_path / "gone", {"command": "true"})
    assert envelope["success"] is False and "cannot start /bin/sh in" in envelope["error"]
