"""A child CLI process: its own process group, stdout read as it streams (pexpect), deadlines."""

from __future__ import annotations

import collections
import contextlib
import fcntl
import io
import math
import os
import re
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

from crewbridge.errors import CLINotFound, CrewTimeout, Interrupted, ProviderError
from crewbridge.sandbox import Launch, Sandbox, spawn

CHUNK = 1 << 16
MAX_LINE = 8 << 20  # a longer line is cut (memory stays bounded whatever the CLI prints)
STDERR_KEEP = 8192
STDERR_HEAD = 4096  # the start of stderr is kept too: a CLI's first error comes before its stack trace
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}  # crew stops on each (cli.main)

LOGGER = __name__  # the logger crew --verbose shows: each command run, each line read and sent
DEBUG = 10  # logging.DEBUG: logging itself loads once a CLI started (Child)
# Process groups started and not yet ended, with the sandbox's launch of each (its view and private
# temp folder): end_all() ends them on Ctrl-C and removes what their launches leave.
_groups: dict[int, Launch | None] = {}
_groups_lock = threading.RLock()  # end_all() may run in a signal handler that interrupted its holder
_ending = False
# Threads between the start of a process and its track_group: end_all() waits for them, else one
# forked as crew exits would outlive it, in a group nobody knew of.
_starting: set[int] = set()
_started = threading.Condition(_groups_lock)
START_WAIT = 5.0  # seconds end_all() waits for starts under way (each takes milliseconds)


def track_group(pgid: int, launch: Launch | None = None) -> None:
    """Note a process group crew started (a CLI, a tool's command) and its launch; once `end_all`
    ran, end it at once."""
    with _groups_lock:
        if not _ending:
            _groups[pgid] = launch if launch is not None else _groups.get(pgid)
            return
    _signal_group(pgid, signal.SIGKILL)


def untrack_group(pgid: int) -> None:
    """The group was ended and its leader reaped."""
    with _groups_lock:
        _groups.pop(pgid, None)


@contextlib.contextmanager
def starting() -> Iterator[None]:
    """Around a process's start, up to its track_group: end_all() waits for it to be tracked (and so
    killed). Interrupted once end_all() ran: nothing more starts."""
    me = threading.get_ident()
    with _groups_lock:
        if _ending:
            raise Interrupted("crew is stopping: no process is started any more")
        _starting.add(me)
    try:
        yield
    finally:
        with _groups_lock:
            _starting.discard(me)
            _started.notify_all()


