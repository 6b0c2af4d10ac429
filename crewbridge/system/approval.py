"""A person's yes or no to a tool call, asked on every channel that reaches one (the terminal, an
editor over ACP, the browser of `crew ui`: the first answer wins), and the terminal it shares with
crew's other lines on stderr.

One question at a time, across agents (the Floor); while one waits for its answer, crew's other
lines are held and written after it. Only the asking thread ever waits for a person, and only until
its deadline (the run's end), or until its question is withdrawn (the reply was stopped, the run
ended): the terminal's descriptor is read with select() against both, never with a blocking read.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from select import select
from typing import IO, Any, Literal, Protocol

from crewbridge.base.visible import visible

Verdict = Literal["yes", "always", "no"]

WOKEN = 2.0  # seconds a withdrawal waits for the asking thread, woken, to end its question (a bound)
SHOWN_INPUT = 2000  # characters of a call's input shown in an approval question
_TYPED: dict[str, Verdict] = {"y": "yes", "yes": "yes", "a": "always", "always": "always"}
_SAID = {"yes": "allowed", "always": "always allowed", "no": "declined"}


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


@dataclass(frozen=True)
class Question:
    """A tool call that needs a person's yes: what every channel shows."""

    agent: str  # the agent that wants it
    tool: str  # crew's tool name, or `native:NAME` for one of the CLI's own tools
    input: dict[str, Any]
    note: str = ""  # why it is asked even under --yes (a command the rules could not check)
    run: str | None = None  # the run's id, where the run has a transcript
    call: str | None = None  # the call's id in the run's record

    def shown_input(self, limit: int | None = SHOWN_INPUT) -> str:
        """The input as one JSON line with nothing in it that could hide a part (crewbridge.base.visible),
        cut at `limit` characters with a word that says so."""
        return visible(json.dumps(self.input, ensure_ascii=False), limit)

    def prompt(self) -> str:
        note = f"\n{visible(self.note)}" if self.note else ""  # it may quote the command
        return f"@{visible(self.agent)} wants to run {visible(self.tool)} {self.shown_input()}{note}\nAllow?"


@dataclass(frozen=True)
class Answer:
    """A person's answer and where it came from."""

    verdict: Verdict
    source: str  # the channel's name: "terminal", "editor", "browser"


class Channel(Protocol):
    """One place a person can answer (the terminal, an editor over ACP, the browser of `crew ui`).
    `ask` waits until the answer, `deadline` (time.monotonic(); None: no limit) or withdraw(),
    and gives None for the last two; `withdraw` may be called from any thread and ends a waiting
    `ask` promptly; `settled` tells the channel that another one answered the question it asked."""

    source: str

    def available(self) -> bool: ...

    def ask(self, question: Question, deadline: float | None) -> Verdict | None: ...

    def withdraw(self) -> None: ...

    def reopen(self) -> None: ...

    def settled(self, question: Question, answer: Answer) -> None: ...


class TerminalChannel:
    """Asks on the terminal crew runs in, one question at a time across agents (the Floor)."""

    source = "terminal"

    def __init__(self, stdin: IO[str] | None = None, stderr: IO[str] | None = None) -> None:
        self.stdin = stdin or sys.stdin
        self.stderr = stderr or sys.stderr
        self._withdrawn = False  # no question may ask (until reopen())
        self._other: Answer | None = None  # the answer given elsewhere to the question being asked

    def available(self) -> bool:
        return isatty(self.stdin) and isatty(self.stderr)

    def ask(self, question: Question, deadline: float | None) -> Verdict | None:
        wake = terminal.take(self, deadline, lambda: self._withdrawn)
        if wake is None:
            return None
        try:
            self.stderr.write(f"{question.prompt()} [y/N/a=always] ")
            self.stderr.flush()
            answer = _read_line(self.stdin, deadline, wake)
            if answer is None:
                late = deadline is not None and time.monotonic() >= deadline
                other = self._other
                self.stderr.write(
                    f"(answered on the {other.source}: {_SAID[other.verdict]})\n"
                    if other is not None
                    else "(no answer before the run's time was up)\n"
                    if late
                    else "(withdrawn)\n"
                )
                self.stderr.flush()
        finally:
            terminal.give()
        if answer is None:
            return None
        return _TYPED.get(answer.strip().lower(), "no")

    def withdraw(self) -> None:
        self._withdrawn = True
        terminal.withdraw(self)

    def reopen(self) -> None:
        self._withdrawn = False
        self._other = None

    def settled(self, question: Question, answer: Answer) -> None:
        self._other = answer
        self.withdraw()


class Approver:
    """Asks a person yes/no on every channel that can reach one (the terminal, and those a face or
    `crew ui` adds); the first answer wins and the others are told. Says no without asking when no
    channel can reach anyone. `asking` hears every question before it is asked, `answered` every
    answer (None: nobody answered): the run's record."""

    def __init__(
        self,
        stdin: IO[str] | None = None,
        stderr: IO[str] | None = None,
        channels: Sequence[Channel] = (),
        asking: Callable[[Question], None] | None = None,
        answered: Callable[[Question, Answer | None], None] | None = None,
    ) -> None:
        self.channels: list[Channel] = [TerminalChannel(stdin, stderr), *channels]
        self.asking = asking
        self.answered = answered
        self._withdrawn = False  # no question may ask (until reopen())

    @property
    def interactive(self) -> bool:
        """Whether some channel can reach a person now."""
        return any(channel.available() for channel in self.channels)

    def ask(self, question: Question, deadline: float | None = None) -> Answer | None:
        """The first answer from any channel: "yes", "always" (this tool, for the rest of the run)
        or "no", with its source; None when `deadline` (time.monotonic()) passed first or the
        question was withdrawn."""
        live = [channel for channel in self.channels if channel.available()]
        if self.asking is not None:
            self.asking(question)
        answer = None if self._withdrawn or not live else self._first(live, question, deadline)
        if self.answered is not None:
            self.answered(question, answer)
        return answer

    def _first(self, live: list[Channel], question: Question, deadline: float | None) -> Answer | None:
        if len(live) == 1:
            verdict = live[0].ask(question, deadline)
            return None if verdict is None else Answer(verdict, live[0].source)
        answers: queue.SimpleQueue[tuple[Channel, Verdict | None]] = queue.SimpleQueue()
        threads = [
            threading.Thread(
                target=lambda c=channel: answers.put((c, c.ask(question, deadline))),
                name=f"crew-ask-{channel.source}",
                daemon=True,
            )
            for channel in live
        ]
        for thread in threads:
            thread.start()
        answer = None
        for _ in live:  # each channel ends its ask: answered, past the deadline, or withdrawn
            channel, verdict = answers.get()
            if verdict is not None and answer is None:
                answer = Answer(verdict, channel.source)
                for other in live:
                    if other is not channel:
                        other.settled(question, answer)
        for thread in threads:
            thread.join()
        for channel in live:  # settled() withdrew the others for this question only
            if not self._withdrawn:
                channel.reopen()
        return answer

    def withdraw(self) -> None:
        """Withdraw the question this approver asks or waits to ask, and refuse any other until
        reopen() (its reply was stopped, its run ended)."""
        self._withdrawn = True
        for channel in self.channels:
            channel.withdraw()

    def reopen(self) -> None:
        """Questions may be asked again (a new message of the conversation)."""
        self._withdrawn = False
        for channel in self.channels:
            channel.reopen()


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
