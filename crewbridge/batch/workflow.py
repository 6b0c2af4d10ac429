"""One repository of a batch as a durable DBOS workflow (`BatchWorker.repo`), and its steps.

The workflow: a clock step (when the repository started), the batch's budget (no new repository
starts once the finished ones cost --max-total-cost), then tries: get the repository (the commit it
starts from), make a fresh worktree, run the agent in it (execute mode, crew's sandbox and policy,
--review as `crew execute --review` does), commit what it changed, push it for a URL. A try that
fails is followed by another from a fresh worktree, --retries times. DBOS records each step's result;
a workflow recovered after its worker died replays what was recorded and runs the rest, on whatever
machine takes it (crewbridge.batch.repos makes what a step needs there).

A step never raises what crew reports (CrewError): it returns {"error": …} so the try's failure is
recorded like any result. `DBOS.set_event("phase", …)` tells `crew batch status` where a repository is.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbos import DBOS, DBOSConfiguredInstance

from crewbridge.api import Stop
from crewbridge.batch.repos import Place, RepoError, Stamp, patch_of
from crewbridge.batch.spec import BatchSpec, Repo
from crewbridge.batch.store import INSTANCE
from crewbridge.bridge import Bridge
from crewbridge.config import Config
from crewbridge.errors import CrewError
from crewbridge.git import Change
from crewbridge.sandbox import Sandboxing
from crewbridge.usage import Tally

MAX_PATCH = 8 * 1024 * 1024  # bytes of an agent's patch kept in the database (to commit it elsewhere)
CANCEL_POLL = 1.0  # seconds between two looks at whether the workflow was cancelled, while its agent runs


@dataclass
class Runtime:
    """What this process brings to each repository's run: its crew.yaml, its state folder (clones,
    worktrees) and the machine's sandbox."""

    config: Config
    state: Path
    sandboxing: Sandboxing


