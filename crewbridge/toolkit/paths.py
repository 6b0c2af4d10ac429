"""Paths a tool may touch: everything resolves inside the working directory, symlinks included.

crew's own tools resolve a path with `place`: the kernel resolves it beneath the working directory's
descriptor (crewbridge.system.beneath) and the tool then works on the descriptor it got, never on the name
again. `resolve_inside` judges a name that another program opens itself (a CLI's own tools)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from crewbridge.errors import CrewError
from crewbridge.system import beneath
from crewbridge.system.beneath import printable
from crewbridge.toolkit.registry import ToolFailure

WORKDIR = "the working directory"
ROOT = "the additional directory"
SKILL = "the skill folder"
GIT = b".git"  # git's own folder (or, in a worktree, the file naming it)
ESCAPED = re.compile(rb"\\x([0-9a-fA-F]{2})")  # a byte that is not UTF-8, as names are shown


class PathOutside(CrewError, ToolFailure):
    """A path that leads outside the working directory (by `..`, an absolute path or a symlink)."""


def resolve_inside(workdir: Path, user_path: str, roots: Iterable[Path] = ()) -> Path:
    """The real path `user_path` names, relative to `workdir`; refused if it leads outside (and
    outside every one of `roots`, folders used as the working directory is: an editor's).

    Symlinks are followed (also dangling ones and symlinked parent directories), so the answer is
    where a read or write would land now. Paths that do not exist yet resolve through their existing
    parents. A judgement by name, for a path another program opens; crew's tools use `place`.
    """
    if "\0" in user_path:
        raise ToolFailure(f"path {user_path!r} contains a NUL character; give a plain file path")
    root = Path(os.path.realpath(workdir))
    if not root.is_dir():
        raise ToolFailure(f"working directory {root} does not exist; start crew in an existing directory")
    target = Path(root, user_path or ".")  # an absolute user_path replaces root here
    real = Path(os.path.realpath(target))
    if real.is_relative_to(root) or any(real.is_relative_to(os.path.realpath(other)) for other in roots):
        return real
    through = None if not Path(os.path.normpath(target)).is_relative_to(root) else str(real)
    raise _outside(user_path, str(root), WORKDIR, through)


@dataclass(frozen=True)
class Place:
    """Where a path a tool was given leads: a directory, open (the working directory, or the skill
    folder an absolute path is in), and the path beneath it."""

    user: str  # the path as the model wrote it
    fd: int  # the directory (place() closes it)
    rel: bytes  # the path beneath it
    top: bytes  # the directory's real path
    workdir: bytes  # the working directory's real path: shown paths are relative to it
    label: str  # what the directory is, for messages

    def open(self, flags: int) -> int:
        """A new descriptor for the path, opened with `flags` (symlinks followed while inside)."""
        try:
            return beneath.open_beneath(self.fd, self.rel, flags, inside=self.top)
        except beneath.Outside:
            raise self.outside() from None

    def parent(self, make_dirs: bool = False) -> tuple[int, bytes]:
        """(a new descriptor of the folder the path ends in, the name in it): where a write lands.
        Never in a `.git` folder, by name or through a symlink: a hook or a config line written
        there runs later, when the user runs git, outside any sandbox."""
        if _escapes(self.rel):  # refused before any folder is made
            raise self.outside()
        if GIT in self.rel.split(b"/"):
            raise self.in_git()
        try:
            folder, name = beneath.parent_beneath(self.fd, self.rel, inside=self.top, make_dirs=make_dirs)
        except beneath.Outside:
            raise self.outside() from None
        below = beneath.below(beneath.fd_path(folder) or b"", self.workdir)
        if name == GIT or (below is not None and GIT in below.split(b"/")):
            os.close(folder)
            raise self.in_git()
        return folder, name

    def shown(self, fd: int, name: bytes = b".") -> str:
        """Where `fd` (or `name` in the folder `fd`) is, as the model sees it: relative to the
        working directory, or absolute (a skill's file); bytes that are not UTF-8 as \\xNN."""
        real = beneath.fd_path(fd)
        if real is None:  # no /proc: the path as it was given
            real = os.path.normpath(os.path.join(self.top, self.rel))
        elif name != b".":
            real = os.path.join(real, name)
        return shown_path(Path(os.fsdecode(self.workdir)), Path(os.fsdecode(real)))

    def in_git(self) -> ToolFailure:
        return ToolFailure(
            f"'{printable(self.user)}' is in .git, git's own folder: crew's file tools do not write there "
            "(a hook or config written there runs code later); change the repository with git commands"
        )

    def outside(self) -> PathOutside:
        through = None
        if not _escapes(self.rel):  # a symlink led out: say where (by name, for the message only)
            through = printable(os.path.realpath(os.path.join(self.top, self.rel)))
        return _outside(self.user, printable(self.top), self.label, through)


@contextmanager
def place(
    workdir: Path, user_path: str, read_roots: Iterable[Path] = (), roots: Iterable[Path] = ()
) -> Iterator[Place]:
    """The directory `user_path` resolves beneath, open, and the path below it: the working
    directory, for a relative path or an absolute one inside it; one of `roots` (real paths:
    folders read and written as the working directory is, an editor's additional directories)
    for an absolute path inside one; a skill's folder (one of `read_roots`, real paths, for tools
    that only read) for an absolute path inside one.

    Refused: a NUL, a character no file name can hold, an absolute path anywhere else.
    """
    raw = _encoded(user_path)
    real = os.fsencode(os.path.realpath(workdir))
    given = os.fsencode(os.path.abspath(workdir))
    rel = raw if not raw.startswith(b"/") else beneath.below(raw, given) or beneath.below(raw, real)
    top, label = real, WORKDIR
    if rel is None:
        for folder, kind in (*((f, ROOT) for f in roots), *((f, SKILL) for f in read_roots)):
            rel = beneath.below(raw, os.fsencode(folder))
            if rel is not None:
                top, label = os.fsencode(folder), kind
                break
        else:
            raise _outside(user_path, printable(real), WORKDIR, None)
    fd = _open_top(given if label == WORKDIR else top, label)
    try:
        yield Place(user_path, fd, _unescaped(fd, rel, top), top, real, label)
    finally:
        os.close(fd)


def shown_path(workdir: Path, real: Path) -> str:
    """A resolved path as the model sees it: relative to the working directory, '/'-separated
    (absolute for a file of a skill's folder); bytes that are not UTF-8 shown as \\xNN."""
    inside = beneath.below(os.fsencode(real), os.fsencode(os.path.realpath(workdir)))
    return printable(inside if inside is not None else os.fsencode(real))


def _outside(user: str, root: str, label: str, through: str | None) -> PathOutside:
    if through is None:
        hint = " (relative paths start there)" if label == WORKDIR else ""
        return PathOutside(f"path '{user}' is outside {label} {root}; use a path inside it{hint}")
    return PathOutside(
        f"path '{user}' leads outside {label} {root} through a symlink (to {through}); only files inside it can be used"
    )


def _escapes(rel: bytes) -> bool:
    """Whether `rel` leads out by its names alone (`..` past its start)."""
    normal = os.path.normpath(rel)
    return normal == b".." or normal.startswith(b"../")


def _encoded(user_path: str) -> bytes:
    if "\0" in user_path:
        raise ToolFailure(f"path {user_path!r} contains a NUL character; give a plain file path")
    try:
        return os.fsencode(user_path)
    except UnicodeEncodeError:
        raise ToolFailure(
            f"path {user_path!r} holds a character no file name can hold (a lone surrogate); "
            "write bytes that are not UTF-8 as \\xNN, as crew shows them"
        ) from None


def _open_top(folder: bytes, label: str) -> int:
    try:
        if label == WORKDIR:
            return os.open(folder, beneath.FOLDER)
        return beneath.open_real(folder, beneath.FOLDER)
    except beneath.Outside:
        raise ToolFailure(
            f"{label} {printable(folder)} now leads through a symlink; it is read only where crew found it"
        ) from None
    except OSError as exc:
        raise ToolFailure(
            f"{label} {printable(folder)} cannot be opened ({exc.strerror}); "
            + ("start crew in an existing directory" if label == WORKDIR else "tell the user")
        ) from None


def _unescaped(fd: int, rel: bytes, top: bytes) -> bytes:
    """`rel`; or, when that is not there and it holds \\xNN (as names that are not UTF-8 are shown),
    the name those bytes make, if that is there."""
    if not ESCAPED.search(rel) or _exists(fd, rel, top):
        return rel
    raw = ESCAPED.sub(lambda found: bytes([int(found[1], 16)]), rel)
    return raw if _exists(fd, raw, top) else rel


def _exists(fd: int, rel: bytes, top: bytes) -> bool:
    try:
        os.close(beneath.open_beneath(fd, rel, os.O_PATH, inside=top))
    except OSError:
        return False
    return True
