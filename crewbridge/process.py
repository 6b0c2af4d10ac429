"""A child CLI process: its own process group, stdout read as it streams (pexpect), deadlines."""
from __future__ import annotations

import collections
import fcntl
import logging
import os
import shlex
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterator

import pexpect
from pexpect import fdpexpect

from crewbridge.errors import CLINotFound, CrewTimeout

CHUNK = 1 << 16
MAX_LINE = 8 << 20  # a longer line is cut (memory stays bounded whatever the CLI prints)
STDERR_KEEP = 8192

log = logging.getLogger(__name__)  # crew --verbose shows it: each command run, each line read and sent
_groups: set[int] = set()  # process groups started and not yet ended: end_all() ends them on Ctrl-C
_groups_lock = threading.Lock()
_ending = False


def track_group(pgid: int) -> None:
    """Note a process group crew started (a CLI, a tool's command); once `end_all` ran, end it at once."""
    with _groups_lock:
        if not _ending:
            _groups.add(pgid)
            return
    _signal_group(pgid, signal.SIGKILL)


def untrack_group(pgid: int) -> None:
    """The group was ended and its leader reaped."""
    with _groups_lock:
        _groups.discard(pgid)


def end_all() -> None:
    """Kill every process group crew started that may still run, and any started from now on: for an
    interrupted crew, so that nothing it started outlives it."""
    global _ending
    with _groups_lock:
        _ending = True
        groups = list(_groups)
    for pgid in groups:
        _signal_group(pgid, signal.SIGKILL)



