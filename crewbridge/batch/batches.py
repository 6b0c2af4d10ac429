"""The batch commands on crewbridge.batch.store: submit a batch (and work on it here until it is
finished, or return at once), be a worker, resume, cancel, and read a batch's state."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from itertools import groupby
from pathlib import Path
from typing import Any

from crewbridge.base.mentions import parse_agent
from crewbridge.base.options import PULL, RunOptions, command_line
from crewbridge.batch.database import database_files
from crewbridge.batch.report import COMPLETE, FINISHED, paused, state
from crewbridge.batch.repos import Place
from crewbridge.batch.spec import BatchSpec, Repo, batch_id
from crewbridge.batch.store import Row, Store, per_repository
from crewbridge.config import Config, state_dir
from crewbridge.errors import CrewError, UsageError
from crewbridge.sandbox import Sandboxing
from crewbridge.system.forge import Client, Pace, forge_of, remote_of, state_of
from crewbridge.system.git import Checkout
from crewbridge.work.pulls import remote_url

RECOVER_EVERY = 2.0  # seconds between two looks for dead executors while waiting or working
READ_EVERY = 0.25  # seconds between two reads of what this process waits for (a batch; a worker's work)
View = Callable[[Sequence[Row]], None]  # shown each time the batch is read


def open_working(url: str, config: Config, listen: Sequence[str] | None, new: Sequence[BatchSpec] = ()) -> Store:
    """This process as an executor that runs repositories (with `config`, this machine's state folder
    and sandbox), on the queues of the batches `listen` (None: every batch's, as a worker); `new`:
    the batch it submits."""
    from crewbridge.batch.workflow import BatchWorker, Runtime  # loads DBOS
    from crewbridge.telemetry.exporter import exporter

    sandboxing = Sandboxing()
    config = replace(config, hide=[*config.hide, *database_files(url)])  # also where --db put it
    traced = exporter(config)  # the repositories' runs as one trace per batch, when telemetry is on
    return Store.open(
        url,
        worker=lambda running, side: BatchWorker(Runtime(config, state_dir(), sandboxing, running, side, traced)),
        listen=listen,
        new=new,
    )


def spec_of(task: str, given: dict[str, Any], config: Config) -> BatchSpec:
    """The batch the command line describes (`given`: its options by name); an agent that is not
    configured (the writer, the reviewer) is a UsageError."""
    command_line(given)
    pull = {name: value for name in PULL if (value := given.pop(name, None))}
    RunOptions(worktree=True, **pull).check("execute")  # --draft, --pr-title, --pr-body, --label need --pr
    run = {name: given[name] for name in RunOptions.names() if name in given}
    spec = BatchSpec(
        batch_id(given.get("given_id")),
        task,
        retries=given["retries"],
        concurrency=given["concurrency"],
        max_total_cost=given["max_total_cost"],
        worker_concurrency=given.get("worker_concurrency"),
        canary=given.get("canary") or 0,
        run=run,
        pull=pull,
    )
    config.agent(spec.agent)
    if spec.run.get("review"):
        config.agent(parse_agent(spec.run["review"]).agent)
    return spec


def proposable(spec: BatchSpec, repos: Sequence[Repo], *, token: bool) -> None:
    """With --pr, a UsageError before anything starts for a repository whose change could not be
    proposed: no origin (a local one), a remote on no forge crew can tell, or (`token`) no token here."""
    if not spec.proposes:
        return
    for repo in repos:
        url = repo.url or remote_url(Checkout.of(Path(repo.path or "."), "--pr"))
        forge_of(remote_of(url), token=token)


def submit(store: Store, spec: BatchSpec, repos: list[Repo]) -> BatchSpec:
    """Enqueue the repositories of `spec` not in the batch yet (past its first --canary ones, held
    until those are done or unchanged). A batch id given again is the same batch: its repositories
    are not enqueued twice; the task and options must be the same."""
    rows = store.rows(spec.batch)
    if rows and rows[0].spec.stored() != spec.stored():
        raise UsageError(
            f"batch {spec.batch} exists with another task or options ({rows[0].spec.task.splitlines()[0]!r}); "
            f"give another --id, or `crew batch resume {spec.batch}` to finish it"
        )
    store.register(spec)
    there = {row.repo.key for row in rows}
    new = [(repo, 1) for repo in repos if repo.key not in there]
    first = max(spec.canary - len(rows), 0) if spec.canary else len(new)
    store.enqueue(spec, new[:first])
    store.enqueue(spec, new[first:], held=True)
    return spec


def wait(store: Store, batch: str, view: View) -> list[Row]:
    """Read the batch until every repository is finished, or it is paused (a canary failed; working
    here meanwhile when this process listens to its queue: stopping the agents of those cancelled,
    releasing the held ones once the canaries passed, and putting back the repositories of dead
    executors); its rows."""
    known: dict[str, Row] = {}
    recovered = 0.0
    while True:
        workflows = store.follow(known, batch=batch, phases=True)
        store.running.stop_cancelled(workflows)
        rows = per_repository(workflows)
        view(rows)
        if not store.running and (all(state(row) in FINISHED for row in rows) or paused(rows)):
            return rows
        release_passed(store, rows)
        if time.monotonic() - recovered > RECOVER_EVERY:
            store.recover_dead()
            recovered = time.monotonic()
        time.sleep(READ_EVERY)


def release_passed(store: Store, rows: Sequence[Row]) -> bool:
    """Let the held repositories of a batch (`rows`) start once every other one is done or
    unchanged; whether it did."""
    held = [row for row in rows if state(row) == "held"]
    if not held or any(state(row) not in COMPLETE for row in rows if state(row) != "held"):
        return False
    store.release(held)
    return True


def resume(store: Store, batch: str, *, failed_only: bool = False) -> list[Row]:
    """Put back the repositories of `batch` that did not end done or unchanged: those of dead
    executors on their queue (DBOS replays their recorded steps), the held ones released, and the
    failed, cancelled and skipped ones as a new workflow of the next generation (with
    `failed_only`: the failed ones only). Those already done stay as they are."""
    rows = existing(store, batch)
    readable = [row.spec for row in rows if row.refused is None]
    if not readable:
        raise UsageError(f"no repository of batch {batch} can be read (their rows are not crew's JSON; see its status)")
    spec = readable[0]
    store.register(spec)
    if failed_only:
        again = [row for row in rows if state(row) == "failed"]
    else:
        store.recover_dead()
        store.release(rows)
        again = [row for row in rows if state(row) in FINISHED and state(row) not in COMPLETE]
    store.enqueue(spec, [(row.repo, row.generation + 1) for row in again if row.refused is None])
    return rows


def cancel(store: Store, batch: str) -> list[Row]:
    """Cancel the repositories of `batch` not finished: the queued and held never start, the running
    have their agents ended by their workers. The rows cancelled."""
    rows = [row for row in existing(store, batch) if state(row) not in FINISHED]
    store.cancel([row.workflow for row in rows])
    return rows


def work(store: Store, until_idle: bool, say: Callable[[str], None]) -> None:
    """Be a worker: take the repositories of every batch with some queued, stop the agents of those
    cancelled, release held ones whose canaries passed, put back those of dead executors; with
    `until_idle`, return once none is queued and none runs here. Says each repository this worker
    finished."""
    known: dict[str, Row] = {}
    recovered = 0.0
    while True:
        waiting = store.waiting()
        held = sorted({row.spec.batch for row in waiting if row.status == "DELAYED"})
        released = [batch for batch in held if release_passed(store, store.rows(batch))]
        if time.monotonic() - recovered > RECOVER_EVERY:
            store.recover_dead()
            recovered = time.monotonic()
        before = {workflow: state(row) for workflow, row in known.items()}
        mine = store.follow(known, executor=store.executor)
        store.running.stop_cancelled(mine)
        for row in mine:
            if state(row) in FINISHED and before.get(row.workflow) != state(row):
                say(f"{row.spec.batch} {row.repo.text}: {state(row)}")
        # dequeued here (PENDING under this executor) but not started yet, or ending after a cancel
        running = store.running or any(row.status == "PENDING" for row in mine)
        if until_idle and not released and not any(row.status == "ENQUEUED" for row in waiting) and not running:
            return
        time.sleep(READ_EVERY)


def diffs(rows: Sequence[Row], repo: str | None, folder: Path) -> Iterator[bytes]:
    """The patch of each repository of a batch done (of `repo` only: as given, or its folder or URL),
    each after a line naming it; a UsageError when `repo` is not one of the batch's, or not done."""
    named = None if repo is None else {repo, str(Path(repo).resolve())}
    chosen = [row for row in rows if named is None or named & {row.repo.text, row.repo.path, row.repo.url}]
    if repo is not None and not chosen:
        names = ", ".join(row.repo.text for row in rows[:5])
        raise UsageError(f"'{repo}' is not a repository of batch {rows[0].spec.batch}; its repositories: {names}")
    done = [row for row in chosen if state(row) == "done" and row.output and row.output.get("commit")]
    if repo is not None and not done:
        raise UsageError(f"{repo} is {state(chosen[0])} in batch {rows[0].spec.batch}: no change to show")
    for row in done:
        commit = str(row.output["commit"]) if row.output else ""
        yield f"# {row.repo.text}: {row.spec.branch} {commit[:10]}\n".encode()
        yield Place(row.repo, folder).diff(commit)


def pull_states(rows: Sequence[Row], pace: Pace) -> dict[str, dict[str, str]]:
    """Each pull request of `rows` now, from its forge (paced as the workers are): its state (open,
    merged, closed) and checks, by workflow; one that cannot be asked is `unknown`, and says why."""
    states: dict[str, dict[str, str]] = {}
    clients: dict[str, Client] = {}
    for row in rows:
        pull = (row.output or {}).get("pull")
        if not pull:
            continue
        try:
            url = row.repo.url or remote_url(Checkout.of(Path(row.repo.path or "."), "crew batch status"))
            remote = remote_of(url)
            forge = forge_of(remote)
            client = clients.setdefault(forge.pace, Client(forge, pace))
            states[row.workflow] = state_of(client, remote, int(pull["number"])).to_dict()
        except CrewError as exc:
            states[row.workflow] = {"state": "unknown", "checks": str(exc)}
    return states


def existing(store: Store, batch: str) -> list[Row]:
    """The rows of `batch`; a UsageError naming the batches there are when it is not one."""
    rows = store.rows(batch)
    if not rows:
        known = sorted({row.spec.batch for row in store.rows()})
        there = f"the batches there: {', '.join(known[-5:])}" if known else "there is none yet"
        raise UsageError(f"no batch '{batch}' in {store.name}; {there} (crew batch list)")
    return rows


def latest(store: Store) -> str:
    """The id of the batch submitted last."""
    rows = store.rows()
    if not rows:
        raise UsageError(f'no batch in {store.name} yet; crew batch "@agent task" REPO… starts one')
    return max(rows, key=lambda row: row.created).spec.batch


def batches(store: Store) -> list[tuple[str, list[Row]]]:
    """Every batch and its rows, oldest first."""
    rows = sorted(store.rows(), key=lambda row: row.spec.batch)
    found = [(batch, list(group)) for batch, group in groupby(rows, key=lambda row: row.spec.batch)]
    return sorted(found, key=lambda item: min(row.created for row in item[1]))
