"""What every provider is: how to build the command, decode one output line, and resume."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from crewbridge.events import Event, Notice


@dataclass
class Turn:
    """One invocation of a CLI: the message to send and how."""

    prompt: str
    mode: str = "query"  # "query" (read-only) or "execute"
    model: str | None = None
    session_id: str | None = None  # continue this session (the CLI's own resume)
    system_prompt: str | None = None
    options: list[str] = field(default_factory=list)  # extra CLI options from configuration


class Decoder(Protocol):
    def decode(self, line: str) -> list[Event]:
        """The events one line of CLI output stands for (a corrupt line gives a Notice)."""


class JsonLineDecoder:
    """Base for JSON-lines decoders: parses the line, hands dicts to `event`."""

    def decode(self, line: str) -> list[Event]:
        line = line.strip()
        if not line:
            return []
        try:
            obj = json.loads(line)
        except ValueError as exc:
            return [Notice("corrupt", f"not JSON ({exc.msg}): {line[:120]}")]
        if not isinstance(obj, dict):
            return [Notice("corrupt", f"not a JSON object: {line[:120]}")]
        try:
            return self.event(obj)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            return [Notice("corrupt", f"unexpected event shape ({exc}): {line[:120]}")]

    def event(self, obj: dict[str, Any]) -> list[Event]:
        raise NotImplementedError


class Provider:
    """A CLI crew can drive. Subclasses set the class attributes and build the argv."""

    name = ""
    binary = ""
    install_hint = ""  # how a person installs the CLI
    resumable = True  # has its own session resume; otherwise crew replays the transcript
    prompt_on_stdin = True  # argv is capped at 128 KiB; stdin is not

    def argv(self, turn: Turn) -> list[str]:
        raise NotImplementedError

    def decoder(self) -> Decoder:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        """Variables added to the inherited environment."""
        return {}
