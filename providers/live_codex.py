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
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.providers.base import JsonLineDecoder, Turn
from crewbridge.providers.codex import CodexProvider, own_sandbox
from crewbridge.providers.live_process import LiveProcess, RpcConversation, control_deadline

from crewbridge.conversation import EXACT, FULL
from crewbridge.errors import ProviderError
from crewbridge.events import Done, Event, Failure, MessageEnd, Notice, Session, Text, Usage
from crewbridge.native import SERVER, result_text
from crewbridge.templates import render

if TYPE_CHECKING:
    from crewbridge.registry import Tool
    from crewbridge.sessions import Prior

CLIENT = {"name": "crewbridge", "title": "crewbridge", "version": "1"}
CONVERSATION_ITEMS = ("agentMessage", "userMessage")  # every other item is a tool's
PREFIX = SERVER + "_"  # crew's dynamic tools: crew_read_file, … (Codex has tools of its own)
# Codex's approval requests → its tool they are about, as the model calls it
APPROVALS = {"item/commandExecution/requestApproval": "exec_command", "item/fileChange/requestApproval": "apply_patch"}


class AppServerDecoder(JsonLineDecoder):
    """app-server notifications → events. Codex's own tool items are set aside as notices."""

    def event(self, obj: dict[str, Any]) -> list[Event]:
        method, params = obj.get("method"), obj.get("params") or {}
        if method == "item/agentMessage/delta":
            return [Text(params["delta"])]
        if method in ("item/started", "item/completed"):
            kind = params["item"].get("type")
            if kind == "agentMessage":
                return [MessageEnd()] if method == "item/completed" else []
            started = method == "item/started" and kind not in CONVERSATION_ITEMS
            return [Notice("native_" + str(kind))] if started else []
        if method == "thread/tokenUsage/updated":
            last = params["tokenUsage"]["last"]
            return [
                Usage(
                    last.get("inputTokens") or 0,
                    last.get("outputTokens") or 0,
                    cached_tokens=last.get("cachedInputTokens") or 0,
                )
            ]
        if method == "turn/completed":
            turn = params["turn"]
            if turn.get("status") == "failed":
                message = (turn.get("error") or {}).get("message") or "the turn failed"
                return [Failure(str(message)), Done(ok=False)]
            return [Done()]
        if method == "error":
            message = str(params["error"].get("message"))
            return [Notice("retry", message)] if params.get("willRetry") else [Failure(message)]
        return [Notice("unknown", str(method))]


