"""Codex, live: one `codex app-server` process (JSON-RPC 2.0 over stdio) for the whole conversation.

A thread is started once; each message is a turn/start, and the reply's text arrives as
item/agentMessage/delta notifications. The thread is ephemeral: Codex writes no session file for
it, which it would otherwise read again a dozen times in every turn (~30 ms of each tool turn).
Stopping a reply sends turn/interrupt: Codex then keeps the messages it had completed in that turn
and drops the one it was writing, so before the next message crew injects (thread/inject_items, an
experimental method) the rest of the reply up to its last tool block as an assistant message. If
Codex had already completed a message holding text past the block (the race: the reply finished
before the interrupt landed), the conversation moves to a new thread into which crew injects the
history it holds, ending with the reply cut at the block (an ephemeral thread cannot be reverted).
Either way the history is exact. A turn that ran Codex's own tools left items crew does not hold:
after one, a race leaves the reply whole and the follow-up names the tail instead.

With native tools (Turn.native) crew's tools are the thread's dynamic tools, named `crew_<tool>`; each
call is an `item/tool/call` request, run through the loop's channel. Whatever the tools' route, Codex
asks crew (approval policy "untrusted") before each command (0.169.0 asks even for `cat` or `ls`)
and each patch: the channel's policy decides. A refusal declines it, and the reason reaches the model
as a steer message (turn/steer) sent first, since a decline carries no text. An accepted command runs
in the sandbox, and Codex reruns it outside the sandbox, without asking again, when the sandbox
refuses it.

What crew reads of Codex's messages is typed (the TypedDicts below, checked by msgspec as they
arrive: crewbridge.protocol.jsonrpc); a notification of another shape is set aside as a corrupt line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from crewbridge.base.decoded import Done, Event, Failure, MessageEnd, Notice, Session, Text, Usage
from crewbridge.base.templates import render
from crewbridge.conversations import EXACT, FULL
from crewbridge.conversations.peer import CLIENT, Peer
from crewbridge.protocol.jsonrpc import Misshapen, Reply, Request, Route, notification, shaped
from crewbridge.providers.base import Image, JsonLineDecoder, Turn
from crewbridge.providers.codex import CodexProvider, OwnItems, own_sandbox, snake_case
from crewbridge.toolkit.native import SERVER, result_text

if TYPE_CHECKING:
    from crewbridge.toolkit.native import Channel
    from crewbridge.toolkit.registry import Tool
    from crewbridge.work.sessions import Prior

CONVERSATION_ITEMS = ("agentMessage", "userMessage")  # every other item is a tool's
CREWS_ITEMS = "dynamicToolCall"  # a call to crew's own tool (native): recorded by crew's channel
PREFIX = SERVER + "_"  # crew's dynamic tools: crew_read_file, … (Codex has tools of its own)
# Codex's approval requests → its tool they are about, as the model calls it
APPROVALS = {"item/commandExecution/requestApproval": "exec_command", "item/fileChange/requestApproval": "apply_patch"}


class _Item(TypedDict, total=False):
    type: str
    id: str
    text: str | None
    changes: Any
    # codex's own tools' (crewbridge.providers.codex.OwnItems)
    status: Any
    command: Any
    cwd: Any
    aggregatedOutput: Any
    exitCode: Any
    server: Any
    tool: Any
    arguments: Any
    result: Any
    error: Any
    query: Any
    path: Any


class ItemNote(TypedDict):
    item: _Item


class DeltaNote(TypedDict):
    delta: str


class _Last(TypedDict, total=False):
    inputTokens: int | None
    outputTokens: int | None
    cachedInputTokens: int | None


class _TokenUsage(TypedDict):
    last: _Last
    modelContextWindow: NotRequired[int | None]


class UsageNote(TypedDict):
    tokenUsage: _TokenUsage


class _Error(TypedDict, total=False):
    message: Any


class _Turn(TypedDict, total=False):
    id: str
    status: str
    error: _Error | None


class TurnNote(TypedDict):
    turn: _Turn


class _ErrorNote(TypedDict):
    error: _Error


class ErrorNote(_ErrorNote, total=False):
    willRetry: bool


class _Id(TypedDict):
    id: str


class ThreadStarted(TypedDict):
    """The answer to thread/start."""

    thread: _Id


class TurnStarted(TypedDict):
    """The answer to turn/start."""

    turn: _Id


class ToolCall(TypedDict, total=False):
    """item/tool/call: a call to one of crew's dynamic tools."""

    tool: Any
    arguments: Any


