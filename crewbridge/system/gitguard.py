"""What an agent's run left in a folder that would run code on the user's next git command: found
after the run, and disarmed before anything runs git there outside the sandbox.

An agent in execute mode may write its working directory, and git runs code that files in a
repository name: a repository's `config` (core.fsmonitor, core.pager, aliases, filters, include.path…)
and `hooks/`, whoever's repository it is. So a run could leave, for the user's next `git status`:

- a **new repository** below the folder (a `.git` folder or file, or a bare repository: HEAD,
  objects/ and refs/), with a config of the agent's; git runs it when the user works in that folder,
  and from the top repository once a **gitlink** for it is in the index (`git add sub`);
- a changed config or hook of a repository already there: the folder's own `.git`, a submodule's
  (`.git/modules/…`), a worktree's `config.worktree`, a nested repository of the user's;
- a `.gitattributes` line (or `.git/info/attributes`) that names a filter, diff or merge driver
  the files did not name before (a driver configured for the user runs on those files);
- a `.gitmodules` whose submodule `url` or `update` changed (`git submodule update` fetches from
  it, or runs `!command`).

`Watch(folder)` takes a snapshot of all that before the run (a walk of the folder for `.git`
entries and `.gitattributes` files, the bytes of the watched files, the index's gitlinks);
`Watch.disarm()` compares, and for each thing the run added or changed:

- a new repository is moved, whole, into crew's quarantine folder
  ($XDG_STATE_HOME/crewbridge/quarantine/<time>/, 0700): nothing is deleted, and without its `.git`
  the folder is plain files that git reads as data;
- a changed config, hook or `.git` pointer is moved there too, and the file as it was before the
  run is written back (a new one is only moved); a config change that touches only keys that run
  nothing (user.name, remote.*.url, …: HARMLESS) is left alone;
- `.gitattributes` lines naming a new driver are taken out (the file as the run left it goes to
  the quarantine); a `.gitmodules` is written back as it was;
- a new gitlink is removed from the index (`git update-index --force-remove`: the index entry
  only; the folder stays, as plain files).

Each is an `Armed` (where, what, what crew did), which the caller reports. crew's own git commands
here run with core.fsmonitor off and no hooks. `armed_between(checkout, old, new)` finds the same in
the difference between two trees, for `crew apply`, which refuses such changes.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import os
import shutil
import stat
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from crewbridge.base.places import state_dir
from crewbridge.errors import CrewError
from crewbridge.system.git import Checkout, run_git

QUARANTINE = "quarantine"  # in crew's state folder
MAX_FOLDERS = 200_000  # folders walked looking for repositories; beyond, the walk says it stopped
KEPT_BYTES = 1 << 20  # a watched file larger than this is kept as its hash: it cannot be written back
DRIVERS = ("filter", "diff", "merge")  # attributes that name a driver: a program from git's config
GITLINK = "160000"
# Config keys whose values run nothing: a change to these alone is left as it is (lower case, as
# `git config --list` prints sections and names; fnmatch patterns).
HARMLESS = (
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "extensions.objectformat",
    "init.defaultbranch",
    "user.name",
    "user.email",
    "branch.*.remote",
    "branch.*.merge",
    "remote.*.url",
    "remote.*.fetch",
    "submodule.*.active",
)
SUBMODULE_KEYS = ("submodule.*.url", "submodule.*.update")  # in .gitmodules: where it fetches, what it runs


@dataclass(frozen=True)
class Armed:
    """One thing that would run code on the user's next git command: where, what it is, and what
    crew did about it ("" when nothing was done: `crew apply` refuses instead)."""

    path: str  # as the user finds it: relative to the folder when inside it
    what: str
    done: str = ""

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    def line(self) -> str:
        return f"{self.path}: {self.what}" + (f"; {self.done}" if self.done else "")


def summary(found: list[Armed]) -> str:
    """The notice a person reads: what crew disarmed, one thing per line."""
    things = "\n".join(f"  {armed.line()}" for armed in found)
    return f"the run left what would run code on your next git command; crew disarmed it:\n{things}"


@dataclass
class _Found:
    """What a walk of the folder found."""

    repositories: dict[Path, tuple[int, int]] = field(default_factory=dict)  # `.git` entry or bare repo → (dev, inode)
    bare: set[Path] = field(default_factory=set)  # those that are bare repositories (not `.git`)
    attributes: list[Path] = field(default_factory=list)  # .gitattributes files
    complete: bool = True  # False: the walk stopped at MAX_FOLDERS


@dataclass
class _Snapshot:
    found: _Found
    modules: dict[Path, tuple[int, int]]  # the submodules' git folders (.git/modules/…)
    files: dict[Path, bytes]  # every watched file as it is
    gitlinks: frozenset[str]
    index: tuple[int, ...] | None  # the index file's identity and change time: unchanged, so are its gitlinks
    drivers: frozenset[str]  # the drivers attributes name (`filter=lfs`), in every attributes file


class Watch:
    """A folder before an agent's run; `disarm()` after it (see the module's docstring). The one
    engine function every kind of run calls: an execute run's loop, a chat's message, crew mcp's
    calls, a worktree's run (in its worktree); a batch the same."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder.resolve()
        self.repository = _repository(self.folder)
        self.before = self._snapshot()
        self.quarantine: Path | None = None  # made when first needed

    def disarm(self) -> list[Armed]:
        """What the run added or changed that would run code on the user's next git command, each
        disarmed; the state it leaves becomes the new snapshot (a second call sees what came since)."""
        found: list[Armed] = []
        after = _walk(self.folder, self._own_dot_git())
        for path, identity in after.repositories.items():
            if self.before.found.repositories.get(path) != identity:
                found.append(self._new_repository(path, path in after.bare))
        for path, identity in _modules(self.repository).items():
            if self.before.modules.get(path) != identity:
                found.append(self._take(path, "a new submodule repository in the git folder"))
        now = self._snapshot(None if found else after, self.before)  # without what was moved away
        for path in sorted(set(self.before.files) | set(now.files)):
            old, new = self.before.files.get(path), now.files.get(path)
            if new is not None and old != new:
                found += self._changed(path, old, new)
        found += self._gitlinks(now.gitlinks)
        if not after.complete:
            found.append(
                Armed(
                    self._shown(self.folder),
                    f"holds more than {MAX_FOLDERS} folders: crew looked for new repositories in the first "
                    f"{MAX_FOLDERS} only",
                    "look for `.git` folders below it before you use git there",
                )
            )
        self.before = self._snapshot(earlier=now) if found else now
        return found

    # -- the snapshot

    def _snapshot(self, found: _Found | None = None, earlier: _Snapshot | None = None) -> _Snapshot:
        """The state of the folder now (`found`: its walk, when just made; `earlier`: a snapshot
        whose gitlinks stand if the index did not change since)."""
        found = found or _walk(self.folder, self._own_dot_git())
        modules = _modules(self.repository)
        git_dirs = [*self._own_git_dirs(), *modules, *(p for p in found.repositories if p.is_dir())]
        files: dict[Path, bytes] = {}
        for git_dir in git_dirs:
            for path in _watched_in(git_dir):
                _keep(files, path)
        for path in found.repositories:
            if path.name == ".git" and path.is_file():
                _keep(files, path)
        dot_git = self.folder / ".git"
        if dot_git.is_file() and not os.path.islink(dot_git):
            _keep(files, dot_git)  # a worktree's pointer to its git folder
        for path in [*found.attributes, *self._gitmodules()]:
            _keep(files, path)
        drivers = frozenset(
            driver
            for path, content in files.items()
            if _is_attributes(path)
            for driver, _ in _drivers(content.decode("utf-8", "replace"))
        )
        index = self._index()
        unchanged = earlier is not None and index is not None and earlier.index == index
        gitlinks = earlier.gitlinks if earlier is not None and unchanged else self._gitlink_paths()
        return _Snapshot(found, modules, files, gitlinks, index, drivers)

    def _index(self) -> tuple[int, ...] | None:
        """The index's inode, size and change time (which no write can leave as it was), if any."""
        if self.repository is None:
            return None
        try:
            info = os.stat(self.repository.git_dir / "index")
        except OSError:
            return None
        return info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns

    def _own_dot_git(self) -> Path | None:
        """The folder's own `.git`: that of the repository whose top it is, or a new one where
        there was no repository (`git init`); any other `.git` below the folder is nested."""
        if self.repository is None or self.repository.top == self.folder:
            return self.folder / ".git"
        return None

    def _own_git_dirs(self) -> list[Path]:
        """The repository's own git folders (and one made where there was none)."""
        if self.repository is None:
            own = self.folder / ".git"
            return [own] if own.is_dir() and not own.is_symlink() else []
        folders = [self.repository.git_dir, self.repository.common]
        return [*dict.fromkeys(folders), *sorted((self.repository.common / "worktrees").glob("*"))]

    def _gitmodules(self) -> list[Path]:
        top = self.repository.top if self.repository is not None else self.folder
        return [top / ".gitmodules"]

    def _gitlink_paths(self) -> frozenset[str]:
        if self.repository is None:
            return frozenset()
        try:
            listed = self.repository.git(["ls-files", "--stage", "-z"]).stdout
        except CrewError:
            return frozenset()
        entries = listed.decode("utf-8", "surrogateescape").split("\0")
        return frozenset(entry.split("\t", 1)[1] for entry in entries if entry.startswith(GITLINK + " "))

    # -- disarming

    def _new_repository(self, path: Path, bare: bool) -> Armed:
        if bare and path == self.folder:  # the folder itself made a bare repository: without HEAD it is none
            return self._take(path / "HEAD", "the folder was made a bare git repository (its HEAD)")
        what = "a new bare git repository" if bare else "a new git repository"
        if path.is_file() or path.is_symlink():
            what = "a new `.git` pointer to a git folder"
        return self._take(path, f"{what}, with a config and hooks of the run's")

    def _changed(self, path: Path, old: bytes | None, new: bytes) -> list[Armed]:
        if _is_attributes(path):
            return self._attributes(path, new)
        if path.name == ".gitmodules":
            return self._submodules(path, old, new)
        if path.parent.name == "hooks":
            what = "a changed git hook" if old is not None else "a new git hook"
        elif path.name == ".git":
            what = "a changed pointer to the git folder"
        else:
            keys = _harmful_keys(old, new)
            if not keys:
                return []
            what = f"{'a changed' if old is not None else 'a new'} git config: {', '.join(keys)}"
        return [self._replace(path, old, what)]

    def _attributes(self, path: Path, new: bytes) -> list[Armed]:
        lines = new.decode("utf-8", "replace").splitlines(keepends=True)
        bad = {n: driver for driver, n in _drivers("".join(lines)) if driver not in self.before.drivers}
        if not bad:
            return []
        moved = self._store(path)
        path.write_text("".join(line for n, line in enumerate(lines, 1) if n not in bad), encoding="utf-8")
        named = ", ".join(f"line {n} ({driver})" for n, driver in sorted(bad.items()))
        return [
            Armed(
                self._shown(path),
                f"names a driver it did not name before, which git runs on those files: {named}",
                f"those lines were taken out; the file as the run left it is in {moved}",
            )
        ]

    def _submodules(self, path: Path, old: bytes | None, new: bytes) -> list[Armed]:
        keys = _changed_keys(_config_entries(old), _config_entries(new), SUBMODULE_KEYS)
        if not keys:
            return []
        return [self._replace(path, old, f"a changed submodule source or update command: {', '.join(keys)}")]

    def _gitlinks(self, now: frozenset[str]) -> list[Armed]:
        out = []
        for added in sorted(now - self.before.gitlinks):
            assert self.repository is not None  # only a repository has an index
            try:
                self.repository.git(["update-index", "--force-remove", "--", added])
                done = "removed from the index (git update-index --force-remove); its folder stays, as plain files"
            except CrewError as exc:
                done = f"could not be removed from the index ({exc}); run `git rm --cached {added}`"
            where = self.repository.top / added
            out.append(Armed(self._shown(where), "a gitlink added to the index: git runs that repository", done))
        return out

    def _replace(self, path: Path, old: bytes | None, what: str) -> Armed:
        """Move `path` to the quarantine and write back what it was (`old`), if it was."""
        try:
            moved = self._store(path)
        except OSError as exc:
            return Armed(self._shown(path), what, f"could not be moved ({exc.strerror or exc}): remove it by hand")
        if old is None:
            return Armed(self._shown(path), what, f"moved to {moved}")
        if old.startswith(b"sha256:"):
            return Armed(self._shown(path), what, f"moved to {moved}; it was too large to keep, so it is not restored")
        if old.startswith(b"link:"):
            os.symlink(old[len(b"link:") :], path)
        else:
            path.write_bytes(old)
        return Armed(self._shown(path), what, f"restored as it was before the run; the run's is in {moved}")

    def _take(self, path: Path, what: str) -> Armed:
        try:
            return Armed(self._shown(path), what, f"moved to {self._store(path)}")
        except OSError as exc:
            return Armed(self._shown(path), what, f"could not be moved ({exc.strerror or exc}): remove it by hand")

    def _store(self, path: Path) -> Path:
        """Move `path` into this run's quarantine folder, under its path from the folder."""
        if self.quarantine is None:
            root = state_dir() / QUARANTINE
            root.mkdir(parents=True, exist_ok=True, mode=0o700)
            stamp = time.strftime("%Y%m%d-%H%M%S")
            self.quarantine = Path(_fresh(root, stamp))
        inside = path.relative_to(self.folder) if path.is_relative_to(self.folder) else Path("outside", *path.parts[1:])
        target = self.quarantine / inside
        n = 1
        while os.path.lexists(target):
            n += 1
            target = target.with_name(f"{inside.name}.{n}")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(path, target)  # a rename on one file system; links are moved, not followed
        return target

    def _shown(self, path: Path) -> str:
        if path == self.folder:
            return str(path)
        return str(path.relative_to(self.folder)) if path.is_relative_to(self.folder) else str(path)


