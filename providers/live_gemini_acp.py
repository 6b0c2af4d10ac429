"""Gemini, native: one `gemini --acp` process (the Agent Client Protocol: JSON-RPC 2.0 over stdio)
for the whole conversation.

crew initializes it, opens one session whose `mcpServers` hold crew's own MCP server, and sends each
message as a `session/prompt`; the reply streams as `session/update` notifications and ends with the
prompt's answer (its stopReason and token counts). crew's tools are served over MCP's streamable
HTTP inside crew's own process (127.0.0.1, a free port, a random bearer token), so each call takes
the loop's path (crewbridge.native.Channel) in the same process: transcript, hooks, progress events.
The model sees them as `mcp_crew_<tool>`, apart from Gemini's own `read_file` and the like.

Gemini runs in its "default" approval mode, in which it asks its client (`session/request_permission`)
before each use of its own tools that write or run commands; crew's policy answers (Channel.permit).
Its tools that only read run without asking. The question names no tool and carries no input: the
tool is the prefix of its call id (`<tool>__<id>`, as 0.61 makes every id), the input what the
question shows (the command of a shell call, the file of an edit).

ACP cannot rewind a reply: a stopped one stays whole in Gemini's history (FULL).
"""

from __future__ import annotations

import secrets
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.providers.base import JsonLineDecoder, Turn
from crewbridge.providers.gemini import GeminiProvider
from crewbridge.providers.live_process import LiveProcess, RpcConversation, control_deadline

from crewbridge.conversation import FULL
from crewbridge.errors import CrewError, ProviderError
from crewbridge.events import Done, Event, Failure, MessageEnd, Notice, Session, Text, Usage
from crewbridge.mcp.core import McpSession, McpTools, Send
from crewbridge.mcp.http import McpHttp
from crewbridge.native import SERVER
from crewbridge.version import __version__

if TYPE_CHECKING:
    from crewbridge.sessions import Prior

PROTOCOL_VERSION = 1
CLIENT = {"name": "crewbridge", "title": "crewbridge", "version": __version__}
ENDED = ("end_turn", "cancelled")  # stop reasons of a reply that ended as it should


class AcpDecoder(JsonLineDecoder):
    """session/update notifications → events. Gemini's tool calls end a message (the text around a
    call is two messages) and are set aside as notices."""

    def event(self, obj: dict[str, Any]) -> list[Event]:
        method = obj.get("method")
        if method != "session/update":
            return [Notice("unknown", str(method))]
        update = obj["params"]["update"]
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            content = update["content"]
            return [Text(content["text"])] if content.get("type") == "text" else [Notice("content", content["type"])]
        if kind == "tool_call":
            return [MessageEnd(), Notice("native_tool_call", str(update.get("title")))]
        return [Notice(str(kind))]


def prompt_end(answer: dict[str, Any]) -> list[Event]:
    """The events of session/prompt's answer: the reply's usage, then its end."""
    if "error" in answer:
        error = answer["error"]
        code = error.get("code")
        status = code if isinstance(code, int) and 400 <= code < 600 else None
        return [MessageEnd(), Failure(str(error.get("message")), status), Done(ok=False)]
    result = answer.get("result") or {}
    tokens = ((result.get("_meta") or {}).get("quota") or {}).get("token_count") or {}
    out: list[Event] = [MessageEnd(), Usage(tokens.get("input_tokens") or 0, tokens.get("output_tokens") or 0)]
    reason = result.get("stopReason")
    if reason in ENDED:
        return [*out, Done()]
    return [*out, Failure(f"gemini ended the reply early: {reason}"), Done(ok=False)]


def native_input(call: dict[str, Any]) -> dict[str, Any]:
    """The input of one of Gemini's own tool uses, from its permission question: its raw input
    where Gemini gives it, else what the question shows."""
    raw = call.get("rawInput")
    if isinstance(raw, dict):
        return raw
    data: dict[str, Any] = {}
    if call.get("kind") == "execute":
        data["command"] = call.get("title")  # a shell call's title is its command
    for item in call.get("content") or []:
        if isinstance(item, dict) and item.get("type") == "diff":
            data.update(file_path=item.get("path"), content=item.get("newText"))
    if not data:
        data["title"] = call.get("title")
        paths = [place.get("path") for place in call.get("locations") or [] if isinstance(place, dict)]
        if paths:
            data["paths"] = paths
    return data


