"""DBOS as crew batch uses it: the system database, this process as one executor, the batch's queue,
and the recovery of the work of executors that died (crewbridge.batch.database: which database,
crew's own connection beside DBOS's, and why nothing the database holds runs).

- **The database**: `--db URL`, else $CREW_BATCH_DB, else a SQLite file in crew's state folder
  (state/batch/batches.sqlite). DBOS creates its tables there at the first start. A SQLite file is
  put in write-ahead-log mode first: each of DBOS's commits is then one sync of the log instead of
  the three of a rollback journal (6 ms a commit against 28 ms on this machine), durable alike.
  Every value is stored as JSON (DBOS's portable JSON serializer); a row that says otherwise is
  refused before DBOS reads it (`Row.refused`).
- **Executors**: each crew batch process is a DBOS executor of its own, with an id made of the
  host, the process id and random digits, and the application version WORKFLOW_VERSION (the same for
  every crew whose workflow has the same steps: DBOS recovers a workflow only under the version that
  started it). It holds a lock named after its executor id for as long as it runs
  (crewbridge.batch.database.Side), which the system lets go when the process dies, however it dies.
- **Queues**: a batch's repositories are enqueued on the DBOS queue `crew-batch:ID`, registered in
  the database with the batch's --concurrency as its global concurrency (DBOS counts the
  repositories running on every executor against it) and its --worker-concurrency as each
  executor's. A worker listens to every queue; the process that submits or resumes a batch to its
  queue only; the others to none. Repositories held for a canary are enqueued DELAYED (far in the
  future) until they are released.
- **Recovery**: a repository whose executor died stays PENDING under that executor's id. A working
  process (the submitter, a worker, `crew batch resume`) looks for such executors, asks each one's lock
  whether it still runs, and hands the repositories of those that do not to `DBOS.resume_workflows`
  on their own queue: a live worker takes each, replays its recorded steps and runs the rest.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crewbridge.api import Stop
from crewbridge.base.extras import EXTRAS, missing
from crewbridge.batch.database import Side, StoreError, first_line, guard, scrubbed, shown
from crewbridge.batch.spec import BatchSpec, Repo
from crewbridge.errors import CrewError

APP = "crew-batch"  # DBOS's application name
WORKFLOW_VERSION = "crew-batch-4"  # DBOS's application version: change it when the workflow's steps change
WORKFLOW = "BatchWorker.repo"  # the workflow's name as DBOS records it
QUEUE_PREFIX = "crew-batch:"
INSTANCE = "crew"  # the name DBOS records for the workflows' instance (crewbridge.batch.workflow)
# Seconds between two looks of a queue for work, by each process that works on it. DBOS queues are
# polled (nothing wakes them when a slot frees), so a repository waits half of it on average once
# there is room; a look costs about a millisecond of CPU.
QUEUE_POLL = 0.1
HELD = 10 * 365 * 24 * 3600.0  # seconds a repository held for its batch's canary is delayed: until released


def workflow_id(batch: str, repo: Repo, generation: int) -> str:
    return f"{batch}:{repo.key}:{generation}"


def serializer() -> Any:
    """What DBOS stores values with: its portable JSON (crewbridge.batch.database.SERIALIZATION)."""
    from dbos import DBOSPortableJSONSerializer

    return DBOSPortableJSONSerializer()


@dataclass
class Row:
    """A repository's latest workflow in a batch, as DBOS stores it."""

    workflow: str
    spec: BatchSpec
    repo: Repo
    generation: int
    status: str  # DBOS's: ENQUEUED, DELAYED, PENDING, SUCCESS, ERROR, CANCELLED, …
    executor: str | None
    output: dict[str, Any] | None
    error: str | None
    created: float  # seconds since the epoch
    phase: dict[str, Any] | None = None  # where a running one is (its "phase" event)
    refused: str | None = None  # why its rows were not read: they are not crew's JSON
    interrupted: bool = False  # PENDING under an executor that no longer runs


class Running:
    """The repositories' workflows running in this process (each in a thread of DBOS's), with the
    Stop of each one's agent. DBOS tells a running workflow nothing when it is cancelled (a cancel
    is an update of its row, and DBOS's own preemptible steps look at the row every second), so the
    process that runs it stops its agent when its read of the workflows' states finds it cancelled,
    and does not close DBOS while one still runs."""

    def __init__(self) -> None:
        self._stops: dict[str, Stop] = {}
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def run(self, workflow: str) -> Iterator[Stop]:
        """Workflow `workflow` runs here for the time of the block; the Stop of its agent."""
        stop = Stop()
        with self._lock:
            self._stops[workflow] = stop
        try:
            yield stop
        finally:
            with self._lock:
                self._stops.pop(workflow, None)

    def stop_cancelled(self, rows: Iterable[Row]) -> None:
        """Stop the agents of those of `rows` that run here and were cancelled."""
        with self._lock:
            stops = [
                self._stops[row.workflow] for row in rows if row.status == "CANCELLED" and row.workflow in self._stops
            ]
        for stop in stops:
            stop.set()

    def __bool__(self) -> bool:
        """Whether any runs here."""
        return bool(self._stops)