def armed_between(checkout: Checkout, old: str, new: str) -> list[Armed]:
    """What the change from tree (or commit) `old` to `new` adds that would run code on a git
    command where it is applied: gitlinks, `.gitattributes` lines naming a new driver, a changed
    submodule source or update command. Nothing is done about them (`crew apply` refuses)."""
    raw = checkout.git(["diff", "--raw", "-z", "--no-renames", "--no-abbrev", old, new]).stdout
    fields = raw.decode("utf-8", "surrogateescape").split("\0")
    found = []
    attributes: list[str] = []
    for i in range(0, len(fields) - 1, 2):
        meta, path = fields[i], fields[i + 1]
        parts = meta.lstrip(":").split()
        if len(parts) < 5:
            continue
        if parts[1] == GITLINK and parts[0] != GITLINK:
            found.append(Armed(path, "a gitlink (an embedded repository), which git would run"))
        elif path == ".gitmodules":
            keys = _changed_keys(_blob_entries(checkout, old, path), _blob_entries(checkout, new, path), SUBMODULE_KEYS)
            if keys:
                found.append(Armed(path, f"a changed submodule source or update command: {', '.join(keys)}"))
        elif path == ".gitattributes" or path.endswith("/.gitattributes"):
            attributes.append(path)
    known = {d for path in attributes for d, _ in _drivers(_blob(checkout, old, path))}
    for path in attributes:
        new_drivers = sorted({d for d, _ in _drivers(_blob(checkout, new, path))} - known)
        if new_drivers:
            found.append(Armed(path, f"names a driver git would run on those files: {', '.join(new_drivers)}"))
    return found


