"""Native tool calls: crew's tools reach a CLI through its own tool channel (an MCP server inside
claude's control protocol, codex's dynamic tools, an MCP server gemini reaches over ACP) instead
of the text catalogue, and the CLI's own tools' uses are decided by crew's policy wherever the CLI
asks its client.

The loop gives its conversation a Channel. A conversation calls `call` for each of crew's tools the
model uses natively and `permit` for each use of the CLI's own tools the CLI asks about; both take
the path a text call takes (schema, hooks, policy, approval, transcript, progress events).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from crewbridge.version import __version__

if TYPE_CHECKING:
    from crewbridge.registry import Tool, ToolResult

SERVER = "crew"  # the MCP server's name, and the prefix of codex's dynamic tools: every name the model sees carries it
MCP_VERSION = "2025-06-18"


class Channel(Protocol):
    """What a conversation is given: crew's tools to offer natively, and crew's decisions on the
    CLI's own tools (the loop's, crewbridge.loop.LoopChannel)."""

    def tools(self) -> list[Tool]:
        """crew's tools the model is offered natively (its policy's, for its mode)."""

    def call(self, name: str, arguments: Any) -> ToolResult:
        """Run crew's tool `name` (bare), as a text call runs; always a result, never an exception
        (but MaxTurnsReached or a repeated failure ends the run)."""

    def decides(self) -> bool:
        """Whether crew's policy may refuse any of the CLI's own tools' uses (query mode, the
        read-only profile, native: globs, command globs): a CLI that asks at a cost (codex) is made
        to ask only then."""

    def permit(self, tool: str, arguments: Any, read_only: bool) -> str | None:
        """Whether the CLI may run its own tool `tool` (`read_only`: it only reads): None to let it,
        else why not, for the model."""


@dataclass
class McpTools:
    """A tools-only MCP server over a Channel: what claude's SDK MCP server and the MCP server
    gemini reaches over ACP answer. One message in, its answer out (None for a notification)."""

    channel: Channel
    name: str = SERVER

    def answer(self, message: Any) -> dict[str, Any] | None:
        if not isinstance(message, dict) or "id" not in message:
            return None  # notifications (initialized, cancelled): nothing to answer
        method, params, rid = message.get("method"), message.get("params") or {}, message["id"]
        if method == "initialize":
            asked = params.get("protocolVersion")
            result: dict[str, Any] = {
                "protocolVersion": asked if isinstance(asked, str) else MCP_VERSION,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": self.name, "version": __version__},
            }
        elif method == "ping":
            result = {}
        elif method == "tools/list":
            result = {"tools": [mcp_tool(spec) for spec in self.channel.tools()]}
        elif method == "tools/call":
            name, arguments = params.get("name"), params.get("arguments")
            if not isinstance(name, str):
                return rpc_error(rid, -32602, "tools/call needs a tool name in params.name")
            result = tool_content(self.channel.call(name, {} if arguments is None else arguments))
        else:
            return rpc_error(rid, -32601, f"method '{method}' is not served; crew serves tools only")
        return {"jsonrpc": "2.0", "id": rid, "result": result}


def mcp_tool(spec: Tool) -> dict[str, Any]:
    """A tool as MCP's tools/list gives it."""
    return {
        "name": spec.name,
        "description": spec.description,
        "inputSchema": spec.input_schema,
        "annotations": {"readOnlyHint": spec.read_only},
    }


def result_text(result: ToolResult) -> str:
    """A tool's result as the model reads it on a native channel: its data, or its error."""
    if not result.success:
        return str(result.error)
    data = result.data
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, indent=1)
    return text + ("\n(the output was truncated)" if result.truncated else "")


def tool_content(result: ToolResult) -> dict[str, Any]:
    """A tool's result as MCP's tools/call answers it."""
    return {"content": [{"type": "text", "text": result_text(result)}], "isError": not result.success}


def rpc_error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}