@DBOS.dbos_class()
class BatchWorker(DBOSConfiguredInstance):
    """The workflows and steps, bound to this process's Runtime (DBOS finds it by INSTANCE)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        super().__init__(INSTANCE)

    @DBOS.workflow()
    def repo(self, spec_data: dict[str, Any], repo_data: dict[str, Any]) -> dict[str, Any]:
        """One repository's run: its record (crewbridge.batch.report's row)."""
        spec, repo = BatchSpec.of(spec_data), Repo.of(repo_data)
        record: dict[str, Any] = {"repo": repo.text, "status": "failed", "branch": None, "commit": None}
        record.update(changes=None, usage=None, attempts=0, error=None, started=self.clock(), ended=None)
        refused = self.budget(spec_data)
        if refused:
            record.update(status="skipped", error=refused, ended=self.clock())
            return record
        usage = Tally()
        base: str | None = None
        for attempt in range(1, spec.retries + 2):
            record["attempts"] = attempt
            error = None
            if base is None:
                self._phase("fetch", attempt, record["started"])
                fetched = self.fetch(spec_data, repo_data)
                base, error = fetched.get("base"), fetched.get("error")
            if base is not None:
                error = self._attempt(spec, repo, base, attempt, record, usage)
            record["error"] = error
            if error is None:
                break
        record.update(usage=usage.to_dict() if usage else None, ended=self.clock())
        return record

    def _attempt(
        self, spec: BatchSpec, repo: Repo, base: str, attempt: int, record: dict[str, Any], usage: Tally
    ) -> str | None:
        """One try, from a fresh worktree: the error that ended it, or None (the record updated)."""
        spec_data, repo_data = spec.to_dict(), repo.to_dict()
        self._phase("worktree", attempt, record["started"])
        made = self.worktree(spec_data, repo_data, base)
        if made.get("error"):
            return str(made["error"])
        self._phase("agent", attempt, record["started"])
        ran = self.agent(spec_data, repo_data, base)
        usage.add(Tally.of(ran.get("usage")))
        if ran.get("error"):
            return str(ran["error"])
        record["changes"] = ran["changes"]
        if not ran["changes"]["files"]:
            record.update(status="unchanged", branch=None, commit=None)
            return None
        self._phase("commit", attempt, record["started"])
        committed = self.commit(spec_data, repo_data, base, ran["tree"], ran.get("patch"))
        if committed.get("error"):
            return str(committed["error"])
        if repo.url is not None:
            self._phase("push", attempt, record["started"])
            pushed = self.push(spec_data, repo_data, committed["commit"], committed["stamp"], base, ran)
            if pushed.get("error"):
                return str(pushed["error"])
        record.update(status="done", branch=spec.branch, commit=committed["commit"])
        return None

    def _phase(self, step: str, attempt: int, started: float) -> None:
        DBOS.set_event("phase", {"step": step, "attempt": attempt, "started": started})

    @DBOS.step()
    def clock(self) -> float:
        return time.time()

    @DBOS.step()
    def budget(self, spec_data: dict[str, Any]) -> str | None:
        """Why this repository may not start (the batch passed --max-total-cost), or None."""
        spec = BatchSpec.of(spec_data)
        if spec.max_total_cost is None:
            return None
        spent = 0.0
        for row in DBOS.list_workflows(workflow_id_prefix=f"{spec.batch}:", status="SUCCESS", load_input=False):
            spent += ((row.output or {}).get("usage") or {}).get("cost_usd") or 0.0
        if spent < spec.max_total_cost:
            return None
        return (
            f"not started: the batch's repositories cost ${spent:.4f}, past --max-total-cost ${spec.max_total_cost:g}"
        )

    @DBOS.step()
    def fetch(self, spec_data: dict[str, Any], repo_data: dict[str, Any]) -> dict[str, Any]:
        """The commit the batch starts from in this repository."""
        try:
            return {"base": self._place(repo_data).base(spec_data["batch"])}
        except CrewError as exc:
            return {"error": str(exc)}

    @DBOS.step()
    def worktree(self, spec_data: dict[str, Any], repo_data: dict[str, Any], base: str) -> dict[str, Any]:
        """A fresh worktree at `base` (the one of an earlier try removed)."""
        try:
            made = self._place(repo_data).worktree(BatchSpec.of(spec_data), base, fresh=True)
        except CrewError as exc:
            return {"error": str(exc)}
        return {"path": str(made.path), "branch": made.branch}

    @DBOS.step()
    def agent(self, spec_data: dict[str, Any], repo_data: dict[str, Any], base: str) -> dict[str, Any]:
        """The agent's run in the worktree (made anew if a killed run left it changed, or it is on
        another machine): its usage, and what it changed (the tree, and its patch from `base`)."""
        spec = BatchSpec.of(spec_data)
        try:
            worktree = self._place(repo_data).worktree(spec, base, fresh=False)
        except CrewError as exc:
            return {"error": str(exc)}
        bridge = Bridge(self.runtime.config, workdir=worktree.path, sandboxing=self.runtime.sandboxing)
        stop, ended = Stop(), threading.Event()
        watcher = threading.Thread(target=_watch, args=(DBOS.workflow_id, stop, ended), daemon=True)
        watcher.start()
        try:
            outcome = bridge.run(spec.task, "execute", options=spec.options(), stop=stop)[0]
        finally:
            ended.set()
        usage = outcome.result.usage if outcome.result is not None else None
        if outcome.error is not None:
            return {"error": str(outcome.error), "usage": usage}
        try:
            tree = worktree.checkout.snapshot()
            changes = worktree.checkout.changes(base, tree)
            patch = patch_of(worktree, base, tree, MAX_PATCH) if changes else None
        except CrewError as exc:
            return {"error": str(exc), "usage": usage}
        return {"tree": tree, "patch": patch, "changes": counted(changes), "usage": usage}

    @DBOS.step()
    def commit(
        self, spec_data: dict[str, Any], repo_data: dict[str, Any], base: str, tree: str, patch: bytes | None
    ) -> dict[str, Any]:
        """The commit of the agent's tree on the batch's branch, and who made it when."""
        place = self._place(repo_data)
        try:
            stamp = place.stamp(time.time())
            commit = place.commit(BatchSpec.of(spec_data), base, tree, patch, stamp)
        except CrewError as exc:
            return {"error": str(exc)}
        return {"commit": commit, "stamp": stamp.__dict__}

    @DBOS.step()
    def push(
        self,
        spec_data: dict[str, Any],
        repo_data: dict[str, Any],
        commit: str,
        stamp: dict[str, str],
        base: str,
        ran: dict[str, Any],
    ) -> dict[str, Any]:
        """The branch pushed to the URL (the commit made again first when it was made elsewhere)."""
        spec, place = BatchSpec.of(spec_data), self._place(repo_data)
        try:
            if place.commit(spec, base, ran["tree"], ran.get("patch"), Stamp(**stamp)) != commit:
                raise RepoError(f"the commit made again in {place.clone} differs from {commit[:10]}")
            place.push(spec, commit)
        except CrewError as exc:
            return {"error": str(exc)}
        return {}

    def _place(self, repo_data: dict[str, Any]) -> Place:
        return Place(Repo.of(repo_data), self.runtime.state)


def counted(changes: list[Change]) -> dict[str, int]:
    """What a repository's record says of its changes: files, lines added and removed."""
    return {
        "files": len(changes),
        "added": sum(change.added or 0 for change in changes),
        "removed": sum(change.removed or 0 for change in changes),
    }


def _watch(workflow_id: str | None, stop: Stop, ended: threading.Event) -> None:
    """Stop the agent once its workflow is cancelled (`crew batch cancel`), until `ended`."""
    while workflow_id is not None and not ended.wait(CANCEL_POLL):
        try:
            status = DBOS.get_workflow_status(workflow_id)
        except Exception:  # the database busy (SQLite locked by a writer): look again next time
            continue
        if status is not None and status.status == "CANCELLED":
            stop.set()
            return