# --- finding things


def _repository(folder: Path) -> Checkout | None:
    try:
        found = Checkout.of(folder, "crew")
    except CrewError:  # not a repository, or no git: only a walk of the folder
        return None
    return Checkout(found.top.resolve(), found.git_dir.resolve(), found.common.resolve())


def _walk(folder: Path, own: Path | None) -> _Found:
    """Every `.git` entry below `folder` (but `own`) and every bare repository, not looked into,
    and every .gitattributes file; links are not followed. (Paths are made only for what is found:
    making one per entry would cost more than the walk.)"""
    found = _Found()
    skipped = str(own) if own is not None else None
    stack = [str(folder)]
    seen = 0
    while stack:
        current = stack.pop()
        seen += 1
        if seen > MAX_FOLDERS:
            found.complete = False
            break
        try:
            with os.scandir(current) as listing:
                entries = list(listing)
        except OSError:
            continue
        inside: list[str] = []
        names: set[str] = set()  # of what makes a git folder: HEAD, objects/, refs/, .git
        for entry in entries:
            name = entry.name
            with contextlib.suppress(OSError):
                if name == ".git":
                    names.add(name)
                    if entry.path != skipped:
                        info = entry.stat(follow_symlinks=False)
                        found.repositories[Path(entry.path)] = (info.st_dev, info.st_ino)
                elif entry.is_dir(follow_symlinks=False):
                    inside.append(entry.path)
                    if name in ("objects", "refs"):
                        names.add(name)
                elif name == "HEAD":
                    names.add(name)
                elif name == ".gitattributes" and entry.is_file(follow_symlinks=False):
                    found.attributes.append(Path(entry.path))
        if names == {"HEAD", "objects", "refs"}:  # a git folder, as git's discovery takes one
            with contextlib.suppress(OSError):
                found.repositories[Path(current)] = _identity(Path(current))
                found.bare.add(Path(current))
            continue
        stack += inside
    return found


