"""How a run in any crew process reaches a `crew ui` serving for the same user: the browser as an
approval channel, and the page's cancel.

`crew ui` listens on a Unix socket in the user's state folder (`ui.sock`, 0600 in a 0700 folder).
A run finds it there; with none there (or none answering) the browser is simply not available and a
run without a terminal refuses as it always did. Two conversations go over it, JSON lines each way:

- a question: the run sends `{"op": "ask", …}` (run, agent, tool, input) and waits for
  `{"op": "answer", "verdict": …}` until its deadline or its withdrawal; when another channel
  answered first it says `{"op": "settled", …}` and hangs up (the page shows who answered);
- attendance: while a run is recorded, `{"op": "attend", "run": …}` keeps a connection up (made
  again within POLL seconds of a `crew ui` starting); `{"op": "cancel"}` on it cancels the run. (The
  page reads what the run does from its record, the model's text too.)

`attend(record)` joins a run to the UI, where the program is composed (the engine knows no face):
the browser as its approval channel, the page's cancel as the record's.

The UI trusts a connection only from the user's own uid, and a message about a run only from the
process that run's transcript names (SO_PEERCRED, checked by the kernel; crewbridge.ui).
"""

from __future__ import annotations

import json
import os
import select
import socket
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.base.places import state_dir
from crewbridge.base.visible import visible, visible_strings
from crewbridge.system.approval import Answer, Question, Verdict

if TYPE_CHECKING:
    from crewbridge.record.stream import Record

SOCKET_NAME = "ui.sock"
POLL = 1.0  # seconds between looks for a `crew ui` that was not there
MAX_LINE = 1 << 20  # bytes of one message either way
SENT_INPUT = 256 << 10  # bytes of a question's input sent whole; a larger one goes as its shown form
VERDICTS: tuple[Verdict, ...] = ("yes", "always", "no")


def socket_path(env: Mapping[str, str] | None = None) -> Path:
    """Where a `crew ui` of this user listens."""
    return state_dir(env) / SOCKET_NAME


def at_socket(path: Path, act: Callable[[str], None]) -> None:
    """`act` (a socket's bind or connect) on `path`, named so that its length does not matter: an
    AF_UNIX address holds 107 bytes, and a state folder deep in a home can pass that. Linux resolves
    /proc/self/fd/N as the folder that descriptor holds open, so the name is short wherever it lies."""
    try:
        folder = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        act(str(path))  # no folder to hold: the address as it is, and its error
        return
    try:
        act(f"/proc/self/fd/{folder}/{path.name}")
    finally:
        os.close(folder)


def connect(path: Path) -> socket.socket | None:
    """A connection to the `crew ui` at `path`, or None when none answers there."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        at_socket(path, sock.connect)
    except OSError:
        sock.close()
        return None
    return sock


def send(sock: socket.socket, message: dict[str, Any]) -> bool:
    """Write one message; False when the other side is gone."""
    try:
        sock.sendall(json.dumps(message, ensure_ascii=True).encode() + b"\n")
    except OSError:
        return False
    return True


class Lines:
    """The messages arriving on a socket, one JSON object a line; None at the end (or garbage)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = b""

    def ready(self) -> bool:
        """Whether a whole line is buffered already."""
        return b"\n" in self._buffer

    def next(self) -> dict[str, Any] | None:
        """The next message (reads until one is whole); None at the end of the stream."""
        while b"\n" not in self._buffer:
            if len(self._buffer) > MAX_LINE:
                return None
            try:
                chunk = self.sock.recv(1 << 16)
            except OSError:
                return None
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            message = json.loads(line)
        except ValueError:
            return None
        return message if isinstance(message, dict) else None