@dataclass
class Store:
    """This process's DBOS (launched), its executor id and side connection, and the workflows it runs."""

    url: str
    executor: str
    side: Side
    running: Running = field(default_factory=Running)

    @classmethod
    def open(
        cls,
        url: str,
        *,
        worker: Callable[[Running, Side], object] | None = None,
        listen: Sequence[str] | None = (),
        new: Sequence[BatchSpec] = (),
    ) -> Store:
        """Launch DBOS on `url` as a new executor; `worker(running, side)` registers the workflows'
        instance (a process that runs repositories; `running` is where they say they run); it works
        on the queues of the batches `listen` (None: every batch's, as a worker). The queues of the
        batches `new` are registered before the launch when they are not there yet: DBOS's queue
        threads look for queues registered after it once a second."""
        try:
            from dbos import DBOS  # for start-up speed: only crew batch loads DBOS (and SQLAlchemy)
        except ImportError:
            raise missing(EXTRAS["batch"], "crew batch") from None
        guard()
        executor = f"{socket.gethostname()}-{os.getpid()}-{os.urandom(3).hex()}"
        if url.startswith("sqlite:///"):
            _write_ahead(Path(url.removeprefix("sqlite:///")))
        side = Side.of(url)
        side.hold(executor)
        logging.getLogger("dbos").addFilter(_quiet_cancellation)
        DBOS(
            config={
                "name": APP,
                "system_database_url": url,
                "application_version": WORKFLOW_VERSION,
                "executor_id": executor,
                "log_level": "ERROR",
                "serializer": serializer(),
                # SQLite's notification listener sleeps this long between looks, and DBOS.destroy
                # waits for it (half a second on average at DBOS's 1 s); it has nothing to look for.
                "notification_listener_polling_interval_sec": 0.1,
            }
        )
        store = cls(url, executor, side)
        if worker is not None:
            worker(store.running, side)
        if listen is not None:
            DBOS.listen_queues([QUEUE_PREFIX + batch for batch in listen])
        _register_early(url, new)
        try:
            DBOS.launch()
        except Exception as exc:
            DBOS.destroy()
            side.close()
            raise StoreError(f"cannot open the batch database {shown(url)}: {scrubbed(first_line(exc), url)}") from None
        return store

    @property
    def name(self) -> str:
        """The database, as messages name it (a file, or a URL without its password)."""
        return self.url.removeprefix("sqlite:///") if self.url.startswith("sqlite:///") else shown(self.url)

    def close(self) -> None:
        from dbos import DBOS

        DBOS.destroy(workflow_completion_timeout_sec=0)
        self.side.close()

    def register(self, spec: BatchSpec) -> None:
        """The queue of `spec`'s batch in the database, with its limits (the same for every process)."""
        from dbos import DBOS

        DBOS.register_queue(QUEUE_PREFIX + spec.batch, **_limits(spec))

    def enqueue(self, spec: BatchSpec, repos: list[tuple[Repo, int]], *, held: bool = False) -> None:
        """Put each repository's workflow (of its generation) on the batch's queue (`held`: not to
        start until released)."""
        from dbos import DBOSClient

        client = DBOSClient(system_database_url=self.url, application_name=APP, serializer=serializer())
        try:
            for repo, generation in repos:
                options: Any = {
                    "queue_name": QUEUE_PREFIX + spec.batch,
                    "workflow_name": WORKFLOW,
                    "class_name": "BatchWorker",
                    "instance_name": INSTANCE,
                    "workflow_id": workflow_id(spec.batch, repo, generation),
                    "app_version": WORKFLOW_VERSION,
                }
                if held:
                    options["delay_seconds"] = HELD
                client.enqueue(options, spec.to_dict(), repo.to_dict())
        finally:
            client.destroy()

    def release(self, rows: Iterable[Row]) -> None:
        """Let the held ones of `rows` start."""
        from dbos import DBOS

        for row in rows:
            if row.status == "DELAYED":
                DBOS.set_workflow_delay(row.workflow, delay_seconds=0)

    def rows(self, batch: str | None = None) -> list[Row]:
        """Each repository's latest workflow (of batch `batch`, or of every batch), in order of submission."""
        from dbos import DBOS

        return per_repository(read(DBOS, self.side, {}, prefix=f"{batch}:" if batch is not None else None))

    def follow(
        self, known: dict[str, Row], *, batch: str | None = None, executor: str | None = None, phases: bool = False
    ) -> list[Row]:
        """The workflows of batch `batch` (or run by executor `executor`), read again (see `read`);
        with `phases`, where each running one is, and whether its executor still runs."""
        from dbos import DBOS

        rows = read(DBOS, self.side, known, prefix=f"{batch}:" if batch is not None else None, executor=executor)
        running = [row for row in rows if phases and row.status == "PENDING" and row.refused is None]
        foreign = self.side.foreign([row.workflow for row in running])  # its phase is written as it runs
        for row in running:
            row.refused = foreign.get(row.workflow)
            row.phase = DBOS.get_event(row.workflow, "phase", timeout_seconds=0) if row.refused is None else None
        return rows

    def interrupted(self, rows: Iterable[Row]) -> None:
        """Mark those of `rows` running under an executor that no longer runs."""
        for row in rows:
            row.interrupted = (
                row.status == "PENDING" and row.executor != self.executor and not self.side.alive(row.executor or "")
            )

    def waiting(self) -> list[Row]:
        """The workflows of every batch waiting to start (ENQUEUED) or held (DELAYED), states only."""
        from dbos import DBOS

        found = DBOS.list_workflows(status=["ENQUEUED", "DELAYED"], name=WORKFLOW, load_input=False, load_output=False)
        return [_bare(status) for status in found]

    def cancel(self, workflows: list[str]) -> None:
        from dbos import DBOS

        DBOS.cancel_workflows(workflows)  # at once: a queued one cannot start as a running one is cancelled

    def recover_dead(self) -> list[str]:
        """Put back on their queues the repositories whose executors died (their locks let go);
        those executors' ids."""
        from dbos import DBOS

        pending = DBOS.list_workflows(status="PENDING", name=WORKFLOW, load_input=False, load_output=False)
        executors = {row.executor_id for row in pending if row.executor_id and row.executor_id != self.executor}
        dead = sorted(executor for executor in executors if not self.side.alive(executor))
        queues: dict[str, list[str]] = {}
        for row in pending:
            if row.executor_id in dead and row.queue_name:
                queues.setdefault(row.queue_name, []).append(row.workflow_id)
        for queue, workflows in queues.items():  # DBOS replays their recorded steps
            DBOS.resume_workflows(workflows, queue_name=queue)
        return dead


