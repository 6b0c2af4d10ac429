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
"""

from __future__ import annotations

import itertools
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.providers.base import JsonLineDecoder, Turn
from crewbridge.providers.codex import CodexProvider
from crewbridge.providers.live_process import LiveConversation, LiveProcess, control_deadline

from crewbridge.conversation import EXACT, FULL
from crewbridge.errors import ProviderError
from crewbridge.events import Done, Event, Failure, MessageEnd, Notice, Session, Text, Usage

if TYPE_CHECKING:
    from crewbridge.sessions import Prior

CLIENT = {"name": "crewbridge", "title": "crewbridge", "version": "1"}
SANDBOX = {"query": "read-only", "execute": "workspace-write"}
CONVERSATION_ITEMS = ("agentMessage", "userMessage")  # every other item is one of Codex's own tools


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


class CodexLiveConversation(LiveConversation):
    def __init__(self, provider: CodexProvider, base: Turn, *, cwd: Path, env: dict[str, str] | None = None) -> None:
        super().__init__(provider, base, [provider.binary, "app-server", *base.options], cwd=cwd, env=env)
        self._ids = itertools.count(1)
        self._turn: str | None = None  # the current (or last) turn
        self._running = False  # turn/completed of the current turn is still to be read
        self._stored = ""  # text of the agent messages Codex completed (so stored) in this turn
        self._native = False  # the current turn ran one of Codex's own tools
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
        thread = self._call(
            "thread/start",
            {
                "cwd": str(self.cwd),
                "model": self.base.model,
                "sandbox": SANDBOX.get(self.base.mode, "read-only"),
                "approvalPolicy": "never",
                "ephemeral": True,
            },
        )["thread"]
        self.session_id = thread["id"]

    def _request(self, method: str, params: dict[str, Any]) -> int:
        assert self.process is not None
        request_id = next(self._ids)
        self.process.write({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    def _call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A request and its result; what arrives meanwhile is set aside (nothing is running)."""
        request_id = self._request(method, params)
        assert self.process is not None
        reply = self.process.read_until(
            lambda obj: obj.get("id") == request_id and "method" not in obj, control_deadline()
        )
        if "error" in reply:
            raise ProviderError(f"codex app-server refused {method}: {reply['error'].get('message')}")
        return reply.get("result") or {}

    def send(self, message: str, deadline: float | None) -> Generator[Event, None, None]:
        process = self._start()  # a CLI that is not installed raises CLINotFound from here
        try:
            self._finish_turn()
            yield Session(self.session_id)
            self._stored, self._native = "", False
            self._remember(user_item(message))
            self._turn = None
            self._running = True
            request_id = self._request(
                "turn/start", {"threadId": self.session_id, "input": [{"type": "text", "text": message}]}
            )
            decoder = AppServerDecoder()
            while self._running:
                obj = process.read(deadline)
                if isinstance(obj, dict) and "method" not in obj:  # the answer to a request
                    if obj.get("id") == request_id and "error" in obj:
                        self._running = False
                        yield Failure(f"codex refused the turn: {obj['error'].get('message')}")
                    elif obj.get("id") == request_id:
                        self._turn = obj["result"]["turn"]["id"]
                    continue
                if isinstance(obj, dict):
                    self._note(obj)
                yield from decoder.decode_object(obj)
        except ProviderError as exc:  # the app-server exited
            self._running = False
            yield Failure(str(exc))

    def _note(self, obj: dict[str, Any]) -> None:
        """Track what Codex stores of the current turn; answer its requests (it asks nothing when
        approvals are off, but a request left unanswered would hang the turn)."""
        method, params = obj["method"], obj.get("params") or {}
        if "id" in obj:
            assert self.process is not None
            self.process.write(
                {
                    "jsonrpc": "2.0",
                    "id": obj["id"],
                    "error": {"code": -32601, "message": f"crew does not handle {method}"},
                }
            )
        elif method == "item/completed" and params["item"].get("type") == "agentMessage":
            self._stored += params["item"].get("text") or ""
        elif method == "item/started" and params["item"].get("type") not in CONVERSATION_ITEMS:
            self._native = True
        elif method == "turn/started" and self._turn is None:
            # codex 0.169.0 sends it before it answers turn/start, and the whole turn may come
            # before that answer too (it answers and streams from different tasks)
            self._turn = params["turn"]["id"]
        elif method == "turn/completed" and params["turn"]["id"] == self._turn:
            self._running = False

    def _finish_turn(self) -> None:
        """Read what is left of a turn the loop stopped reading, up to its turn/completed."""
        while self._running and self.process is not None:
            obj = self.process.read(control_deadline())
            if isinstance(obj, dict) and "method" in obj:
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
