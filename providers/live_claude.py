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
`mcp_message` (crew's tools as an SDK MCP server named crew, served by crewbridge.mcp.core.McpTools).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Generator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.providers.base import Turn
from crewbridge.providers.claude import LIVE_FLAGS, NATIVE_FLAGS, ClaudeDecoder, ClaudeProvider
from crewbridge.providers.live_process import LiveConversation, LiveProcess, control_deadline

from crewbridge.conversation import EXACT, FULL
from crewbridge.errors import ProviderError
from crewbridge.events import Event, Failure, Notice, Session, Usage
from crewbridge.mcp.core import McpTools
from crewbridge.native import SERVER

if TYPE_CHECKING:
    from crewbridge.sessions import Prior


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


class ClaudeLiveConversation(LiveConversation):
    native_tools = True

    def __init__(self, provider: ClaudeProvider, base: Turn, *, cwd: Path, env: dict[str, str] | None = None) -> None:
        super().__init__(provider, base, live_argv(provider, base), cwd=cwd, env=env)
        self._requests = itertools.count(1)
        self._open = False  # a turn whose result line has not been read yet
        self._answered: dict[str, Any] = {}  # the user line the current reply answers
        self._native = False  # the current reply used one of Claude's own tools
        self._cost = 0.0  # the process's total cost so far: each result reports the total, not its share
        self._mcp: McpTools | None = None  # crew's SDK MCP server, made with the first message for it

    def resume(self, prior: Prior) -> bool:
        if prior.session_id is None or not self.provider.has_session(prior.session_id, self.env, self.cwd):
            return False
        assert isinstance(self.provider, ClaudeProvider)
        self.argv = live_argv(self.provider, replace(self.base, session_id=prior.session_id))
        return True

    def _start(self) -> LiveProcess:
        process, first = self._launch()
        if first:
            process.write(assistant_line(""))  # an anchor for rewinding to the first message
        return process

    def send(self, message: str, deadline: float | None) -> Generator[Event, None, None]:
        process = self._start()  # a CLI that is not installed raises CLINotFound from here
        try:
            self._finish_turn()
            self._answered = user_line({"role": "user", "content": message})
            self._native = False
            process.write(self._answered)
            self._open = True
            yield from self._reply(process, deadline)
        except ProviderError as exc:  # the CLI exited
            self._open = False
            yield Failure(str(exc))

    def _reply(self, process: LiveProcess, deadline: float | None) -> Iterator[Event]:
        decoder = ClaudeDecoder()
        while self._open:
            obj = self._read(process, deadline)
            if isinstance(obj, dict):
                self._open = not _is_result(obj)
                self._native = self._native or _is_tool_result(obj)
            for event in decoder.decode_object(obj):
                if isinstance(event, Session) and event.session_id:
                    self.session_id = event.session_id
                yield self._share(event) if isinstance(event, Usage) else event

    def _share(self, usage: Usage) -> Usage:
        """The reply's usage with its share of the cost (Claude reports the process's total)."""
        if usage.cost_usd is None:
            return usage
        share, self._cost = max(usage.cost_usd - self._cost, 0.0), max(usage.cost_usd, self._cost)
        return replace(usage, cost_usd=round(share, 8))

    def _finish_turn(self) -> None:
        """Read what is left of a reply the loop stopped reading, up to its result line."""
        if self._open and self.process is not None:
            result = self._read_until(self.process, _is_result)
            self._open = False
            usage = [event for event in ClaudeDecoder().decode_object(result) if isinstance(event, Usage)]
            self.late += [self._share(event) for event in usage if event.input_tokens or event.output_tokens]

    def _request(self, process: LiveProcess, request: dict[str, Any]) -> str:
        request_id = f"crew-{next(self._requests)}"
        process.write({"type": "control_request", "request_id": request_id, "request": request})
        return request_id

    def _control(self, process: LiveProcess, request: dict[str, Any]) -> dict[str, Any]:
        """Send a control request and wait for its answer."""
        request_id = self._request(process, request)

        def answered(obj: dict[str, Any]) -> bool:
            return obj.get("type") == "control_response" and obj["response"].get("request_id") == request_id

        return self._read_until(process, answered)["response"].get("response") or {}

    def _read(self, process: LiveProcess, deadline: float | None) -> dict[str, Any] | Notice:
        """The next line Claude writes that is not a question to crew: those are answered here."""
        while True:
            obj = process.read(deadline)
            if isinstance(obj, dict) and obj.get("type") == "control_request":
                process.write(self._answer(obj))
            elif not (isinstance(obj, dict) and obj.get("type") == "control_cancel_request"):
                return obj

    def _read_until(self, process: LiveProcess, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        deadline = control_deadline()
        while True:
            obj = self._read(process, deadline)
            if isinstance(obj, dict) and done(obj):
                return obj

    def _answer(self, message: dict[str, Any]) -> dict[str, Any]:
        """The control response to Claude's control request `message`."""
        request_id, request = message.get("request_id"), message.get("request") or {}
        subtype, channel = request.get("subtype"), self.channel
        answer: dict[str, Any]
        if subtype == "can_use_tool" and channel is not None:
            tool, data = str(request.get("tool_name")), request.get("input") or {}
            refusal = channel.permit(tool, data, read_only=tool in self.provider.read_only_tools)
            answer = (
                {"behavior": "deny", "message": refusal} if refusal else {"behavior": "allow", "updatedInput": data}
            )
        elif subtype == "mcp_message" and request.get("server_name") == SERVER and channel is not None:
            self._mcp = self._mcp or McpTools(channel)
            response = self._mcp.answer(request.get("message"))
            answer = {"mcp_response": response or {"jsonrpc": "2.0", "result": {}}}
        else:
            error = f"crew does not answer {subtype} requests here"
            return {
                "type": "control_response",
                "response": {"subtype": "error", "request_id": request_id, "error": error},
            }
        return {
            "type": "control_response",
            "response": {"subtype": "success", "request_id": request_id, "response": answer},
        }

    def stop(self) -> None:
        if self._open and self.process is not None:
            self._request(self.process, {"subtype": "interrupt"})

    def keep(self, kept: str, stopped: bool) -> str:
        self._finish_turn()
        if not stopped or self._native:
            # Claude holds the reply as far as it streamed. One that used Claude's own tools is left
            # so: rewinding would drop those calls too; the follow-up names the tail instead.
            return FULL
        assert self.process is not None  # a reply was stopped, so the process exists
        rewound = self._control(
            self.process,
            {
                "subtype": "rewind_conversation",
                "interrupt_if_running": True,
                "target_message_uuid": self._answered["uuid"],
            },
        )
        if not rewound.get("rewound"):
            return FULL
        self.process.write(user_line(self._answered["message"], shouldQuery=False))
        self._open = True
        self._finish_turn()  # that message is in the history before the reply goes in after it
        self.process.write(assistant_line(kept))
        return EXACT


def live_argv(provider: ClaudeProvider, turn: Turn) -> list[str]:
    """The live process's command: crew's tools as an SDK MCP server when the turn asks for native tools."""
    return provider.argv(turn) + LIVE_FLAGS + (NATIVE_FLAGS if turn.native else [])


def _is_result(obj: dict[str, Any]) -> bool:
    return obj.get("type") == "result"


def _is_tool_result(obj: dict[str, Any]) -> bool:
    """A user line Claude wrote for one of its own tools' results."""
    content = obj.get("message", {}).get("content") if obj.get("type") == "user" else None
    return isinstance(content, list) and any(
        isinstance(part, dict) and part.get("type") == "tool_result" for part in content
    )
