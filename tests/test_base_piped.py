"""What was piped to crew (crewbridge.base.piped): a pipe, a socket or a file on stdin is read to its
end as the task's context; a terminal or another device never is; a pipe that stays open is said so
after a second and waited for no longer than the run's time."""

from __future__ import annotations

import os
import socket
import threading

import pytest

from crewbridge.base import piped
from crewbridge.base.piped import read_context, with_context
from crewbridge.errors import CrewTimeout


def reader(fd: int):
    return open(fd, "rb", buffering=0)


def test_pipes_sockets_and_files_are_read_terminals_and_other_devices_never(tmp_path):
    pipe_out, pipe_in = os.pipe()
    os.close(pipe_in)
    left, right = socket.socketpair()
    right.close()
    (tmp_path / "f").write_text("in a file\n")
    master, tty = os.openpty()
    with reader(pipe_out) as pipe, open(tmp_path / "f", "rb") as file, open(os.devnull, "rb") as null:
        with open("/dev/zero", "rb") as zero, reader(tty) as terminal, left.makefile("rb") as sock:
            assert [piped.piped(s) for s in (pipe, sock, file)] == [True, True, True]
            assert [piped.piped(s) for s in (null, zero, terminal, None)] == [False] * 4
            assert read_context(file, print) == "in a file\n"
            assert read_context(zero, print) is None  # never read: it would not end
            assert read_context(terminal, print) is None and read_context(null, print) is None
    os.close(master)
    left.close()


def test_a_pipe_is_read_to_its_end_bytes_that_are_not_utf8_kept():
    out, into = os.pipe()
    os.write(into, b"caf\xc3\xa9 \xff\n")
    os.close(into)
    with reader(out) as pipe:
        text = read_context(pipe, print)
    assert text == "café \udcff\n"
    assert text.encode("utf-8", "surrogateescape") == b"caf\xc3\xa9 \xff\n"


def test_a_pipe_still_open_after_a_second_is_said_once_then_read_when_it_ends(monkeypatch):
    monkeypatch.setattr(piped, "QUIET", 0.05)
    out, into = os.pipe()
    said: list[str] = []
    spoken = threading.Event()

    def say(text: str) -> None:
        said.append(text)
        spoken.set()

    def feed() -> None:
        os.write(into, b"first ")
        assert spoken.wait(30)  # written only once crew has said it waits: no race with the notice
        os.write(into, b"last\n")
        os.close(into)

    writer = threading.Thread(target=feed)
    writer.start()
    with reader(out) as pipe:
        assert read_context(pipe, say) == "first last\n"
    writer.join()
    assert said == [
        "crew: waiting for stdin to end (it is added to the task); give -n (--no-stdin) to read nothing, "
        "or close the pipe"
    ]


def test_a_pipe_open_past_the_runs_time_is_a_timeout_that_says_what_to_do():
    out, into = os.pipe()
    with reader(out) as pipe, pytest.raises(CrewTimeout) as raised:
        read_context(pipe, lambda text: None, timeout=0.2)
    os.close(into)
    assert str(raised.value) == (
        "stdin was still open after 0.2s (--timeout), so crew never started the task: close the pipe, or give "
        "-n (--no-stdin) to read nothing"
    )
    assert raised.value.exit_code == 124


def test_the_context_follows_the_task_when_there_is_any():
    assert with_context("why?", "ERROR: boom\n") == "why?\n\nERROR: boom\n"
    assert with_context("why?", "") == with_context("why?", None) == "why?"
