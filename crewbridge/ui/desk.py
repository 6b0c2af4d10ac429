"""The UI's end of crewbridge.ui.link: the Unix socket runs reach `crew ui` on, the approval questions
they ask (open, and answered lately), the runs attending it (to cancel them; the page reads the
rest of a run from its record); and a second `crew ui` of the user's asking for a fresh sign-in link
(crewbridge.ui.signin: it must prove it runs as the user outside any sandbox).

Only the user's own processes connect (the socket is 0600 in the 0700 state folder), and a message
about a run is taken only from the process that run's transcript names (SO_PEERCRED: the kernel
says who connected). A sandboxed command of the model's, which may reach the socket, can neither
ask in a run's name, nor hear its cancel, nor get a sign-in link.
"""

from __future__ import annotations

import os
import secrets
import socket
import struct
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from crewbridge.errors import UsageError
from crewbridge.record.index import Runs
from crewbridge.ui.link import VERDICTS, Lines, at_socket, connect, hang_up, send
from crewbridge.ui.signin import ASKING, claimed, no_new_privs

KEPT_ANSWERED = 50  # answered or withdrawn questions still shown


@dataclass
class Question:
    """A question a run asks on the page."""

    id: str
    run: str
    agent: str
    tool: str
    input: Any
    shown: str
    note: str
    asked: str
    sock: socket.socket = field(repr=False)
    state: str = "open"  # open | answered | withdrawn
    verdict: str | None = None
    source: str | None = None  # where it was answered: browser, terminal, editor
    ended: str | None = None  # when it was answered or withdrawn

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "run": self.run,
            "agent": self.agent,
            "tool": self.tool,
            "input": self.input,
            "shown": self.shown,
            "note": self.note,
            "asked": self.asked,
            "state": self.state,
            "verdict": self.verdict,
            "source": self.source,
            "ended": self.ended,
        }