def end_all() -> None:
    """Kill every process group crew started that may still run, and every process it started that
    is not reaped yet (one whose start an interrupt cut short was never tracked), refuse any more
    starts, and remove the views and temp folders of their launches: for an interrupted crew, so
    that nothing it started outlives it (crew exits next, skipping the runs' own clean-up)."""
    global _ending
    me = threading.get_ident()  # the signal handler's thread may have been starting one itself
    with _groups_lock:
        _ending = True
        _started.wait_for(lambda: not _starting - {me}, START_WAIT)
        groups = dict(_groups)
    for pgid in groups:
        _signal_group(pgid, signal.SIGKILL)
    for pid in _children():
        _signal_group(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 1.0  # crew exits next: the CLIs must be gone, not just told
    for pgid in groups:
        while not _reaped(pgid) and time.monotonic() < deadline:
            time.sleep(0.002)
    for launch in groups.values():
        if launch is not None:
            launch.ended()


class Groups:
    """The process groups one run's tools started (run_command, command tools): `end()` kills those
    still running when the run ends or passes its deadline, whatever the tool threads are doing.
    Each is also tracked for end_all(). A call that can be cancelled alone has groups of its own
    within the run's (`parent`): ended with the call, or with the run."""

    def __init__(self, parent: Groups | None = None) -> None:
        self._pgids: set[int] = set()
        self._lock = threading.Lock()
        self._ended = False
        self._parent = parent

    def add(self, pgid: int, launch: Launch | None = None) -> None:
        track_group(pgid, launch)
        with self._lock:
            ended = self._ended
            if not ended:
                self._pgids.add(pgid)
        if ended:
            _signal_group(pgid, signal.SIGKILL)  # the run is over: a tool still starting gets nothing
        elif self._parent is not None:
            self._parent.add(pgid, launch)

    def discard(self, pgid: int) -> None:
        """The group was ended and its leader reaped by the tool itself."""
        with self._lock:
            self._pgids.discard(pgid)
        if self._parent is not None:
            self._parent.discard(pgid)
        untrack_group(pgid)

    def end(self) -> None:
        with self._lock:
            self._ended = True
            pgids, self._pgids = list(self._pgids), set()
        for pgid in pgids:
            _signal_group(pgid, signal.SIGKILL)


def _popen(
    argv: list[str], *, env: dict[str, str] | None, cwd: Path | None, sandbox: Sandbox | None, passed: Collection[str]
) -> tuple[subprocess.Popen[bytes], Launch]:
    """The CLI `argv` running in a process group of its own (inside `sandbox` when given), with
    pipes for stdin, stdout and stderr, and of the secrets in `env` only those `passed`
    (crewbridge.system.childenv). OSError when it cannot be started."""
    proc, launch = spawn(
        [_arg(arg) for arg in argv],
        sandbox=sandbox,
        env=env,
        cwd=cwd,
        passed=passed,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    _grow_pipe(proc.stdout.fileno())
    return proc, launch


# The patterns that read a failed CLI's stderr are kept as text, compiled at their first use (re's
# own cache): for start-up speed, a CLI starts without compiling them (~2 ms), and most runs never do.

# What a CLI writes on stderr that never says what went wrong: stack frames (node's "at …", Python's
# Traceback and its frames, Rust's numbered backtrace), a location alone, a caret under code.
_FRAME = (
    r"\s*(at\s|File \".*\", line \d+|\d+: |Traceback \(most recent call last\):|Stack backtrace:|\^+\s*$)"
    r"|\S+:\d+(:\d+)?\)?\s*$"
)
# A line that says it is the error: "Error: …", "TypeError: …", "sqlite3.OperationalError: …", "error: …",
# "fatal: …", node's "EROFS: …".
_LABELLED = r"([\w.]*(Error|Exception)|error|fatal|Fatal|FATAL|ERROR|E[A-Z]{2,})\s*:"
_ERROR_WORD = (
    r"(?i)\b(error|failed|cannot|can't|could not|not found|denied|refused|missing|must|invalid|unable|read-only)\b"
)
# A write the sandbox refused: the kernel's words (bubblewrap's read-only mounts, Landlock's EACCES)
# as node, Python, Rust and sqlite put them; and where, when the CLI says.
_REFUSED_WRITE = (
    r"(?i)(read-only file system|attempt to write a readonly database|unable to open database file"
    r"|\[Errno 13\] Permission denied|EACCES: permission denied|Permission denied \(os error 13\))"
)
_QUOTED_PATH = r"""['"](/[^'"\n]+)['"]"""
# node's recursive mkdir says ENOENT when the kernel refused to make a folder whose parent exists
_MKDIR_REFUSED = r"ENOENT: no such file or directory, mkdir '(/[^'\n]+)'"


def error_line(stderr: str) -> str:
    """The line of a CLI's stderr that says what went wrong: the first that says it is an error,
    else the first with an error's words (not a heading ending in ':'), else the last line; never a
    stack frame, and an indented line only when nothing else is left."""
    lines = [line for line in stderr.splitlines() if line.strip() and not re.match(_FRAME, line)]
    ranked = [line for line in lines if not line[0].isspace()] or lines
    if not ranked:
        return "no message on stderr"
    chosen = next((line for line in ranked if re.match(_LABELLED, line)), None) or next(
        (line for line in ranked if re.search(_ERROR_WORD, line) and not line.rstrip().endswith(":")), ranked[-1]
    )
    return chosen.strip()


def refused_write(stderr: str) -> tuple[str, str | None] | None:
    """When a CLI's stderr says a write was refused (read-only, not permitted): the words that say
    so, and the path it tried when it names one (None when it does not)."""
    for index, line in enumerate(lines := stderr.splitlines()):
        found = re.search(_REFUSED_WRITE, line)
        if found:
            nearby = "\n".join(lines[index : index + 8])  # node puts the path on a line of its own
            path = re.search(_QUOTED_PATH, nearby)
            return found.group(1), path.group(1) if path else None
        made = re.search(_MKDIR_REFUSED, line)
        if made and Path(made.group(1)).parent.is_dir():
            return "a folder could not be made", made.group(1)
    return None


def _arg(arg: str) -> str:
    """An argument the kernel can take: a file name that was not UTF-8 (its bytes held as lone
    surrogates) stays, to become those bytes again; any other lone surrogate (a model's "\\ud800")
    is written as a backslash escape, never an error."""
    try:
        os.fsencode(arg)
    except UnicodeEncodeError:
        return arg.encode("utf-8", "backslashreplace").decode("utf-8")
    return arg


def _encoded(text: str) -> bytes:
    """Text for a CLI's stdin: UTF-8, a lone surrogate (a name that was not UTF-8, a model's
    "\\udc80") written as a backslash escape, so the CLI and its model read it escaped."""
    return text.encode("utf-8", "backslashreplace")


def _grow_pipe(fd: int) -> None:
    """Make a pipe as large as the system allows. Gemini CLI 0.61 loses all its output after a
    stdout line longer than ~192 KiB (its echo of a long prompt) when the pipe is the default 64 KiB;
    with 1 MiB it is whole (measured up to a 3.3 MB line)."""
    try:
        with open("/proc/sys/fs/pipe-max-size") as limit:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, int(limit.read()))
    except (AttributeError, OSError, ValueError):
        pass  # not Linux, or a limit we may not raise: the default pipe still works for most output


def _children() -> list[int]:
    """The processes this one started, of any thread, that are not reaped yet (the kernel's list)."""
    pids: list[int] = []
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError), open(f"/proc/self/task/{task}/children") as listed:
            pids += [int(pid) for pid in listed.read().split()]
    return pids


