"""A real pseudo-terminal for tests of what crew asks a person: `Terminal(*answers)`."""

from __future__ import annotations

import os
import re
import select
import termios
import time

import pytest


class Terminal:
    """A real pseudo-terminal (a pipe with `tty=False`): crew asks on one side (`stdin`, `stderr`),
    the test types the `answers` (each a line, typed ahead) and reads what was asked on the other.
    No echo, no output processing: what crew writes is what the test reads."""

    def __init__(self, *answers: str, tty: bool = True) -> None:
        if tty:
            self.master, near = os.openpty()
            attrs = termios.tcgetattr(near)
            attrs[1] &= ~termios.OPOST
            attrs[3] &= ~termios.ECHO
            termios.tcsetattr(near, termios.TCSANOW, attrs)
            far = os.dup(near)
        else:
            near, self.master = os.pipe()
            far = os.open(os.devnull, os.O_WRONLY)
        self.stdin = open(near, encoding="utf-8")
        self.stderr = open(far, "w", encoding="utf-8")
        self.shown = ""
        _OPEN.append(self)
        for answer in answers:
            self.type(answer)

    def type(self, answer: str) -> None:
        os.write(self.master, answer.encode() + b"\n")

    def read(self, until: str = "") -> str:
        """All crew wrote so far; with `until`, once that has appeared too (a bound, not a timing)."""
        deadline = time.monotonic() + 30
        while (until not in self.shown and time.monotonic() < deadline) or select.select([self.master], [], [], 0)[0]:
            if select.select([self.master], [], [], 0.05)[0]:
                self.shown += os.read(self.master, 65536).decode()
        assert until in self.shown, self.shown
        return self.shown

    @property
    def asked(self) -> list[str]:
        return re.findall(r".*?\[y/N/a=always\] ", self.read(), re.S)

    def close(self) -> None:
        for closing in (self.stdin.close, self.stderr.close, lambda: os.close(self.master)):
            try:
                closing()
            except OSError:
                pass


_OPEN: list[Terminal] = []


@pytest.fixture(autouse=True)
def close_terminals():
    """Closes the Terminals a test made (import it into a test module to use it)."""
    yield
    while _OPEN:
        _OPEN.pop().close()