class Child:
    """A running CLI. Read its stdout with `lines()`, write with `send_line()`, end it with `kill()`."""

    def __init__(self, argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
                 stdin: str | None = None, keep_stdin: bool = False, install_hint: str = "") -> None:
        self.argv = argv
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, cwd=cwd, env=env,
                                         start_new_session=True)
        except FileNotFoundError:
            hint = f"; install it with: {install_hint}" if install_hint else "; install it or fix PATH"
            raise CLINotFound(f"'{argv[0]}' not found on PATH{hint}") from None
        self.pgid = self.proc.pid
        track_group(self.pgid)
        self.trace("$", shlex.join(argv))
        _grow_pipe(self.proc.stdout.fileno())
        # pexpect gets its own descriptor: closing it must never close one the pipe object still owns
        # (a later GC of that object would then close whatever reused the number).
        self.out = fdpexpect.fdspawn(os.dup(self.proc.stdout.fileno()), timeout=None, maxread=CHUNK)
        self._stderr: collections.deque[bytes] = collections.deque()
        self._stderr_size = 0
        self._stderr_reader = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_reader.start()
        self.cut_lines = 0
        self._kill_lock = threading.Lock()
        self._ready: collections.deque[str] = collections.deque()  # lines read, not yet taken
        self._pending = b""  # the start of a line whose end has not arrived
        self._cut = False  # bytes of the current line were dropped (it passed MAX_LINE)
        self._ended = False
        if stdin is not None:
            self.trace("<", stdin)
        if stdin is not None or not keep_stdin:
            # From a thread: a CLI that writes while we write would otherwise deadlock on full pipes.
            threading.Thread(target=self._feed, args=(stdin, keep_stdin), daemon=True).start()

    def _feed(self, stdin: str | None, keep_stdin: bool) -> None:
        if stdin is not None:
            self._write(stdin.encode())
        if not keep_stdin:
            self._close_stdin()

    def _write(self, data: bytes) -> None:
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the CLI stopped reading; its exit status and stderr tell why

    def _close_stdin(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def send_line(self, text: str) -> None:
        self.trace("<", text)
        self._write(text.encode() + b"\n")

    def trace(self, mark: str, text: str) -> None:
        """Log a line of the exchange: `$` the command, `<` a line sent, `>` a line read."""
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s[%d] %s %s", os.path.basename(self.argv[0]), self.pgid, mark, text)

    def _drain_stderr(self) -> None:
        for chunk in iter(lambda: self.proc.stderr.read1(CHUNK), b""):
            self._stderr.append(chunk)
            self._stderr_size += len(chunk)
            while self._stderr_size > STDERR_KEEP and len(self._stderr) > 1:
                self._stderr_size -= len(self._stderr.popleft())

    @property
    def stderr(self) -> str:
        if self.proc.poll() is not None:  # all it wrote is in the pipe: let the reader take it
            self._stderr_reader.join(0.5)
        return b"".join(self._stderr).decode("utf-8", "replace")[-STDERR_KEEP:]

    def lines(self, deadline: float | None = None) -> Iterator[str]:
        """stdout lines as they arrive; CrewTimeout (after killing the group) when `deadline` passes."""
        while (line := self.read_line(deadline)) is not None:
            yield line

    def read_line(self, deadline: float | None = None) -> str | None:
        """The next stdout line (None once stdout has ended), without waiting past `deadline`:
        then CrewTimeout, after killing the group. A chunk read is split into all its lines at once.
        """
        while not self._ready:
            if self._ended:
                return None
            self._read_chunk(deadline)
        return self._ready.popleft()

    def _read_chunk(self, deadline: float | None) -> None:
        wait = None if deadline is None else deadline - time.monotonic()
        if wait is not None and wait <= 0:
            self.kill()
            raise CrewTimeout(f"'{os.path.basename(self.argv[0])}' gave no complete reply in time; "
                              "it was stopped (raise --timeout if it needs longer)")
        try:
            chunk = self.out.read_nonblocking(CHUNK, timeout=wait)
        except pexpect.TIMEOUT:
            return
        except (OSError, ValueError):
            if not self.out.closed:
                raise
            self._ended = True  # kill() from another thread (Ctrl-C, close) closed the reader
            return
        except pexpect.EOF:
            self._ended = True
            if self._pending or self._cut:
                self._end_line(b"")
            return
        start = 0
        while (nl := chunk.find(b"\n", start)) >= 0:
            self._end_line(chunk[start:nl])
            start = nl + 1
        self._add(chunk[start:])

    def _add(self, piece: bytes) -> None:
        room = MAX_LINE - len(self._pending)
        if len(piece) > room:  # the rest of a line longer than MAX_LINE is dropped, never copied
            self._cut = True
            piece = piece[:room]
        self._pending += piece

    def _end_line(self, piece: bytes) -> None:
        self._add(piece)
        self.cut_lines += self._cut
        self._line(self._pending)
        self._pending, self._cut = b"", False

    def _line(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace")
        self.trace(">", line)
        self._ready.append(line)

    def wait(self, timeout: float = 5.0) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.wait()

    def kill(self, grace: float = 0.5) -> None:
        """End the whole process group: SIGTERM, then SIGKILL after `grace` seconds. Safe to call
        from several threads at once: descriptors are closed exactly once."""
        with self._kill_lock:
            self._kill(grace)

    def _kill(self, grace: float) -> None:
        if self.proc.poll() is None:
            _signal_group(self.pgid, signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        _signal_group(self.pgid, signal.SIGKILL)  # also any grandchildren left in the group
        self.proc.wait()
        untrack_group(self.pgid)
        self._close_stdin()
        if not self.out.closed:
            self.out.close()
            self.proc.stdout.close()

    def close(self) -> None:
        """Reap after a normal end; ends anything left in the group."""
        self.kill(grace=0)


def _grow_pipe(fd: int) -> None:
    """Make a pipe as large as the system allows. Gemini CLI 0.61 loses all its output after a
    stdout line longer than ~192 KiB (its echo of a long prompt) when the pipe is the default 64 KiB;
    with 1 MiB it is whole (measured up to a 3.3 MB line)."""
    try:
        size = int(Path("/proc/sys/fs/pipe-max-size").read_text())
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, size)
    except (AttributeError, OSError, ValueError):
        pass  # not Linux, or a limit we may not raise: the default pipe still works for most output


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
