"""A person's yes or no to a tool call, asked on the terminal, and the terminal it shares with crew's
other lines on stderr.

One question at a time, across agents (the Floor); while one waits for its answer, crew's other
lines are held and written after it. Only the asking thread ever waits for a person, and only until
its deadline (the run's end), or until its question is withdrawn (the reply was stopped, the run
ended): the terminal's descriptor is read with select() against both, never with a blocking read.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from select import select
from typing import IO, Any

WOKEN = 2.0  # seconds a withdrawal waits for the asking thread, woken, to end its question (a bound)


class Floor:
    """The terminal: who asks on it now, and the lines held meanwhile."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._asker: object | None = None
        self._held: list[Callable[[], None]] = []
        self._wake: tuple[int, int] | None = None  # readable once the question being asked is withdrawn
        self._wipe: Callable[[], None] | None = None  # clears the status line on the terminal now, if one is

    def take(self, asker: object, deadline: float | None, withdrawn: Callable[[], bool]) -> int | None:
        """Wait for the terminal until `deadline` (None: as long as it takes) or until `withdrawn()`;
        → once it is `asker`'s, a descriptor that becomes readable if its question is withdrawn (then
        give() it back), else None."""
        with self._cond:
            while self._asker is not None and not withdrawn():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(left)
            if withdrawn():
                return None
            if self._wake is None:  # made once, kept for the process's life, as the terminal is
                self._wake = os.pipe()
                os.set_blocking(self._wake[0], False)
            self._asker = asker
            if self._wipe is not None:  # a question never shares its line with a status line
                self._wipe()
                self._wipe = None
            return self._wake[0]

    def give(self) -> None:
        """The question is over: the lines held meanwhile are written, and the next question may ask."""
        with self._cond:
            self._asker = None
            assert self._wake is not None
            while True:  # a withdrawal that came with the answer is spent
                try:
                    if not os.read(self._wake[0], 64):
                        break
                except BlockingIOError:
                    break
            held, self._held = self._held, []
            for write in held:
                write()
            self._cond.notify_all()

    def withdraw(self, asker: object) -> None:
        """End `asker`'s question, the one being asked (once its thread has said so on the terminal:
        what is written next comes after it) and any waiting for the terminal."""
        with self._cond:
            if self._asker is asker and self._wake is not None:
                os.write(self._wake[1], b"!")
                self._cond.wait_for(lambda: self._asker is not asker, WOKEN)
            self._cond.notify_all()

    def write(self, write: Callable[[], None]) -> None:
        """Call `write` (it writes to the terminal) now, or once the question being asked is over."""
        with self._cond:
            if self._asker is not None:
                self._held.append(write)
            else:
                write()

    def write_if_free(self, write: Callable[[], None], wipe: Callable[[], None] | None = None) -> None:
        """Call `write` now if nothing else is writing or asking, else not at all (a status line);
        `wipe` clears what it drew, and is called before the next question is asked."""
        if self._cond.acquire(blocking=False):
            try:
                if self._asker is None:
                    write()
                    self._wipe = wipe
            finally:
                self._cond.release()


terminal = Floor()  # the process's one terminal


class Approver:
    """Asks a person yes/no on the terminal; says no without asking when there is no terminal."""

    def __init__(self, stdin: IO[str] | None = None, stderr: IO[str] | None = None) -> None:
        self.stdin = stdin or sys.stdin
        self.stderr = stderr or sys.stderr
        self._withdrawn = False  # no question may ask (until reopen())

    @property
    def interactive(self) -> bool:
        return isatty(self.stdin) and isatty(self.stderr)

    def ask(self, question: str, deadline: float | None = None) -> str | None:
        """The answer: "yes", "always" (this tool, for the rest of the run) or "no"; None when
        `deadline` (time.monotonic()) passed first or the question was withdrawn."""
        wake = terminal.take(self, deadline, lambda: self._withdrawn)
        if wake is None:
            return None
        try:
            self.stderr.write(f"{question} [y/N/a=always] ")
            self.stderr.flush()
            answer = _read_line(self.stdin, deadline, wake)
            if answer is None:
                late = deadline is not None and time.monotonic() >= deadline
                self.stderr.write("(no answer before the run's time was up)\n" if late else "(withdrawn)\n")
                self.stderr.flush()
        finally:
            terminal.give()
        if answer is None:
            return None
        return {"y": "yes", "yes": "yes", "a": "always", "always": "always"}.get(answer.strip().lower(), "no")

    def withdraw(self) -> None:
        """Withdraw the question this approver asks or waits to ask, and refuse any other until
        reopen() (its reply was stopped, its run ended)."""
        self._withdrawn = True
        terminal.withdraw(self)

    def reopen(self) -> None:
        """Questions may be asked again (a new message of the conversation)."""
        self._withdrawn = False


def _read_line(stream: IO[str], deadline: float | None, wake: int) -> str | None:
    """A line typed on the terminal `stream`, read from its descriptor once it is there (a terminal
    hands over whole lines); None when `deadline` passes or `wake` becomes readable first; "" at
    the end of input."""
    fd = stream.fileno()
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return None
        ready = select([fd, wake], [], [], left)[0]
        if wake in ready:
            return None
        if ready:
            return os.read(fd, 4096).decode("utf-8", "replace").partition("\n")[0]


def isatty(stream: Any) -> bool:
    """Whether `stream` is a terminal (False for anything that cannot say)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