def _is_git_dir(entries: dict[str, os.DirEntry[str]]) -> bool:
    """Whether a folder with these entries is a git folder (HEAD, objects/ and refs/)."""
    with contextlib.suppress(OSError):
        head, objects, refs = entries.get("HEAD"), entries.get("objects"), entries.get("refs")
        return bool(head and objects and refs and objects.is_dir() and refs.is_dir())
    return False


def _identity(path: Path) -> tuple[int, int]:
    info = os.lstat(path)
    return info.st_dev, info.st_ino


def _modules(repository: Checkout | None) -> dict[Path, tuple[int, int]]:
    """The submodules' git folders in the repository's git folder (`modules/<name>`, a name may
    hold slashes, and theirs in turn)."""
    if repository is None:
        return {}
    found: dict[Path, tuple[int, int]] = {}
    stack = [repository.common / "modules"]
    while stack:
        current = stack.pop()
        try:
            with os.scandir(current) as listing:
                entries = {entry.name: entry for entry in listing}
        except OSError:
            continue
        if _is_git_dir(entries) or "config" in entries:
            with contextlib.suppress(OSError):
                found[current] = _identity(current)
            stack.append(current / "modules")
            continue
        stack += [current / name for name, entry in entries.items() if entry.is_dir(follow_symlinks=False)]
    return found


