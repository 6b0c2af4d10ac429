"""Making a CLI's process: the one place crew does it (for process.Child), each in a process group of
its own with pipes for stdin, stdout and stderr. Also the CLIs started ahead from the launch plan
(crewbridge.early), before crew has loaded: the first Child that asks for exactly the same command,
environment and directory takes one over; end_ahead() ends those none took."""
from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import threading

TYPE_CHECKING = False  # typing itself is ~5 ms to import; type checkers read this name as True
if TYPE_CHECKING:
    from collections.abc import Mapping

    Popen = subprocess.Popen[bytes]
    # (argv, environment, working directory): what makes two starts the same process
    Spec = tuple[tuple[str, ...], dict[str, str], str | None]

_ahead: list[tuple[Spec, Popen]] = []
_asked: list[Spec] | None = None  # while recording: what popen() was asked for
_lock = threading.RLock()  # end_ahead() may run in a signal handler that interrupted its holder


def popen(argv: list[str], *, env: Mapping[str, str] | None,
          cwd: str | os.PathLike[str] | None) -> tuple[Popen, bool]:
    """The CLI `argv` running in `cwd` with `env` (None: this process's), and whether it was
    started ahead with exactly these (else it is new). OSError when it cannot be started."""
    spec = _spec(argv, env, cwd)
    with _lock:
        if _asked is not None:
            _asked.append(spec)
        for index, (started, proc) in enumerate(_ahead):
            if started == spec:
                del _ahead[index]
                return proc, True
    return _start(spec), False


def ahead(specs: list[Spec]) -> None:
    """Start these CLIs now, for popen() to hand out. One that cannot start is left out: the Child
    that asks for it then starts it again and reports what is wrong."""
    for spec in specs:
        try:
            proc = _start(spec)
        except OSError:
            continue
        with _lock:
            _ahead.append((spec, proc))


def end_ahead() -> None:
    """End the CLIs started ahead that no Child took, and reap them."""
    with _lock:
        left = [proc for _, proc in _ahead]
        _ahead.clear()
    for proc in left:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass  # gone already
        proc.wait()


def record() -> None:
    """Note from now on what popen() is asked for (recorded() hands it over)."""
    global _asked
    with _lock:
        _asked = []


def recorded() -> list[Spec]:
    """What popen() was asked for since record(), in order; recording stops."""
    global _asked
    with _lock:
        asked, _asked = _asked or [], None
    return asked


def _spec(argv: list[str], env: Mapping[str, str] | None, cwd: str | os.PathLike[str] | None) -> Spec:
    return tuple(argv), dict(os.environ if env is None else env), None if cwd is None else os.fspath(cwd)


def _start(spec: Spec) -> Popen:
    argv, env, cwd = spec
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=cwd, env=env, start_new_session=True)
    _grow_pipe(proc.stdout.fileno())
    return proc


def _grow_pipe(fd: int) -> None:
    """Make a pipe as large as the system allows. Gemini CLI 0.61 loses all its output after a
    stdout line longer than ~192 KiB (its echo of a long prompt) when the pipe is the default 64 KiB;
    with 1 MiB it is whole (measured up to a 3.3 MB line)."""
    try:
        with open("/proc/sys/fs/pipe-max-size") as limit:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, int(limit.read()))
    except (AttributeError, OSError, ValueError):
        pass  # not Linux, or a limit we may not raise: the default pipe still works for most output
