"""What a decoder makes of one line of CLI output. Only `Text` is assistant-authored."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

OUTPUT_CHARS = 20_000  # of a CLI's own tool's output kept (OwnResult.of): the record's, not the model's


@dataclass(slots=True)  # not frozen: one is made per streamed delta, and frozen doubles that cost
class Text:
    """A delta of assistant-authored text: the only thing the extractor ever sees."""

    text: str

    def __post_init__(self) -> None:  # a decoder that meets another shape reports the line as corrupt
        if not isinstance(self.text, str):
            raise TypeError(f"text is {type(self.text).__name__}, not a string")


@dataclass(frozen=True)
class MessageEnd:
    """An assistant message (or content block) ended; a fence never spans this boundary."""


@dataclass(frozen=True)
class Session:
    """The CLI told us its session/thread id and/or model."""

    session_id: str | None = None
    model: str | None = None


@dataclass(frozen=True)
class Usage:
    """Tokens (input includes cached: read from the provider's cache) and cost, as the CLI reported
    them for one reply. `cumulative`: the CLI reports its session's totals so far instead (codex
    exec on a resumed thread); the conversation turns them into this reply's share."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    cached_tokens: int = 0
    cumulative: bool = False
    context_window: int | None = None  # tokens the model's context holds, where the CLI says it


@dataclass(frozen=True)
class Failure:
    """The CLI reported an error (API error, max turns, …) in its own words."""

    message: str
    status: int | None = None


@dataclass(frozen=True)
class Done:
    """The CLI's reply ended (its final/result event): a live CLI's conversation reads up to it."""


@dataclass(frozen=True)
class OwnCall:
    """The CLI uses one of its own tools (or a tool of an MCP server it was given, not crew's):
    `ref`, the CLI's id for the call; `name` and `input` as crew's policy names and reads them
    (crewbridge.toolkit.native.Channel.permit: Bash, exec_command, write_file, mcp__SERVER__TOOL)."""

    ref: str
    name: str
    input: Any = None


@dataclass(frozen=True)
class OwnResult:
    """What the CLI reported of its own tool's run (`ref`: its id for the call): whether it went
    well, its output (bounded: OwnResult.of), a command's exit code where the CLI says it."""

    ref: str
    ok: bool
    output: str = ""
    exit_code: int | None = None
    truncated: bool = False

    @classmethod
    def of(cls, ref: str, ok: bool, output: str, exit_code: int | None = None) -> OwnResult:
        """The result with its output cut to OUTPUT_CHARS characters."""
        cut = len(output) > OUTPUT_CHARS
        return cls(ref, ok, output[:OUTPUT_CHARS] if cut else output, exit_code, cut)


@dataclass(frozen=True)
class Notice:
    """Something seen and set aside: a corrupt line, an echoed prompt, a subagent's words."""

    kind: str
    detail: str = ""


Event = Text | MessageEnd | Session | Usage | Failure | Done | OwnCall | OwnResult | Notice