class Approval(TypedDict, total=False):
    """item/commandExecution/requestApproval, item/fileChange/requestApproval."""

    turnId: str | None
    itemId: str
    command: Any
    cwd: Any
    reason: str | None


class _Asked(TypedDict, total=False):
    codex_approval_kind: Any
    tool_name: Any
    tool_params: Any


class Elicitation(TypedDict, total=False):
    """mcpServer/elicitation/request: an MCP server's question, or Codex's own before one of an MCP
    server's tools runs (its `_meta` says so)."""

    turnId: str | None
    serverName: Any
    _meta: _Asked | None


NOTES: dict[str, Any] = {  # what crew reads of each notification's params; others are notices
    "item/agentMessage/delta": DeltaNote,
    "item/started": ItemNote,
    "item/completed": ItemNote,
    "thread/tokenUsage/updated": UsageNote,
    "turn/started": TurnNote,
    "turn/completed": TurnNote,
    "error": ErrorNote,
}


class AppServerDecoder(JsonLineDecoder):
    """app-server notifications → events, each read in its shape first (`note`). Codex's own tools'
    items are OwnCall and OwnResult events (crewbridge.providers.codex.OwnItems)."""

    def __init__(self) -> None:
        self._own = OwnItems()

    def decode_object(self, obj: dict[str, Any] | Notice, line: str | bytes | None = None) -> list[Event]:
        return [obj] if isinstance(obj, Notice) else self.event(obj)

    def event(self, obj: dict[str, Any]) -> list[Event]:
        noted = note(obj)
        return [noted] if isinstance(noted, Notice) else self.events_of(*noted)

    def events_of(self, method: str, params: Any) -> list[Event]:
        """The events of notification `method`, its `params` in their shape (NOTES)."""
        if method in ("item/started", "item/completed"):
            item = params["item"]
            kind = item.get("type")
            if kind == "agentMessage":
                return [MessageEnd()] if method == "item/completed" else []
            if kind in CONVERSATION_ITEMS or kind == CREWS_ITEMS:
                return []
            return self._own.events(snake_case(item), method == "item/completed")
        return events_of(method, params)


def events_of(method: str, params: Any) -> list[Event]:
    """The events of notification `method` (not an item's), its `params` in their shape (NOTES)."""
    if method == "item/agentMessage/delta":
        return [Text(params["delta"])]
    if method == "thread/tokenUsage/updated":
        usage = params["tokenUsage"]
        last = usage["last"]
        return [
            Usage(
                last.get("inputTokens") or 0,
                last.get("outputTokens") or 0,
                cached_tokens=last.get("cachedInputTokens") or 0,
                context_window=usage.get("modelContextWindow"),
            )
        ]
    if method == "turn/completed":
        turn = params["turn"]
        if turn.get("status") == "failed":
            message = (turn.get("error") or {}).get("message") or "the turn failed"
            return [Failure(str(message)), Done()]
        return [Done()]
    if method == "error":
        message = str(params["error"].get("message"))
        return [Notice("retry", message)] if params.get("willRetry") else [Failure(message)]
    return [Notice("unknown", str(method))]


def note(obj: dict[str, Any]) -> tuple[str, Any] | Notice:
    """A notification's method and its params in their shape (NOTES); a corrupt Notice for one of
    another shape."""
    method = str(obj.get("method"))
    try:
        return method, shaped(obj.get("params"), NOTES.get(method), f"the {method} notification")
    except Misshapen as exc:
        return Notice("corrupt", f"{exc}: {json.dumps(obj)[:120]}")


def user_item(text: str, images: tuple[Image, ...] = ()) -> dict[str, Any]:
    shown = [{"type": "input_image", "image_url": image.url()} for image in images]
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}, *shown]}