class BrowserChannel:
    """The browser of a `crew ui` as an approval channel (crewbridge.system.approval.Channel): available
    while one serves for this user; a question waits there until answered, the deadline, or its
    withdrawal. Safe for questions asked at once from several threads (a loop's tool workers)."""

    source = "browser"

    def __init__(self, run_id: str | None, path: Path | None = None) -> None:
        self.run_id = run_id
        self.path = path or socket_path()
        self._lock = threading.Lock()
        self._open: dict[int, socket.socket] = {}  # id(question) → its connection
        self._withdrawn = False

    def available(self) -> bool:
        if self.run_id is None:  # transcripts are off: the UI could not tell whose question it is
            return False
        sock = connect(self.path)
        if sock is None:
            return False
        sock.close()
        return True

    def ask(self, question: Question, deadline: float | None) -> Verdict | None:
        sock = connect(self.path) if self.run_id is not None else None
        if sock is None:
            return None
        with self._lock:
            if self._withdrawn:
                sock.close()
                return None
            self._open[id(question)] = sock
        try:
            if not send(sock, self._message(question)):
                return None
            return _verdict(Lines(sock), deadline)
        finally:
            with self._lock:
                self._open.pop(id(question), None)
            sock.close()

    def _message(self, question: Question) -> dict[str, Any]:
        """The question as the page shows it: every string drawn by crewbridge.base.visible (the input
        whole as one line, and, when not too large, its strings line by line for an edit's diff)."""
        whole = json.dumps(question.input, ensure_ascii=True)
        return {
            "op": "ask",
            "run": self.run_id,
            "agent": visible(question.agent),
            "tool": visible(question.tool),
            "input": visible_strings(question.input) if len(whole) <= SENT_INPUT else None,
            "shown": question.shown_input(SENT_INPUT),
            "note": visible(question.note),
        }

    def withdraw(self) -> None:
        with self._lock:
            self._withdrawn = True
            asking = list(self._open.values())
        for sock in asking:
            hang_up(sock)

    def reopen(self) -> None:
        with self._lock:
            self._withdrawn = False

    def settled(self, question: Question, answer: Answer) -> None:
        with self._lock:
            sock = self._open.get(id(question))
        if sock is not None:
            send(sock, {"op": "settled", "verdict": answer.verdict, "source": answer.source})
            hang_up(sock)


def _verdict(lines: Lines, deadline: float | None) -> Verdict | None:
    """The verdict the UI sends, or None at the deadline or when the connection ends first."""
    while True:
        if not lines.ready():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            if not select.select([lines.sock], [], [], left)[0]:
                continue
        message = lines.next()
        if message is None:
            return None
        if message.get("op") == "answer" and message.get("verdict") in VERDICTS:
            verdict: Verdict = message["verdict"]
            return verdict


def hang_up(sock: socket.socket) -> None:
    """End a connection another thread reads: its read returns at once."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class Attendance:
    """A run's presence at the `crew ui` of this user, from its start to close(): `cancel` is
    called when the page cancels the run. Looks for a `crew ui` every POLL seconds while none
    serves, from a daemon thread."""

    def __init__(self, run_id: str, cancel: Callable[[], None], path: Path | None = None) -> None:
        self.run_id = run_id
        self.cancel = cancel
        self.path = path or socket_path()
        self._closed = threading.Event()
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._attend, name="crew-ui-attend", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            sock, self._sock = self._sock, None
        if sock is not None:
            hang_up(sock)
            sock.close()

    def _attend(self) -> None:
        while not self._closed.is_set():
            sock = connect(self.path)
            if sock is not None:
                if send(sock, {"op": "attend", "run": self.run_id, "pid": os.getpid()}):
                    with self._lock:
                        if self._closed.is_set():
                            sock.close()
                            return
                        self._sock = sock
                    self._listen(Lines(sock))
                    with self._lock:
                        self._sock = None
                sock.close()
            self._closed.wait(POLL)

    def _listen(self, lines: Lines) -> None:
        while (message := lines.next()) is not None:
            if message.get("op") == "cancel":
                self.cancel()


def attend(record: Record) -> list[BrowserChannel]:
    """Join the run of `record` to a `crew ui` serving for this user (crewbridge.engine.context.Observer):
    its cancel cancels the run, until the run ends; the browser asks about its calls."""
    if not record.kept:  # transcripts are off: the UI could not tell whose run it is
        return []
    attendance = Attendance(record.run, lambda: record.cancel("browser"))
    record.attach(lambda event: attendance.close() if event.kind == "end" else None)
    return [BrowserChannel(record.run)]
