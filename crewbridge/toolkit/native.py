"""Native tool calls: crew's tools reach a CLI through its own tool channel (an MCP server inside
claude's control protocol, codex's dynamic tools, an MCP server gemini reaches over ACP) instead
of the text catalogue, and the CLI's own tools' uses are decided by crew's policy wherever the CLI
asks its client.

The loop gives its conversation a Channel. A conversation calls `call` for each of crew's tools the
model uses natively and `permit` for each use of the CLI's own tools the CLI asks about; both take
the path a text call takes (schema, hooks, policy, approval, transcript, progress events). What the
CLI reports of its own tools' uses and results (crewbridge.base.decoded.OwnCall, OwnResult) reaches the
channel's `own`: from the loop, which reads the conversation's events, and from a live
conversation that reads them while the loop does not (the rest of a reply it stopped).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from crewbridge.base.decoded import OwnCall, OwnResult
    from crewbridge.base.stop import Stop
    from crewbridge.toolkit.registry import Tool, ToolResult

SERVER = "crew"  # the MCP server's name, and the prefix of codex's dynamic tools: every name the model sees carries it


class Channel(Protocol):
    """What a conversation is given: crew's tools to offer natively, and crew's decisions on the
    CLI's own tools (the loop's, crewbridge.engine.loop.LoopChannel)."""

    def tools(self) -> list[Tool]:
        """crew's tools the model is offered natively (its policy's, for its mode)."""

    def call(self, name: str, arguments: Any, stop: Stop | None = None) -> ToolResult:
        """Run crew's tool `name` (bare), as a text call runs; always a result, never an exception
        (but MaxTurnsReached or a repeated failure ends the run). `stop`, set when the CLI cancels
        the call (MCP's notifications/cancelled), ends the processes the call started."""

    def decides(self) -> bool:
        """Whether crew's policy may refuse any of the CLI's own tools' uses (query mode, the
        read-only profile, native: globs, command globs): a CLI that asks at a cost (codex) is made
        to ask only then."""

    def permit(self, tool: str, arguments: Any, read_only: bool, ref: str | None = None) -> str | None:
        """Whether the CLI may run its own tool `tool` (`read_only`: it only reads; `ref`: the CLI's
        id for the call, which its OwnCall and OwnResult carry too): None to let it, else why not,
        for the model."""

    def own(self, event: OwnCall | OwnResult) -> None:
        """Record what the CLI reported of one of its own tools' uses: the use, or its result."""


def result_text(result: ToolResult) -> str:
    """A tool's result as the model reads it on a native channel: its data, or its error."""
    notices = "".join(f"\n\n{notice}" for notice in result.notices)
    if not result.success:
        return str(result.error) + notices
    data = result.data
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, indent=1)
    return text + ("\n(the output was truncated)" if result.truncated else "") + notices
