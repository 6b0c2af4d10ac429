"""Each agent in a git worktree of its own (`crew execute --worktree`), and what is done with them
afterwards: `crew worktrees` lists them, `crew apply` brings one agent's changes into the checkout,
`crew worktrees clean` removes them.

An agent's worktree is `$XDG_STATE_HOME/crewbridge/worktrees/<repository>-<tag>/<run id>/<agent>`
(`~/.local/state/…` by default; the tag tells apart repositories of one name), on a new branch
`crew/<run id>/<agent>` made from HEAD. It is outside the user's checkout, so no tool run there
lists it and git status does not show it; and outside the repository's `.git` folder, which the CLIs
guard (Claude Code asks before it edits any path with a `.git` folder in it). The commit it was made
from is kept beside git's own notes on the worktree (`<git common dir>/worktrees/<id>/crew-base`), out
of the agent's reach.

What an agent changed is everything that differs between that commit and the worktree as it is on
disk: edits, new files (untracked), deletions, and commits it made itself (crewbridge.system.git's snapshot).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from crewbridge.base.mentions import Mention
from crewbridge.config import state_dir
from crewbridge.errors import CrewError, UsageError
from crewbridge.system.git import Change, Checkout, summary
from crewbridge.system.gitguard import armed_between

if TYPE_CHECKING:
    from crewbridge.record.stream import Record

BRANCHES = "crew/"  # crew's branches: crew/<run id>/<agent>
BASE_FILE = "crew-base"  # in a worktree's own git folder: the commit it was made from
APPLY = ["--binary", "--whitespace=nowarn", "-"]  # git apply's options for an agent's patch, read on stdin
_LABEL_CHARACTERS = re.compile(r"[^\w.-]+")


class Conflict(CrewError):
    """An agent's changes do not apply to the checkout; nothing was changed."""


class RunsCode(CrewError):
    """An agent's changes hold a gitlink, a new attributes driver or a submodule source
    (crewbridge.system.gitguard); `crew apply` refuses them, nothing was changed."""


@dataclass(frozen=True)
class Worktree:
    """One agent's worktree of one run."""

    run_id: str
    agent: str
    path: Path
    branch: str
    base: str  # the commit it was made from
    checkout: Checkout

    def changes(self) -> list[Change]:
        """What the agent changed: the worktree on disk against the commit it was made from."""
        return self.checkout.changes(self.base, self.checkout.snapshot())

    def patch(self) -> bytes:
        """What the agent changed, as a patch git apply takes (binary files too)."""
        return self.checkout.diff(self.base, self.checkout.snapshot(), binary=True)

    def uncommitted(self) -> list[str]:
        """The files that differ from the commit the worktree has checked out (its snapshot's, not
        git status: no filter the agent's attributes name runs)."""
        head = self.checkout.head(f"the worktree {self.path}")
        return [change.path for change in self.checkout.changes(head, self.checkout.snapshot())]

    def applied_to(self, target: Checkout) -> bool:
        """Whether `target`'s files hold what the agent changed already (`crew apply` took it): the
        patch would come out of them cleanly."""
        return _holds(target, self.patch())

    def to_dict(self) -> dict[str, object]:
        return {"run_id": self.run_id, "agent": self.agent, "worktree": str(self.path), "branch": self.branch}


@dataclass
class Made:
    """The worktrees of a run, one per mention (in mention order), and the checkout they came from."""

    run_id: str
    worktrees: list[Worktree]
    top: Path  # the checkout's top folder
    base: str
    uncommitted: list[str]  # the checkout's files that differ from HEAD: not in the worktrees

    def announce(self, record: Record) -> None:
        """A warning in the run's record when the checkout's uncommitted changes are left out."""
        if self.uncommitted:
            from crewbridge.record.events import Notice

            record.emit(Notice(agent=self.worktrees[0].agent, text=self.notice(), about="warning"))

    def changed(self, worktree: Worktree, record: Record) -> list[Change] | None:
        """What the agent changed in `worktree`, in the run's record too (None, and the error
        there, when git could not tell: the run's answers stand)."""
        from crewbridge.record import events as ev

        try:
            changes: list[Change] | None = worktree.changes()
        except CrewError as exc:
            record.emit(ev.Error(agent=worktree.agent, message=str(exc), exit_code=exc.exit_code))
            changes = None
        record.emit(
            ev.Worktree(
                agent=worktree.agent,
                worktree=str(worktree.path),
                branch=worktree.branch,
                base=self.base,
                git_dir=str(worktree.checkout.git_dir),  # what crew ui's diff trusts, never its `.git`
                common=str(worktree.checkout.common),
                changes=None if changes is None else [change.to_dict() for change in changes],
            )
        )
        return changes

    def place(self, worktree: Worktree, folder: Path) -> Path:
        """Where an agent that would work in `folder` (inside the checkout) works in `worktree`; the
        folder is made when HEAD does not have it (an untracked one)."""
        real = folder.resolve()
        if not real.is_relative_to(self.top):
            raise UsageError(
                f"@{worktree.agent} works in {real}, outside the repository at {self.top}; --worktree needs "
                "its working directory inside the repository (its workdir in crew.yaml)"
            )
        inside = worktree.path / real.relative_to(self.top)
        inside.mkdir(parents=True, exist_ok=True)
        return inside

    def left(self) -> str:
        """What the person should know of the worktrees of a run that stopped before its end."""
        run = self.run_id
        return (
            f"the run stopped; its worktrees stay, with what each agent changed so far: `crew worktrees` lists "
            f"them, `crew apply {run} AGENT` takes one agent's changes, `crew worktrees clean {run}` removes them"
        )

    def notice(self) -> str:
        """What the person should know about where the worktrees started ("" when nothing)."""
        if not self.uncommitted:
            return ""
        count = len(self.uncommitted)
        return (
            f"your checkout has uncommitted changes ({count} file{'' if count == 1 else 's'}); the "
            f"worktrees start from HEAD ({self.base[:10]}) without them"
        )


