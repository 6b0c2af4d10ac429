"""One repository of a batch as a durable DBOS workflow (`BatchWorker.repo`), and its steps.

The workflow: a first step (when the repository started; whether the batch's budget lets it start,
none does once the finished ones cost --max-total-cost; the commit it starts from), then tries: run
the agent in a fresh worktree at that commit (execute mode, crew's sandbox and policy, --review as
`crew execute --review` does), commit what it changed, push it for a URL. A try that fails is
followed by another from a fresh worktree, --retries times. DBOS records each step's result; a
workflow recovered after its worker died replays what was recorded and runs the rest, on whatever
machine takes it (crewbridge.batch.repos makes what a step needs there).

Each step is a write to the database (and each phase below), so there are few: the worktree is made
by the agent's step, which a recovered run does again anyway (a killed agent's worktree is not to be
trusted), and the end time is read by the workflow itself (it decides nothing).

A step never raises what crew reports (CrewError): it returns {"error": …} so the try's failure is
recorded like any result. `DBOS.set_event("phase", …)` tells `crew batch status` where a repository is.
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbos import DBOS, DBOSConfiguredInstance

from crewbridge.base.stop import Stop
from crewbridge.base.usage import Tally
from crewbridge.batch.database import Side
from crewbridge.batch.repos import Place, RepoError, patch_of
from crewbridge.batch.spec import BatchSpec, Repo
from crewbridge.batch.store import INSTANCE, Running
from crewbridge.bridge import Bridge
from crewbridge.config import Config
from crewbridge.engine.outputs import check_record
from crewbridge.errors import CrewError
from crewbridge.record.events import End, Event, Parent
from crewbridge.sandbox import Sandboxing
from crewbridge.system.forge import Client, Pace, Proposal, forge_of, propose, remote_of
from crewbridge.system.git import Change, Stamp
from crewbridge.telemetry.exporter import Exporter
from crewbridge.ui.link import attend
from crewbridge.work.pulls import FILES, Told, base_branch, body, remote_url, title_of

MAX_PATCH = 8 * 1024 * 1024  # bytes of an agent's patch kept in the database (to commit it elsewhere)


@dataclass
class Runtime:
    """What this process brings to each repository's run: its crew.yaml, its state folder (clones,
    worktrees), the machine's sandbox, where the workflows running here say so (their agents are
    stopped there when they are cancelled), crew's own look at the database (a workflow whose rows
    are not crew's JSON refuses itself), and the forges' pace all workers share."""

    config: Config
    state: Path
    sandboxing: Sandboxing
    running: Running
    side: Side
    traced: Exporter | None = None  # the repositories' runs as traces, when telemetry is on
    pace: Pace = field(init=False)

    def __post_init__(self) -> None:
        self.pace = self.side.pace()


@DBOS.dbos_class()
class BatchWorker(DBOSConfiguredInstance):
    """The workflows and steps, bound to this process's Runtime (DBOS finds it by INSTANCE)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._places: dict[str, Place] = {}
        super().__init__(INSTANCE)

    @DBOS.workflow()
    def repo(self, spec_data: dict[str, Any], repo_data: dict[str, Any]) -> dict[str, Any]:
        """One repository's run: its record (crewbridge.batch.report's row)."""
        workflow = str(DBOS.workflow_id)
        refused = self.runtime.side.foreign([workflow])  # before DBOS replays a step it recorded
        if refused:  # nothing of its inputs is used
            now = time.time()
            return {**new_record("", now), "error": refused[workflow], "ended": now}
        with self.runtime.running.run(workflow) as stop:
            return self._run(BatchSpec.of(spec_data), Repo.of(repo_data), stop)

    def _run(self, spec: BatchSpec, repo: Repo, stop: Stop) -> dict[str, Any]:
        spec_data, repo_data = spec.to_dict(), repo.to_dict()
        if repo.url is not None:  # a clone may take a while
            self._phase("fetch", 1, time.time())
        begun = self.begin(spec_data, repo_data)
        record = new_record(repo.text, begun["started"])
        if begun.get("refused"):
            record.update(status="skipped", error=begun["refused"], ended=time.time())
            return record
        usage = Tally()
        base, error = begun.get("base"), begun.get("error")
        for attempt in range(1, spec.retries + 2):
            record["attempts"] = attempt
            if base is None and attempt > 1:
                self._phase("fetch", attempt, record["started"])
                fetched = self.fetch(spec_data, repo_data)
                base, error = fetched.get("base"), fetched.get("error")
            if base is not None:
                error = self._attempt(spec, repo, base, attempt, record, usage, stop)
            record["error"] = error
            if error is None or record["commit"] is not None:  # a change committed is not made again
                break
        record.update(usage=usage.to_dict() if usage else None, ended=time.time())
        return record

    def _attempt(
        self, spec: BatchSpec, repo: Repo, base: str, attempt: int, record: dict[str, Any], usage: Tally, stop: Stop
    ) -> str | None:
        """One try, from a fresh worktree: the error that ended it, or None (the record updated)."""
        spec_data, repo_data = spec.to_dict(), repo.to_dict()
        self._phase("agent", attempt, record["started"])
        ran = self.agent(spec_data, repo_data, base, stop)
        usage.add(Tally.of(ran.get("usage")))
        record["disarmed"] += [{**armed, "attempt": attempt} for armed in ran.get("disarmed", [])]
        record.update(answer=ran.get("answer"), run=ran.get("run"), checks=ran.get("checks", []))
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
        if repo.url is not None or spec.proposes:  # to the URL, or to the repository's origin
            self._phase("push", attempt, record["started"])
            pushed = self.push(spec_data, repo_data, committed["commit"], committed["stamp"], base, ran)
            if pushed.get("error"):
                return str(pushed["error"])
        record.update(status="done", branch=spec.branch, commit=committed["commit"])
        if spec.proposes:
            self._phase("pull", attempt, record["started"])
            pulled = self.pull(spec_data, repo_data, told(spec, ran))
            if pulled.get("error"):  # the branch is pushed: no try makes the change again
                record["status"] = "failed"
                return f"pushed {spec.branch}; no {pulled.get('noun', 'pull request')}: {pulled['error']}"
            record["pull"] = pulled["pull"]
        return None

    def _phase(self, step: str, attempt: int, started: float) -> None:
        DBOS.set_event("phase", {"step": step, "attempt": attempt, "started": started})

    @DBOS.step()
    def begin(self, spec_data: dict[str, Any], repo_data: dict[str, Any]) -> dict[str, Any]:
        """When the repository started; why it may not (`refused`: the batch passed
        --max-total-cost); else the commit it starts from (`base`), or why there is none (`error`)."""
        begun: dict[str, Any] = {"started": time.time(), "refused": self._refused(BatchSpec.of(spec_data))}
        return begun if begun["refused"] else {**begun, **self._base(spec_data, repo_data)}

    @DBOS.step()
    def fetch(self, spec_data: dict[str, Any], repo_data: dict[str, Any]) -> dict[str, Any]:
        """The commit the batch starts from in this repository (a try after the first step could not tell)."""
        return self._base(spec_data, repo_data)

    def _base(self, spec_data: dict[str, Any], repo_data: dict[str, Any]) -> dict[str, Any]:
        try:
            return {"base": self._place(repo_data).base(spec_data["batch"])}
        except CrewError as exc:
            return {"error": str(exc)}

    def _refused(self, spec: BatchSpec) -> str | None:
        """Why this repository may not start (the batch passed --max-total-cost), or None."""
        if spec.max_total_cost is None:
            return None
        spent = 0.0
        ended = DBOS.list_workflows(
            workflow_id_prefix=f"{spec.batch}:", status="SUCCESS", load_input=False, load_output=False
        )
        foreign = self.runtime.side.foreign([row.workflow_id for row in ended])  # their outputs are read
        clean = [row.workflow_id for row in ended if row.workflow_id not in foreign]
        for row in DBOS.list_workflows(workflow_ids=clean, load_input=False) if clean else ():
            spent += ((row.output or {}).get("usage") or {}).get("cost_usd") or 0.0
        if spent < spec.max_total_cost:
            return None
        return (
            f"not started: the batch's repositories cost ${spent:.4f}, past --max-total-cost ${spec.max_total_cost:g}"
        )

    @DBOS.step()
    def agent(self, spec_data: dict[str, Any], repo_data: dict[str, Any], base: str, stop: Stop) -> dict[str, Any]:
        """The agent's run in a fresh worktree at `base` (ended by `stop`): its answer, run id and
        usage, what crew disarmed for git, and what it changed (the tree, and its patch from `base`,
        in base64). A run that changed nothing leaves no worktree and no branch."""
        spec = BatchSpec.of(spec_data)
        try:
            worktree = self._place(repo_data).worktree(spec, base)
        except CrewError as exc:
            return {"error": str(exc)}
        traced = self.runtime.traced
        bridge = Bridge(
            self.runtime.config,
            workdir=worktree.path,
            sandboxing=self.runtime.sandboxing,
            observers=[attend, *([traced.observe] if traced else [])],
            tracing=traced.tracing if traced else None,
        )
        parent = Parent(
            batch=spec.batch, repo=Repo.of(repo_data).text
        )  # the runs list names both; its trace: the batch's
        ended: list[End] = []  # the record's end: each agent's usage (the reviewer's too)

        def keep(event: Event) -> None:
            if isinstance(event, End):
                ended.append(event)

        outcome = bridge.run(spec.task, "execute", options=spec.options(), stop=stop, on_progress=keep, parent=parent)[
            0
        ]
        result = outcome.result
        ran: dict[str, Any] = {
            "usage": result.usage if result is not None else None,
            "answer": result.answer if result is not None else None,
            "run": outcome.run,
            "disarmed": [armed.to_dict() for armed in outcome.disarmed],
            "checks": [check_record(check) for check in outcome.checks],
            "review": outcome.review.to_dict() if outcome.review is not None else None,
            "agents": ended[0].usage if ended else {},
        }
        if outcome.error is not None:
            return {**ran, "error": str(outcome.error)}
        try:
            tree = worktree.checkout.snapshot()
            changes = worktree.checkout.changes(base, tree)
            patch = patch_of(worktree, base, tree, MAX_PATCH) if changes else None
            if not changes:
                self._place(repo_data).discard(spec)
        except CrewError as exc:
            return {**ran, "error": str(exc)}
        shown = base64.b64encode(patch).decode() if patch is not None else None
        files = [change.to_dict() for change in changes[:FILES]]
        return {**ran, "tree": tree, "patch": shown, "changes": counted(changes), "files": files}

    @DBOS.step()
    def commit(
        self, spec_data: dict[str, Any], repo_data: dict[str, Any], base: str, tree: str, patch: str | None
    ) -> dict[str, Any]:
        """The commit of the agent's tree on the batch's branch, and who made it when."""
        place = self._place(repo_data)
        try:
            stamp = place.checkout().stamp(time.time())
            commit = place.commit(BatchSpec.of(spec_data), base, tree, _bytes(patch), stamp)
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
        """The branch pushed to the URL, or to a local repository's origin for --pr (the commit made
        again first when it was made elsewhere)."""
        spec, place = BatchSpec.of(spec_data), self._place(repo_data)
        try:
            if place.commit(spec, base, ran["tree"], _bytes(ran.get("patch")), Stamp(**stamp)) != commit:
                raise RepoError(f"the commit made again in {place.clone} differs from {commit[:10]}")
            place.push(spec, commit)
        except CrewError as exc:
            return {"error": str(exc)}
        return {}

    @DBOS.step()
    def pull(self, spec_data: dict[str, Any], repo_data: dict[str, Any], told_data: dict[str, Any]) -> dict[str, Any]:
        """The pull request of the batch's branch, pushed: opened, or the one open for it updated
        (its forge paced across every worker: Runtime.pace)."""
        spec, place = BatchSpec.of(spec_data), self._place(repo_data)
        noun = "pull request"
        try:
            checkout = place.checkout()
            remote = remote_of(place.repo.url or remote_url(checkout))
            client = Client(forge_of(remote), self.runtime.pace)
            noun = client.forge.noun
            proposal = Proposal(
                spec.branch,
                base_branch(checkout, place.repo.url or "origin"),
                title_of(spec.task, spec.pull.get("pr_title")),
                body(Told(**told_data, intro=spec.pull.get("pr_body"))),
                bool(spec.pull.get("draft")),
                tuple(spec.pull.get("labels") or ()),
            )
            pull = propose(client, remote, proposal)
        except CrewError as exc:
            return {"error": str(exc), "noun": noun}
        waits = {"limits": len(client.waits), "waited": sum(client.waits)}
        return {"pull": {**pull.to_dict(), "forge": client.forge.kind, **waits}}

    def _place(self, repo_data: dict[str, Any]) -> Place:
        """The repository on this machine (one Place a repository: it knows its checkout once found)."""
        repo = Repo.of(repo_data)
        return self._places.setdefault(repo.key, Place(repo, self.runtime.state))


