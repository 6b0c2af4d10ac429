"""Gemini, native: one `gemini --acp` process (the Agent Client Protocol: JSON-RPC 2.0 over stdio)
for the whole conversation.

crew initializes it, opens one session whose `mcpServers` hold crew's own MCP server, and sends each
message as a `session/prompt`; the reply streams as `session/update` notifications and ends with the
prompt's answer (its stopReason and token counts). crew's tools are served over MCP's streamable
HTTP inside crew's own process (127.0.0.1, a free port, a random bearer token). Each message that
arrives there is handed to the thread that reads Gemini (crewbridge.conversations.peer.Peer.on_loop), so a call
takes the loop's path (crewbridge.toolkit.native.Channel) as a text call does, one at a time and in order:
transcript, hooks, progress events. The model sees them as `mcp_crewbridge_<tool>`, apart from Gemini's
own `read_file` and the like.

Gemini runs in its "default" approval mode, in which it asks its client (`session/request_permission`)
before each use of its own tools that write or run commands; crew's policy answers (Channel.permit).
Its tools that only read run without asking. The question names no tool and carries no input: the
tool is the prefix of its call id (`<tool>__<id>`, as 0.61 makes every id), the input what the
question shows (the command of a shell call, the file of an edit).

ACP cannot rewind a reply: a stopped one stays whole in Gemini's history (FULL).

What crew reads of Gemini's messages is typed (the TypedDicts below, checked by msgspec as they
arrive: crewbridge.protocol.jsonrpc); an update of another shape is set aside as a corrupt line.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from crewbridge.base.decoded import Done, Event, Failure, MessageEnd, Notice, OwnCall, OwnResult, Session, Text, Usage
from crewbridge.base.places import state_dir
from crewbridge.conversations import FULL
from crewbridge.conversations.peer import CLIENT, Peer
from crewbridge.protocol.jsonrpc import Misshapen, Reply, Request, Route, notification, shaped
from crewbridge.protocol.mcp import McpTools
from crewbridge.protocol.mcp_http import McpHttp
from crewbridge.providers.base import JsonLineDecoder, McpServer, Turn
from crewbridge.providers.gemini import ACP_SERVER, GeminiProvider

if TYPE_CHECKING:
    from crewbridge.sandbox.allowlist import Entry
    from crewbridge.toolkit.native import Channel
    from crewbridge.work.sessions import Prior

PROTOCOL_VERSION = 1
ENDED = ("end_turn", "cancelled")  # stop reasons of a reply that ended as it should


class _Content(TypedDict, total=False):
    type: str
    text: str


class _Update(TypedDict, total=False):
    sessionUpdate: str
    content: Any  # a chunk's content block (_Content); a tool call's list of contents
    # a tool call's (ToolCall)
    toolCallId: Any
    title: Any
    kind: Any
    status: Any
    rawInput: Any
    locations: Any


class Update(TypedDict):
    """session/update's params."""

    update: _Update


class ToolCall(TypedDict, total=False):
    toolCallId: Any
    title: Any
    kind: Any
    rawInput: Any
    content: list[Any] | None
    locations: list[Any] | None


class Option(TypedDict):
    kind: str
    optionId: Any


class Permission(TypedDict, total=False):
    """session/request_permission: Gemini asks before one of its own tools runs."""

    toolCall: ToolCall
    options: list[Option]


class _Tokens(TypedDict, total=False):
    input_tokens: int | None
    output_tokens: int | None


class _Quota(TypedDict, total=False):
    token_count: _Tokens | None


class _Meta(TypedDict, total=False):
    quota: _Quota | None


class PromptEnd(TypedDict, total=False):
    """The answer to session/prompt."""

    stopReason: Any
    _meta: _Meta | None


class SessionMade(TypedDict):
    """The answer to session/new."""

    sessionId: str


