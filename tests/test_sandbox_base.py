"""A launch's descriptors are closed once, whichever threads end it: a second close of a number
would close whatever another part of crew opened under it since (a server's listening socket)."""

from __future__ import annotations

import os
import threading

import pytest

from crewbridge.sandbox import base
from crewbridge.sandbox.base import Launch


def test_a_launch_ended_on_two_threads_at_once_closes_each_descriptor_once(monkeypatch: pytest.MonkeyPatch) -> None:
    status, held = os.pipe()
    launch = Launch(["true"], {}, status=status, held=held)
    closed: list[int] = []
    first = threading.Event()
    other_done = threading.Event()
    real_close = os.close

    def close(fd: int) -> None:
        closed.append(fd)
        real_close(fd)
        if not first.is_set():  # the first thread, in the middle of its closes: the other one ends it now
            first.set()
            other_done.wait(5)

    monkeypatch.setattr(base.os, "close", close)
    one = threading.Thread(target=launch.ended)
    one.start()
    assert first.wait(5)
    other = threading.Thread(target=launch.ended)  # end_all() after an interrupt, say
    other.start()
    other.join(5)
    other_done.set()
    one.join(5)
    assert sorted(closed) == sorted([status, held])


def test_released_then_ended_closes_held_once(monkeypatch: pytest.MonkeyPatch) -> None:
    status, held = os.pipe()
    launch = Launch(["true"], {}, status=status, held=held)
    closed: list[int] = []
    real_close = os.close
    monkeypatch.setattr(base.os, "close", lambda fd: (closed.append(fd), real_close(fd)))
    launch.release()
    launch.ended()
    assert sorted(closed) == sorted([status, held])