def labels(mentions: Sequence[Mention]) -> list[str]:
    """Each mention's name in branch and folder names: the agent, or `agent-model` for an agent
    mentioned more than once (`-2`, `-3` … when that is taken too)."""
    counts: dict[str, int] = {}
    for mention in mentions:
        counts[mention.agent] = counts.get(mention.agent, 0) + 1
    taken: set[str] = set()
    out = []
    for mention in mentions:
        label = mention.agent
        if counts[mention.agent] > 1 and mention.model:
            label = f"{label}-{_LABEL_CHARACTERS.sub('-', mention.model).strip('-.')}"
        unique, n = label, 1
        while unique in taken:
            n += 1
            unique = f"{label}-{n}"
        taken.add(unique)
        out.append(unique)
    return out


def make(folder: Path, run_id: str, names: Sequence[str], base: str | None = None) -> Made:
    """A worktree per name, on branch crew/<run id>/<name> made from HEAD of the checkout holding
    `folder` (or from commit `base`). All or none: one that cannot be made removes those made before it."""
    checkout = Checkout.of(folder, "--worktree")
    base = base or checkout.head("--worktree")
    uncommitted = checkout.uncommitted()
    made: list[Worktree] = []
    try:
        for name in names:
            made.append(add(checkout, run_id, name, base))
    except BaseException:
        for worktree in made:
            _remove(checkout, worktree, force=True)
        raise
    return Made(run_id, made, checkout.top, base, uncommitted)


def add(checkout: Checkout, run_id: str, name: str, base: str, *, replace: bool = False) -> Worktree:
    """Agent `name`'s worktree of run `run_id` in `checkout`, at commit `base`, on a new branch
    crew/<run id>/<name> (with `replace`, the branch is reset when it exists: it must not be out
    in another worktree)."""
    _root(checkout).mkdir(parents=True, exist_ok=True, mode=0o700)
    path = _root(checkout) / run_id / name
    branch = f"{BRANCHES}{run_id}/{name}"
    checkout.git(["worktree", "add", "--quiet", "-B" if replace else "-b", branch, str(path), base])
    own = _own_git_dirs(checkout.common)[path]
    (own / BASE_FILE).write_text(base + "\n")
    return Worktree(run_id, name, path, branch, base, Checkout(path, own, checkout.common))


def listed(folder: Path, run_id: str | None = None) -> list[Worktree]:
    """crew's worktrees of the repository holding `folder` (of run `run_id` only, when given), by
    run and agent."""
    return listed_in(Checkout.of(folder, "crew worktrees"), run_id)


def listed_in(checkout: Checkout, run_id: str | None = None) -> list[Worktree]:
    """crew's worktrees of `checkout`'s repository (of run `run_id` only, when given), by run and agent."""
    root = _root(checkout)
    own = _own_git_dirs(checkout.common)
    out = checkout.git(["worktree", "list", "--porcelain", "-z"]).stdout.decode("utf-8", "surrogateescape")
    found = []
    for record in out.split("\0\0"):
        fields = dict(_field(field) for field in record.split("\0") if field)
        path, branch = Path(fields.get("worktree", "")).resolve(), fields.get("branch", "").removeprefix("refs/heads/")
        parts = branch.split("/")
        if len(parts) != 3 or parts[0] + "/" != BRANCHES or path.parent.parent != root or path not in own:
            continue
        if run_id is not None and parts[1] != run_id:
            continue
        base_file = own[path] / BASE_FILE
        base = base_file.read_text().strip() if base_file.is_file() else fields.get("HEAD", "")
        found.append(Worktree(parts[1], parts[2], path, branch, base, Checkout(path, own[path], checkout.common)))
    return sorted(found, key=lambda w: (w.run_id, w.agent))


