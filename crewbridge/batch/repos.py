"""One repository of a batch on this machine (`Place`): where it is (the person's repository, or
crew's clone of a URL in this machine's state folder), the commit the batch starts from, the fresh
worktree each attempt works in, the commit of what the agent changed, and the push to the URL.

Each step of a repository's workflow may run on another machine than the one before it (a dead
worker's repository is finished elsewhere), so what a step records is a fact that holds anywhere
(a commit, a tree, a patch) and each step makes what it needs on this machine from those facts: the
clone when there is none, the base commit when the clone lacks it, the agent's tree from its patch,
the commit from its recorded author and date (the same bytes, so the same id)."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from crewbridge.batch.spec import BatchSpec, Repo
from crewbridge.errors import CrewError
from crewbridge.system.childenv import FORGE
from crewbridge.system.git import Checkout, Stamp
from crewbridge.work.pulls import push, reach
from crewbridge.work.worktrees import Worktree, add, listed_in


class RepoError(CrewError):
    """A repository of a batch could not be reached, cloned, committed to or pushed."""


class Place:
    """`repo` on this machine, with crew's state folder `state` (clones go in state/batch/clones)."""

    def __init__(self, repo: Repo, state: Path) -> None:
        self.repo = repo
        self.clone = state / "batch" / "clones" / f"{repo.name}-{repo.key}"
        self._checkout: Checkout | None = None  # found once: each git command names its folders

    def checkout(self) -> Checkout:
        """The repository's checkout here: the person's own, or crew's clone (made when missing)."""
        if self._checkout is None:
            self._checkout = Checkout.of(self._folder(), "crew batch")
        return self._checkout

    def _folder(self) -> Path:
        if self.repo.path is not None:
            if not Path(self.repo.path).is_dir():
                raise RepoError(f"the repository {self.repo.path} is not on this machine; run this batch where it is")
            return Path(self.repo.path)
        assert self.repo.url is not None
        with self._locked():
            if not (self.clone / ".git").is_dir():
                self.clone.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                reach(["clone", "--quiet", "--no-checkout", "--", self.repo.url, str(self.clone)], self.clone.parent)
        return self.clone

    def base(self, batch: str) -> str:
        """The commit the batch starts from in this repository: HEAD of a local one; the URL's HEAD
        now, for a URL (kept under refs/crew/batch/BATCH in the clone)."""
        checkout = self.checkout()
        if self.repo.url is None:
            return checkout.head("crew batch")
        ref = f"refs/crew/batch/{batch}"
        with self._locked():
            self._fetch(checkout, [f"+HEAD:{ref}"])
        return checkout.text(["rev-parse", "--verify", f"{ref}^{{commit}}"])

    def worktree(self, spec: BatchSpec, base: str) -> Worktree:
        """A new worktree of the batch here, at `base`, on branch crew/batch-ID/AGENT (made anew when
        it is there: what an earlier try, or a killed run, left in it goes)."""
        checkout = self.checkout()
        self._have(checkout, base)
        self._release(checkout, spec.branch, keep_branch=True)
        return add(checkout, spec.run_id, spec.agent, base, replace=True)

    def discard(self, spec: BatchSpec) -> None:
        """Remove the batch's worktree and branch here (its agent changed nothing)."""
        self._release(self.checkout(), spec.branch, keep_branch=False)

    def commit(self, spec: BatchSpec, base: str, tree: str, patch: bytes | None, stamp: Stamp) -> str:
        """The commit of `tree` on `base` with the batch's message and `stamp`, on the batch's branch;
        the tree is made from `patch` when this machine does not have it."""
        checkout = self.checkout()
        self._have(checkout, base)
        if not self._exists(checkout, tree):
            self._rebuild(checkout, base, tree, patch)
        commit = checkout.commit(tree, base, spec.message(), stamp)
        checkout.git(["update-ref", f"refs/heads/{spec.branch}", commit])
        for worktree in listed_in(checkout, spec.run_id):  # its index follows the branch it has out
            worktree.checkout.git(["reset", "--quiet"])
        return commit

    def push(self, spec: BatchSpec, commit: str) -> None:
        """Push `commit` as the batch's branch (replacing it there) to the URL, then drop the worktree;
        or, for a local repository (--pr), to its origin, its worktree kept for `crew apply`."""
        checkout = self.checkout()
        if not self._exists(checkout, commit):
            raise RepoError(f"commit {commit[:10]} is not in {checkout.top}; `crew batch resume` makes it again")
        push(checkout, self.repo.url or "origin", commit, spec.branch)
        if self.repo.url is not None:
            self._release(checkout, spec.branch, keep_branch=False)

    def diff(self, commit: str) -> bytes:
        """What the batch's `commit` changed (from its parent, the commit the batch started from), as a
        patch; fetched from the URL's branches when this machine has no such commit."""
        checkout = self.checkout()
        self._have(checkout, commit)
        return checkout.diff(f"{commit}^", commit, binary=True)

    def _release(self, checkout: Checkout, branch: str, *, keep_branch: bool) -> None:
        """Remove the worktree that has the batch's branch out, wherever it is (an earlier try's,
        or one a dead worker made from another state folder: the repository is this workflow's
        now), and the branch unless `keep_branch`. git forgets worktrees whose folders are gone."""
        listing = checkout.git(["worktree", "list", "--porcelain", "-z"]).stdout.decode("utf-8", "surrogateescape")
        stale = False
        for record in listing.split("\0\0"):
            fields = dict(field.partition(" ")[::2] for field in record.split("\0") if field)
            stale = stale or "prunable" in fields
            if fields.get("branch") == f"refs/heads/{branch}":
                removed = checkout.git(["worktree", "remove", "--force", fields["worktree"]], check=False)
                stale = stale or removed.returncode != 0
        if stale:
            checkout.git(["worktree", "prune"])
        if not keep_branch:
            checkout.git(["branch", "-D", "--quiet", branch], check=False)

    def _have(self, checkout: Checkout, commit: str) -> None:
        """Fetch the URL's branches when the clone lacks `commit` (one made on another machine)."""
        if self.repo.url is None or self._exists(checkout, commit):
            return
        with self._locked():
            self._fetch(checkout, ["+refs/heads/*:refs/remotes/origin/*"])
        if not self._exists(checkout, commit):
            raise RepoError(f"commit {commit[:10]} is no longer at {self.repo.url}; start the batch again")

    def _rebuild(self, checkout: Checkout, base: str, tree: str, patch: bytes | None) -> None:
        """Write `tree` here from `base` and the agent's patch (made on another machine)."""
        if patch is None:
            raise RepoError(f"the agent's change to {self.repo.text} was too large to keep and is not on this machine")
        scratch = checkout.git_dir / f"crew-batch-index-{tree[:12]}"
        try:
            checkout.git(["read-tree", base], index=scratch)
            applied = ["apply", "--cached", "--binary", "--whitespace=nowarn", "-"]
            made = "" if checkout.git(applied, index=scratch, input=patch, check=False).returncode else tree
            made = made and checkout.git(["write-tree"], index=scratch).stdout.decode().strip()
        finally:
            scratch.unlink(missing_ok=True)
        if made != tree:
            raise RepoError(f"the agent's change to {self.repo.text} did not apply to {base[:10]} here")

    def _exists(self, checkout: Checkout, name: str) -> bool:
        return checkout.git(["cat-file", "-e", name], check=False).returncode == 0

    def _fetch(self, checkout: Checkout, refspecs: list[str]) -> None:
        assert self.repo.url is not None
        checkout.git(["fetch", "--quiet", "--no-tags", "--", self.repo.url, *refspecs], passed=FORGE)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """The clone to this process alone (two batches may fetch into one clone at once)."""
        self.clone.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(self.clone.parent / f"{self.clone.name}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield


def patch_of(worktree: Worktree, base: str, tree: str, limit: int) -> bytes | None:
    """The agent's change as a binary patch from `base` to `tree` (None when over `limit` bytes)."""
    patch = worktree.checkout.diff(base, tree, binary=True)
    return patch if len(patch) <= limit else None