def _register_early(url: str, specs: Sequence[BatchSpec]) -> None:
    """Register the queues of `specs` not there yet, as a client (before DBOS launches); nothing
    when the database has no DBOS tables yet (Store.register does it after the launch)."""
    if not specs:
        return
    from dbos import DBOSClient

    try:
        client = DBOSClient(system_database_url=url, application_name=APP, serializer=serializer())
    except Exception:  # Store.open says what is wrong with the database
        return
    try:
        for spec in specs:
            if client.retrieve_queue(QUEUE_PREFIX + spec.batch) is None:
                client.register_queue(QUEUE_PREFIX + spec.batch, **_limits(spec))
    except Exception:  # a database DBOS has not made its tables in yet
        pass
    finally:
        client.destroy()


def _limits(spec: BatchSpec) -> dict[str, Any]:
    """The queue of `spec`'s batch: its limits, and how often each process looks at it."""
    return {
        "global_concurrency": spec.concurrency,
        "worker_concurrency": spec.worker_concurrency,
        "polling_interval_sec": QUEUE_POLL,
        "on_conflict": "always_update",
    }


def read(
    dbos: Any, side: Side, known: dict[str, Row], *, prefix: str | None = None, executor: str | None = None
) -> list[Row]:
    """The workflows whose ids start with `prefix` (or run by `executor`) read by `dbos` (DBOS, or a
    DBOSClient): their states each time, and in full (`known` keeps them) only those that are new
    or changed state (a workflow's inputs never change, its output once, when it ends), once crew's
    own look at their rows (`side`) found them crew's JSON; the others are refused, unread."""
    found = dbos.list_workflows(
        workflow_id_prefix=prefix, executor_id=executor, name=WORKFLOW, load_input=False, load_output=False
    )
    changed = [s for s in found if s.workflow_id not in known or known[s.workflow_id].status != s.status]
    foreign = side.foreign([s.workflow_id for s in changed])
    clean = [s.workflow_id for s in changed if s.workflow_id not in foreign]
    for status in dbos.list_workflows(workflow_ids=clean, name=WORKFLOW) if clean else ():
        row = _row(status)
        if row is not None:
            known[row.workflow] = row
    for status in changed:
        if status.workflow_id in foreign:
            known[status.workflow_id] = _refused(status, foreign[status.workflow_id], known)
    return [known[s.workflow_id] for s in found if s.workflow_id in known]