def choose(options: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """The outcome selecting the option of `kind` (allow_once, reject_once); cancelled without one."""
    chosen = next((option for option in options if option.get("kind") == kind), None)
    if chosen is None:
        return {"outcome": {"outcome": "cancelled"}}
    return {"outcome": {"outcome": "selected", "optionId": chosen["optionId"]}}


class GeminiAcpConversation(RpcConversation):
    native_tools = True

    def __init__(self, provider: GeminiProvider, base: Turn, *, cwd: Path, env: dict[str, str] | None = None) -> None:
        super().__init__(provider, base, provider.native_argv(base), cwd=cwd, env=env)
        self._prompt: int | None = None  # the id of the session/prompt whose answer is still to be read
        self._http: McpHttp | None = None
        self._mcp: McpTools | None = None  # crew's tools, as the MCP server self._http serves
        self._ended: CrewError | None = None  # a crew tool call ended the run (raised by send())

    def resume(self, prior: Prior) -> bool:
        """Gemini could load its session (session/load), but only from its own session files, which
        crew's tests and many users turn off: the first message replays the history instead."""
        return False

    def _start(self) -> LiveProcess:
        process, first = self._launch()
        if first:
            self._call(
                "initialize", {"protocolVersion": PROTOCOL_VERSION, "clientCapabilities": {}, "clientInfo": CLIENT}
            )
            servers = [self._serve()] if self.channel is not None and self.base.native else []
            session = self._call("session/new", {"cwd": str(self.cwd), "mcpServers": servers})
            self.session_id = session["sessionId"]
        return process

    def _serve(self) -> dict[str, Any]:
        """Start crew's MCP server for this conversation: its entry in session/new's mcpServers."""
        token = secrets.token_urlsafe(32)
        assert self.channel is not None
        self._mcp = McpTools(self.channel)
        self._http = McpHttp(self._respond, token=token)
        self._http.start()
        header = {"name": "Authorization", "value": f"Bearer {token}"}
        return {"type": "http", "name": SERVER, "url": self._http.url, "headers": [header]}

    def _respond(self, message: Any, session: McpSession, notify: Send) -> dict[str, Any] | None:
        """Answer one MCP message from Gemini (from the HTTP server's thread). A call that ends the
        run (too many calls, a repeated failure) is answered with an error and ends it in send()."""
        assert self._mcp is not None
        try:
            return self._mcp.respond(message, session, notify)
        except CrewError as exc:
            self._ended = exc
            return {"jsonrpc": "2.0", "id": message.get("id"), "error": {"code": -32603, "message": str(exc)}}

    def send(self, message: str, deadline: float | None) -> Generator[Event, None, None]:
        process = self._start()  # a CLI that is not installed raises CLINotFound from here
        self._finish()
        yield Session(self.session_id)
        prompt = [{"type": "text", "text": message}]
        self._prompt = self._request("session/prompt", {"sessionId": self.session_id, "prompt": prompt})
        decoder = AcpDecoder()
        while self._prompt is not None:
            try:
                obj = process.read(deadline)
            except ProviderError as exc:  # gemini exited
                self._prompt = None
                self._end_run()
                yield Failure(str(exc))
                return
            self._end_run()
            if isinstance(obj, dict) and "method" in obj and "id" in obj:  # a question to crew
                yield MessageEnd()
                self._answer(obj)
            elif isinstance(obj, dict) and "method" not in obj:  # the answer to a request
                if obj.get("id") == self._prompt:
                    self._prompt = None
                    yield from prompt_end(obj)
            else:
                yield from decoder.decode_object(obj)

    def _end_run(self) -> None:
        """Raise the error with which a call of crew's tools ended the run, if one did."""
        if self._ended is not None:
            raise self._ended

    def _answer(self, request: dict[str, Any]) -> None:
        """Answer Gemini's request: a permission question by crew's policy; nothing else is served."""
        assert self.process is not None
        params = request.get("params") or {}
        if request["method"] != "session/request_permission":
            error = {"code": -32601, "message": f"crew does not serve {request['method']}"}
            self.process.write({"jsonrpc": "2.0", "id": request["id"], "error": error})
            return
        call, channel = params.get("toolCall") or {}, self.channel
        assert channel is not None  # the loop serves a conversation before its first message
        tool, named, _ = str(call.get("toolCallId")).partition("__")
        tool = tool if named else str(call.get("title"))
        if tool in {f"mcp_{SERVER}_{spec.name}" for spec in channel.tools()}:
            refusal = None  # crew's own tool (asked about when the user's policy files say so): its call decides
        else:
            refusal = channel.permit(tool, native_input(call), read_only=tool in self.provider.read_only_tools)
        outcome = choose(params.get("options") or [], "reject_once" if refusal else "allow_once")
        self.process.write({"jsonrpc": "2.0", "id": request["id"], "result": outcome})

    def _finish(self) -> None:
        """Read what is left of a reply the loop stopped reading, up to its prompt's answer; Gemini's
        questions meanwhile are refused (crew wants no more of that reply)."""
        while self._prompt is not None and self.process is not None:
            obj = self.process.read(control_deadline())
            if isinstance(obj, dict) and "method" in obj and "id" in obj:
                options = (obj.get("params") or {}).get("options") or []
                self.process.write({"jsonrpc": "2.0", "id": obj["id"], "result": choose(options, "reject_once")})
            elif isinstance(obj, dict) and "method" not in obj and obj.get("id") == self._prompt:
                self._prompt = None
                self.late += [event for event in prompt_end(obj) if isinstance(event, Usage)]

    def stop(self) -> None:
        if self._prompt is not None and self.process is not None:
            self.process.write({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": self.session_id}})

    def keep(self, kept: str, stopped: bool) -> str:
        self._finish()
        return FULL  # ACP has no way to cut a reply out of Gemini's history

    def close(self) -> None:
        super().close()
        if self._http is not None:
            self._http.close()