class AcpDecoder(JsonLineDecoder):
    """session/update notifications → events, each read in its shape first. Gemini's tool calls end
    a message (the text around a call is two messages); so does a permission question. Its own
    tools' calls are OwnCall events when first seen (a tool_call; an update or a permission question
    may come first: then its update is the first crew sees), OwnResult when done; crew's own
    (mcp_crewbridge_*) are recorded by crew's channel."""

    def __init__(self) -> None:
        self._seen: set[str] = set()  # the calls given as OwnCall

    def decode_object(self, obj: dict[str, Any] | Notice, line: str | bytes | None = None) -> list[Event]:
        return [obj] if isinstance(obj, Notice) else self.event(obj)

    def event(self, obj: dict[str, Any]) -> list[Event]:
        method = obj.get("method")
        if method == "session/request_permission":
            return [MessageEnd()]  # a tool is about to run: the text before it is a message of its own
        if method != "session/update":
            return [Notice("unknown", str(method))]
        try:
            update = shaped(obj.get("params"), Update, "the session/update notification")["update"]
        except Misshapen as exc:
            return [Notice("corrupt", f"{exc}: {json.dumps(obj)[:120]}")]
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            content = update.get("content")
            content = content if isinstance(content, dict) else {}
            if content.get("type") == "text" and isinstance(content.get("text"), str):
                return [Text(content["text"])]
            return [Notice("content", str(content.get("type")))]
        if kind in ("tool_call", "tool_call_update"):
            return self._tool_call(kind, update)
        return [Notice(str(kind))]

    def _tool_call(self, kind: str, update: _Update) -> list[Event]:
        call: ToolCall = update  # a tool call's update holds its fields
        ref, tool = str(call.get("toolCallId")), own_tool(call)
        out: list[Event] = [MessageEnd()] if kind == "tool_call" else []
        if tool.startswith(f"mcp_{ACP_SERVER}_"):
            return out
        if ref not in self._seen:
            self._seen.add(ref)
            out = [MessageEnd(), OwnCall(ref, tool, native_input(call))]
        status = update.get("status")
        if status in ("completed", "failed"):
            out.append(OwnResult.of(ref, status == "completed", _output(call.get("content"))))
        return out


def prompt_end(reply: Reply) -> list[Event]:
    """The events of session/prompt's answer: the reply's usage, then its end."""
    if reply.error is not None:
        code = reply.error.get("code")
        status = code if isinstance(code, int) and 400 <= code < 600 else None
        return [MessageEnd(), Failure(str(reply.error.get("message")), status), Done()]
    tokens = ((reply.result.get("_meta") or {}).get("quota") or {}).get("token_count") or {}
    out: list[Event] = [MessageEnd(), Usage(tokens.get("input_tokens") or 0, tokens.get("output_tokens") or 0)]
    reason = reply.result.get("stopReason")
    if reason in ENDED:
        return [*out, Done()]
    return [*out, Failure(f"gemini ended the reply early: {reason}"), Done()]


def own_tool(call: ToolCall) -> str:
    """Which of Gemini's tools a call is: its id names it (`<tool>__<id>`), else its title."""
    tool, named, _ = str(call.get("toolCallId")).partition("__")
    return tool if named else str(call.get("title"))


def _output(content: Any) -> str:
    """What a finished call shows: its text, and the files it changed."""
    parts = []
    for item in content if isinstance(content, list) else []:
        inner = item.get("content") if isinstance(item, dict) else None
        if isinstance(inner, dict) and isinstance(inner.get("text"), str):
            parts.append(inner["text"])
        elif isinstance(item, dict) and item.get("type") == "diff":
            parts.append(f"changed {item.get('path')}")
    return "\n".join(parts)


def native_input(call: ToolCall) -> dict[str, Any]:
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


def stdio_server(server: McpServer) -> dict[str, Any]:
    """An MCP server crew is given (Turn.mcp_servers) as session/new's mcpServers entry."""
    env = [{"name": name, "value": value} for name, value in server.env]
    return {"name": server.name, "command": server.command, "args": list(server.args), "env": env}


def choose(options: list[Option], kind: str) -> dict[str, Any]:
    """The outcome selecting the option of `kind` (allow_once, reject_once); cancelled without one."""
    chosen = next((option for option in options if option.get("kind") == kind), None)
    if chosen is None:
        return {"outcome": {"outcome": "cancelled"}}
    return {"outcome": {"outcome": "selected", "optionId": chosen["optionId"]}}


def asking_policy(servers: Sequence[McpServer]) -> Path | None:
    """A policy file (in crew's state folder, 0600) by which Gemini asks its client before each tool
    of `servers` runs, so that crew's policy decides on them as on Gemini's own tools; None without
    servers. Gemini allows every tool of a server --allowed-mcp-server-names names (its rule at user
    tier + 0.1): this rule, at user tier + 0.999, comes first."""
    if not servers:
        return None
    folder = state_dir() / "policies"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, name = tempfile.mkstemp(prefix="gemini-", suffix=".toml", dir=folder)
    rules = "".join(
        f'[[rule]]\nmcpName = {json.dumps(server.name)}\ntoolName = "*"\ndecision = "ask_user"\npriority = 999\n\n'
        for server in servers
    )
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(rules)
    return Path(name)


