"""Scratch git repositories for the tests of worktrees and reviews."""

from __future__ import annotations

import subprocess
from pathlib import Path

IDENTITY = ["-c", "user.name=Test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false"]


def git(folder: Path, *args: str) -> str:
    """`git ARGS` in `folder`; what it printed (fails the test when git fails)."""
    done = subprocess.run(
        ["git", *IDENTITY, *args], cwd=folder, stdin=subprocess.DEVNULL, capture_output=True, text=True
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


def make_repo(folder: Path, files: dict[str, str | bytes]) -> Path:
    """A repository at `folder` whose one commit holds `files` (path → text or bytes)."""
    folder.mkdir(parents=True, exist_ok=True)
    git(folder, "init", "-q", "-b", "main")
    write(folder, files)
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "start")
    return folder


def write(folder: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def status(folder: Path) -> str:
    """`git status --porcelain`: what a person would see as uncommitted."""
    return git(folder, "status", "--porcelain", "--untracked-files=all")
