"""Claude Code, live: one `claude -p --input-format stream-json` process for the whole conversation.

Each message is a stream-json user line on stdin; the reply's text arrives as stream_event deltas.
Stopping a reply sends the interrupt control request (it lands within milliseconds). Claude then
holds the reply as far as it had streamed, which is past the tool block by at least the text that
made crew stop. So before the next message crew rewinds the conversation to the message the reply
answered (the rewind_conversation control request), puts that message back without querying the
model (`shouldQuery: false`), and appends the reply cut at its last block as an assistant line. The
history is then exact — prompt, reply up to the block, and next the tool result — whether the
interrupt landed mid-reply or the reply had already finished (the race).

The rewind needs an assistant message before its target; for the first message there is none, so
the process starts with an empty assistant line, which Claude leaves out of every model request.

Claude's questions come on the same stream, as control requests, and are answered as they come:
`can_use_tool` (one of its own tools, by crew's policy: the loop's channel) and, with native tools,
`mcp_message` (crew's tools as an SDK MCP server named crew, served by crewbridge.protocol.mcp.McpTools).
crew's own requests (interrupt, rewind_conversation) are control requests too: the control protocol
is the Wire of this live peer (crewbridge.conversations.peer). What crew reads of claude's requests
and answers is typed (the TypedDicts below, checked by msgspec as they arrive: crewbridge.protocol.jsonrpc).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from crewbridge.base.decoded import Event, Usage
from crewbridge.conversations import EXACT, FULL
from crewbridge.conversations.peer import Peer
from crewbridge.protocol.jsonrpc import METHOD_NOT_FOUND, Reply, Request, Route, RpcError
from crewbridge.providers.base import Turn
from crewbridge.providers.claude import LIVE_FLAGS, NATIVE_FLAGS, ClaudeDecoder, ClaudeProvider
from crewbridge.toolkit.native import SERVER

if TYPE_CHECKING:
    from crewbridge.protocol.mcp import McpTools
    from crewbridge.toolkit.native import Channel
    from crewbridge.work.sessions import Prior


class _CanUseTool(TypedDict):
    tool_name: str


class CanUseTool(_CanUseTool, total=False):
    """can_use_tool: Claude asks before one of its own tools runs."""

    input: dict[str, Any]
    tool_use_id: str


class McpMessage(TypedDict):
    """mcp_message: a message to an SDK MCP server (crew's)."""

    server_name: str
    message: Any


class Rewound(TypedDict, total=False):
    """The answer to rewind_conversation."""

    rewound: bool


class Control:
    """Claude's control protocol (the Wire): requests either way are control_request lines, answered
    by control_response lines; crew's requests are numbered crew-1, crew-2, …"""

    def request(self, number: int, method: str, params: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        request_id = f"crew-{number}"
        return request_id, {
            "type": "control_request",
            "request_id": request_id,
            "request": {"subtype": method, **params},
        }

    def answer(self, request_id: Any, result: Any) -> dict[str, Any]:
        response = {"subtype": "success", "request_id": request_id, "response": result}
        return {"type": "control_response", "response": response}

    def refusal(self, request_id: Any, code: int, message: str) -> dict[str, Any]:
        return {
            "type": "control_response",
            "response": {"subtype": "error", "request_id": request_id, "error": message},
        }

    def parse(self, obj: dict[str, Any]) -> Request | Reply | None:
        kind = obj.get("type")
        if kind == "control_request":
            request = obj.get("request")
            request = request if isinstance(request, dict) else {}
            return Request(obj.get("request_id"), str(request.get("subtype")), request)
        if kind == "control_response":
            response = obj.get("response")
            response = response if isinstance(response, dict) else {}
            if response.get("subtype") == "error":
                return Reply(response.get("request_id"), {}, {"message": response.get("error")})
            result = response.get("response")
            return Reply(response.get("request_id"), result if isinstance(result, dict) else {})
        return None  # control_cancel_request too: the question it cancels was answered at once


def line_id() -> str:
    # For start-up speed: uuid loads platform, slow to import, and not needed before the CLI starts.
    import uuid

    return str(uuid.uuid4())


def user_line(message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "user", "uuid": line_id(), "message": message, **extra}


def assistant_line(text: str) -> dict[str, Any]:
    return {
        "type": "assistant",
        "uuid": line_id(),
        "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
    }


class ClaudeLiveConversation(Peer):
    wire = Control()
    decoder = ClaudeDecoder
    native_tools = True

    def __init__(self, provider: ClaudeProvider, base: Turn, *, cwd: Path, env: dict[str, str] | None = None) -> None:
        super().__init__(provider, base, live_argv(provider, base), cwd=cwd, env=env)
        self._prompt_line: dict[str, Any] = {}  # the user line the current reply answers
        self._used_tools = False  # the reply used tools (Claude's or crew's): its history holds their calls
        self._cost = 0.0  # the process's total cost so far: each result reports the total, not its share
        self._mcp: McpTools | None = None  # crew's SDK MCP server (one session), made with its first message

    def routes(self) -> dict[str, Route]:
        return {
            "can_use_tool": Route(self._can_use_tool, CanUseTool),
            "mcp_message": Route(self._mcp_message, McpMessage),
        }

    def resume(self, prior: Prior) -> bool:
        if prior.session_id is None or not self.provider.has_session(prior.session_id, self.env, self.cwd):
            return False
        assert isinstance(self.provider, ClaudeProvider)
        self.argv = live_argv(self.provider, replace(self.base, session_id=prior.session_id))
        return True

    def set_up(self) -> None:
        self.write(assistant_line(""))  # an anchor for rewinding to the first message

    def begin(self, message: str) -> list[Event]:
        images = [
            {"type": "image", "source": {"type": "base64", "media_type": image.mime, "data": image.base64()}}
            for image in self.images()
        ]
        content = [{"type": "text", "text": message}, *images] if images else message
        self._prompt_line = user_line({"role": "user", "content": content})
        self._used_tools = False
        self.write(self._prompt_line)
        return []

    def events(self, obj: dict[str, Any]) -> list[Event]:
        events = self.reading.decode_object(obj)
        kind = obj.get("type")
        if kind == "user":
            self._used_tools = self._used_tools or _is_tool_result(obj)
        elif kind == "result":  # the only line with usage
            events = [self._share(event) if isinstance(event, Usage) else event for event in events]
        return events

    def _share(self, usage: Usage) -> Usage:
        """The reply's usage with its share of the cost (Claude reports the process's total)."""
        if usage.cost_usd is None:
            return usage
        share, self._cost = max(usage.cost_usd - self._cost, 0.0), max(usage.cost_usd, self._cost)
        return replace(usage, cost_usd=round(share, 8))

    def _can_use_tool(self, request: Request, channel: Channel) -> dict[str, Any]:
        """One of Claude's own tools: crew's policy decides."""
        tool, data = request.params["tool_name"], request.params.get("input") or {}
        read_only, ref = tool in self.provider.read_only_tools, request.params.get("tool_use_id")
        refusal = channel.permit(tool, data, read_only, ref)
        return {"behavior": "deny", "message": refusal} if refusal else {"behavior": "allow", "updatedInput": data}

    def _mcp_message(self, request: Request, channel: Channel) -> dict[str, Any] | None:
        """A message to crew's SDK MCP server (the only one Claude is given). A tools/call runs on
        a thread of its own (Peer.offload): its cancellation (notifications/cancelled, which Claude
        sends when it aborts the call) comes on the stream this thread reads, and must reach it."""
        if request.params["server_name"] != SERVER:
            raise RpcError(METHOD_NOT_FOUND, f"crew serves no MCP server named {request.params['server_name']}")
        if self._mcp is None:
            from crewbridge.protocol.mcp import McpTools  # for start-up speed: with the first native call

            self._mcp = McpTools(channel)
        mcp, message = self._mcp, request.params["message"]

        def answer() -> dict[str, Any]:
            return {"mcp_response": mcp.answer(message) or {"jsonrpc": "2.0", "result": {}}}

        if isinstance(message, dict) and message.get("method") == "tools/call":
            self.offload(request, answer)
            return None
        return answer()

    def interrupt(self) -> None:
        self.request("interrupt", {})

    def keep(self, kept: str, stopped: bool) -> str:
        self.finish()
        if not stopped or self._used_tools:
            # Claude holds the reply as far as it streamed. One that used tools is left so: rewinding
            # would drop those calls too; the follow-up names the tail instead.
            return FULL
        target = {"interrupt_if_running": True, "target_message_uuid": self._prompt_line["uuid"]}
        rewound = self.exchange("rewind_conversation", target, Rewound)
        if rewound.error is not None or not rewound.result.get("rewound"):
            return FULL
        # that message is in the history before the reply goes in after it
        self.await_reply(user_line(self._prompt_line["message"], shouldQuery=False))
        self.write(assistant_line(kept))
        return EXACT


def live_argv(provider: ClaudeProvider, turn: Turn) -> list[str]:
    """The live process's command: crew's tools as an SDK MCP server when the turn asks for native tools."""
    return provider.argv(turn) + LIVE_FLAGS + (NATIVE_FLAGS if turn.native else [])


def _is_tool_result(obj: dict[str, Any]) -> bool:
    """A user line Claude wrote for a tool's result."""
    message = obj.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, list) and any(
        isinstance(part, dict) and part.get("type") == "tool_result" for part in content
    )
