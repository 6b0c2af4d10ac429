"""A live peer: a CLI that holds the whole conversation in one long-lived process, spoken to in
JSON lines both ways — claude's stream-json control protocol, codex app-server's and gemini
--acp's JSON-RPC 2.0. `Peer` is a live conversation's turn state over two parts it is made of:
the transport (crewbridge.conversations.transport: the process, and the inbox of other threads)
and the endpoint (crewbridge.protocol.jsonrpc: crew's requests matched to their answers, the CLI's routed
to handlers). Each crewbridge/conversations/CLI.py gives its wire, its decoder, its routes (the
CLI's requests crew answers, with the shape of their params), its message builders and its
repair of the CLI's history (`keep`).

One turn: crew writes the message (`begin`), then reads the CLI's lines until the decoder says
the reply is Done. Each line is one of three things (the wire tells which):
- an answer to one of crew's requests, matched by id and handed to what waits for it;
- a request from the CLI, answered by its route's handler (with the loop's channel), or refused;
- anything else: the provider's decoder turns it into events.
Every read and write waits no longer than the run's deadline (the one send() was given), the
control exchanges of keep() and the set-up of the process too. Everything runs on the thread
that reads, and so do crew's tools called natively — a handler, or an MCP message that reached
crew on another thread (`on_loop`) — one at a time, in the order they come, and an error that ends
the run is raised there at once; unless the handler hands its call to a thread of its own
(`offload`: claude's calls, whose cancellation comes on the stream the reading thread would be
blocked from reading), where its failure is raised on the reading thread as soon as it happens.
A CLI that exits is the turn's Failure. A message of another shape than its route reads is refused
(or, an answer, handed on as an error) at the boundary; an exception in a handler past it is
crew's bug, and raised as one.
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from crewbridge.base.decoded import Done, Event, Failure, Notice, OwnCall, OwnResult, Session, Text, Usage
from crewbridge.conversations.transport import Answer, Inbox, LiveProcess
from crewbridge.errors import CrewError, ProviderError
from crewbridge.protocol.jsonrpc import (
    INTERNAL_ERROR,
    JSONRPC,
    METHOD_NOT_FOUND,
    Endpoint,
    Reply,
    Request,
    Route,
    RpcError,
    Wire,
)
from crewbridge.providers.base import Image, JsonLineDecoder, Provider, Turn, cli_environment
from crewbridge.version import __version__

if TYPE_CHECKING:
    from crewbridge.toolkit.native import Channel

CLIENT = {"name": "crewbridge", "title": "crewbridge", "version": __version__}  # how crew names itself to a CLI


class Peer:
    """A conversation (crewbridge.conversations.Conversation) held in one long-lived CLI process
    (`argv`), started by start() or the first message, never after close() — which may come from
    another thread (Ctrl-C). Subclasses give `wire`, `decoder`, `routes`, `set_up`, `begin`,
    `interrupt`, `keep` and `resume`; `events` where they track what the CLI holds of a reply."""

    wire: ClassVar[Wire] = JSONRPC
    decoder: ClassVar[type[JsonLineDecoder]]  # a new one for each reply
    native_tools = False  # offers crew's tools natively when the turn asks (Turn.native)

    def __init__(
        self, provider: Provider, base: Turn, argv: list[str], *, cwd: Path, env: dict[str, str] | None = None
    ) -> None:
        self.provider = provider
        self.base = base
        self.argv = argv
        self.cwd = cwd
        self.env, self.passed = cli_environment(provider, base, env)
        self.session_id: str | None = None
        self.reported: Usage | None = None  # live CLIs report each reply's usage, not totals
        self.late: list[Usage] = []  # usage read while finishing a reply the loop stopped reading
        self.channel: Channel | None = None
        self.endpoint = Endpoint(self.wire, self.routes())
        self.process: LiveProcess | None = None
        self.deadline: float | None = None  # the run's: no read or write waits past it
        self._images = base.images  # given with the first message, then never again
        self.open = False  # a reply whose end (Done) has not been read
        self.stopped = False  # stop() was sent for that reply
        self.reading = self.decoder()  # the current reply's decoder
        self._inbox: Inbox | None = None
        self._failed: collections.deque[BaseException] = collections.deque()  # by offloaded calls
        self._wake: tuple[int, int] | None = None  # a pipe: an offloaded call failed (offload)
        self._lock = threading.Lock()
        self._closed = False
        self._set_up = False  # set_up() ran on the process

    # -- what each CLI gives

    def routes(self) -> dict[str, Route]:
        """The CLI's requests crew answers, by method: each one's handler (called with the request
        and the loop's channel) and the shape of its params."""
        return {}

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
        if self.process is not None and self.open:  # in the midst of a reply (a cancel, Ctrl-C, an error)
            self.process.close()
        elif self.process is not None:  # its replies read: it ends by itself (session saved, telemetry sent)
            self.process.end()
        if self._inbox is not None:
            self._inbox.close()  # after the process: nothing reads any more
        with self._lock:
            wake, self._wake = self._wake, None
        if wake is not None:
            os.close(wake[0])
            os.close(wake[1])

    # -- for the subclasses

    def write(self, obj: dict[str, Any]) -> None:
        assert self.process is not None
        self.process.write(obj, self.deadline)

    def request(
        self, method: str, params: dict[str, Any], then: Callable[[Reply], list[Event]] | None = None, shape: Any = None
    ) -> Any:
        """Send a request (`then` acts on its answer when it comes, its result in `shape`: a
        msgspec Struct); its id."""
        request_id, line = self.endpoint.request(method, params, then, shape)
        self.write(line)
        return request_id

    def exchange(self, method: str, params: dict[str, Any], shape: Any = None) -> Reply:
        """A request and its answer; what the CLI writes meanwhile is acted on, its events set aside."""
        replies: list[Reply] = []

        def take(reply: Reply) -> list[Event]:
            replies.append(reply)
            return []

        self.request(method, params, take, shape)
        while not replies:
            self._aside(self._next())
        return replies[0]

    def call(self, method: str, params: dict[str, Any], shape: Any = None) -> Any:
        """A request's result; ProviderError when the CLI refuses it or answers in another shape."""
        reply = self.exchange(method, params, shape)
        if reply.misread:
            raise ProviderError(f"{self.provider.name}: {reply.error and reply.error['message']}")
        if reply.error is not None:
            raise ProviderError(f"{self.provider.name} refused {method}: {reply.error.get('message')}")
        return reply.result

    def answer(self, request_id: Any, result: dict[str, Any]) -> None:
        self.write(self.wire.answer(request_id, result))

    def images(self) -> tuple[Image, ...]:
        """The task's images, for the message that begins now: the first one's only."""
        images, self._images = self._images, ()
        return images

    def finish(self) -> None:
        """Read what is left of a reply the loop stopped reading, up to its end; its usage comes late."""
        while self.open and self.process is not None:
            self._aside(self._next())

    def await_reply(self, line: dict[str, Any]) -> None:
        """Write `line`, to which the CLI answers with a whole reply (one the model does not write),
        and read that reply to its end."""
        self.write(line)
        self.open = True
        self.finish()

    def offload(self, request: Request, work: Callable[[], dict[str, Any]]) -> None:
        """Answer `request` with what `work` gives, on a thread of its own: the reading thread goes
        on reading, so what the CLI sends meanwhile (a cancellation of this very call) is acted on.
        A refusal (RpcError) or a CrewError that ends the run is the CLI's answer, and the CrewError
        (or crew's bug) is raised on the reading thread as soon as it happens."""
        assert self.process is not None
        with self._lock:
            if self._wake is None:
                self._wake = os.pipe()
                os.set_blocking(self._wake[0], False)
                self.process.child.watch(self._wake[0], self._raise_failed)
            wake = self._wake[1]

        def run() -> None:
            failed: BaseException | None = None
            try:
                line = self.wire.answer(request.id, work())
            except RpcError as exc:
                line = self.wire.refusal(request.id, exc.code, str(exc))
            except BaseException as exc:  # raised on the reading thread
                line, failed = self.wire.refusal(request.id, INTERNAL_ERROR, str(exc)), exc
            try:
                self.write(line)
            except CrewError:
                pass  # the CLI has ended (or the run's deadline passed): the reading thread says so
            if failed is not None:
                self._failed.append(failed)
                with self._lock:
                    if self._wake is not None:
                        os.write(wake, b"!")

        threading.Thread(target=run, name=f"{self.provider.name}-call", daemon=True).start()

    def _raise_failed(self) -> None:
        with self._lock:
            if self._wake is not None:
                try:
                    os.read(self._wake[0], 1 << 12)
                except BlockingIOError:
                    pass
        if self._failed:
            raise self._failed.popleft()

    def on_loop(self, answer: Answer) -> Answer:
        """`answer` for MCP messages that reach crew on other threads (over HTTP): each call
        (`message`, and whatever the transport adds) is handed to the thread that reads this CLI
        and answered there, between lines, in the order they came; the caller waits for the answer
        until the run's deadline. Once the process runs."""
        assert self.process is not None
        self._inbox = Inbox(answer, lambda: self.deadline)
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
            self.argv,
            env=self.env,
            passed=self.passed,
            cwd=self.cwd,
            install_hint=self.provider.install_hint,
            sandbox=self.base.sandbox,
        )

    def _next(self) -> list[Event]:
        """Read the CLI's next line and act on it; the events it stands for."""
        assert self.process is not None
        obj = self.process.read(self.deadline)
        if isinstance(obj, Notice):
            return [obj]
        kind = self.endpoint.wire.parse(obj)
        if kind is None:  # most lines: a delta of the reply
            return self._seen(self.events(obj))
        if isinstance(kind, Reply):
            return self._seen(self.endpoint.settle(kind) or [])
        events = self.events(obj)
        self._handle(kind)
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
        """Events read while the loop is not reading: only the usage counts (late_usage), and the
        CLI's own tools' uses and results (the channel records them)."""
        for event in events:
            if isinstance(event, Usage) and (event.input_tokens or event.output_tokens):
                self.late.append(event)
            elif isinstance(event, (OwnCall, OwnResult)) and self.channel is not None:
                self.channel.own(event)

    def _handle(self, request: Request) -> None:
        """Answer the CLI's request by its route (an unanswered one would hang the CLI). A handler
        error that ends the run is the CLI's answer too, and then raised."""
        if self.channel is None:  # without a channel the CLI was told of nothing to ask
            self.write(self.wire.refusal(request.id, METHOD_NOT_FOUND, f"crew does not handle {request.method}"))
            return
        try:
            line = self.endpoint.dispatch(request, self.channel)
        except CrewError as exc:
            self.write(self.wire.refusal(request.id, INTERNAL_ERROR, str(exc)))
            raise
        if line is not None:
            self.write(line)
