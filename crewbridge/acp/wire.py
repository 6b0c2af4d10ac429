"""stdio as the ACP SDK's message transport, and the courier that sends one session's updates and
requests in the order the run's threads make them.

The SDK's own stdio transport logs a frame that is not JSON and drops it, and a frame that is JSON
but no message (an array, a number) ends its read loop. Here each gets its JSON-RPC error (parse
error, invalid request) and the agent reads on: a client's bad frame never ends crew acp. The one
bad frame not answered is a malformed answer (an object with `result` or `error`): it is said on
stderr and dropped, since answering an answer could start an endless exchange with a client that
does the same."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from crewbridge.protocol.jsonrpc import INVALID_REQUEST, RpcError, invalid, read_message, refusal, request_id

T = TypeVar("T")
MAX_FRAME = 50 << 20  # bytes of one message (the SDK's own limit)
log = logging.getLogger("crewbridge.acp")


class StdioTransport:
    """JSON-RPC messages, one per line, read from `reader` and written to `writer`."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self._lock = asyncio.Lock()

    async def send(self, message: dict[str, Any]) -> None:
        line = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
        async with self._lock:
            self.writer.write(line + b"\n")
            await self.writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        """The next message; None at the end of input. A bad frame is answered and skipped."""
        while True:
            try:
                line = await self.reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:  # the last line, without its newline
                line = exc.partial
                if not line:
                    return None
            except asyncio.LimitOverrunError:
                await self._skip_long_line()
                await self.send(refusal(None, INVALID_REQUEST, f"a message longer than {MAX_FRAME:,} bytes"))
                continue
            if not line.strip():
                continue
            try:
                message = read_message(line)
            except RpcError as exc:
                await self.send(refusal(None, exc.code, str(exc)))
                continue
            problem = invalid(message)  # MCP's core judges JSON-RPC 2.0 for both
            if problem is None:
                return message
            if isinstance(message, dict) and ("result" in message or "error" in message):  # never answer an answer
                log.warning("a malformed answer was dropped: %s", problem)
                continue
            await self.send(refusal(request_id(message), INVALID_REQUEST, problem))

    async def close(self) -> None:
        self.writer.close()

    async def _skip_long_line(self) -> None:
        while True:
            try:
                await self.reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as exc:
                await self.reader.readexactly(exc.consumed)


async def stdio(leftover: bytes = b"") -> StdioTransport:
    """This process's stdin and stdout as a transport; `leftover`: bytes read from stdin before
    (crewbridge.acp.early), read first. A pipe or socket is read and written by the event loop;
    anything else (a file) by a thread (reads) and plainly (writes)."""
    import sys
    import threading

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_FRAME)
    if leftover:
        reader.feed_data(leftover)
    if _polled(0):
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    else:  # a file, /dev/null, a terminal, or no stdin at all: read in a thread

        def feed() -> None:
            try:
                while chunk := os.read(0, 1 << 16):
                    loop.call_soon_threadsafe(reader.feed_data, chunk)
            except OSError:  # stdin closed: the end of input
                pass
            loop.call_soon_threadsafe(reader.feed_eof)

        threading.Thread(target=feed, name="crew-acp-stdin", daemon=True).start()
    if _polled(1):
        transport, protocol = await loop.connect_write_pipe(_Drained, sys.stdout)
        writer: Any = asyncio.StreamWriter(transport, protocol, None, loop)
    else:  # not a pipe: plain writes
        writer = _Plain(1)
    return StdioTransport(reader, writer)


def _polled(fd: int) -> bool:
    """Whether the event loop can watch `fd`: a pipe or a socket (epoll refuses a file and
    /dev/null, and asyncio then fails in a callback, after the pipe was accepted)."""
    import stat

    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _Drained(asyncio.streams.FlowControlMixin):
    """The write side's flow control (asyncio's own, as StreamWriter.drain needs it)."""


class _Plain:
    """A file written plainly, as a StreamWriter is."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.fd, view) :]
            except OSError as exc:  # no stdout (closed, a full disk): the editor is gone
                raise ConnectionError(f"stdout cannot be written: {exc}") from None

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        return None


class Courier:
    """Sends what one session's run says to the client, in the order its threads say it: updates
    (notifications) and requests (a permission, a file), from any thread. A request's answer comes
    back as a concurrent future; cancelling that future cancels the request."""

    def __init__(self, loop: asyncio.AbstractEventLoop, send: Callable[[Any], Awaitable[None]]) -> None:
        self.loop = loop
        self._send = send
        self._queue: asyncio.Queue[tuple[str, Any, Any]] = asyncio.Queue()
        self._failed: BaseException | None = None  # crew's own error sending an update (a bug)
        self._pump = loop.create_task(self._run())

    def notify(self, update: Any) -> None:
        self._put(("update", update, None))

    def request(self, make: Callable[[], Awaitable[T]]) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        if not self._put(("request", make, future)):
            future.set_exception(ConnectionError("the editor is gone"))
        return future

    async def drain(self) -> None:
        """Wait until everything said so far was sent; raise crew's own error if an update could
        not be sent for one (the prompt then ends with it, instead of waiting for ever)."""
        if self._pump.done():  # closed: nothing more is sent
            return
        done = self.loop.create_future()
        self._queue.put_nowait(("mark", done, None))
        await done

    def close(self) -> None:
        self._pump.cancel()

    def _put(self, item: tuple[str, Any, Any]) -> bool:
        try:
            self.loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: the editor is gone
            return False
        return True

    async def _run(self) -> None:
        """Send what comes, in order, for as long as the session lives: no error ends the pump
        (a mark left waiting would hang its prompt); crew's own is kept for the next drain()."""
        while True:
            kind, item, future = await self._queue.get()
            if kind == "mark":
                failed, self._failed = self._failed, None
                item.set_exception(failed) if failed is not None else item.set_result(None)
            elif kind == "update":
                try:
                    await self._send(item)
                except (ConnectionError, OSError):  # the editor is gone; the run is being ended
                    log.debug("an update was not sent: the editor is gone")
                except Exception as exc:  # crew's bug: raised by the prompt's drain(), not lost
                    log.exception("an update could not be sent")
                    self._failed = self._failed or exc
            elif not future.cancelled():
                self._start(item, future)

    def _start(self, make: Callable[[], Awaitable[Any]], future: concurrent.futures.Future[Any]) -> None:
        """Send a request; its answer settles `future`, and cancelling `future` cancels it."""
        task: asyncio.Task[Any] = self.loop.create_task(make())  # type: ignore[arg-type]
        task.add_done_callback(lambda done: _settle(future, done))

        def cancelled(settled: concurrent.futures.Future[Any]) -> None:
            if settled.cancelled():
                self.loop.call_soon_threadsafe(task.cancel)

        future.add_done_callback(cancelled)


def _settle(future: concurrent.futures.Future[Any], task: asyncio.Task[Any]) -> None:
    if future.done():
        return
    if task.cancelled():
        future.cancel()
    elif task.exception() is not None:
        future.set_exception(task.exception())
    else:
        future.set_result(task.result())
