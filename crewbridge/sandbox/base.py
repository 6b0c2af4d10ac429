"""What every sandbox mechanism is given (a Confinement) and makes (a Launch)."""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from crewbridge.sandbox.hidden import NOTHING, Hidden, Hiding
from crewbridge.sandbox.state import Prepared, State

if TYPE_CHECKING:
    from crewbridge.sandbox.egress import Egress, Gate

TMP = Path("/tmp")


@dataclass(frozen=True)
class Confinement:
    """What a sandboxed process may do. Everything is readable but what `hiding` hides; it may write
    only beneath `writable` (and its private temp folder), not to `read_only` inside them; a CLI
    also what its `state` lets it write (crewbridge.sandbox.state)."""

    writable: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    visible: tuple[Path, ...] = ()  # folders it reads that a private /tmp must not hide
    network: bool = False  # off: no TCP/UDP, and no Unix socket files (docker.sock, ssh-agent, D-Bus)
    egress: Egress | None = None  # with `network`: only through crew's proxy, to what it allows (else open)
    leave_group: bool = True  # False: it may not start processes that outlive its group (setsid)
    state: Callable[[Mapping[str, str]], State] | None = None  # a CLI's state folders, from its environment
    denied: tuple[str, ...] = ()  # deny_commands globs: the programs they deny whatever the arguments are masked
    hiding: Hiding | None = None  # what of the user's files it must not read (crewbridge.sandbox.hidden)
    hidden: Hidden = NOTHING  # `hiding` for one launch: the places, and what beneath them stays readable

    def resolved(self, prepared: Prepared, hidden: Hidden) -> Confinement:
        """This confinement for one launch: with a CLI's state made ready (crewbridge.sandbox.state)
        and the places `hiding` hides found (crewbridge.sandbox.hidden)."""
        return replace(
            self,
            writable=(*self.writable, *prepared.writable),
            read_only=(*self.read_only, *prepared.read_only),
            state=None,
            hiding=None,
            hidden=hidden,
        )


@dataclass
class Launch:
    """How to start a process inside the sandbox: what Popen is given, and what to undo."""

    argv: list[str]
    env: dict[str, str]
    pass_fds: tuple[int, ...] = ()
    preexec_fn: Callable[[], None] | None = None
    wrapped: bool = False  # a wrapper process leads the group (bwrap): a stop goes to the rest first
    removed: list[Path] = field(default_factory=list)  # its private temp folder and view, removed once it ended
    parent_fds: list[int] = field(default_factory=list)  # closed in crew once the process started
    status: int | None = None  # where an unproven mechanism says whether the sandbox came up (bwrap's),
    # read by crewbridge.sandbox.spawn; open until the process ended
    gate: Gate | None = None  # its way out through crew's proxy (crewbridge.sandbox.egress), closed once it ended
    held: int | None = None  # closed once its gate is open: the process waits for that (bwrap's --block-fd)
    # end_all() (an interrupt) and the process's own end may end it on two threads at once: each
    # descriptor is taken under the lock and closed once, never a number another part opened since.
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def started(self) -> None:
        """The process started (or failed to): crew's copies of what it was handed are closed."""
        with self._lock:
            fds, self.parent_fds = self.parent_fds, []
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    def release(self) -> None:
        """Close `held` (once): the process, held back until its gate opened, goes on."""
        with self._lock:
            fd, self.held = self.held, None
        if fd is not None:
            os.close(fd)

    def ended(self) -> None:
        """The process ended: its private temp folder and its view go (rmtree follows no link)."""
        self.started()
        with self._lock:
            fds, self.status, self.held = (self.status, self.held), None, None
            folders, self.removed = self.removed, []
        for fd in fds:
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        if self.gate is not None:
            self.gate.close()
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)


