"""The transport of a live peer (crewbridge.conversations.peer): one long-lived CLI process spoken
to in JSON lines, and the inbox through which other threads hand it work.

Every read and write waits no longer than the deadline it is given (the run's), and so does every
wait across threads: a message handed to the reading thread is answered by then, or at once with an
error once the conversation is closed.
"""

from __future__ import annotations

import collections
import json
import os
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.base.decoded import Notice
from crewbridge.errors import CrewError, ProviderError
from crewbridge.protocol.jsonrpc import INTERNAL_ERROR, refusal
from crewbridge.providers.base import parse_object
from crewbridge.system.process import Child

if TYPE_CHECKING:
    from concurrent.futures import Future

    from crewbridge.sandbox import Sandbox

# Seconds a live CLI has to exit once its stdin is closed. A SIGTERM, half a second after it, cut
# short claude's own shutdown, which gives its OpenTelemetry exporter 2 s (its spans were lost).
END_WAIT = 3.0
Answer = Callable[..., "dict[str, Any] | None"]  # an MCP message (and what its transport adds) → its answer


class LiveProcess:
    """One running CLI process for a whole conversation: JSON objects in and out, one a line,
    through Child (its own process group, ended as a whole)."""

    def __init__(
        self,
        argv: list[str],
        *,
        env: dict[str, str],
        cwd: Path,
        install_hint: str = "",
        sandbox: Sandbox | None = None,
        passed: Collection[str] = (),
    ) -> None:
        """`passed`: the names in `env` the CLI gets although crewbridge.system.childenv withholds them."""
        self.name = os.path.basename(argv[0])
        self.child = Child(
            argv, env=env, cwd=cwd, keep_stdin=True, install_hint=install_hint, sandbox=sandbox, passed=passed
        )

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

    def end(self) -> None:
        """End the CLI as its own end would, once its last reply is read: its stdin closed, it exits
        (claude, codex and gemini within ~70 ms); one still running after END_WAIT, and the rest of
        its group, are ended."""
        self.child.end(END_WAIT)

    def close(self) -> None:
        """End the whole process group now (SIGTERM, then SIGKILL if it lingers): a reply cut short."""
        self.child.kill()


class Inbox:
    """MCP messages that reach crew on other threads, answered on the thread that reads the CLI:
    ask() (any thread) hands one over and waits, until the run's `deadline` at the latest; the
    reader, woken through `fd`, answers them in order (answer_all). A CrewError that ends the run
    is the message's answer too (an error), and is raised by answer_all(). Once closed, every
    message is answered at once with an error.

    A notification (no id) is taken on the asking thread at once: it gets no answer and only
    changes a session's state — a cancellation, which must reach the call the reading thread may be
    running."""

    def __init__(self, answer: Answer, deadline: Callable[[], float | None]) -> None:
        self._answer = answer
        self._deadline = deadline
        self._waiting: collections.deque[tuple[tuple[Any, ...], Future[dict[str, Any] | None]]] = collections.deque()
        self._lock = threading.Lock()
        self._closed = False
        self.fd, self._wake = os.pipe()  # readable while messages wait
        os.set_blocking(self.fd, False)

    def ask(self, message: Any, *more: Any) -> dict[str, Any] | None:
        if not isinstance(message, dict) or "id" not in message:
            with self._lock:
                closed = self._closed
            return None if closed else self._answer(message, *more)
        # For start-up speed: concurrent.futures (and the logging it loads) is not needed to start a CLI.
        from concurrent.futures import Future
        from concurrent.futures import TimeoutError as FutureTimeout

        answered: Future[dict[str, Any] | None] = Future()
        with self._lock:
            if self._closed:
                return _failed(message, "the conversation has ended")
            self._waiting.append(((message, *more), answered))
            os.write(self._wake, b"!")
        deadline = self._deadline()
        try:
            return answered.result(None if deadline is None else max(deadline - time.monotonic(), 0))
        except FutureTimeout:
            return _failed(message, "the run's --timeout passed before crew could answer")

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
    return refusal(message["id"], INTERNAL_ERROR, why)
