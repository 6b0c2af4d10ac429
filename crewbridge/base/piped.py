"""What was piped to crew: the context `crew query` and `crew execute` add to the task.

crew reads its stdin only when it is a pipe, a socket or a regular file: never a terminal, and never
another device (`/dev/null`, `/dev/zero`, a serial line), which give nothing or never end. A pipe
is read to its end, as `git diff | crew query …` wants; one that stays open and quiet is said so on
stderr after a second (`sleep 100 | crew query …` would look hung), and is waited for no longer than
the run's time. `--no-stdin` (`-n`) reads nothing: inside `while read` loops, whose input is crew's
stdin too.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from select import select
from typing import IO, Any

from crewbridge.errors import CrewTimeout

QUIET = 1.0  # seconds of an open, silent stdin before crew says it waits for it
CHUNK = 1 << 16


def piped(stream: IO[Any] | None) -> bool:
    """Whether `stream` is something crew reads as context: a pipe, a socket or a regular file."""
    try:
        mode = os.fstat(stream.fileno()).st_mode  # type: ignore[union-attr]
    except (AttributeError, OSError, ValueError):  # None, closed, or no descriptor (a test's StringIO)
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISREG(mode)


def read_context(stream: IO[Any] | None, say: Callable[[str], None], timeout: float | None = None) -> str | None:
    """All of `stream` when it is piped (else None), as text (bytes that are not UTF-8 kept as lone
    surrogates, as crew reads its arguments). When it is still open after QUIET seconds, `say` is
    told once that crew waits for it; past `timeout` seconds, CrewTimeout."""
    if stream is None or not piped(stream):
        return None
    fd = stream.fileno()
    start = time.monotonic()
    parts: list[bytes] = []
    said = False
    while True:
        waited = time.monotonic() - start
        if timeout is not None and waited >= timeout:
            raise CrewTimeout(
                f"stdin was still open after {timeout:g}s (--timeout), so crew never started the task: "
                "close the pipe, or give -n (--no-stdin) to read nothing"
            )
        limits = ([] if said else [QUIET - waited]) + ([] if timeout is None else [timeout - waited])
        if not select([fd], [], [], max(min(limits), 0) if limits else None)[0]:
            if not said and time.monotonic() - start >= QUIET:
                say(
                    "crew: waiting for stdin to end (it is added to the task); give -n (--no-stdin) to "
                    "read nothing, or close the pipe"
                )
                said = True
            continue
        chunk = os.read(fd, CHUNK)
        if not chunk:
            return b"".join(parts).decode("utf-8", "surrogateescape")
        parts.append(chunk)


def with_context(task: str, context: str | None) -> str:
    """The task as sent: the piped context, when there is any, after it."""
    return f"{task}\n\n{context}" if context else task
