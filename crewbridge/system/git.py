"""git, as crew uses it for worktrees and reviews: run it (bounded, in a process group of its own),
find a checkout, take a snapshot of what is on disk, and say what changed between two trees.

A *snapshot* is the tree of every file of a checkout that git does not ignore, as it is on disk now
(tracked and untracked, committed or not), written with a scratch index: the checkout's own index
and its branches are never touched. Two snapshots, or a commit and a snapshot, give "what changed"
(`changes`) and the patch (`diff`).
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import signal
import stat
import subprocess
import tempfile
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from crewbridge.errors import CLINotFound, CrewError, CrewTimeout, UsageError
from crewbridge.system import beneath
from crewbridge.system.childenv import without_secrets
from crewbridge.system.process import starting, track_group, untrack_group

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
# program and no hooks (an agent may have planted either; crewbridge.system.gitguard disarms them after a
# run, and crew's git may run before that, for a review's diff).
SAFE = ["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "diff.external="]
# Diffs and patches as git writes them by default, whatever the user's configuration says
# (external diff drivers, textconv, no or mnemonic prefixes, relative paths, colour).
REGULAR, EXECUTABLE, SYMLINK, GITLINK = "100644", "100755", "120000", "160000"  # the modes of an index entry
CHUNK = 1 << 20  # bytes of a file read at a time
_PLAIN_DIFF = ["--no-ext-diff", "--no-textconv", "--no-color", "--no-relative", "--src-prefix=a/", "--dst-prefix=b/"]


FALLBACK_IDENT = ("crew", "crew@localhost")  # who makes crew's commits where git has no user.name/user.email
_IDENT = re.compile(r"^(?P<name>[^<>\n]*?) <(?P<email>[^<>\n]*)> \d+ [+-]\d{4}$")


class GitError(CrewError):
    """A git command crew ran failed; the message holds what git said."""


@dataclass(frozen=True)
class Stamp:
    """Who made a commit and when: kept with the commit, so that any machine makes the same one again."""

    name: str
    email: str
    date: str  # "SECONDS +ZZZZ", as git writes it

    def line(self) -> str:
        return f"{self.name} <{self.email}> {self.date}"


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
    environment but those `passed` (crewbridge.system.childenv: a command a repository's config names runs
    with it). GitError with git's own words when it fails and `check`; CLINotFound when git is not
    installed."""
    clean = without_secrets(os.environ, passed)
    env = {name: value for name, value in clean.items() if name not in _REPOSITORY_VARIABLES}
    env["GIT_TERMINAL_PROMPT"] = "0"  # never ask for a password on the terminal
    if index is not None:
        env["GIT_INDEX_FILE"] = str(index)
    with starting():  # tracked before an interrupt's end_all() goes on
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
        scratch index (the checkout's own is left as it is). No program the folder or its
        repository names runs (a clean filter, fsmonitor): git only lists the names (`ls-files`,
        which reads no file), crew reads each file itself beneath the top, no symlink followed on
        the way (crewbridge.system.beneath), and git stores the bytes as they are (`hash-object
        --no-filters`). A submodule's commit is the index's; a repository the run made inside is
        a gitlink to its HEAD (read as data), as git add makes it."""
        listed = self.git(["ls-files", "-z", "--stage"], timeout=timeout).stdout
        entries: dict[bytes, tuple[str, str]] = {}  # path → (mode, id) as the index has it
        for record in listed.split(b"\0"):
            if record:
                info, _, path = record.partition(b"\t")
                mode, oid, _ = info.decode().split(" ")
                entries[path] = (mode, oid)
        others = self.git(["ls-files", "-z", "--others", "--exclude-standard"], timeout=timeout).stdout
        paths = sorted({*entries, *(p.rstrip(b"/") for p in others.split(b"\0") if p)})  # "sub/": a repository
        kind = self.text(["rev-parse", "--show-object-format"], timeout=timeout)
        with tempfile.TemporaryDirectory(prefix="crew-snapshot-") as scratch:
            lines = _Blobs(self.top, kind, Path(scratch)).entries(paths, entries)
            fresh = [line for line in lines if line.copy is not None]
            if fresh:  # the files the index does not hold as they are: stored, whole
                names = b"".join(os.fsencode(str(line.copy)) + b"\n" for line in fresh)
                stored = self.git(["hash-object", "-w", "--no-filters", "--stdin-paths"], input=names, timeout=timeout)
                for line, oid in zip(fresh, stored.stdout.decode().split(), strict=True):
                    line.oid = oid
            index = Path(scratch, "index")
            info = b"".join(b"%s %s\t%s\0" % (line.mode.encode(), line.oid.encode(), line.path) for line in lines)
            self.git(["update-index", "-z", "--index-info"], index=index, input=info, timeout=timeout)
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

    def stamp(self, when: float) -> Stamp:
        """This checkout's git identity (crew's own where it has none) at time `when`."""
        found = self.git(["var", "GIT_COMMITTER_IDENT"], check=False)
        match = _IDENT.match(found.stdout.decode("utf-8", "replace").strip()) if found.returncode == 0 else None
        name, email = (match["name"], match["email"]) if match and match["name"] else FALLBACK_IDENT
        return Stamp(name, email, f"{int(when)} +0000")

    def commit(self, tree: str, parent: str, message: str, stamp: Stamp) -> str:
        """The commit of `tree` on `parent`, written as its bytes say (no hook, no signing, no
        template runs): the same tree, parent, message and stamp are the same commit anywhere."""
        text = f"tree {tree}\nparent {parent}\nauthor {stamp.line()}\ncommitter {stamp.line()}\n\n{message}"
        return self.git(["hash-object", "-t", "commit", "-w", "--stdin"], input=text.encode()).stdout.decode().strip()

    def diff(self, old: str, new: str, *, binary: bool = False) -> bytes:
        """The patch from tree (or commit) `old` to `new`: with `binary`, one `git apply` takes it
        whole (binary files included); without, binary files are only named."""
        return self.git(["diff", *(["--binary"] if binary else []), *_PLAIN_DIFF, old, new]).stdout


@dataclass
class _Line:
    """One entry of a snapshot's index: its mode, object id ("" until git stored it) and path, and
    the scratch copy of its bytes when git must store them."""

    mode: str
    oid: str
    path: bytes
    copy: Path | None = None


class _Blobs:
    """The files of a checkout read by crew, beneath its top with no symlink followed, as a
    snapshot's entries: what the index holds already keeps its id; anything else is copied to
    `scratch` for git to store (a copy git reads, never the checkout's own file)."""

    def __init__(self, top: Path, kind: str, scratch: Path) -> None:
        self.top = top
        self.kind = hashlib.sha256 if kind == "sha256" else hashlib.sha1
        self.scratch = scratch
        self.copies = 0

    def entries(self, paths: Sequence[bytes], index: dict[bytes, tuple[str, str]]) -> list[_Line]:
        top = os.open(self.top, beneath.FOLDER)
        found: list[_Line] = []
        held: tuple[bytes, int | None] = (b"", None)  # the folder of the last path (sorted: often the next's)
        try:
            for path in paths:
                head, _, name = path.rpartition(b"/")
                if held[0] != head or held[1] is None:
                    if held[1] is not None:
                        os.close(held[1])
                    held = (head, _folder(top, head))
                line = self._entry(held[1], path, name, index.get(path)) if held[1] is not None else None
                if line is not None:
                    found.append(line)
        finally:
            if held[1] is not None:
                os.close(held[1])
            os.close(top)
        return found

    def _entry(self, folder: int, path: bytes, name: bytes, indexed: tuple[str, str] | None) -> _Line | None:
        """`path`'s entry as it is on disk, `name` in `folder` (None: not there, or not a file git
        stores). Opened without blocking and without following a symlink: a FIFO cannot hang it."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
        except OSError as exc:
            try:  # a symlink (ELOOP) is stored as what it says, never read through
                target = os.readlink(name, dir_fd=folder) if exc.errno == errno.ELOOP else None
            except OSError:
                target = None
            if target is None:
                return None
            return self._kept(_Line(SYMLINK, "", path), lambda at: target[at : at + CHUNK], indexed, len(target))
        try:
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode):  # a submodule, or a repository made inside (git add takes it so)
                commit = indexed[1] if indexed is not None and indexed[0] == GITLINK else _head(folder, name)
                return _Line(GITLINK, commit, path) if commit else None
            if not stat.S_ISREG(info.st_mode):
                return None
            mode = EXECUTABLE if info.st_mode & stat.S_IXUSR else REGULAR
            return self._kept(_Line(mode, "", path), lambda at: os.pread(fd, CHUNK, at), indexed, info.st_size)
        finally:
            os.close(fd)

    def _kept(self, line: _Line, read: Callable[[int], bytes], indexed: tuple[str, str] | None, size: int) -> _Line:
        """`line` with the index's id when the bytes `read(offset)` gives are what it holds; else
        with a scratch copy of them for git to store (a file that changes meanwhile is stored as
        copied: its size in the header then differs, and so does the id)."""
        digest = self.kind(b"blob %d\0" % size)
        for chunk in _chunks(read):
            digest.update(chunk)
        if indexed == (line.mode, digest.hexdigest()):
            line.oid = indexed[1]
            return line
        self.copies += 1
        line.copy = self.scratch / f"{self.copies}.blob"
        with open(line.copy, "wb") as out:
            for chunk in _chunks(read):
                out.write(chunk)
        return line


def _folder(top: int, head: bytes) -> int | None:
    """The folder `head` beneath `top`, reached with no symlink on the way (None: gone, or a
    symlink is: git sees no file there either)."""
    try:
        return beneath.open_beneath(top, head or b".", beneath.FOLDER, links=False)
    except OSError:
        return None


def _head(folder: int, name: bytes) -> str | None:
    """The commit the repository `name` (in `folder`) has checked out, read as data from its `.git`
    folder (a loose or packed ref, or a detached HEAD); None when it names none so (git add too
    refuses a repository without a commit)."""
    try:
        dot_git = beneath.open_beneath(folder, name + b"/.git", beneath.FOLDER, links=False)
    except OSError:
        return None
    try:
        head = _small(dot_git, b"HEAD").strip()
        if head.startswith(b"ref: refs/") and b".." not in head:
            ref = head[5:]
            loose = _small(dot_git, ref).strip()
            packed = (line.split(b" ") for line in _small(dot_git, b"packed-refs").splitlines())
            head = loose or next((words[0] for words in packed if words[1:] == [ref]), b"")
    finally:
        os.close(dot_git)
    return head.decode() if re.fullmatch(rb"[0-9a-f]{40}|[0-9a-f]{64}", head) else None


def _small(folder: int, path: bytes) -> bytes:
    """The start of a small file beneath `folder` (b"" when it is not there or not a file)."""
    try:
        fd = beneath.open_beneath(folder, path, os.O_RDONLY | os.O_NONBLOCK, links=False)
    except OSError:
        return b""
    try:
        return os.pread(fd, CHUNK, 0) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    finally:
        os.close(fd)


def _chunks(read: Callable[[int], bytes]) -> Iterator[bytes]:
    """What `read(offset)` gives, CHUNK bytes at a time, to its end (a short read)."""
    offset = 0
    while chunk := read(offset):
        yield chunk
        if len(chunk) < CHUNK:
            return
        offset += len(chunk)