def find(folder: Path, run_id: str, agent: str) -> Worktree:
    """Agent `agent`'s worktree of run `run_id` (a whole run id, a unique start of one, or `last`);
    a UsageError naming those there are."""
    agent = agent.removeprefix("@")
    of_run = listed(folder, _run_of(listed(folder), run_id))
    for worktree in of_run:
        if worktree.agent == agent:
            return worktree
    names = ", ".join(w.agent for w in of_run)
    raise UsageError(f"run {of_run[0].run_id} has no worktree for '{agent}'; its agents: {names}")


def _run_of(worktrees: list[Worktree], run_id: str) -> str:
    """The run `run_id` names among those with worktrees: itself, the one it starts, or the newest for `last`."""
    runs = sorted({w.run_id for w in worktrees})
    if run_id == "last" and runs:
        return runs[-1]
    found = [run for run in runs if run.startswith(run_id)] if run_id else []
    if run_id in runs:
        return run_id
    if len(found) == 1:
        return found[0]
    if found:
        listed_runs = ", ".join(found[:5])
        raise UsageError(f"run id '{run_id}' matches {len(found)} runs with worktrees ({listed_runs}); give more of it")
    raise UsageError(f"no worktree of run '{run_id}' in this repository; `crew worktrees` lists them")


@dataclass
class Applied:
    """What `apply` took: whose changes, and which (`already`: the checkout held them before, nothing was done)."""

    worktree: Worktree
    changes: list[Change]
    already: bool = False

    def lines(self) -> list[str]:
        """What `crew apply` says."""
        worktree = self.worktree
        if self.already:
            return [
                f"@{worktree.agent}'s changes of run {worktree.run_id} are in this checkout already (applied "
                f"before); nothing was applied. `crew worktrees clean {worktree.run_id}` removes the worktree"
            ]
        return [f"applied {worktree.branch}: {summary(self.changes)}", *(f"  {c.line()}" for c in self.changes)]


def apply(folder: Path, run_id: str, agent: str) -> Applied:
    """Bring `agent`'s changes of run `run_id` into the checkout holding `folder` as uncommitted
    changes, all or nothing: Conflict (nothing changed) when they do not apply. Changes the checkout
    holds already (applied before) are not applied again."""
    target = Checkout.of(folder, "crew apply")
    worktree = find(folder, run_id, agent)
    tree = worktree.checkout.snapshot()
    changed = worktree.checkout.changes(worktree.base, tree)
    if not changed:
        raise UsageError(f"@{worktree.agent} changed nothing in run {worktree.run_id}; there is nothing to apply")
    armed = armed_between(worktree.checkout, worktree.base, tree)
    if armed:
        things = "; ".join(thing.line() for thing in armed)
        raise RunsCode(
            f"@{worktree.agent}'s changes hold what would run code on your next git command ({things}); "
            f"nothing was applied. Look at them in {worktree.path}, and take what you want by hand"
        )
    patch = worktree.checkout.diff(worktree.base, tree, binary=True)
    tried = target.git(["apply", "--check", *APPLY], input=patch, check=False)
    if tried.returncode != 0:
        if _holds(target, patch):
            return Applied(worktree, changed, already=True)
        said = "; ".join(line.removeprefix("error: ") for line in tried.stderr.decode("utf-8", "replace").splitlines())
        raise Conflict(
            f"@{worktree.agent}'s changes do not apply to {target.top} ({said}); nothing was applied. "
            f"Commit or stash your changes there and try again, or take them from {worktree.path} by hand"
        )
    target.git(["apply", *APPLY], input=patch)
    return Applied(worktree, changed)


def _holds(target: Checkout, patch: bytes) -> bool:
    """Whether `target`'s files hold `patch` already: it would come out of them cleanly."""
    reverse = target.git(["apply", "--check", "--reverse", *APPLY], input=patch, check=False)
    return bool(patch) and reverse.returncode == 0


def table(worktrees: list[Worktree], as_json: bool = False) -> list[str]:
    """`crew worktrees`: a line per worktree (run, agent, what it changed, branch, folder) under a
    header, or a JSON object per line."""
    rows = []
    for worktree in worktrees:
        try:
            changes: list[Change] | None = worktree.changes() if worktree.path.is_dir() else None
        except CrewError:
            changes = None
        rows.append((worktree, changes))
    if as_json:
        return [
            json.dumps({**w.to_dict(), "base": w.base, "changes": None if c is None else [x.to_dict() for x in c]})
            for w, c in rows
        ]
    if not rows:
        return []
    cells = [("RUN", "AGENT", "CHANGES", "BRANCH", "WORKTREE")] + [
        (w.run_id, w.agent, "missing" if c is None else summary(c), w.branch, str(w.path)) for w, c in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(4)]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)) + "  " + row[4]
        for row in cells
    ]


