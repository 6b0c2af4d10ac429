"""The batch commands on crewbridge.batch.store: submit a batch (and work on it here until it is
finished, or return at once), be a worker, resume, cancel, and read a batch's state."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from itertools import groupby
from typing import Any

from crewbridge.batch.report import COMPLETE, FINISHED, state
from crewbridge.batch.spec import BatchSpec, Repo, batch_id
from crewbridge.batch.store import Row, Store, database_files, per_repository
from crewbridge.config import Config, state_dir
from crewbridge.errors import UsageError
from crewbridge.mentions import parse_agent
from crewbridge.options import RunOptions
from crewbridge.sandbox import Sandboxing

RECOVER_EVERY = 2.0  # seconds between two looks for dead executors while waiting or working
READ_EVERY = 0.25  # seconds between two reads of what this process waits for (a batch; a worker's work)
View = Callable[[Sequence[Row]], None]  # shown each time the batch is read


def open_working(url: str, config: Config, batches: Mapping[str, tuple[int, int | None]]) -> Store:
    """This process as an executor that runs repositories (with `config`, this machine's state folder
    and sandbox), on the queues of `batches` (id → concurrency, this process's share) from the start."""
    from crewbridge.batch.workflow import BatchWorker, Runtime  # loads DBOS

    sandboxing = Sandboxing()
    config = replace(config, hide=[*config.hide, *database_files(url)])  # also where --db put it
    return Store.open(
        url,
        worker=lambda running: BatchWorker(Runtime(config, state_dir(), sandboxing, running)),
        batches=batches,
    )


def open_worker(url: str, config: Config, share: int | None) -> Store:
    """A worker (`work`), on the queues of the batches with repositories waiting from the start."""
    return open_working(url, config, {spec.batch: (spec.concurrency, share) for spec in Store.queued_now(url)})


def spec_of(task: str, given: dict[str, Any], config: Config) -> BatchSpec:
    """The batch the command line describes (`given`: its options by name); an agent that is not
    configured (the writer, the reviewer) is a UsageError."""
    run = {name: given[name] for name in RunOptions.names() if name in given}
    spec = BatchSpec(
        batch_id(given.get("given_id")), task, given["retries"], given["concurrency"], given["max_total_cost"], run
    )
    config.agent(spec.agent)
    if spec.run.get("review"):
        config.agent(parse_agent(spec.run["review"]).agent)
    return spec


def submit(store: Store, spec: BatchSpec, repos: list[Repo]) -> BatchSpec:
    """Enqueue the repositories of `spec` not in the batch yet. A batch id given again is the same
    batch: its repositories are not enqueued twice; the task and options must be the same."""
    rows = store.rows(spec.batch)
    if rows and rows[0].spec != spec:
        raise UsageError(
            f"batch {spec.batch} exists with another task or options ({rows[0].spec.task.splitlines()[0]!r}); "
            f"give another --id, or `crew batch resume {spec.batch}` to finish it"
        )
    there = {row.repo.key for row in rows}
    store.enqueue(spec, [(repo, 1) for repo in repos if repo.key not in there])
    return spec


def wait(store: Store, batch: str, view: View) -> list[Row]:
    """Read the batch until every repository is finished (working here meanwhile when this process
    declared its queue: stopping the agents of those cancelled; and putting back the repositories of
    dead executors); its rows."""
    known: dict[str, Row] = {}
    recovered = 0.0
    while True:
        workflows = store.follow(known, batch=batch, phases=True)
        store.running.stop_cancelled(workflows)
        rows = per_repository(workflows)
        view(rows)
        if all(state(row) in FINISHED for row in rows) and not store.running:
            return rows
        if time.monotonic() - recovered > RECOVER_EVERY:
            store.recover_dead()
            recovered = time.monotonic()
        time.sleep(READ_EVERY)


def resume(store: Store, batch: str) -> list[Row]:
    """Put back every repository of `batch` that did not end done or unchanged: those of dead
    executors on their queue (DBOS replays their recorded steps), the failed, cancelled and skipped
    ones as a new workflow of the next generation. Those already done stay as they are."""
    rows = existing(store, batch)
    store.declare(batch, rows[0].spec.concurrency, None)
    store.recover_dead()
    again = [row for row in rows if state(row) in FINISHED and state(row) not in COMPLETE]
    store.enqueue(rows[0].spec, [(row.repo, row.generation + 1) for row in again])
    return rows


def cancel(store: Store, batch: str) -> list[Row]:
    """Cancel the repositories of `batch` not finished: the queued never start, the running have
    their agents ended by their workers. The rows cancelled."""
    rows = [row for row in existing(store, batch) if state(row) not in FINISHED]
    store.cancel([row.workflow for row in rows])
    return rows


def work(store: Store, share: int | None, until_idle: bool, say: Callable[[str], None]) -> None:
    """Be a worker: take the repositories of every batch with some queued (at most `share` of each at
    once here), stop the agents of those cancelled, put back those of dead executors; with
    `until_idle`, return once none is queued and none runs here. Says each repository this worker
    finished."""
    known: dict[str, Row] = {}
    recovered = 0.0
    while True:
        waiting = store.declare_queued(share)
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
        if until_idle and not waiting and not running:
            return
        time.sleep(READ_EVERY)


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