def _refused(status: Any, why: str, known: dict[str, Row]) -> Row:
    """The Row of a workflow whose rows are not crew's JSON: what crew knew of its repository, else
    what its id says (BATCH:KEY:GENERATION); failed, with `why`."""
    batch, key, generation = [*status.workflow_id.rsplit(":", 2), "", ""][:3]
    same = [row for row in known.values() if row.spec.batch == batch and row.refused is None]
    repo = next((row.repo for row in same if row.repo.key == key), Repo(f"(workflow {status.workflow_id})", key=key))
    spec = same[0].spec if same else BatchSpec(batch, "@crew (its task is in a refused row)")
    generation_number = int(generation) if generation.isdigit() else 0
    created = (status.created_at or 0) / 1000
    return Row(
        status.workflow_id, spec, repo, generation_number, "ERROR", status.executor_id, None, why, created, refused=why
    )


def _bare(status: Any) -> Row:
    """A Row of only what a status read without inputs tells (the workflow id, its state)."""
    batch, key, _ = [*status.workflow_id.rsplit(":", 2), "", ""][:3]
    spec = BatchSpec(batch, "@crew (not read)")
    return Row(status.workflow_id, spec, Repo(key, key=key), 0, status.status, status.executor_id, None, None, 0.0)


def per_repository(rows: Iterable[Row | None]) -> list[Row]:
    """Each repository's latest workflow among `rows` (the highest generation), in order of submission."""
    found: dict[tuple[str, str], Row] = {}
    for row in rows:
        if row is None:
            continue
        key = (row.spec.batch, row.repo.key)
        if key not in found or found[key].generation < row.generation:
            found[key] = row
    return sorted(found.values(), key=lambda r: (r.spec.batch, r.repo.position))


def _write_ahead(path: Path) -> None:
    """The SQLite database at `path` in write-ahead-log mode (kept in the file; see the top)."""
    import sqlite3

    try:
        with contextlib.closing(sqlite3.connect(path, timeout=30)) as database:
            database.execute("PRAGMA journal_mode=WAL")
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the batch database {path}: {exc}") from None


def _quiet_cancellation(record: logging.LogRecord) -> bool:
    """DBOS logs a cancelled workflow (crew batch cancel) as an error with its traceback: not one."""
    return not (record.exc_info and type(record.exc_info[1]).__name__.endswith("CancelledError"))


class Reader:
    """Every batch's rows read as a client of the database at `url`, launching no executor (what
    `crew ui` reads); the connections are made at the first read and kept until close()."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._client: Any = None
        self._side: Side | None = None

    def rows(self) -> list[Row]:
        from dbos import DBOSClient  # for start-up speed, as everywhere: only batches load DBOS

        try:
            if self._client is None:
                guard()
                self._side = Side.of(self.url)
                self._client = DBOSClient(system_database_url=self.url, application_name=APP, serializer=serializer())
            assert self._side is not None
            return per_repository(read(self._client, self._side, {}))
        except StoreError:
            raise
        except Exception as exc:  # what the driver says, without the URL's password
            raise StoreError(
                f"cannot read the batch database {shown(self.url)}: {scrubbed(first_line(exc), self.url)}"
            ) from None

    def close(self) -> None:
        if self._client is not None:
            self._client.destroy()
            self._client = None
        if self._side is not None:
            self._side.close()
            self._side = None


def _row(status: Any) -> Row | None:
    """A Row of DBOS's WorkflowStatus (None for a workflow that is not a batch's repository)."""
    try:
        spec_data, repo_data = status.input["args"][:2]
        spec, repo = BatchSpec.of(spec_data), Repo.of(repo_data)
        generation = int(status.workflow_id.rsplit(":", 1)[1])
    except (TypeError, KeyError, ValueError, IndexError, CrewError):
        return None
    output = status.output if isinstance(status.output, dict) else None
    error = first_line(status.error) if status.error is not None else None
    created = (status.created_at or 0) / 1000
    return Row(status.workflow_id, spec, repo, generation, status.status, status.executor_id, output, error, created)
