"""git, as crew uses it for worktrees and reviews: run it (bounded, in a process group of its own),
find a checkout, take a snapshot of what is on disk, and say what changed between two trees.

A *snapshot* is the tree of every file of a checkout that git does not ignore, as it is on disk now
(tracked and untracked, committed or not), written with a scratch index: the checkout's own index
and its branches are never touched. Two snapshots, or a commit and a snapshot, give "what changed"
(`changes`) and the patch (`diff`).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from crewbridge.childenv import without_secrets
from crewbridge.errors import CLINotFound, CrewError, CrewTimeout, UsageError
from crewbridge.process import track_group, untrack_group

GIT_TIMEOUT = 120.0  # seconds one git command may take
# Variables that point git at another repository, index or object store than the folder's own:
# set in crew's environment (crew run from a git hook), they would send crew's commands elsewhere.
_REPOSITORY_VARIABLES = frozenset(
    {
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_COMMON_DIR",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_NAMESPACE",
        "GIT_PREFIX",
    }
)
# What crew's own git commands in a checkout run of the repository's configuration: no fsmonitor
# program and no hooks (an agent may have planted either; crewbridge.gitguard disarms them after a
# run, and crew's git may run before that, for a review's diff).
SAFE = ["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null"]
# Diffs and patches as git writes them by default, whatever the user's configuration says
# (external diff drivers, textconv, no or mnemonic prefixes, relative paths, colour).
_PLAIN_DIFF = ["--no-ext-diff", "--no-textconv", "--no-color", "--no-relative", "--src-prefix=a/", "--dst-prefix=b/"]


class GitError(CrewError):
    """A git command crew ran failed; the message holds what git said."""


@dataclass(frozen=True)
class Change:
    """One file that differs between two trees: lines added and removed (None for a binary file)."""

    path: str
    status: str  # added | modified | deleted | type changed
    added: int | None
    removed: int | None

    def to_dict(self) -> dict[str, object]:
        return {"path": self.path, "status": self.status, "added": self.added, "removed": self.removed}

    def line(self) -> str:
        """`M notes.txt +3 -1` (`binary` for a binary file)."""
        counts = "binary" if self.added is None else f"+{self.added} -{self.removed}"
        return f"{_LETTER[self.status]} {self.path} {counts}"


_STATUS = {"A": "added", "M": "modified", "D": "deleted", "T": "type changed"}
_LETTER = {name: letter for letter, name in _STATUS.items()}


def summary(changes: Sequence[Change]) -> str:
    """`2 files changed, +5 -1` (or `no changes`)."""
    if not changes:
        return "no changes"
    added = sum(c.added or 0 for c in changes)
    removed = sum(c.removed or 0 for c in changes)
    files = f"{len(changes)} file{'' if len(changes) == 1 else 's'} changed"
    return f"{files}, +{added} -{removed}"


def run_git(
    args: Sequence[str],
    cwd: Path,
    *,
    index: Path | None = None,
    input: bytes | None = None,
    timeout: float = GIT_TIMEOUT,
    check: bool = True,
    passed: Collection[str] = (),
) -> subprocess.CompletedProcess[bytes]:
    """`git ARGS` in `cwd` (with a scratch `index` when given), in a process group of its own that
    is ended at `timeout` (CrewTimeout) or when crew is interrupted, with no secret in its
    environment but those `passed` (crewbridge.childenv: a command a repository's config names runs
    with it). GitError with git's own words when it fails and `check`; CLINotFound when git is not
    installed."""
    clean = without_secrets(os.environ, passed)
    env = {name: value for name, value in clean.items() if name not in _REPOSITORY_VARIABLES}
    env["GIT_TERMINAL_PROMPT"] = "0"  # never ask for a password on the terminal
    if index is not None:
        env["GIT_INDEX_FILE"] = str(index)
    try:
        proc = subprocess.Popen(
            ["git", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError:
        raise CLINotFound("git is not installed (not on PATH); install it to use --worktree or --review") from None
    except OSError as exc:
        raise GitError(f"cannot run git in {cwd}: {exc.strerror or exc}") from None
    track_group(proc.pid)
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CrewTimeout(f"git {_subcommand(args)} did not finish in {timeout:g}s in {cwd}; crew ended it") from None
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever it started ends with it
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
        untrack_group(proc.pid)
    if check and proc.returncode != 0:
        said = " ".join(err.decode("utf-8", "replace").split()) or f"exit {proc.returncode}"
        raise GitError(f"git {_subcommand(args)} failed in {cwd}: {said}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _subcommand(args: Sequence[str]) -> str:
    """`worktree add` of `-c x=y --git-dir=… worktree add …`: what a message names."""
    words = [arg for i, arg in enumerate(args) if not arg.startswith("-") and (i == 0 or args[i - 1] != "-c")]
    return " ".join(words[:2]) if words[:1] == ["worktree"] else (words[0] if words else "")


@dataclass(frozen=True)
class Checkout:
    """A git checkout: its top folder, its own git folder and the repository's common one. Every
    command crew runs in it names both folders, so a `.git` written inside the checkout (by an
    agent) cannot point crew's git elsewhere; and runs no hook."""

    top: Path
    git_dir: Path  # the checkout's own: the common one for the main checkout, <common>/worktrees/<id> for a worktree
    common: Path  # shared by every worktree of the repository

    @classmethod
    def of(cls, folder: Path, why: str) -> Checkout:
        """The checkout holding `folder`; a one-line UsageError outside one (`why` names what needs it)."""
        found = run_git(
            ["rev-parse", "--path-format=absolute", "--show-toplevel", "--absolute-git-dir", "--git-common-dir"],
            folder,
            check=False,
        )
        lines = found.stdout.decode("utf-8", "surrogateescape").splitlines()
        if found.stdout.startswith(b"--path-format") or b"path-format" in found.stderr:  # older git echoes it
            raise UsageError(f"{why} needs git 2.31 or newer (`git --version` says which this is); update git")
        if found.returncode != 0 or len(lines) != 3:
            fix = f"git init there, or go without {why}" if why.startswith("--") else "run it inside the repository"
            raise UsageError(f"{why} needs a git repository, and {folder} is not in one ({fix})")
        return cls(Path(lines[0]), Path(lines[1]), Path(lines[2]))

    def git(
        self,
        args: Sequence[str],
        *,
        index: Path | None = None,
        input: bytes | None = None,
        timeout: float = GIT_TIMEOUT,
        check: bool = True,
        passed: Collection[str] = (),
    ) -> subprocess.CompletedProcess[bytes]:
        """`git ARGS` in this checkout (with a scratch `index` when given; `passed` as run_git's)."""
        where = [*SAFE, f"--git-dir={self.git_dir}", f"--work-tree={self.top}"]
        return run_git([*where, *args], self.top, index=index, input=input, timeout=timeout, check=check, passed=passed)

    def text(self, args: Sequence[str], *, timeout: float = GIT_TIMEOUT) -> str:
        """What `git ARGS` printed here, as text without its last newline."""
        return self.git(args, timeout=timeout).stdout.decode("utf-8", "surrogateescape").rstrip("\n")

    def head(self, why: str) -> str:
        """The commit HEAD names; a UsageError in a repository without a commit yet."""
        found = self.git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], check=False)
        if found.returncode != 0:
            raise UsageError(
                f"{why} starts from HEAD, and the repository at {self.top} has no commit yet; commit once first"
            )
        return found.stdout.decode().strip()

    def uncommitted(self) -> list[str]:
        """The files that differ from HEAD or are untracked (not ignored)."""
        out = self.git(["status", "--porcelain=v1", "-z", "--untracked-files=all"]).stdout
        paths, rename = [], False
        for entry in out.decode("utf-8", "surrogateescape").split("\0"):
            if rename:  # a rename's second field: the name it had
                rename = False
            elif entry:
                paths.append(entry[3:])
                rename = entry[0] in "RC"
        return paths

    def snapshot(self, timeout: float = GIT_TIMEOUT) -> str:
        """The tree of every file here that git does not ignore, as on disk now, written with a
        scratch copy of the index (the checkout's own index is left as it is)."""
        with tempfile.TemporaryDirectory(prefix="crew-index-") as scratch:
            index = Path(scratch, "index")
            own = self.git_dir / "index"
            if own.is_file():  # its stat data spares git hashing every unchanged file again
                shutil.copy2(own, index)  # with its time: git's check for files changed in its second needs it
            self.git(["add", "--all", "--", "."], index=index, timeout=timeout)
            return self.git(["write-tree"], index=index, timeout=timeout).stdout.decode().strip()

    def changes(self, old: str, new: str) -> list[Change]:
        """The files that differ between trees (or commits) `old` and `new`, in path order; a
        rename is a deletion and an addition."""
        counted = self.git(["diff", "--numstat", "-z", "--no-renames", *_PLAIN_DIFF, old, new]).stdout
        named = self.git(["diff", "--name-status", "-z", "--no-renames", *_PLAIN_DIFF, old, new]).stdout
        fields = named.decode("utf-8", "surrogateescape").split("\0")
        status = {fields[i + 1]: _STATUS.get(fields[i], "modified") for i in range(0, len(fields) - 1, 2)}
        found = []
        for entry in counted.decode("utf-8", "surrogateescape").split("\0"):
            if entry:
                added, removed, path = entry.split("\t", 2)
                counts = (None, None) if added == "-" else (int(added), int(removed))
                found.append(Change(path, status.get(path, "modified"), *counts))
        return found

    def diff(self, old: str, new: str, *, binary: bool = False) -> bytes:
        """The patch from tree (or commit) `old` to `new`: with `binary`, one `git apply` takes it
        whole (binary files included); without, binary files are only named."""
        return self.git(["diff", *(["--binary"] if binary else []), *_PLAIN_DIFF, old, new]).stdout