def _unserved(message: Any, session: Any, send: Any) -> dict[str, Any] | None:
    """crew's MCP server before the conversation serves its tools: nothing is asked of it then
    (Gemini learns its address in session/new)."""
    raise RuntimeError("crew's MCP server was asked before it served its tools")


def mcp_entry(url: str) -> Entry:
    """crew's own MCP server at `url` (127.0.0.1), as an allowed destination of Gemini's sandbox."""
    from crewbridge.sandbox.allowlist import from_url  # for start-up speed: a native run only

    found = from_url(url, "crew's MCP server")
    assert found is not None
    return found


class GeminiAcpConversation(Peer):
    decoder = AcpDecoder
    native_tools = True

    def __init__(self, provider: GeminiProvider, base: Turn, *, cwd: Path, env: dict[str, str] | None = None) -> None:
        self._policy = asking_policy(base.mcp_servers)
        policy = ["--policy", str(self._policy)] if self._policy else []
        self._http: McpHttp | None = None
        self._token = ""
        if base.native:  # crew's MCP server listens before Gemini starts: its sandbox lets it reach it
            self._token = secrets.token_urlsafe(32)
            self._http = McpHttp(_unserved, token=self._token)
            self._http.start()
            if base.sandbox is not None:
                base = replace(base, sandbox=base.sandbox.reaching(mcp_entry(self._http.url)))
        super().__init__(provider, base, [*provider.native_argv(base), *policy], cwd=cwd, env=env)

    def routes(self) -> dict[str, Route]:
        return {"session/request_permission": Route(self._permission, Permission)}

    def resume(self, prior: Prior) -> bool:
        """Gemini could load its session (session/load), but only from its own session files, which
        crew's tests and many users turn off: the first message replays the history instead."""
        return False

    def set_up(self) -> None:
        self.call("initialize", {"protocolVersion": PROTOCOL_VERSION, "clientCapabilities": {}, "clientInfo": CLIENT})
        servers = [self._mcp_server(self.channel)] if self.channel is not None and self.base.native else []
        servers += [stdio_server(server) for server in self.base.mcp_servers]
        self.session_id = self.call("session/new", {"cwd": str(self.cwd), "mcpServers": servers}, SessionMade)[
            "sessionId"
        ]

    def _mcp_server(self, channel: Channel) -> dict[str, Any]:
        """Serve crew's tools on crew's MCP server for this conversation: its entry in session/new's
        mcpServers."""
        assert self._http is not None
        self._http.respond = self.on_loop(McpTools(channel).respond)
        header = {"name": "Authorization", "value": f"Bearer {self._token}"}
        return {"type": "http", "name": ACP_SERVER, "url": self._http.url, "headers": [header]}

    def begin(self, message: str) -> list[Event]:
        images = [{"type": "image", "mimeType": image.mime, "data": image.base64()} for image in self.images()]
        prompt = [{"type": "text", "text": message}, *images]
        params: dict[str, Any] = {"sessionId": self.session_id, "prompt": prompt}
        if self.base.trace:  # ACP's reserved trace context: the prompt's spans go under its agent's span
            params["_meta"] = {name.lower(): value for name, value in self.base.trace}
        self.request("session/prompt", params, prompt_end, PromptEnd)
        return [Session(self.session_id)]

    def _permission(self, request: Request, channel: Channel) -> dict[str, Any]:
        """Gemini asks before one of its own tools runs: crew's policy decides. The question names no
        tool: its call id does (`<tool>__<id>`). A stopped reply's questions are refused: crew wants
        no more of it."""
        params: Permission = request.params
        call, options = params.get("toolCall") or ToolCall(), params.get("options") or []
        if self.stopped:
            return choose(options, "reject_once")
        tool = own_tool(call)
        if tool in {f"mcp_{ACP_SERVER}_{spec.name}" for spec in channel.tools()}:
            refusal = None  # crew's own tool (asked about when the user's policy files say so): its call decides
        else:
            read_only = tool in self.provider.read_only_tools
            refusal = channel.permit(tool, native_input(call), read_only, ref=str(call.get("toolCallId")))
        return choose(options, "reject_once" if refusal else "allow_once")

    def interrupt(self) -> None:
        self.write(notification("session/cancel", {"sessionId": self.session_id}))

    def keep(self, kept: str, stopped: bool) -> str:
        self.finish()
        return FULL  # ACP has no way to cut a reply out of Gemini's history

    def close(self) -> None:
        super().close()  # first: an MCP message still waiting is answered, and the server can end
        if self._http is not None:
            self._http.close()
        if self._policy is not None:
            self._policy.unlink(missing_ok=True)