def _watched_in(git_dir: Path) -> Iterator[Path]:
    """The files of a git folder that make code run: its configs, attributes and hooks."""
    yield from (git_dir / "config", git_dir / "config.worktree", git_dir / "info" / "attributes")
    with contextlib.suppress(OSError), os.scandir(git_dir / "hooks") as hooks:
        for entry in hooks:
            if not entry.name.endswith(".sample") and not entry.is_dir(follow_symlinks=False):
                yield git_dir / "hooks" / entry.name


def _keep(files: dict[Path, bytes], path: Path) -> None:
    """The file's content into `files` (a link as `link:` and its target; past KEPT_BYTES its
    hash); nothing when it is not there."""
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            files[path] = b"link:" + os.fsencode(os.readlink(path))
        elif stat.S_ISREG(info.st_mode):
            with open(path, "rb") as file:
                content = file.read(KEPT_BYTES + 1)
                if len(content) > KEPT_BYTES:
                    digest = hashlib.sha256(content)
                    while chunk := file.read(1 << 20):
                        digest.update(chunk)
                    content = b"sha256:" + digest.hexdigest().encode()
            files[path] = content
    except OSError:
        pass


def _fresh(root: Path, stamp: str) -> str:
    for n in range(1, 1000):
        candidate = root / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            candidate.mkdir(mode=0o700)
            return str(candidate)
        except FileExistsError:
            continue
    raise CrewError(f"cannot make a quarantine folder in {root}; remove old ones there")


