"""What every sandbox mechanism is given (a Confinement) and makes (a Launch)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from crewbridge.sandbox.state import Prepared, State

TMP = Path("/tmp")


@dataclass(frozen=True)
class Confinement:
    """What a sandboxed process may do. Everything is readable; it may write only beneath
    `writable` (and its private temp folder), not to `read_only` inside them; a CLI also what its
    `state` lets it write (crewbridge.sandbox.state)."""

    writable: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    visible: tuple[Path, ...] = ()  # folders it reads that a private /tmp must not hide
    network: bool = False  # off: no TCP/UDP, and no Unix socket files (docker.sock, ssh-agent, D-Bus)
    leave_group: bool = True  # False: it may not start processes that outlive its group (setsid)
    state: Callable[[Mapping[str, str]], State] | None = None  # a CLI's state folders, from its environment

    def resolved(self, prepared: Prepared) -> Confinement:
        """This confinement with a CLI's state made ready for one launch (crewbridge.sandbox.state)."""
        return Confinement(
            writable=(*self.writable, *prepared.writable),
            read_only=(*self.read_only, *prepared.read_only),
            visible=self.visible,
            network=self.network,
            leave_group=self.leave_group,
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

    def started(self) -> None:
        """The process started (or failed to): crew's copies of what it was handed are closed."""
        fds, self.parent_fds = self.parent_fds, []
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    def ended(self) -> None:
        """The process ended: its private temp folder and its view go (rmtree follows no link)."""
        self.started()
        folders, self.removed = self.removed, []
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)


class Mechanism(Protocol):
    name: str
    detail: str  # which one (bwrap's path, Landlock's ABI), for crew doctor

    def launch(self, argv: list[str], env: dict[str, str], cwd: Path, confinement: Confinement) -> Launch:
        """`argv` run inside the sandbox; FileNotFoundError when its program is not on PATH."""


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