def user_item(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def assistant_item(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


class CodexLiveConversation(RpcConversation):
    native_tools = True

    def __init__(self, provider: CodexProvider, base: Turn, *, cwd: Path, env: dict[str, str] | None = None) -> None:
        super().__init__(provider, base, [provider.binary, "app-server", *base.options], cwd=cwd, env=env)
        self._turn: str | None = None  # the current (or last) turn
        self._running = False  # turn/completed of the current turn is still to be read
        self._stored = ""  # text of the agent messages Codex completed (so stored) in this turn
        self._native = False  # the current turn ran a tool (crew's natively, or Codex's own)
        self._changes: dict[str, Any] = {}  # file changes by item id: an approval request names only the item
        self._steers: dict[int, Any] = {}  # turn/steer request → the approval request to decline once answered
        # The model-visible conversation, as Responses API items; None once Codex's own tools added
        # items crew does not hold.
        self._history: list[dict[str, Any]] | None = []

    def resume(self, prior: Prior) -> bool:
        """The thread is ephemeral (nothing of it outlives the process): the new one is given the
        earlier history from crew's transcript, exactly, before the first message."""
        self._history = [user_item(text) if role == "user" else assistant_item(text) for role, text in prior.history]
        return True

    def _start(self) -> LiveProcess:
        process, first = self._launch()
        if first:
            self._call("initialize", {"clientInfo": CLIENT, "capabilities": {"experimentalApi": True}})
            process.write({"jsonrpc": "2.0", "method": "initialized"})
            self._new_thread()
            if self._history:  # a resumed conversation's
                self._inject(*self._history)
        return process

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
        self.session_id = self._call("thread/start", params)["thread"]["id"]

    def send(self, message: str, deadline: float | None) -> Generator[Event, None, None]:
        process = self._start()  # a CLI that is not installed raises CLINotFound from here
        try:
            self._finish_turn()
            yield Session(self.session_id)
            self._stored, self._native, self._changes = "", False, {}
            self._remember(user_item(message))
            self._turn = None
            self._running = True
            request_id = self._request(
                "turn/start", {"threadId": self.session_id, "input": [{"type": "text", "text": message}]}
            )
            decoder = AppServerDecoder()
            while self._running:
                obj = process.read(deadline)
                if isinstance(obj, dict) and "method" not in obj and obj.get("id") == request_id:
                    if "error" in obj:
                        self._running = False
                        yield Failure(f"codex refused the turn: {obj['error'].get('message')}")
                    else:
                        self._turn = obj["result"]["turn"]["id"]
                    continue
                if isinstance(obj, dict):
                    self._note(obj)
                    if "method" not in obj:
                        continue
                yield from decoder.decode_object(obj)
        except ProviderError as exc:  # the app-server exited
            self._running = False
            yield Failure(str(exc))

    def _note(self, obj: dict[str, Any]) -> None:
        """Track what Codex stores of the current turn; answer its requests (one left unanswered
        would hang the turn) and what it answers to crew's steers."""
        if "method" not in obj:  # a steer's answer (even an error): Codex holds the reason, or never will
            approval = self._steers.pop(obj.get("id", -1), None)
            if approval is not None:
                self._answer(approval, {"decision": "decline"})
            return
        method, params = obj["method"], obj.get("params") or {}
        if "id" in obj:
            self._serve(obj["id"], method, params)
        elif method == "item/completed" and params["item"].get("type") == "agentMessage":
            self._stored += params["item"].get("text") or ""
        elif method == "item/started" and params["item"].get("type") not in CONVERSATION_ITEMS:
            self._native = True
            if params["item"].get("type") == "fileChange":
                self._changes[params["item"]["id"]] = params["item"].get("changes")
        elif method == "turn/started" and self._turn is None:
            # codex 0.169.0 sends it before it answers turn/start, and the whole turn may come
            # before that answer too (it answers and streams from different tasks)
            self._turn = params["turn"]["id"]
        elif method == "turn/completed" and params["turn"]["id"] == self._turn:
            self._running = False

    def _serve(self, request_id: Any, method: str, params: dict[str, Any]) -> None:
        """Answer a request of Codex's: a call to one of crew's tools, or an approval, through the
        channel. Without a channel Codex asks nothing (approvals are off, no dynamic tools)."""
        if self.channel is not None and method == "item/tool/call":
            self._answer(request_id, self._tool_call(params.get("tool"), params.get("arguments")))
        elif self.channel is not None and method in APPROVALS:
            tool = APPROVALS[method]
            refusal = self.channel.permit(tool, self._asked(tool, params), tool in self.provider.read_only_tools)
            if refusal is None:
                self._answer(request_id, {"decision": "accept"})
            else:  # the reason first: a decline carries none, and Codex goes on at once after it
                reason = render("native_refused.md", tool=tool, reason=refusal).strip()
                steer = {
                    "threadId": self.session_id,
                    "expectedTurnId": params.get("turnId"),
                    "input": [{"type": "text", "text": reason}],
                }
                self._steers[self._request("turn/steer", steer)] = request_id
        else:
            message = {"code": -32601, "message": f"crew does not handle {method}"}
            assert self.process is not None
            self.process.write({"jsonrpc": "2.0", "id": request_id, "error": message})

    def _tool_call(self, name: Any, arguments: Any) -> dict[str, Any]:
        """The answer to item/tool/call: crew's tool run through the channel."""
        assert self.channel is not None
        if isinstance(name, str) and name.startswith(PREFIX):
            result = self.channel.call(name[len(PREFIX) :], {} if arguments is None else arguments)
            text, success = result_text(result), result.success
        else:
            text, success = f"{name!r} is not one of crew's tools (their names start with {PREFIX})", False
        return {"contentItems": [{"type": "inputText", "text": text}], "success": success}

    def _asked(self, tool: str, params: dict[str, Any]) -> dict[str, Any]:
        """What an approval request is about, for the policy, the person asked and the transcript:
        the command (as Codex runs it) and its directory, or the file changes; and Codex's reason
        (a command refused by the sandbox, to be run outside it)."""
        if tool == "apply_patch":
            asked = {"changes": self._changes.pop(params.get("itemId", ""), None)}
        else:
            asked = {"command": params.get("command"), "cwd": params.get("cwd")}
        return {**asked, **({"reason": params["reason"]} if params.get("reason") else {})}

    def _answer(self, request_id: Any, result: dict[str, Any]) -> None:
        assert self.process is not None
        self.process.write({"jsonrpc": "2.0", "id": request_id, "result": result})

    def _finish_turn(self) -> None:
        """Read what is left of a turn the loop stopped reading, up to its turn/completed."""
        while self._running and self.process is not None:
            obj = self.process.read(control_deadline())
            if isinstance(obj, dict):
                self._note(obj)
                self.late += [event for event in AppServerDecoder().decode_object(obj) if isinstance(event, Usage)]

    def stop(self) -> None:
        if self._running and self._turn is not None:
            self._request("turn/interrupt", {"threadId": self.session_id, "turnId": self._turn})

    def keep(self, kept: str, stopped: bool) -> str:
        self._finish_turn()
        if self._native:
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
            return FULL  # a new thread would lack the calls and results of Codex's own tools
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
        self._call("thread/inject_items", {"threadId": self.session_id, "items": list(items)})


def dynamic_tool(spec: Tool) -> dict[str, Any]:
    """One of crew's tools as a thread's dynamic tool."""
    return {
        "type": "function",
        "name": PREFIX + spec.name,
        "description": spec.description,
        "inputSchema": spec.input_schema,
    }