def _reaped(pid: int) -> bool:
    """Reap child `pid` if it has died (the leader of a group crew started); True once it is gone.
    As Child.kill does, the wait is for the leader: the rest of its group got the same SIGKILL."""
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:  # reaped already, by its Popen
        return True


class Child:
    """A running CLI. Read its stdout with `lines()`, write with `send_line()`, end it with `kill()`."""

    def __init__(
        self,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        stdin: str | None = None,
        keep_stdin: bool = False,
        install_hint: str = "",
        sandbox: Sandbox | None = None,
        passed: Collection[str] = (),  # names in `env` it gets although crewbridge.system.childenv withholds them
    ) -> None:
        self.argv = argv
        self.sandboxed = sandbox is not None
        with starting():  # tracked before an interrupt's end_all() goes on
            try:
                self.proc, self._launch = _popen(argv, env=env, cwd=cwd, sandbox=sandbox, passed=passed)
            except FileNotFoundError:
                hint = f"; install it with: {install_hint}" if install_hint else "; install it or fix PATH"
                raise CLINotFound(f"'{argv[0]}' not found on PATH{hint}") from None
            except OSError as exc:  # there, but not runnable: not executable, a folder, a bad #! line
                raise ProviderError(
                    f"'{argv[0]}' cannot be started ({exc.strerror}); make it an executable program or fix the command"
                ) from None
            self.pgid = self.proc.pid
            track_group(self.pgid, self._launch)
        pipe_in, pipe_out, pipe_err = self.proc.stdin, self.proc.stdout, self.proc.stderr
        assert pipe_in is not None and pipe_out is not None and isinstance(pipe_err, io.BufferedReader)  # _popen's
        self._stdin = pipe_in
        os.set_blocking(pipe_in.fileno(), False)  # a write waits in poll(), bounded by its deadline
        self._stdin_lock = threading.Lock()  # held by a write, and by kill() closing stdin
        self._stderr_pipe = pipe_err
        self._start_trace()
        # pexpect reads stdout; imported here, after the CLI started, so its ~20 ms import overlaps
        # the CLI's own start-up. It gets the only descriptor of the pipe, closed once by _release().
        from pexpect import EOF, TIMEOUT, fdpexpect

        self._eof_error, self._timeout_error = EOF, TIMEOUT  # for _read_chunk, without an import per chunk
        self.out = fdpexpect.fdspawn(os.dup(pipe_out.fileno()), timeout=None, maxread=CHUNK, use_poll=True)
        pipe_out.close()
        self._wake_r, self._wake_w = os.pipe()  # kill() wakes a reader blocked on a silent CLI
        self._poll = select.poll()  # unlike select(), any descriptor number
        self._poll.register(self.out.child_fd, select.POLLIN)
        self._poll.register(self._wake_r, select.POLLIN)
        self._reading = threading.Lock()  # held while reading: the descriptors stay open meanwhile
        self._killed = False
        self._stderr: collections.deque[bytes] = collections.deque()
        self._stderr_head, self._stderr_cut = b"", False
        self._stderr_size = 0
        self._stderr_reader = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_reader.start()
        self.cut_lines = 0
        self._kill_lock = threading.Lock()
        self._watched: dict[int, Callable[[], None]] = {}  # see watch()
        self._ready: collections.deque[str] = collections.deque()  # lines read, not yet taken
        self._pending = b""  # the start of a line whose end has not arrived
        self._cut = False  # bytes of the current line were dropped (it passed MAX_LINE)
        self._ended = False
        if not keep_stdin:  # else stdin stays open for send_line(), or for a feed() later
            self.feed(stdin)

    def feed(self, text: str | None) -> None:
        """Write `text` (if any) to stdin and close it: the whole input of a CLI that reads stdin to
        its end. From a thread: a CLI that writes while we write would otherwise deadlock on full pipes."""
        if text is not None:
            self.trace("<", text)
        threading.Thread(target=self._feed, args=(text,), daemon=True).start()

    def _feed(self, text: str | None) -> None:
        leave_signals_to_main()
        if text is not None:
            self._write(_encoded(text), None)
        self._close_stdin()

    def _write(self, data: bytes, deadline: float | None) -> None:
        """Write `data` to stdin as the CLI takes it; CrewTimeout (after killing the group) when it has
        not taken it all by `deadline`. A CLI that stopped reading, or was killed, is let be: its
        exit status and stderr say why."""
        view = memoryview(data)
        while view:
            with self._stdin_lock:
                if self._stdin.closed:
                    return  # kill() closed it from another thread (Ctrl-C, a stopped reply)
                fd = self._stdin.fileno()
                try:
                    view = view[os.write(fd, view) :]
                except BlockingIOError:
                    pass  # the pipe is full: wait below for the CLI to read
                except OSError:
                    return  # the CLI closed its stdin or exited
            if view and not self._writable(fd, deadline):
                self.kill()
                raise CrewTimeout(
                    f"'{os.path.basename(self.argv[0])}' did not read its input in time; "
                    "it was stopped (raise --timeout if it needs longer)"
                )

    def _writable(self, fd: int, deadline: float | None) -> bool:
        """Wait until stdin (`fd`) takes more, the CLI is killed or gone (True), or `deadline` passes (False)."""
        wait = None if deadline is None else deadline - time.monotonic()
        if wait is not None and wait <= 0:
            return False
        writable = select.poll()
        writable.register(fd, select.POLLOUT)
        with self._kill_lock:
            if self._killed:
                return True
            writable.register(self._wake_r, select.POLLIN)  # kill() writes to it: a write waits no more
        return bool(writable.poll(None if wait is None else max(1, math.ceil(wait * 1000))))

    def _close_stdin(self) -> None:
        with self._stdin_lock:  # _feed and kill() may close it at once: a buffered pipe's close is not thread-safe
            try:
                self._stdin.close()
            except OSError:
                pass

    def send_line(self, text: str, deadline: float | None = None) -> None:
        """Write `text` and a newline to stdin; CrewTimeout (after killing the group) when the CLI has
        not read it all by `deadline`."""
        self.trace("<", text)
        self._write(_encoded(text) + b"\n", deadline)

    def watch(self, fd: int, ready: Callable[[], None]) -> None:
        """While read_line() waits for a line, call `ready()` on its thread whenever `fd` is readable:
        work that the thread reading this CLI does between its lines (several descriptors may be)."""
        self._poll.register(fd, select.POLLIN)
        self._watched[fd] = ready

    def _start_trace(self) -> None:
        """Trace the exchange from now on, the command first. For start-up speed, logging (~3 ms,
        with traceback and textwrap) and shlex load here, once the CLI started, as pexpect does."""
        import logging
        import shlex

        self._log = logging.getLogger(LOGGER)
        self._command: str | None = shlex.join(self._launch.argv)  # traced once, before the first line read or sent
        self.trace()

    def trace(self, mark: str = "", text: str = "") -> None:
        """Log a line of the exchange: `$` the command (once, first), `<` a line sent, `>` a line read."""
        log = self._log
        if not log.isEnabledFor(DEBUG):
            return
        name = os.path.basename(self.argv[0])
        if self._command is not None:
            log.debug("%s[%d] $ %s", name, self.pgid, self._command, extra={"whole": True})  # never cut
            self._command = None
        if mark:
            log.debug("%s[%d] %s %s", name, self.pgid, mark, text)

    def _drain_stderr(self) -> None:
        leave_signals_to_main()
        for chunk in iter(lambda: self._stderr_pipe.read1(CHUNK), b""):
            if len(self._stderr_head) < STDERR_HEAD:
                self._stderr_head += chunk[: STDERR_HEAD - len(self._stderr_head)]
            self._stderr.append(chunk)
            self._stderr_size += len(chunk)
            while self._stderr_size > STDERR_KEEP and len(self._stderr) > 1:
                self._stderr_size -= len(self._stderr.popleft())
                self._stderr_cut = True

    @property
    def stderr(self) -> str:
        """What the CLI wrote on stderr: all of it, or its start and its last STDERR_KEEP bytes."""
        if self.proc.poll() is not None:  # all it wrote is in the pipe: let the reader take it
            self._stderr_reader.join(0.5)
        tail = b"".join(self._stderr).decode("utf-8", "replace")[-STDERR_KEEP:]
        if not self._stderr_cut:
            return tail
        return self._stderr_head.decode("utf-8", "replace") + "\n[…]\n" + tail

    def failure(self, name: str) -> str:
        """Why CLI `name` ended (once it has): its exit status and the line of its stderr that says
        what went wrong; inside crew's sandbox, when that is a write refused there, crew's own line
        saying so and what to do."""
        code = self.wait()
        stderr = self.stderr
        refused = refused_write(stderr) if self.sandboxed else None
        if refused is not None:
            what, path = refused
            fix = (
                "if that is where it keeps sessions, logs or caches, list that folder in its provider's state_dirs"
                if path
                else "list the folder it keeps its sessions, logs or caches in, in its provider's state_dirs"
            )
            return (
                f"{name} could not write its own state inside crew's sandbox ({what}"
                f"{f': it tried to write {path}' if path else ''}); {fix} in crew.yaml (never one holding its "
                "settings: docs/sandbox.md), or pass --sandbox off"
            )
        return f"{name} exited with status {code}: {error_line(stderr)}"

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
            for ready in self._read_chunk(deadline):
                ready()
        return self._ready.popleft()

    def _read_chunk(self, deadline: float | None) -> list[Callable[[], None]]:
        """Wait for stdout and take what it has; what to call for the watched descriptors that are readable."""
        wait = None if deadline is None else deadline - time.monotonic()
        if wait is not None and wait <= 0:
            self.kill()
            raise CrewTimeout(
                f"'{os.path.basename(self.argv[0])}' gave no complete reply in time; "
                "it was stopped (raise --timeout if it needs longer)"
            )
        with self._reading:
            if self._killed:
                self._release()
                return []
            ready = self._poll.poll(None if wait is None else max(1, math.ceil(wait * 1000)))
            if not ready:
                return []  # the deadline passed: the next call ends it
            if any(fd == self._wake_r for fd, _ in ready):
                self._release()  # kill() from another thread (Ctrl-C, a stopped reply)
                return []
            woken = [self._watched[fd] for fd, _ in ready if fd in self._watched]
            try:
                chunk = self.out.read_nonblocking(CHUNK, timeout=0)
            except self._timeout_error:
                return woken
            except self._eof_error:
                self._ended = True
                if self._pending or self._cut:
                    self._end_line(b"")
                return woken
        start = 0
        while (nl := chunk.find(b"\n", start)) >= 0:
            self._end_line(chunk[start:nl])
            start = nl + 1
        self._add(chunk[start:])
        return woken

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
        if not wait_exit(self.proc, timeout):
            self.kill()
        return self.proc.wait()

    def end(self, timeout: float) -> None:
        """End the CLI as its own end would: stdin closed, and up to `timeout` seconds for it to exit
        by itself (its shutdown saves its session and flushes its telemetry), then the whole group."""
        self._close_stdin()
        self.wait(timeout)
        self.close()

    def kill(self, grace: float = 0.5) -> None:
        """End the whole process group: SIGTERM, then SIGKILL after `grace` seconds. Safe from any
        thread, and more than once: a reader blocked on the CLI is woken and ends its lines."""
        with self._kill_lock:
            if self._killed:
                return
            self._kill(grace)
            os.write(self._wake_w, b"!")  # before _killed: a reader that sees it may close the pipe
            self._killed = True
        if self._reading.acquire(blocking=False):  # else the reader in progress releases them
            try:
                self._release()
            finally:
                self._reading.release()

    def _kill(self, grace: float) -> None:
        if self.proc.poll() is None:
            if self._launch.wrapped:  # the wrapper would die at once and take the CLI with it
                _signal_members(self.pgid, signal.SIGTERM, but=self.proc.pid)
            else:
                _signal_group(self.pgid, signal.SIGTERM)
            wait_exit(self.proc, grace)
        _signal_group(self.pgid, signal.SIGKILL)  # also any grandchildren left in the group
        self.proc.wait()
        untrack_group(self.pgid)
        self._launch.ended()
        self._close_stdin()

    def _release(self) -> None:
        """Close the reading side (with the reading lock held): no line comes after this."""
        self._ended = True
        if not self.out.closed:
            self.out.close()
            os.close(self._wake_r)
            os.close(self._wake_w)

    def close(self) -> None:
        """Reap after a normal end; ends anything left in the group."""
        self.kill(grace=0)