def new_record(repo: str, started: float) -> dict[str, Any]:
    """A repository's record as it starts: failed until a try says otherwise."""
    record: dict[str, Any] = {"repo": repo, "status": "failed", "branch": None, "commit": None, "changes": None}
    record.update(usage=None, attempts=0, error=None, disarmed=[], answer=None, run=None, checks=[], pull=None)
    return {**record, "started": started, "ended": None}


def told(spec: BatchSpec, ran: dict[str, Any]) -> dict[str, Any]:
    """What a repository's pull request says (crewbridge.work.pulls.Told), from its agent's step."""
    return {
        "task": spec.task,
        "answer": ran.get("answer"),
        "changes": ran.get("files", []),
        "counts": ran.get("changes"),
        "checks": ran.get("checks", []),
        "review": ran.get("review"),
        "usage": ran.get("agents", {}),
        "run": ran.get("run"),
        "batch": spec.batch,
    }


def _bytes(patch: str | None) -> bytes | None:
    """A patch as a step recorded it (base64: the database holds JSON)."""
    return base64.b64decode(patch) if patch is not None else None


def counted(changes: list[Change]) -> dict[str, int]:
    """What a repository's record says of its changes: files, lines added and removed."""
    return {
        "files": len(changes),
        "added": sum(change.added or 0 for change in changes),
        "removed": sum(change.removed or 0 for change in changes),
    }
