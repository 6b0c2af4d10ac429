"""Paths a tool may touch: everything resolves inside the working directory, symlinks included."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from crewbridge.errors import CrewError
from crewbridge.registry import ToolFailure


class PathOutside(CrewError, ToolFailure):
    """A path that leads outside the working directory (by `..`, an absolute path or a symlink)."""


def resolve_inside(workdir: Path, user_path: str) -> Path:
    """The real path `user_path` names, relative to `workdir`; refused if it leads outside.

    Symlinks are followed (also dangling ones and symlinked parent directories), so the answer is
    where a read or write would really land. Paths that do not exist yet resolve through their
    existing parents, which is what write_file needs.
    """
    if "\0" in user_path:
        raise ToolFailure(f"path {user_path!r} contains a NUL character; give a plain file path")
    root = Path(os.path.realpath(workdir))
    if not root.is_dir():
        raise ToolFailure(f"working directory {root} does not exist; start crew in an existing directory")
    target = Path(root, user_path or ".")  # an absolute user_path replaces root here
    real = Path(os.path.realpath(target))
    if real.is_relative_to(root):
        return real
    shown = f"path '{user_path}'"
    if Path(os.path.normpath(target)).is_relative_to(root):
        raise PathOutside(
            f"{shown} leads outside the working directory {root} through a symlink "
            f"(to {real}); only files inside it can be used"
        )
    raise PathOutside(
        f"{shown} is outside the working directory {root}; use a path inside it (relative paths start there)"
    )


def resolve_readable(workdir: Path, user_path: str, roots: Iterable[Path]) -> Path:
    """As resolve_inside, and also an absolute path inside one of `roots`, folders read-only tools
    may read besides the working directory (a skill's): symlinks are followed there too."""
    try:
        return resolve_inside(workdir, user_path)
    except PathOutside:
        if os.path.isabs(user_path):
            real = Path(os.path.realpath(user_path))
            if any(real.is_relative_to(root) for root in roots):
                return real
        raise


def shown_path(workdir: Path, real: Path) -> str:
    """A resolved path as the model sees it: relative to the working directory, '/'-separated
    (absolute for a file of a skill's folder)."""
    root = os.path.realpath(workdir)
    return real.relative_to(root).as_posix() if real.is_relative_to(root) else real.as_posix()
