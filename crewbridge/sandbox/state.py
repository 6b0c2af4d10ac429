"""A CLI's own state inside crew's sandbox: what it may write there (its data), and the view through
which it sees the folder that holds its settings.

Writable state is data, never configuration. A CLI keeps both in one folder (~/.claude holds its
sessions beside settings.json; $CODEX_HOME its sessions beside config.toml and .env), and what it
reads there as settings, environment or code runs later, outside any sandbox, when the user next
starts it. So inside the sandbox that folder is read-only, nothing can be made in it, and the CLI
sees it through a view: a fresh folder of the launch's own, named by the variable the CLI finds its
folder by (CLAUDE_CONFIG_DIR, CODEX_HOME, GEMINI_CLI_HOME, QWEN_HOME), in which

- each entry of the real folder is a symbolic link to it: readable, and writable only where it is
  one of the CLI's `data` (sessions, logs), which crew makes first and the sandbox grants;
- each `private` entry is left out: what the CLI must write but must never find again (the shell
  snapshots it sources, the environment scripts of a session, an extension store that replays its
  transactions at start) it makes anew in the view;
- each of its `copies` is a copy of the real file, its own: a registry the CLI rewrites by a temp
  file and a rename under a lock it makes beside the file (gemini's projects.json) reads as it is
  and takes that lock and rename in the view. A link would not do: the lock is made beside the
  file the link leads to, where nothing can be made, and a CLI that waits for that lock waits for
  ever. A lock left beside the real file (`<name>.lock`, by a run of the CLI that is still going
  or was killed) is left out of the view with it;
- whatever the CLI makes or replaces there (a planted .env, a file it rewrites by rename, a lock)
  stays in the view, which is removed once the process ended: no later start reads it.

The kernel holds it under every mechanism: the links lead to places mounted read-only (bubblewrap)
or beneath no granted folder (Landlock, sandbox-exec), and a link cannot be followed to write them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

# Where views are made when the machine has it: a view lives as long as one process, and making its
# links in memory costs ~8 µs each here, against ~0.3-0.7 ms on /tmp's disk.
_IN_MEMORY = "/dev/shm"


@dataclass(frozen=True)
class State:
    """Where a CLI keeps its own state, and what of it the CLI may write inside crew's sandbox."""

    home: Path | None = None  # its state folder, seen through a view when `variable` is given
    variable: str = ""  # the variable the CLI finds `home` by; inside the sandbox it names the view
    within: str = ""  # `variable` names the folder holding `home` under this name (GEMINI_CLI_HOME: .gemini)
    data: tuple[Path, ...] = ()  # folders it writes as data (sessions, logs): writable, made first
    data_files: tuple[Path, ...] = ()  # files it writes in place as data: writable, made first, empty
    private: tuple[str, ...] = ()  # entries of `home` it writes but must never read again: left out of the view
    copies: tuple[str, ...] = ()  # files of `home` it rewrites under a lock: a copy of its own in the view
    also: tuple[tuple[str, Path], ...] = ()  # more entries of the view, as links (claude's ~/.claude.json)
    view_env: tuple[tuple[str, str], ...] = ()  # variables naming an entry of the view (CODEX_SQLITE_HOME)
    read_only: tuple[Path, ...] = ()  # inside `data`: kept read-only where the mechanism can (bubblewrap)
    # The files it reads to log in (its credentials): the sandbox hides them from every other CLI and
    # from crew's commands, not from it (crewbridge.sandbox.hidden).
    login: tuple[Path, ...] = ()


@dataclass
class Prepared:
    """A State made ready for one launch: what the process may write, what stays read-only inside
    that, the variables that lead the CLI to its view, and the view (removed once the process ended)."""

    writable: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    view: Path | None = None


def prepare(state: State) -> Prepared:
    """Make `state`'s data places (so that they can be granted), its read-only ones (so that they
    cannot be planted: a folder when the name has no suffix, `{}` for JSON, else empty, when the
    folder it would be in exists) and its view."""
    for folder in state.data:
        folder.mkdir(parents=True, exist_ok=True)
    for path in state.data_files:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8"):
            pass
    for path in state.read_only:
        _make_empty(path)
    writable = (*state.data, *state.data_files)
    read_only = tuple(path for path in state.read_only if path.exists())
    if state.home is None or not state.variable:
        return Prepared(writable, read_only)
    view = Path(tempfile.mkdtemp(prefix="crew-view-", dir=_IN_MEMORY if os.access(_IN_MEMORY, os.W_OK) else None))
    try:
        inner = _view(state, view)
    except BaseException:
        shutil.rmtree(view, ignore_errors=True)
        raise
    env = {state.variable: str(view), **{name: str(inner / entry) for name, entry in state.view_env}}
    return Prepared((*writable, view), read_only, env, view)


def _view(state: State, view: Path) -> Path:
    """Fill `view` for `state` (see the module's docstring); the folder that stands for its home."""
    assert state.home is not None
    state.home.mkdir(parents=True, exist_ok=True)
    inner = view
    if state.within:  # the rest of the folder that holds it is seen as it is
        _link_entries(state.home.parent, view, leave_out={state.within})
        inner = view / state.within
        inner.mkdir()
    locks = {f"{name}.lock" for name in state.copies}
    _link_entries(state.home, inner, leave_out={*state.private, *state.copies, *locks})
    for name in state.copies:
        _copy(state.home / name, inner / name)
    for name, target in state.also:
        with contextlib.suppress(FileExistsError):
            (inner / name).symlink_to(target)
    return inner


def _link_entries(real: Path, view: Path, *, leave_out: set[str]) -> None:
    for name in os.listdir(real):
        if name not in leave_out:
            (view / name).symlink_to(real / name)


def _copy(real: Path, copy: Path) -> None:
    """`real`'s bytes in a new file `copy`; nothing where `real` is not a plain file (absent, or a
    link: never followed) and the CLI makes the file anew."""
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return
    with open(fd, "rb") as source:
        if stat.S_ISREG(os.fstat(source.fileno()).st_mode):
            with open(copy, "xb") as target:
                shutil.copyfileobj(source, target)


def _make_empty(path: Path) -> None:
    if path.exists():
        return
    with contextlib.suppress(FileExistsError, FileNotFoundError):
        if not path.suffix:
            path.mkdir(parents=True)
            return
        with open(path, "x", encoding="utf-8") as new:
            new.write("{}\n" if path.suffix in (".json", ".jsonc") else "")
