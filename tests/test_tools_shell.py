"""run_command: /bin/sh in the working directory, output captured, its process group ended."""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from crewbridge.tools import builtin_registry

from crewbridge.sandbox import Sandbox, Sandboxing
from crewbridge.toolkit.registry import ToolContext

REGISTRY = builtin_registry()


def run(
    work: Path, data: dict[str, Any], *, limit: float = 30, max_output: int = 20_000, sandbox: Sandbox | None = None
) -> dict[str, Any]:
    """Call run_command with input `data` under crew's time `limit` (inside `sandbox`, if given)."""
    ctx = ToolContext(work, timeout=limit, max_output=max_output, sandbox=sandbox)
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
    assert (
        run(tmp_path, {"command": "pwd; cat notes.txt"})["data"]["output"]
        == f"{os.path.realpath(tmp_path)}\nfrom the workdir\n"
    )


def test_stdin_is_empty_so_a_reader_does_not_hang(tmp_path: Path) -> None:
    assert run(tmp_path, {"command": "cat; echo after"})["data"] == {"exit_code": 0, "output": "after\n"}


@pytest.mark.slow
def test_timeout_kills_the_whole_group_and_keeps_the_output_so_far(tmp_path: Path) -> None:
    command = "echo started; sleep 30 & echo $! > child.pid; wait"
    envelope = run(tmp_path, {"command": command}, limit=0.5)
    assert envelope["success"] is False
    assert envelope["error"] == (
        "command timed out after 0.5s and was killed with its process group; output until then:\nstarted\n"
    )
    assert gone(int((tmp_path / "child.pid").read_text()))


@pytest.mark.slow
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


@pytest.mark.parametrize(
    "data, error",
    [
        ({"command": ""}, "invalid input for crew:run_command at $.command: '' should be non-empty"),
        (
            {"command": "touch ran", "timeout": 0},
            "invalid input for crew:run_command at $.timeout: 0 is less than or equal to the minimum of 0",
        ),
        ({"cmd": "touch ran"}, "invalid input for crew:run_command at $: 'command' is a required property"),
    ],
)
def test_invalid_input_is_refused_before_running(tmp_path: Path, data: dict[str, Any], error: str) -> None:
    assert run(tmp_path, data)["error"] == error
    assert not (tmp_path / "ran").exists()


def test_missing_working_directory_is_a_clear_error(tmp_path: Path) -> None:
    envelope = run(tmp_path / "gone", {"command": "true"})
    assert envelope["success"] is False and "cannot start /bin/sh in" in envelope["error"]


# --- inside the sandbox (each real mechanism: the `sandboxing` fixture) ----------------------------


def sandboxed(
    sandboxing: Sandboxing, work: Path, command: str, mode: str = "execute", network: bool = False
) -> dict[str, Any]:
    """run_command in `work` inside the sandbox an agent's commands get in `mode`; → its envelope."""
    return run(work, {"command": command}, sandbox=sandboxing.commands("required", work, mode, network=network))


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A working directory, a HOME and a folder outside both, all under tmp_path (so under /tmp)."""
    made = {name: tmp_path / name for name in ("work", "home", "outside")}
    for folder in made.values():
        folder.mkdir()
    monkeypatch.setenv("HOME", str(made["home"]))
    return made


def test_a_sandboxed_command_writes_the_working_directory_and_nothing_else(sandboxing, places):
    outside, home = places["outside"] / "planted", places["home"] / ".bashrc"
    command = f"echo made > made.txt; echo x > {outside}; echo x > {home}; echo x > /etc/crew-planted; true"
    assert sandboxed(sandboxing, places["work"], command)["data"]["exit_code"] == 0
    assert (places["work"] / "made.txt").read_text() == "made\n"
    etc = Path("/etc/crew-planted")
    planted, _ = etc.exists(), etc.unlink(missing_ok=True)  # a failing test leaves nothing behind
    assert not outside.exists() and not home.exists() and not planted


def test_in_query_mode_a_command_writes_nothing_not_even_the_working_directory(sandboxing, places):
    envelope = sandboxed(sandboxing, places["work"], "cat /dev/null > made.txt", mode="query")
    assert envelope["data"]["exit_code"] != 0 and not (places["work"] / "made.txt").exists()


def test_temp_is_private_and_writable_through_tmpdir(sandboxing, places):
    envelope = sandboxed(
        sandboxing, places["work"], 'echo kept > "$TMPDIR/scratch" && cat "$TMPDIR/scratch"; echo "$TMPDIR"'
    )
    output, tmpdir = envelope["data"]["output"].splitlines()
    assert output == "kept"
    assert not Path(tmpdir, "scratch").exists()  # private: gone, or never on the host


@pytest.fixture
def listeners(places: dict[str, Path]) -> Iterator[tuple[int, Path, list[str]]]:
    """A TCP listener on 127.0.0.1 and a Unix socket listener in the working directory (where the
    command sees it: only the network rules keep it out); → its port, the socket's path, and what
    each of them was sent (read until the test ends)."""
    tcp = socket.create_server(("127.0.0.1", 0))
    unix = socket.socket(socket.AF_UNIX)
    path = places["work"] / "agent.sock"
    unix.bind(str(path))
    unix.listen()
    heard: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            for ready in select.select([tcp, unix], [], [], 0.05)[0]:
                conn, _ = ready.accept()
                with conn:
                    heard.append(conn.recv(100).decode())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield tcp.getsockname()[1], path, heard
    stop.set()
    thread.join()
    tcp.close()
    unix.close()


REACH = """import socket, sys
for family, address in ((socket.AF_INET, ("127.0.0.1", {port})), (socket.AF_UNIX, {path!r})):
    try:
        with socket.socket(family) as s:
            s.connect(address)
            s.sendall(b"got through")
        print("reached")
    except OSError as exc:
        print(type(exc).__name__)
"""


@pytest.mark.slow
def test_the_network_is_off_tcp_and_unix_sockets_alike(sandboxing, places, listeners):
    port, path, heard = listeners
    script = places["work"] / "reach.py"
    script.write_text(REACH.format(port=port, path=str(path)))
    envelope = sandboxed(sandboxing, places["work"], f"{sys.executable} reach.py")
    assert "reached" not in envelope["data"]["output"]
    assert envelope["data"]["output"].count("\n") == 2  # both tried, both failed
    assert heard == []


def test_sandbox_network_lets_the_commands_reach_it(sandboxing, places, listeners):
    port, path, _ = listeners
    (places["work"] / "reach.py").write_text(REACH.format(port=port, path=str(path)))
    envelope = sandboxed(sandboxing, places["work"], f"{sys.executable} reach.py", network=True)
    assert envelope["data"]["output"] == "reached\nreached\n"


def test_nothing_a_sandboxed_command_starts_outlives_the_call_setsid_included(sandboxing, places):
    marker = f"crew-escape-{os.getpid()}-{id(places)}"
    sleep = f"{sys.executable} -c 'import os, sys, time; sys.argv[1] == \"setsid\" and os.setsid(); time.sleep(60)'"
    command = (f"setsid {sleep} - {marker} & {sleep} setsid {marker} & {sleep} - {marker} & echo started").replace(
        "&", ">/dev/null 2>&1 &"
    )
    assert sandboxed(sandboxing, places["work"], command)["data"]["output"] == "started\n"
    assert all(ended(pid) for pid in running_with(marker))


def running_with(marker: str) -> list[int]:
    """The processes whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def ended(pid: int) -> bool:
    """Whether process `pid` ends within 10 s (awaited on its pidfd, not polled)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], 10)[0])
    finally:
        os.close(fd)