class Mechanism(Protocol):
    name: str
    detail: str  # which one (bwrap's path, Landlock's ABI), for crew doctor
    unproven: bool  # not yet seen to work here: a launch says whether it came up (Launch.status)

    def launch(self, argv: list[str], env: dict[str, str], cwd: Path, confinement: Confinement) -> Launch:
        """`argv` run inside the sandbox; FileNotFoundError when its program is not on PATH."""

    def holds_network(self) -> str | None:
        """Why it cannot keep a process to crew's proxy here (crewbridge.sandbox.egress); None when it can."""


def program(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> str:
    """The absolute path of `argv`'s program, found as exec would find it (PATH from `env`): a
    wrapper is always found, so a missing CLI must be noticed here. FileNotFoundError,
    PermissionError as starting it unwrapped would raise."""
    name = argv[0]
    if "/" in name:
        path = cwd / name
        if not path.exists():
            raise FileNotFoundError(2, "No such file or directory", name)
        if path.is_dir() or not os.access(path, os.X_OK):
            raise PermissionError(13, "Permission denied", name)
        return str(path)
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    if found is None:
        raise FileNotFoundError(2, "No such file or directory", name)
    return found


SYSTEM_BIN = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


@dataclass(frozen=True)
class Masked:
    """A program's file that the sandbox shows as one that refuses to run (`why` says so)."""

    path: Path  # the file itself (links resolved)
    name: str  # the name the rule denies
    glob: str  # the deny_commands glob


def whole_programs(denied: Sequence[str]) -> list[tuple[str, str]]:
    """The deny globs that deny a program whatever its arguments: `rm *` (name `rm`), `rm*` (names
    `rm*`: rmdir too); as (name pattern, glob). `git push*` denies some arguments only; `*` or a
    pattern that starts with a wildcard would mean every program: neither is masked."""
    found = []
    for glob in denied:
        name = glob[:-2] if glob.endswith(" *") else glob if glob.endswith("*") else ""
        if name and " " not in name and "/" not in name and name[0] not in "*?[":
            found.append((name, glob))
    return found


def masked_programs(denied: Sequence[str], env: Mapping[str, str], spared: Sequence[str] = ()) -> list[Masked]:
    """The files of the programs `denied` globs deny whatever their arguments, on PATH and in the
    usual system folders, links resolved; never one of `spared` (the program started, its
    interpreter). A file whose real name the glob does not match is a multi-call binary (busybox:
    `rm` → busybox) or another program's alias: masking it would mask the others, so it is left."""
    import fnmatch  # for start-up speed: only a run with deny_commands masks anything

    wholes = whole_programs(denied)
    if not wholes:
        return []
    keep = {os.path.realpath(path) for path in spared}
    folders = dict.fromkeys([*(p for p in env.get("PATH", "").split(os.pathsep) if p), *SYSTEM_BIN])
    found: dict[str, Masked] = {}
    for folder in folders:
        listed: list[str] | None = None
        for pattern, glob in wholes:
            if not any(char in pattern for char in "*?["):
                names = [pattern] if os.path.lexists(os.path.join(folder, pattern)) else []
            else:
                if listed is None:
                    try:
                        listed = os.listdir(folder)
                    except OSError:
                        listed = []
                names = fnmatch.filter(listed, pattern)
            for name in names:
                real = os.path.realpath(os.path.join(folder, name))
                if real in keep or real in found or not os.path.isfile(real) or not os.access(real, os.X_OK):
                    continue
                if fnmatch.fnmatchcase(os.path.basename(real), pattern):
                    found[real] = Masked(Path(real), name, glob)
    return list(found.values())


def private_temp() -> Path:
    """A fresh folder of its own for a sandboxed process's temporary files (where no private /tmp
    can be mounted), in crew's own temp folder."""
    import tempfile  # for start-up speed: bubblewrap, the usual mechanism, needs none

    return Path(tempfile.mkdtemp(prefix="crew-sandbox-"))


def under_tmp(path: Path) -> bool:
    return TMP in path.parents


def top_under_tmp(path: Path) -> Path:
    """The folder right under /tmp that holds `path` (/tmp/a/b/c → /tmp/a)."""
    return TMP / path.relative_to(TMP).parts[0]