@dataclass
class Cleaned:
    """What `clean` did with one worktree."""

    worktree: Worktree
    removed: bool
    why: str = ""  # why it was kept
    branch_kept: bool = False  # its branch holds commits of its own
    applied: bool = False  # its uncommitted changes are in the checkout (crew apply took them)

    def line(self) -> str:
        worktree = self.worktree
        if not self.removed:
            return f"kept {worktree.path}: {self.why}"
        applied = " (its changes are in your checkout: crew apply took them)" if self.applied else ""
        if self.branch_kept:
            return (
                f"removed {worktree.path}{applied}; kept branch {worktree.branch}, which holds commits of its "
                f"own (git branch -D {worktree.branch} deletes it)"
            )
        return f"removed {worktree.path} and branch {worktree.branch}{applied}"


def clean(folder: Path, run_id: str | None = None, *, force: bool = False) -> list[Cleaned]:
    """Remove crew's worktrees (of run `run_id`, or all) and their branches. A worktree with
    uncommitted changes is kept unless `force` or the checkout holds them already (crew apply took
    them); so is one `folder` is in; a branch that holds commits of its own (made in the worktree)
    is kept unless `force`."""
    checkout = Checkout.of(folder, "crew worktrees clean")
    here = folder.resolve()
    done = []
    found = listed(folder)
    if run_id is not None:
        found = listed(folder, _run_of(found, run_id))
    for worktree in found:
        if here == worktree.path or here.is_relative_to(worktree.path):
            done.append(Cleaned(worktree, False, "crew runs inside it; run clean from elsewhere"))
            continue
        dirty = worktree.uncommitted() if worktree.path.is_dir() else []
        applied = bool(dirty) and not force and worktree.applied_to(checkout)
        if dirty and not force and not applied:
            count = f"{len(dirty)} file{'' if len(dirty) == 1 else 's'}"
            how = f"`crew apply {worktree.run_id} {worktree.agent}` takes them, --force drops them"
            why = f"uncommitted changes ({count}); {how}"
            done.append(Cleaned(worktree, False, why))
            continue
        done.append(Cleaned(worktree, True, branch_kept=not _remove(checkout, worktree, force), applied=applied))
    return done


def _remove(checkout: Checkout, worktree: Worktree, force: bool) -> bool:
    """Remove the worktree, and its branch unless it holds commits of its own and not `force`;
    whether the branch went too. Its run's folder goes once empty."""
    removed = checkout.git(["worktree", "remove", "--force", str(worktree.path)], check=False)
    if removed.returncode != 0 and worktree.path.exists():  # git refuses one whose `.git` link was rewritten
        try:
            shutil.rmtree(worktree.path)  # inside crew's folder; links are removed, not followed
        except OSError as exc:
            raise CrewError(f"cannot remove the worktree {worktree.path}: {exc.strerror or exc}") from None
    checkout.git(["worktree", "prune"])
    tip = checkout.git(["rev-parse", "--verify", "--quiet", f"refs/heads/{worktree.branch}"], check=False)
    gone = tip.returncode != 0 or force or tip.stdout.decode().strip() == worktree.base
    if gone and tip.returncode == 0:
        checkout.git(["branch", "-D", "--quiet", worktree.branch])
    for folder in (worktree.path.parent, worktree.path.parent.parent):  # the run's, the repository's
        try:
            folder.rmdir()
        except OSError:
            break  # other worktrees are still there
    return gone


def _root(checkout: Checkout) -> Path:
    """Where crew keeps the worktrees of `checkout`'s repository: a folder of the state directory
    named after the repository, tagged with its git folder's path."""
    common = checkout.common.resolve()
    name = common.parent.name if common.name == ".git" else common.stem
    tag = hashlib.sha256(os.fsencode(common)).hexdigest()[:8]
    return (state_dir() / "worktrees" / f"{name}-{tag}").resolve()


def _field(text: str) -> tuple[str, str]:
    """`HEAD abc…` → (HEAD, abc…); `bare` → (bare, "")."""
    name, _, value = text.partition(" ")
    return name, value


def _own_git_dirs(common: Path) -> dict[Path, Path]:
    """Each worktree's own git folder, by the worktree's path, as git records them in the common
    git folder (never read from the worktree, whose `.git` an agent could rewrite)."""
    found = {}
    for own in (common / "worktrees").glob("*"):
        try:
            pointer = (own / "gitdir").read_text().strip()
        except OSError:
            continue
        found[Path(pointer).parent.resolve()] = own
    return found
