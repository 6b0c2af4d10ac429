"""How `crew mcp` talks on stdio: a JSON-RPC message a line, one session (streamable HTTP:
crewbridge.protocol.mcp_http).

Every line read gets its answer: tool calls run on a few worker threads (more wait in line, and past
the line's length a call is answered at once as busy), everything else on the reader, so a
cancellation is read while calls run. When stdin ends, the calls still running are waited for (up
to the server's timeout) and answered before the server stops.
"""

from __future__ import annotations

import functools
import itertools
import os
import queue
import sys
import threading
from collections.abc import Callable, Iterator
from typing import IO, Any

from crewbridge.base.jsonio import dumps_bytes
from crewbridge.protocol.mcp import (
    BUSY,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    McpSession,
    RpcError,
    Served,
    read_message,
    refusal,
    request_id,
)

MAX_LINE = 8 << 20  # bytes of one message; a longer line is answered with an error and skipped
WORKERS = 8  # tool calls running at once
BACKLOG = 256  # tool calls waiting for a worker
WIND_DOWN = 10.0  # seconds to wait for calls a closed session stopped


class Link:
    """stdio as MCP's transport: the protocol's own copy of stdout (fd 1 then points to stderr, so
    that anything else written to it, a tool's print, goes there), the one session, and the lines of
    stdin still to answer (`first`: one read before the server loaded)."""

    def __init__(self) -> None:
        stdin = sys.stdin.buffer  # first: nothing is changed when there is no stdin
        self._out = os.fdopen(os.dup(1), "wb")
        os.dup2(2, 1)
        self._lock = threading.Lock()
        self.session = McpSession()
        self.lines = lines(stdin, self.send)
        self.first: list[bytes] = []

    def send(self, message: dict[str, Any]) -> None:
        data = dumps_bytes(message) + b"\n"
        with self._lock:
            try:
                self._out.write(data)
                self._out.flush()
            except (OSError, ValueError):
                pass  # the client went away: stdin ends next

    def rest(self) -> Iterator[bytes]:
        return itertools.chain(self.first, self.lines)


def serve_stdio(server: Served, link: Link | None = None) -> None:
    """Answer the messages on stdin until it closes and every call read is answered; then stop
    every job and end what it started. The protocol owns stdout: anything else written to it (a
    tool's print) goes to stderr. `link`: the transport crewbridge.mcp.early set up (and answered
    initialize on) before the server loaded."""
    link = Link() if link is None else link
    session, send = link.session, link.send
    workers = Workers(WORKERS, BACKLOG)

    def answer(message: Any) -> None:
        try:
            response = server.respond(message, session, send)
        except Exception as exc:  # a bug in crew: answered, never the end of the server
            response = refusal(request_id(message), INTERNAL_ERROR, f"internal error: {type(exc).__name__}: {exc}")
        if response is not None:
            send(response)

    try:
        for line in link.rest():
            try:
                message = read_message(line)
            except RpcError as exc:
                send(refusal(None, exc.code, f"{exc} a line"))
                continue
            if not (isinstance(message, dict) and message.get("method") == "tools/call" and "id" in message):
                answer(message)
            elif not workers.submit(functools.partial(answer, message)):
                send(refusal(request_id(message), BUSY, f"{BACKLOG} calls wait already; send it again later"))
        workers.wait(server.timeout)
    finally:
        session.close()
        workers.wait(WIND_DOWN)
        server.close()


def lines(stream: IO[bytes], send: Callable[[dict[str, Any]], None]) -> Iterator[bytes]:
    """The non-blank lines of `stream`, each at most MAX_LINE bytes: a longer one is answered with
    an error (through `send`) and skipped, without ever being held whole."""
    while True:
        line = stream.readline(MAX_LINE + 1)
        if not line:
            return
        if len(line) > MAX_LINE:
            while line and not line.endswith(b"\n"):
                line = stream.readline(1 << 16)
            send(refusal(None, INVALID_REQUEST, f"a line longer than {MAX_LINE} bytes was skipped; send less"))
        elif line.strip():
            yield line


class Workers:
    """Runs work on at most `count` daemon threads, started as needed; up to `backlog` more wait.
    `submit` says False, and runs nothing, when that many wait already."""

    def __init__(self, count: int, backlog: int) -> None:
        self._count = count
        self._queue: queue.Queue[Callable[[], None]] = queue.Queue(backlog)
        self._threads = 0
        self._unfinished = 0
        self._changed = threading.Condition()

    def submit(self, work: Callable[[], None]) -> bool:
        with self._changed:
            try:
                self._queue.put_nowait(work)
            except queue.Full:
                return False
            self._unfinished += 1
            if self._threads < min(self._count, self._unfinished):
                self._threads += 1
                threading.Thread(target=self._run, name="crew-mcp-call", daemon=True).start()
        return True

    def wait(self, timeout: float) -> bool:
        """Wait until all work submitted has run, for at most `timeout` seconds; whether it has."""
        with self._changed:
            return self._changed.wait_for(lambda: self._unfinished == 0, timeout)

    def _run(self) -> None:
        while True:
            work = self._queue.get()
            try:
                work()
            finally:
                with self._changed:
                    self._unfinished -= 1
                    self._changed.notify_all()