# --- reading what the files say


def _is_attributes(path: Path) -> bool:
    return path.name == ".gitattributes" or (path.name == "attributes" and path.parent.name == "info")


def _drivers(text: str) -> Iterator[tuple[str, int]]:
    """Each driver a gitattributes text names (`filter=lfs`), with its line number; a macro's
    definition (`[attr]name filter=x`) included."""
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith('"'):  # a quoted pattern, with C-style escapes
            end = 1
            while end < len(stripped) and stripped[end] != '"':
                end += 2 if stripped[end] == "\\" else 1
            rest = stripped[end + 1 :]
        else:
            rest = stripped.split(None, 1)[1] if len(stripped.split(None, 1)) > 1 else ""
        for attribute in rest.split():
            name, equals, value = attribute.partition("=")
            if equals and name in DRIVERS:
                yield f"{name}={value}", n


def _config_entries(content: bytes | None) -> dict[str, list[str]]:
    """A git config file's entries by key (lower-cased section and name), as git reads them; None
    for content git cannot read."""
    if content is None:
        return {}
    if content.startswith((b"link:", b"sha256:")):
        return {"": ["(not readable)"]}
    done = run_git(["config", "--file", "-", "--list", "-z", "--no-includes"], Path("/"), input=content, check=False)
    if done.returncode != 0:
        return {"": ["(not readable by git)"]}
    return _entries(done.stdout)


def _blob_entries(checkout: Checkout, tree: str, path: str) -> dict[str, list[str]]:
    done = checkout.git(["config", "--blob", f"{tree}:{path}", "--list", "-z"], check=False)
    return _entries(done.stdout) if done.returncode == 0 else {}


def _blob(checkout: Checkout, tree: str, path: str) -> str:
    done = checkout.git(["cat-file", "blob", f"{tree}:{path}"], check=False)
    return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else ""


def _entries(listed: bytes) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for entry in listed.decode("utf-8", "surrogateescape").split("\0"):
        if entry:
            key, _, value = entry.partition("\n")
            out.setdefault(key, []).append(value)
    return out


def _changed_keys(old: dict[str, list[str]], new: dict[str, list[str]], patterns: tuple[str, ...]) -> list[str]:
    """The keys matching `patterns` whose values differ (ones `new` has: a key removed runs nothing)."""
    return sorted(
        key or "(unreadable)"
        for key in new
        if old.get(key) != new[key] and (not key or any(fnmatch.fnmatchcase(key, p) for p in patterns))
    )


def _harmful_keys(old: bytes | None, new: bytes) -> list[str]:
    """The keys a config change sets that are not HARMLESS (at most 5 named, then a count)."""
    before, after = _config_entries(old), _config_entries(new)
    keys = [
        key or "(a config git cannot read)"
        for key in sorted(after)
        if before.get(key) != after[key] and not (key and any(fnmatch.fnmatchcase(key, p) for p in HARMLESS))
    ]
    return keys if len(keys) <= 5 else [*keys[:5], f"{len(keys) - 5} more"]
