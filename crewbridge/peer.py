"""A live peer: a CLI that holds the whole conversation in one long-lived process, spoken to in
JSON lines both ways — claude's stream-json control protocol, codex app-server's and gemini
--acp's JSON-RPC 2.0. `Peer` is what they share; each providers/live_*.py gives its message
builders, its decoder, its table of handlers and its repair of the CLI's history.

One turn: crew writes the message (`begin`), then reads the CLI's lines until the decoder says
the reply is Done. Each line is one of three things (the `Wire` tells which):
- an answer to one of crew's requests, matched by id and handed to what waits for it;
- a request from the CLI, answered by the handler its method names in `handlers` (with the loop's
  channel), or refused;
- anything else: the provider's decoder turns it into events.
Every read and write waits no longer than the run's deadline (the one send() was given), the
control exchanges of keep() and the set-up of the process too. Everything runs on the thread
that reads: crew's tools called natively — a handler, or an MCP message that reached crew on
another thread (`on_loop`) — run there one at a time, in the order they come, and an error that
ends the run is raised there at once. A CLI that exits is the turn's Failure.
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import threading
from collections.abc import Callable, Generator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from crewbridge.errors import CrewError, ProviderError
from crewbridge.events import Done, Event, Failure, Notice, Session, Text, Usage
from crewbridge.process import Child
from crewbridge.providers.base import JsonLineDecoder, Provider, Turn, parse_object
from crewbridge.version import __version__

if TYPE_CHECKING:
    from crewbridge.native import Channel
    from crewbridge.sandbox import Sandbox

CLIENT = {"name": "crewbridge", "title": "crewbridge", "version": __version__}  # how crew names itself to a CLI
NOT_FOUND, FAILED = -32601, -32603  # JSON-RPC's codes: no such method, the call failed


@dataclass(frozen=True)
class Request:
    """A request the CLI sent crew: its id, its method (claude: the control request's subtype), its params."""

    id: Any
    method: str
    params: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    """The CLI's answer to one of crew's requests: its result, or the error object of a refusal."""

    id: Any
    result: dict[str, Any]
    error: dict[str, Any] | None = None


class Wire(Protocol):
    """How a CLI frames requests and answers on its stream."""

    def request(self, number: int, method: str, params: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """Crew's `number`th request: its id, and the line to write."""

    def answer(self, request_id: Any, result: dict[str, Any]) -> dict[str, Any]:
        """The line that answers the CLI's request."""

    def refusal(self, request_id: Any, code: int, message: str) -> dict[str, Any]:
        """The line that refuses the CLI's request, saying why."""

    def parse(self, obj: dict[str, Any]) -> Request | Reply | None:
        """What a line is: a request to crew, an answer to one of crew's, or neither (None)."""


class JsonRpc:
    """JSON-RPC 2.0 (codex app-server, gemini --acp)."""

    def request(self, number: int, method: str, params: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        return number, {"jsonrpc": "2.0", "id": number, "method": method, "params": params}

    def answer(self, request_id: Any, result: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": request_id, "result": result}

    def refusal(self, request_id: Any, code: int, message: str) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}

    def parse(self, obj: dict[str, Any]) -> Request | Reply | None:
        if "id" not in obj:
            return None  # a notification
        if "method" in obj:
            params = obj.get("params")
            return Request(obj["id"], str(obj["method"]), params if isinstance(params, dict) else {})
        result, error = obj.get("result"), obj.get("error")
        if error is not None and not isinstance(error, dict):
            error = {"message": str(error)}
        return Reply(obj["id"], result if isinstance(result, dict) else {}, error)


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-RPC notification (a request that gets no answer)."""
    return {"jsonrpc": "2.0", "method": method, "params": params or {}}


class LiveProcess:
    """One running CLI process for a whole conversation: JSON objects in and out, one a line,
    through Child (its own process group, ended as a whole)."""

    def __init__(
        self, argv: list[str], *, env: dict[str, str], cwd: Path, install_hint: str = "", sandbox: Sandbox | None = None
    ) -> None:
        self.name = os.path.basename(argv[0])
        self.child = Child(argv, env=env, cwd=cwd, keep_stdin=True, install_hint=install_hint, sandbox=sandbox)

    @property
    def pid(self) -> int:
        return self.child.proc.pid

    def write(self, obj: dict[str, Any], deadline: float | None) -> None:
        """Send `obj` as one line; CrewTimeout when the CLI has not read it by `deadline`."""
        self.child.send_line(json.dumps(obj), deadline)

    def read(self, deadline: float | None) -> dict[str, Any] | Notice:
        """The next JSON object the CLI writes (a Notice for a line that is not one). Raises
        CrewTimeout, after ending the process group, when `deadline` passes; ProviderError when
        the CLI exits."""
        while True:
            # Child's reader splits each chunk into lines once (pexpect's expect, used before, copied
            # the rest of its buffer at each line: a 40 MB stream of short lines took 5 times as long).
            line = self.child.read_line(deadline)
            if line is None:
                raise ProviderError(self._exit_message())
            obj = parse_object(line)
            if obj is not None:
                return obj

    def _exit_message(self) -> str:
        return self.child.failure(self.name)

    def close(self) -> None:
        """End the whole process group (SIGTERM, then SIGKILL if it lingers)."""
        self.child.kill()


Handler = Callable[[Request, "Channel"], "dict[str, Any] | None"]  # the result; None: answered later (answer())


class Refused(Exception):
    """Raised by a handler: crew does not answer this request (the message says why)."""


Then = Callable[[Reply], "list[Event]"]  # what an answer to one of crew's requests does, and its events
Answer = Callable[..., "dict[str, Any] | None"]  # an MCP message (and what its transport adds) → its answer


class Peer:
    """A conversation (crewbridge.conversation.Conversation) held in one long-lived CLI process
    (`argv`), started by start() or the first message, never after close() — which may come from
    another thread (Ctrl-C). Subclasses give `decoder`, `set_up`, `begin`, `interrupt`, `keep`,
    `resume` and their `handlers`; `events` where they track what the CLI holds of a reply."""

    wire: ClassVar[Wire] = JsonRpc()
    decoder: ClassVar[type[JsonLineDecoder]]  # a new one for each reply
    native_tools = False  # offers crew's tools natively when the turn asks (Turn.native)

    def __init__(
        self, provider: Provider, base: Turn, argv: list[str], *, cwd: Path, env: dict[str, str] | None = None
    ) -> None:
        self.provider = provider
        self.base = base
        self.argv = argv
        self.cwd = cwd
        self.env = {**os.environ, **provider.env(), **(env or {})}
        self.session_id: str | None = None
        self.reported: Usage | None = None  # live CLIs report each reply's usage, not totals
        self.late: list[Usage] = []  # usage read while finishing a reply the loop stopped reading
        self.channel: Channel | None = None
        self.handlers: dict[str, Handler] = {}  # the CLI's requests crew answers, by method
        self.process: LiveProcess | None = None
        self.deadline: float | None = None  # the run's: no read or write waits past it
        self.open = False  # a reply whose end (Done) has not been read
        self.stopped = False  # stop() was sent for that reply
        self.reading = self.decoder()  # the current reply's decoder
        self._waiting: dict[Any, Then] = {}  # crew's requests whose answer is awaited, by id
        self._numbers = itertools.count(1)
        self._inbox: Inbox | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._set_up = False  # set_up() ran on the process

    # -- what each CLI gives

    def set_up(self) -> None:
        """The first exchanges with a new process, before the first message."""

    def begin(self, message: str) -> list[Event]:
        """Write a turn's `message`; the events that open its reply."""
        raise NotImplementedError

    def interrupt(self) -> None:
        """Tell the CLI to stop the reply it is writing."""
        raise NotImplementedError

    def events(self, obj: dict[str, Any]) -> list[Event]:
        """The events of a line that is not an answer to crew (a subclass also tracks what it holds)."""
        return self.reading.decode_object(obj)

    # -- the Conversation protocol

    def serve(self, channel: Channel) -> bool:
        self.channel = channel
        return self.base.native and self.native_tools

    def start(self) -> None:
        """Start the CLI now: it boots while crew builds the first message, which it waits for."""
        with self._lock:
            if self._closed or self.process is not None:
                return
            try:
                self.process = self._new_process()
            except CrewError:
                pass  # not installed: send() tries again and reports it

    def send(self, message: str, deadline: float | None) -> Generator[Event, None, None]:
        self.deadline = deadline
        self._launch()  # a CLI that is not installed raises CLINotFound from here
        try:
            self.finish()
            self.reading = self.decoder()
            self.open, self.stopped = True, False
            yield from self._seen(self.begin(message))
            while self.open:
                yield from self._next()
        except ProviderError as exc:  # the CLI exited
            self.open = False
            yield Failure(str(exc))

    def stop(self) -> None:
        if self.open and not self.stopped and self.process is not None:
            self.stopped = True
            self.interrupt()

    def late_usage(self) -> list[Usage]:
        late, self.late = self.late, []
        return late

    def close(self) -> None:
        with self._lock:
            self._closed = True
        if self.process is not None:
            self.process.close()
        if self._inbox is not None:
            self._inbox.close()  # after the process: nothing reads any more

    # -- for the subclasses

    def write(self, obj: dict[str, Any]) -> None:
        assert self.process is not None
        self.process.write(obj, self.deadline)

    def request(self, method: str, params: dict[str, Any], then: Then | None = None) -> Any:
        """Send a request (`then` acts on its answer when it comes); its id."""
        request_id, line = self.wire.request(next(self._numbers), method, params)
        if then is not None:
            self._waiting[request_id] = then
        self.write(line)
        return request_id

    def exchange(self, method: str, params: dict[str, Any]) -> Reply:
        """A request and its answer; what the CLI writes meanwhile is acted on, its events set aside."""
        replies: list[Reply] = []

        def take(reply: Reply) -> list[Event]:
            replies.append(reply)
            return []

        self.request(method, params, take)
        while not replies:
            self._aside(self._next())
        return replies[0]

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A request's result; ProviderError when the CLI refuses it."""
        reply = self.exchange(method, params)
        if reply.error is not None:
            raise ProviderError(f"{self.provider.name} refused {method}: {reply.error.get('message')}")
        return reply.result

    def answer(self, request_id: Any, result: dict[str, Any]) -> None:
        self.write(self.wire.answer(request_id, result))

    def finish(self) -> None:
        """Read what is left of a reply the loop stopped reading, up to its end; its usage comes late."""
        while self.open and self.process is not None:
            self._aside(self._next())

    def on_loop(self, answer: Answer) -> Answer:
        """`answer` for MCP messages that reach crew on other threads (over HTTP): each call
        (`message`, and whatever the transport adds) is handed to the thread that reads this CLI
        and answered there, between lines, in the order they came; the caller waits for the answer.
        Once the process runs."""
        assert self.process is not None
        self._inbox = Inbox(answer)
        self.process.child.watch(self._inbox.fd, self._inbox.answer_all)
        return self._inbox.ask

    # -- the read loop

    def _launch(self) -> LiveProcess:
        """The process, set up the first time it is used (CLINotFound when the CLI is not installed)."""
        with self._lock:
            if self._closed:
                raise ProviderError(f"{self.provider.name}: the conversation was already closed")
            if self.process is None:
                self.process = self._new_process()
            process, first, self._set_up = self.process, not self._set_up, True
        if first:
            self.set_up()
        return process

    def _new_process(self) -> LiveProcess:
        return LiveProcess(
            self.argv, env=self.env, cwd=self.cwd, install_hint=self.provider.install_hint, sandbox=self.base.sandbox
        )

    def _next(self) -> list[Event]:
        """Read the CLI's next line and act on it; the events it stands for."""
        assert self.process is not None
        obj = self.process.read(self.deadline)
        if isinstance(obj, Notice):
            return [obj]
        kind = self.wire.parse(obj)
        try:
            if kind is None:  # most lines: a delta of the reply
                events = self.events(obj)
            elif isinstance(kind, Reply):
                then = self._waiting.pop(kind.id, None)
                events = [] if then is None else then(kind)
            else:
                events = self.events(obj)
                self._handle(kind)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:  # a line of another shape: set aside
            return [Notice("corrupt", f"unexpected line shape ({exc!r}): {json.dumps(obj)[:120]}")]
        return self._seen(events)

    def _seen(self, events: list[Event]) -> list[Event]:
        """`events`, once what they say of the conversation is noted: its session, the reply's end."""
        for event in events:
            if isinstance(event, Text):
                continue
            if isinstance(event, Done):
                self.open = False
            elif isinstance(event, Session) and event.session_id:
                self.session_id = event.session_id
        return events

    def _aside(self, events: list[Event]) -> None:
        """Events read while the loop is not reading: only the usage counts (late_usage)."""
        self.late += [
            event for event in events if isinstance(event, Usage) and (event.input_tokens or event.output_tokens)
        ]

    def _handle(self, request: Request) -> None:
        """Answer the CLI's request by its handler (an unanswered one would hang the CLI). A handler
        error that ends the run is the CLI's answer too, and then raised."""
        handler = self.handlers.get(request.method)
        if handler is None or self.channel is None:  # without a channel the CLI was told of nothing to ask
            self.write(self.wire.refusal(request.id, NOT_FOUND, f"crew does not handle {request.method}"))
            return
        try:
            result = handler(request, self.channel)
        except Refused as exc:
            self.write(self.wire.refusal(request.id, NOT_FOUND, str(exc)))
            return
        except (AttributeError, KeyError, TypeError, ValueError) as exc:  # a request of another shape
            self.write(
                self.wire.refusal(request.id, FAILED, f"crew could not read the {request.method} request ({exc!r})")
            )
            return
        except CrewError as exc:
            self.write(self.wire.refusal(request.id, FAILED, str(exc)))
            raise
        if result is not None:
            self.answer(request.id, result)


class Inbox:
    """MCP messages that reach crew on other threads, answered on the thread that reads the CLI:
    ask() (any thread) hands one over and waits; the reader, woken through `fd`, answers them in
    order (answer_all). A CrewError that ends the run is the message's answer too (an error), and is
    raised by answer_all(). Once closed, every message is answered at once with an error."""

    def __init__(self, answer: Answer) -> None:
        self._answer = answer
        self._waiting: collections.deque[tuple[tuple[Any, ...], Future[dict[str, Any] | None]]] = collections.deque()
        self._lock = threading.Lock()
        self._closed = False
        self.fd, self._wake = os.pipe()  # readable while messages wait
        os.set_blocking(self.fd, False)

    def ask(self, message: Any, *more: Any) -> dict[str, Any] | None:
        answered: Future[dict[str, Any] | None] = Future()
        with self._lock:
            if self._closed:
                return _failed(message, "the conversation has ended")
            self._waiting.append(((message, *more), answered))
            os.write(self._wake, b"!")
        return answered.result()

    def answer_all(self) -> None:
        with self._lock:
            if self._closed:
                return
            try:
                os.read(self.fd, 1 << 12)
            except BlockingIOError:
                pass
        while True:
            with self._lock:
                if not self._waiting:
                    return
                call, answered = self._waiting.popleft()
            try:
                answered.set_result(self._answer(*call))
            except CrewError as exc:
                answered.set_result(_failed(call[0], str(exc)))
                raise
            except BaseException:
                answered.set_result(_failed(call[0], "crew failed to answer"))
                raise

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            waiting, self._waiting = list(self._waiting), collections.deque()
            os.close(self.fd)
            os.close(self._wake)
        for call, answered in waiting:
            answered.set_result(_failed(call[0], "the conversation has ended"))


def _failed(message: Any, why: str) -> dict[str, Any] | None:
    """The error answer to an MCP message (None for a notification, which gets none)."""
    if not isinstance(message, dict) or "id" not in message:
        return None
    return JsonRpc().refusal(message["id"], FAILED, why)
