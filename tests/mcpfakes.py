"""Small honest fakes for the MCP tests: a loop's Channel, a configuration whose call waits until
it is cancelled or released (so a test can act while a call runs), and a project for `crew mcp`
whose agent never answers."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

from crewbridge.protocol.mcp import McpCore
from crewbridge.toolkit.registry import Tool, ToolResult
from crewcli import CREW, crew_env, executable, running, write_config


class FakeChannel:
    """A loop's channel: read_file answers, any other tool fails; `error` is raised by every call."""

    def __init__(self, error: Exception | None = None) -> None:
        self.calls: list[tuple[str, object]] = []
        self.error = error

    def tools(self):
        schema = {"type": "object", "properties": {"path": {"type": "string"}}}
        return [Tool("read_file", "Read a file.\nMore.", schema, lambda ctx, path: path, read_only=True)]

    def call(self, name, arguments, stop=None):
        self.calls.append((name, arguments))
        if self.error is not None:
            raise self.error
        return ToolResult(True, data={"content": "hi"}) if name == "read_file" else ToolResult(False, error="no tool")

    def permit(self, tool, arguments, read_only, ref=None):
        return None

    def own(self, event):
        pass  # what the CLI reports of its own tools: nothing to record here


class Held(McpCore):
    """A configuration whose one tool reports progress ("started"), then waits until its call is
    cancelled or `release` is set. `entered` is set once a call waits; `stopped` says, per call,
    whether it ended cancelled."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()
        self.stopped: list[bool] = []

    def tool_list(self):
        return [{"name": "wait", "inputSchema": {"type": "object"}}]

    def call_tool(self, name, arguments, call):
        call.progress("started")
        call.stop.on_set(self.release.set)
        self.entered.set()
        self.release.wait(60)
        self.stopped.append(call.stop.is_set())
        return {"content": [{"type": "text", "text": "done"}], "isError": False}


# -- `crew mcp` as a process: a project whose agent `slow` never answers -------------------------------

# A CLI that never answers: it writes its pid to $FAKE_PIDS/slow (a folder it declares as its state:
# it may write there inside crew's sandbox, where the pid is its PID namespace's) and sleeps.
SLOW = """\
import os, time
open(os.path.join(os.environ["FAKE_PIDS"], "slow"), "w").write(str(os.getpid()))
time.sleep(600)
"""


def mcp_project(tmp_path: Path, check: str | None = None, **agents: dict) -> Path:
    """tmp_path/work with notes.txt and a trusted crew.yaml whose agent `slow` never answers (and
    `agents`; `check`: what every change must pass)."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("deploy window: Tuesday\n")
    (tmp_path / "pids").mkdir()
    slow = executable(tmp_path / "bin" / "slow", SLOW)
    write_config(
        work / "crew.yaml",
        providers={"slow": {"command": [str(slow)], "state_dirs": ["$FAKE_PIDS"]}},
        agents={"slow": {"provider": "slow"}, **agents},
        **({"check": check} if check else {}),
    )
    subprocess.run(
        [*CREW, "config", "trust", str(work / "crew.yaml")],
        env=env_for(tmp_path),
        stdin=subprocess.DEVNULL,
        check=True,
        capture_output=True,
    )
    return work


def env_for(tmp_path: Path) -> dict[str, str]:
    return crew_env(tmp_path / "home", FAKE_PIDS=str(tmp_path / "pids"))


def slow_pid(tmp_path: Path) -> int:
    """Once the slow agent (or a command told to) wrote tmp_path/pids/slow: its process id as this test
    sees it (the slow agent's found by its program: inside crew's sandbox it wrote another)."""
    path = tmp_path / "pids" / "slow"
    for _ in range(200):
        if path.exists() and path.read_text().strip():
            slow = str(tmp_path / "bin" / "slow")  # its command line starts with it, or with python and it
            found = [
                int(entry.name)
                for entry in Path("/proc").iterdir()
                if entry.name.isdigit() and slow in _argv(entry)[:2]
            ]
            return found[0] if found else int(path.read_text())
        time.sleep(0.05)
    raise AssertionError("the slow process never started")


def _argv(entry: Path) -> list[str]:
    try:
        return (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def gone(pid: int) -> bool:
    """Whether `pid` ends within 30 s (a bound for a loaded machine, not a speed check)."""
    for _ in range(600):
        if not running(pid):
            return True
        time.sleep(0.05)
    return False
