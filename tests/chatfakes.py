"""Small honest fakes for the tests of a conversation across messages (crewbridge.engine.dialogue, the
`crew chat` face): a conversation with scripted replies that records what it was sent, how often its
reply was stopped and whether it was closed, and the loop an agent runs over it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from crewbridge.providers.base import Turn
from crewbridge.tools import builtin_registry

from crewbridge.base.decoded import Done, Event, MessageEnd, Text
from crewbridge.config import AgentSpec
from crewbridge.conversations import FULL
from crewbridge.engine.loop import AgentLoop
from crewbridge.record.stream import Record, Sink
from crewbridge.work.policy import Policy

CATALOGUE_MARK = "[crew tools]"


def block(**data: Any) -> str:
    return "```json\n" + json.dumps({"type": "tool_use", "name": "crew:read_file", "input": data}) + "\n```\n"


def text(*chunks: str) -> list[Event]:
    return [Text(c) for c in chunks] + [MessageEnd(), Done()]


class Script:
    """A conversation with scripted replies (a reply may be KeyboardInterrupt: the person's Ctrl-C
    while it streams). Records what was sent, stopped and closed."""

    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.sent: list[str] = []
        self.stops = 0
        self.closed = False
        self.session_id = "sess-1"
        self.reported = None
        self.base = Turn(prompt="", mode="query")  # what its CLI is started with: no sandbox

    def serve(self, channel: Any) -> bool:
        return False

    def late_usage(self) -> list[Any]:
        return []

    def send(self, message: str, deadline: float | None) -> Any:
        self.sent.append(message)
        events = self.replies.pop(0)
        yield from [Text("Thinking")] + ([] if events is KeyboardInterrupt else events)
        if events is KeyboardInterrupt:
            raise KeyboardInterrupt

    def stop(self) -> None:
        self.stops += 1

    def keep(self, kept: str, stopped: bool) -> str:
        return FULL

    def close(self) -> None:
        self.closed = True


def scripted_loop(workdir: Path, script: Script, mode: str = "query", sink: Sink | None = None) -> AgentLoop:
    """@claude's loop over `script`, with the built-in tools, working in `workdir`, its record's
    events given to `sink`."""
    policy = Policy(AgentSpec("claude", "claude"), mode)
    record = Record()
    if sink is not None:
        record.attach(sink)
    return AgentLoop("claude", script, builtin_registry(), policy, workdir=workdir, record=record)