def assistant_item(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


class CodexLiveConversation(Peer):
    decoder = AppServerDecoder
    reading: AppServerDecoder
    native_tools = True

    def __init__(self, provider: CodexProvider, base: Turn, *, cwd: Path, env: dict[str, str] | None = None) -> None:
        super().__init__(provider, base, [provider.binary, "app-server", *base.options], cwd=cwd, env=env)
        self._turn: str | None = None  # the current (or last) turn
        self._turn_request: Any = None  # the id of the current turn's turn/start
        self._stored = ""  # text of the agent messages Codex completed (so stored) in this turn
        self._used_tools = False  # the turn used tools (Codex's or crew's): its history holds their items
        self._changes: dict[str, Any] = {}  # file changes by item id: an approval request names only the item
        # The model-visible conversation, as Responses API items; None once tools added items crew
        # does not hold.
        self._history: list[dict[str, Any]] | None = []

    def routes(self) -> dict[str, Route]:
        return {
            "item/tool/call": Route(self._tool_call, ToolCall),
            **{method: Route(self._approval, Approval) for method in APPROVALS},
            "mcpServer/elicitation/request": Route(self._elicitation, Elicitation),
        }

    def resume(self, prior: Prior) -> bool:
        """The thread is ephemeral (nothing of it outlives the process): the new one is given the
        earlier history from crew's transcript, exactly, before the first message."""
        self._history = [user_item(text) if role == "user" else assistant_item(text) for role, text in prior.history]
        return True

    def set_up(self) -> None:
        self.call("initialize", {"clientInfo": CLIENT, "capabilities": {"experimentalApi": True}})
        self.write(notification("initialized"))
        self._new_thread()
        if self._history:  # a resumed conversation's
            self._inject(*self._history)

    def _new_thread(self) -> None:
        params: dict[str, Any] = {
            "cwd": str(self.cwd),
            "model": self.base.model,
            "sandbox": own_sandbox(self.base),
            # untrusted: Codex asks crew before each command and patch. Only when crew's policy may
            # refuse one: a command crew allows that the sandbox then blocks, Codex reruns outside
            # the sandbox without asking again; with "never" the sandbox has the last word.
            "approvalPolicy": "untrusted" if self.channel is not None and self.channel.decides() else "never",
            "ephemeral": True,
        }
        if self.base.native and self.channel:
            params["dynamicTools"] = [dynamic_tool(spec) for spec in self.channel.tools()]
        self.session_id = self.call("thread/start", params, ThreadStarted)["thread"]["id"]

    def begin(self, message: str) -> list[Event]:
        self._stored, self._used_tools, self._changes = "", False, {}
        images = self.images()
        self._remember(user_item(message, images))
        self._turn = None
        given = [{"type": "image", "url": image.url()} for image in images]
        params = {"threadId": self.session_id, "input": [{"type": "text", "text": message}, *given]}
        self._turn_request = self.request("turn/start", params, self._started, TurnStarted)
        return [Session(self.session_id)]

    def _started(self, reply: Reply) -> list[Event]:
        """Codex's answer to turn/start: the turn's id, or its refusal."""
        if reply.id != self._turn_request:
            return []  # an earlier turn's, answered after that turn ended
        if reply.error is not None:
            return [Failure(f"codex refused the turn: {reply.error.get('message')}"), Done()]
        self._turn = reply.result["turn"]["id"]
        return []

    def events(self, obj: dict[str, Any]) -> list[Event]:
        """Track what Codex stores of the current turn."""
        noted = note(obj)
        if isinstance(noted, Notice):
            return [noted]
        method, params = noted
        if method == "item/completed" and params["item"].get("type") == "agentMessage":
            self._stored += params["item"].get("text") or ""
        elif method == "item/started" and params["item"].get("type") not in CONVERSATION_ITEMS:
            self._used_tools = True
            if params["item"].get("type") == "fileChange":
                self._changes[params["item"]["id"]] = params["item"].get("changes")
        elif method == "turn/started" and self._turn is None:
            # codex 0.169.0 sends it before it answers turn/start, and the whole turn may come
            # before that answer too (it answers and streams from different tasks)
            self._turn = params["turn"].get("id")
        return self.reading.events_of(method, params)

    def _tool_call(self, request: Request, channel: Channel) -> dict[str, Any]:
        """A call to one of crew's tools (item/tool/call), run through the channel."""
        name, arguments = request.params.get("tool"), request.params.get("arguments")
        if isinstance(name, str) and name.startswith(PREFIX):
            result = channel.call(name[len(PREFIX) :], {} if arguments is None else arguments)
            text, success = result_text(result), result.success
        else:
            text, success = f"{name!r} is not one of crew's tools (their names start with {PREFIX})", False
        return {"contentItems": [{"type": "inputText", "text": text}], "success": success}

    def _approval(self, request: Request, channel: Channel) -> dict[str, Any] | None:
        """An approval request about a command or a patch: crew's policy decides."""
        tool = APPROVALS[request.method]
        params = request.params
        about = self._about(tool, params)
        refusal = channel.permit(tool, about, tool in self.provider.read_only_tools, params.get("itemId"))
        if refusal is None:
            return {"decision": "accept"}
        self._refuse(request, tool, refusal, {"decision": "decline"})
        return None

    def _elicitation(self, request: Request, channel: Channel) -> dict[str, Any] | None:
        """Codex asks before one of an MCP server's tools runs (one the editor gave, Turn.mcp_servers;
        its `default_tools_approval_mode` is "prompt"): crew's policy decides, as for a command.
        What an MCP server itself asks (a form to fill) crew cannot answer: declined."""
        asked = request.params.get("_meta") or {}
        if asked.get("codex_approval_kind") != "mcp_tool_call":
            return {"action": "decline"}
        tool = f"mcp__{request.params.get('serverName')}__{asked.get('tool_name')}"
        data = asked.get("tool_params")
        # The question names no call: the channel links it to the call of that tool (its item) by name
        refusal = channel.permit(tool, data if isinstance(data, dict) else {"input": data}, False)
        if refusal is None:
            return {"action": "accept"}
        self._refuse(request, tool, refusal, {"action": "decline"})
        return None

    def _refuse(self, request: Request, tool: str, refusal: str, declined: dict[str, Any]) -> None:
        """Refuse an approval request: the reason goes first, as a steer (a decline carries none,
        and Codex goes on at once after it); `declined` answers it once Codex has answered the steer
        (even with an error)."""
        reason = render("native_refused.md", tool=tool, reason=refusal).strip()
        steer = {
            "threadId": self.session_id,
            "expectedTurnId": request.params.get("turnId"),
            "input": [{"type": "text", "text": reason}],
        }
        self.request("turn/steer", steer, lambda reply: self._decline(request.id, declined))

    def _decline(self, request_id: Any, declined: dict[str, Any]) -> list[Event]:
        self.answer(request_id, declined)
        return []

    def _about(self, tool: str, params: dict[str, Any]) -> dict[str, Any]:
        """What an approval request is about, for the policy, the person asked and the transcript:
        the command (as Codex runs it) and its directory, or the file changes; and Codex's reason
        (a command refused by the sandbox, to be run outside it)."""
        if tool == "apply_patch":
            asked = {"changes": self._changes.pop(params.get("itemId", ""), None)}
        else:
            asked = {"command": params.get("command"), "cwd": params.get("cwd")}
        return {**asked, **({"reason": params["reason"]} if params.get("reason") else {})}

    def interrupt(self) -> None:
        if self._turn is not None:
            self.request("turn/interrupt", {"threadId": self.session_id, "turnId": self._turn})

    def keep(self, kept: str, stopped: bool) -> str:
        self.finish()
        if self._used_tools:
            self._history = None
        if not stopped:
            self._remember(assistant_item(self._stored))
            return FULL
        if kept.startswith(self._stored):  # Codex holds the start of the reply at most: add the rest
            rest = kept[len(self._stored) :]
            self._remember(assistant_item(self._stored))
            if rest:
                self._inject(assistant_item(rest))
                self._remember(assistant_item(rest))
            return EXACT
        if self._history is None:
            return FULL  # a new thread would lack the calls and results of the tools
        self._history.append(assistant_item(kept))
        self._new_thread()
        self._inject(*self._history)
        return EXACT

    def _remember(self, item: dict[str, Any]) -> None:
        text = item["content"][0]["text"]
        if self._history is not None and text:
            self._history.append(item)

    def _inject(self, *items: dict[str, Any]) -> None:
        """Append raw Responses API items to the thread's model-visible history."""
        self.call("thread/inject_items", {"threadId": self.session_id, "items": list(items)})


def dynamic_tool(spec: Tool) -> dict[str, Any]:
    """One of crew's tools as a thread's dynamic tool."""
    return {
        "type": "function",
        "name": PREFIX + spec.name,
        "description": spec.description,
        "inputSchema": spec.input_schema,
    }
