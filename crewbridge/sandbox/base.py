"""What every sandbox mechanism is given (a Confinement) and makes (a Launch)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

TMP = Path("/tmp")


@dataclass(frozen=True)
class State:
    """Where a CLI keeps its own state: folders it must write, and the files (or folders) in them that
    make code run later (hooks, MCP servers, notify commands), kept read-only inside the sandbox. A
    missing one is made first, empty (`{}` for JSON; a folder when its name has no suffix), so that
    it cannot be planted there."""

    dirs: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()


@dataclass(frozen=True)
class Confinement:
    """What a sandboxed process may do. Everything is readable; it may write only beneath
    `writable` (and its private temp folder), not to `read_only` inside them."""

    writable: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    visible: tuple[Path, ...] = ()  # folders it reads that a private /tmp must not hide
    network: bool = False  # off: no TCP/UDP, and no Unix socket files (docker.sock, ssh-agent, D-Bus)
    leave_group: bool = True  # False: it may not start processes that outlive its group (setsid)
    state: Callable[[Mapping[str, str]], State] | None = None  # a CLI's state folders, from its environment

    def resolved(self, env: Mapping[str, str]) -> Confinement:
        """This confinement with the CLI's state folders added (made when missing, so that they can
        be mounted), and their read-only files (made when missing: see State)."""
        if self.state is None:
            return self
        state = self.state(env)
        for folder in state.dirs:
            folder.mkdir(parents=True, exist_ok=True)
        for path in state.read_only:
            if path.exists() or not path.parent.is_dir():
                continue
            with contextlib.suppress(FileExistsError):
                if not path.suffix:
                    path.mkdir()
                    continue
                with open(path, "x", encoding="utf-8") as new:
                    new.write("{}\n" if path.suffix in (".json", ".jsonc") else "")
        return Confinement(
            writable=(*self.writable, *state.dirs),
            read_only=(*self.read_only, *(p for p in state.read_only if p.exists())),
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
    temp: Path | None = None  # its private temp folder, removed once it ended
    parent_fds: list[int] = field(default_factory=list)  # closed in crew once the process started
    status: int | None = None  # where an unproven mechanism says whether the sandbox came up (bwrap's),
    # read by crewbridge.sandbox.spawn; open until the process ended

    def started(self) -> None:
        """The process started (or failed to): crew's copies of what it was handed are closed."""
        fds, self.parent_fds = self.parent_fds, []
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    def ended(self) -> None:
        """The process ended: its private temp folder goes."""
        self.started()
        if self.status is not None:
            with contextlib.suppress(OSError):
                os.close(self.status)
            self.status = None
        if self.temp is not None:
            shutil.rmtree(self.temp, ignore_errors=True)
            self.temp = None


class Mechanism(Protocol):
    name: str
    detail: str  # which one (bwrap's path, Landlock's ABI), for crew doctor
    unproven: bool  # not yet seen to work here: a launch says whether it came up (Launch.status)

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
