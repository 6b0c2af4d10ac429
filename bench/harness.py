"""Running crew's agent loop in this process against a CLI the benchmark chooses: a fake one (any
argv, its output decoded as claude stream-json) or the real claude CLI talking to the mock model."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from crewbridge.providers.base import Decoder, Provider, Turn
from crewbridge.providers.claude import ClaudeDecoder, ClaudeProvider

from bench.common import PYTHON, REPO
from crewbridge.config import AgentSpec
from crewbridge.conversations import Conversation, ProcessConversation, new_conversation
from crewbridge.engine.loop import AgentLoop, RunResult
from crewbridge.toolkit.registry import ToolRegistry
from crewbridge.work.policy import Policy


class FakeProvider(Provider):
    """A CLI given as a fixed argv, its output decoded as claude stream-json; a process per turn."""

    name = "fake"
    resumable = False

    def __init__(self, argv: list[str]) -> None:
        self.command = argv
        self.binary = argv[0]

    def argv(self, turn: Turn) -> list[str]:
        return list(self.command)

    def decoder(self) -> Decoder:
        return ClaudeDecoder()


def fake_conversation(argv: list[str], cwd: Path) -> Conversation:
    return ProcessConversation(FakeProvider(argv), Turn(""), cwd=cwd)


def claude_conversation(env: dict[str, str], cwd: Path, mode: str = "query") -> Conversation:
    """The real claude CLI, the way crew runs it (live, unless env says CREW_LIVE=0)."""
    return new_conversation(ClaudeProvider(), Turn("", mode=mode), cwd=cwd, env=env)


def reporting(sink: Callable[[Any], None]) -> dict[str, Any]:
    """The loop's options that hand `sink` each event the loop reports: its record's
    (crewbridge.record), or, in a checkout from before the record (--before), its on_progress."""
    try:
        from crewbridge.record.stream import Record
    except ImportError:
        return {"on_progress": sink}
    record = Record()
    record.attach(sink)
    return {"record": record}


def run_loop(
    conversation: Conversation,
    registry: ToolRegistry,
    task: str,
    workdir: Path,
    *,
    mode: str = "query",
    compact: bool | None = False,
    **options: Any,
) -> RunResult:
    policy = Policy(AgentSpec(id="bench", provider="bench"), mode)
    loop = AgentLoop("bench", conversation, registry, policy, workdir=workdir, compact=compact, **options)
    return loop.run(task)


@contextlib.contextmanager
def claude_env() -> Iterator[tuple[Any, dict[str, str], Path]]:
    """(mock server, environment for the real claude CLI, a working directory), all scratch.
    Fails with the fix when the pinned CLI is not installed."""
    from clienv import cli_env
    from mockserver import MockServer

    binary = REPO / "node_modules" / ".bin" / "claude"
    if not binary.exists():
        raise RuntimeError(f"the real claude CLI is not in {binary.parent}; run `npm install` in {REPO}")
    home = Path(tempfile.mkdtemp(prefix="crew-bench-"))
    try:
        with MockServer() as mock:
            env = cli_env("claude", mock.url, home / "home")
            work = home / "work"
            work.mkdir()
            yield mock, env, work
            if mock.problems:
                raise RuntimeError(f"the mock model server saw: {'; '.join(mock.problems)}")
    finally:
        shutil.rmtree(home, ignore_errors=True)


def without_live(env: dict[str, str]) -> dict[str, str]:
    return {**env, "CREW_LIVE": "0"}


def python_argv(script: Path, *args: str) -> list[str]:
    return [PYTHON, str(script), *args]