class Desk:
    """Listens at `path` for runs, from a thread of its own, until close(); and for a second
    `crew ui` of the user's, which `link()` gives a fresh sign-in link (crewbridge.ui.signin)."""

    def __init__(self, path: Path, runs: Runs, link: Callable[[], str]) -> None:
        self.path = path
        self.runs = runs
        self.link = link
        self._lock = threading.Condition()
        self.version = 0  # grows with every change a page shows (questions)
        self._questions: dict[str, Question] = {}
        self._answered: deque[Question] = deque(maxlen=KEPT_ANSWERED)
        self._attending: dict[str, set[socket.socket]] = {}  # run id → its processes' connections
        self._listener: socket.socket | None = None

    # -- the socket -----------------------------------------------------------------------------

    def start(self) -> None:
        """Listen at `path` (refused when another `crew ui` of this user serves there)."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        other = connect(self.path)
        if other is not None:
            other.close()
            raise UsageError(
                f"another crew ui serves for this user (its socket is {self.path}); use that one, or stop it first"
            )
        try:
            self.path.unlink()  # what a crew ui that died left
        except FileNotFoundError:
            pass
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        umask = os.umask(0o177)  # the socket is made 0600 from the start
        try:
            at_socket(self.path, listener.bind)
        except OSError as exc:
            raise UsageError(f"cannot listen at {self.path}: {exc.strerror or exc}; check the state folder") from None
        finally:
            os.umask(umask)
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, name="crew-ui-desk", daemon=True).start()

    def close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                self.path.unlink()
            except OSError:
                pass
            hang_up(listener)  # wakes the accepting thread: a close alone leaves it in accept() for good
            listener.close()
        with self._lock:
            connections = [q.sock for q in self._questions.values()]
            connections += [sock for socks in self._attending.values() for sock in socks]
        for sock in connections:
            hang_up(sock)

    def _accept(self) -> None:
        while (listener := self._listener) is not None:
            try:
                sock, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock,), name="crew-ui-run", daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        try:
            lines = Lines(sock)
            first = lines.next()
            if first is not None and first.get("op") == "sign-in":
                return self._sign_in(sock, lines)
            if first is None or not self._from_the_run(sock, first.get("run")):
                return
            run = str(first["run"])
            if first.get("op") == "ask":
                self._ask(run, first, sock, lines)
            elif first.get("op") == "attend":
                self._attend(run, sock, lines)
        finally:
            sock.close()

    def _from_the_run(self, sock: socket.socket, run: Any) -> bool:
        """Whether `sock` comes from the process that runs `run` (as far as this system can tell)."""
        if not isinstance(run, str):
            return False
        row = self.runs.row(run) if self.runs.path(run) is not None else None
        if row is None:
            return False
        peer = peer_of(sock)
        if peer is None:  # no SO_PEERCRED here: the socket's mode is the whole guard
            return True
        pid, uid = peer
        return uid == os.getuid() and pid == row.pid

    def _sign_in(self, sock: socket.socket, lines: Lines) -> None:
        """A fresh sign-in link for a second `crew ui`, once it proved it runs as this user outside
        any sandbox: it made the file named here in crew's state folder (no crew sandbox lets an
        agent write there), and it is no more confined than this process (no_new_privs)."""
        sock.settimeout(ASKING)
        peer = peer_of(sock)
        if peer is not None and (peer[1] != os.getuid() or (no_new_privs(peer[0]) and not no_new_privs(os.getpid()))):
            send(sock, {"op": "refused", "why": "it runs inside a sandbox"})
            return
        name = f"ui-claim-{secrets.token_hex(16)}"
        send(sock, {"op": "prove", "name": name})
        said = lines.next()
        if not claimed(self.path.parent, name) or said is None or said.get("op") != "proved":
            send(sock, {"op": "refused", "why": f"it did not make {self.path.parent / name}"})
            return
        send(sock, {"op": "link", "url": self.link()})

    # -- questions ------------------------------------------------------------------------------

    def _ask(self, run: str, message: dict[str, Any], sock: socket.socket, lines: Lines) -> None:
        question = Question(
            id=secrets.token_hex(8),
            run=run,
            agent=str(message.get("agent", "")),
            tool=str(message.get("tool", "")),
            input=message.get("input"),
            shown=str(message.get("shown", "")),
            note=str(message.get("note", "")),
            asked=_now(),
            sock=sock,
        )
        with self._lock:
            self._questions[question.id] = question
            self._changed()
        settled = lines.next()  # the run's word that another channel answered, or its hang-up
        with self._lock:
            if question.state == "open":
                if settled is not None and settled.get("op") == "settled":
                    question.state, question.verdict = "answered", str(settled.get("verdict"))
                    question.source = str(settled.get("source"))
                else:
                    question.state = "withdrawn"
            self._questions.pop(question.id, None)
            question.ended = question.ended or _now()
            self._answered.appendleft(question)
            self._changed()

    def questions(self) -> list[dict[str, Any]]:
        """The open questions, oldest first, then those answered or withdrawn lately."""
        with self._lock:
            return [q.to_dict() for q in self._questions.values()] + [q.to_dict() for q in self._answered]

    def answer(self, question_id: str, verdict: str) -> str | None:
        """Answer an open question from the page; what went wrong, else None."""
        if verdict not in VERDICTS:
            return f"verdict '{verdict}' is not one of {', '.join(VERDICTS)}"
        with self._lock:
            question = self._questions.get(question_id) or next(
                (q for q in self._answered if q.id == question_id), None
            )
            if question is None:
                return "no such question"
            if question.state != "open":  # answered here a moment ago, its asker not yet gone, or kept
                return f"already {question.state}" + (f" on the {question.source}" if question.source else "")
            question.state, question.verdict, question.source = "answered", verdict, "browser"
            question.ended = _now()
            self._changed()
        if not send(question.sock, {"op": "answer", "verdict": verdict}):
            return "the run stopped asking before the answer reached it"
        return None

    # -- runs that attend -----------------------------------------------------------------------

    def _attend(self, run: str, sock: socket.socket, lines: Lines) -> None:
        with self._lock:
            self._attending.setdefault(run, set()).add(sock)
        try:
            while lines.next() is not None:  # it says nothing more: its connection is its attendance
                pass
        finally:
            with self._lock:
                self._attending[run].discard(sock)
                if not self._attending[run]:
                    del self._attending[run]

    def attended(self, run: str) -> bool:
        with self._lock:
            return run in self._attending

    def cancel(self, run: str) -> bool:
        """Ask the run's process to cancel it; False when it does not attend (not running here)."""
        with self._lock:
            connections = list(self._attending.get(run, ()))
        return any([send(sock, {"op": "cancel"}) for sock in connections])

    # -- changes --------------------------------------------------------------------------------

    def _changed(self) -> None:
        self.version += 1
        self._lock.notify_all()

    def wait(self, version: int, timeout: float) -> int:
        """The version once it differs from `version`, or after `timeout` seconds."""
        with self._lock:
            self._lock.wait_for(lambda: self.version != version, timeout)
            return self.version


def peer_of(sock: socket.socket) -> tuple[int, int] | None:
    """The pid and uid of the process at the other end of a Unix socket (Linux), else None."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    pid, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    return pid, uid


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