def leave_signals_to_main() -> None:
    """Block Ctrl-C and the stop signals in the calling thread (one that never starts a process: a
    child would inherit the mask). The kernel hands a signal to any thread that does not block it,
    Python acts on it only in the main thread, and a main thread waiting in poll() is woken only
    by a signal handed to it: one caught by a reader thread left Ctrl-C unanswered."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)


def wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait up to `timeout` seconds for `proc` to exit (True when it has), waking the moment it does:
    Popen.wait(timeout) polls in sleeps that grow to 50 ms, so a CLI that takes 25 ms to exit
    was seen gone after 32 ms, one that takes 33 ms after 64 ms."""
    if proc.poll() is not None:
        return True
    try:
        fd = os.pidfd_open(proc.pid)  # Linux 5.3+: readable once the process has exited
    except (AttributeError, OSError):
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        exited = select.poll()
        exited.register(fd, select.POLLIN)
        exited.poll(max(0, math.ceil(timeout * 1000)))
    finally:
        os.close(fd)
    return proc.poll() is not None


def _signal_members(pgid: int, sig: int, *, but: int) -> None:
    """Send `sig` to every process of group `pgid` but `but` (its sandbox's wrapper, which exits
    once the process it wraps has): the CLI saves its session on SIGTERM before it ends."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == but:
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()  # after the command, which may hold anything
        except OSError:
            continue  # ended meanwhile
        if int(fields[2]) == pgid:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry.name), sig)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
