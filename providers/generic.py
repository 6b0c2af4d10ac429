"""Any other CLI, described by configuration: a command template, prompt on stdin or argv, text or jsonl."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from crewbridge.providers.base import Decoder, JsonLineDecoder, Provider, Turn

from crewbridge.errors import ConfigError
from crewbridge.events import Event, MessageEnd, Session, Text


class TextDecoder:
    """Plain text output: every line is assistant text."""

    def decode(self, line: str) -> list[Event]:
        return [Text(line if line.endswith("\n") else line + "\n")]


class JsonlDecoder(JsonLineDecoder):
    """JSON lines; the assistant text is at a dotted key (`message.text`), the session id at another."""

    def __init__(self, text_key: str, session_key: str | None = None) -> None:
        self.text_key = text_key.split(".")
        self.session_key = session_key.split(".") if session_key else None

    def event(self, obj: dict[str, Any]) -> list[Event]:
        out: list[Event] = []
        if self.session_key and isinstance(sid := _dig(obj, self.session_key), str):
            out.append(Session(sid))
        text = _dig(obj, self.text_key)
        if isinstance(text, str):
            out += [Text(text), MessageEnd()]
        return out


def _fill(part: str, values: dict[str, str]) -> str:
    """Replace the known placeholders only: other braces in an argument are the user's own."""
    for key, value in values.items():
        part = part.replace(key, value)
    return part


def _dig(obj: Any, keys: list[str]) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


@dataclass
class GenericSpec:
    """A CLI described in crew.yaml under `providers:`."""

    name: str
    command: list[str]  # may hold {model} and {prompt}; {prompt} means the prompt goes in argv
    format: str = "text"  # text | jsonl
    text_key: str = "text"  # jsonl: where the assistant text is
    session_key: str | None = None  # jsonl: where a session id is
    resume: list[str] = field(default_factory=list)  # argv added to continue, may hold {session}
    model: str | None = None
    install_hint: str = ""
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.command:
            raise ConfigError(f"provider '{self.name}': command is empty; give the CLI and its arguments")
        if self.format not in ("text", "jsonl"):
            raise ConfigError(f"provider '{self.name}': format '{self.format}' is not text or jsonl")


class GenericProvider(Provider):
    def __init__(self, spec: GenericSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.binary = spec.command[0]
        self.install_hint = spec.install_hint or f"install '{spec.command[0]}' and put it on PATH"
        self.resumable = bool(spec.resume and spec.session_key)
        self.prompt_on_stdin = not any("{prompt}" in part for part in spec.command)

    def argv(self, turn: Turn) -> list[str]:
        values = {
            "{model}": turn.model or self.spec.model or "",
            "{prompt}": turn.prompt,
            "{session}": turn.session_id or "",
        }
        parts = self.spec.command + (self.spec.resume if turn.session_id and self.resumable else [])
        return [_fill(part, values) for part in parts] + turn.options

    def decoder(self) -> Decoder:
        if self.spec.format == "jsonl":
            return JsonlDecoder(self.spec.text_key, self.spec.session_key)
        return TextDecoder()

    def env(self) -> dict[str, str]:
        return dict(self.spec.env)

    def commands(self) -> list[list[str]]:
        return []  # any CLI: its --help could be anything, and even --version might ask a model
