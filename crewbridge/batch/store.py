"""DBOS as crew batch uses it: the system database, this process as one executor, the batch's queue,
and the recovery of the work of executors that died.

- **The database**: `--db URL`, else $CREW_BATCH_DB, else a SQLite file in crew's state folder
  (state/batch/batches.sqlite). DBOS creates its tables there at the first start. A SQLite file is
  put in write-ahead-log mode first: each of DBOS's commits is then one sync of the log instead of
  the three of a rollback journal (6 ms a commit against 28 ms on this machine), durable alike.
- **Executors**: each crew batch process is a DBOS executor of its own, with an id made of the
  host, the process id and random digits, and the application version WORKFLOW_VERSION (the same for
  every crew whose workflow has the same steps: DBOS recovers a workflow only under the version that
  started it). It holds a lock named after its executor id for as long as it runs (`Liveness`), which
  the system lets go when the process dies, however it dies.
- **Queues**: a batch's repositories are enqueued on the DBOS queue `crew-batch:ID` with the batch's
  --concurrency as the queue's global concurrency (DBOS counts the repositories running on every
  executor against it); a process that works on a batch declares that queue, with its own share
  (`crew batch worker --concurrency`) as the worker concurrency.
- **Recovery**: a repository whose executor died stays PENDING under that executor's id. A working
  process (the submitter, a worker, `crew batch resume`) looks for such executors, asks each one's lock
  whether it still runs, and hands those that do not to DBOS's `recover_pending_workflows`, which puts
  their repositories back on their queue: a live worker takes each, replays its recorded steps and runs
  the rest.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import socket
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from crewbridge.api import Stop
from crewbridge.batch.spec import BatchSpec, Repo
from crewbridge.config import state_dir
from crewbridge.errors import CrewError, UsageError

APP = "crew-batch"  # DBOS's application name
WORKFLOW_VERSION = "crew-batch-2"  # DBOS's application version: change it when the workflow's steps change
WORKFLOW = "BatchWorker.repo"  # the workflow's name as DBOS records it
QUEUE_PREFIX = "crew-batch:"
INSTANCE = "crew"  # the name DBOS records for the workflows' instance (crewbridge.batch.workflow)
# Seconds between two looks of a queue for work, by each process that works on it. DBOS queues are
# polled (nothing wakes them when a slot frees), so a repository waits half of it on average once
# there is room; a look costs about a millisecond of CPU.
QUEUE_POLL = 0.1
DB_ENV = "CREW_BATCH_DB"


class StoreError(CrewError):
    """The batch database cannot be reached or used."""


def database_url(given: str | None, env: Mapping[str, str] | None = None) -> str:
    """The system database: `given`, $CREW_BATCH_DB, or SQLite in crew's state folder."""
    env = os.environ if env is None else env
    url = given or env.get(DB_ENV) or ""
    if not url:
        folder = state_dir(env) / "batch"
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        return f"sqlite:///{folder / 'batches.sqlite'}"
    if not url.startswith(("postgresql://", "postgres://", "postgresql+psycopg://", "sqlite:///")):
        raise UsageError(
            f"--db '{_shown(url)}' is not a database URL crew batch takes; give postgresql://USER:PASSWORD@HOST/DB "
            "(or sqlite:///PATH), or leave it out for the SQLite file in crew's state folder"
        )
    return url


def database_files(url: str) -> list[str]:
    """The files of a SQLite database `url` names (its journals too), absolute: what the agents'
    sandbox hides besides crew's state folder, where it usually is. None for a server's URL."""
    if not url.startswith("sqlite:///"):
        return []
    path = os.path.abspath(url[len("sqlite:///") :])
    return [path, *(f"{path}-{suffix}" for suffix in ("wal", "shm", "journal"))]


def workflow_id(batch: str, repo: Repo, generation: int) -> str:
    return f"{batch}:{repo.key}:{generation}"


@dataclass
class Row:
    """A repository's latest workflow in a batch, as DBOS stores it."""

    workflow: str
    spec: BatchSpec
    repo: Repo
    generation: int
    status: str  # DBOS's: ENQUEUED, PENDING, SUCCESS, ERROR, CANCELLED, …
    executor: str | None
    output: dict[str, Any] | None
    error: str | None
    created: float  # seconds since the epoch
    phase: dict[str, Any] | None = None  # where a running one is (its "phase" event)


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
    """This process's DBOS (launched), its executor id and liveness lock, and the workflows it runs."""

    url: str
    executor: str
    liveness: Liveness
    declared: dict[str, int | None] = field(default_factory=dict)  # queue → this process's share
    running: Running = field(default_factory=Running)

    @classmethod
    def open(
        cls,
        url: str,
        *,
        worker: Callable[[Running], object] | None = None,
        batches: Mapping[str, tuple[int, int | None]] = {},
    ) -> Store:
        """Launch DBOS on `url` as a new executor; `worker(running)` registers the workflows'
        instance (a process that runs repositories; `running` is where they say they run); `batches`
        (id → concurrency, this process's share) are the queues it works on from the start."""
        try:
            from dbos import DBOS  # for start-up speed: only crew batch loads DBOS (and SQLAlchemy)
        except ImportError:
            raise UsageError("crew batch needs DBOS, which is not installed: pip install 'crewbridge[batch]'") from None
        executor = f"{socket.gethostname()}-{os.getpid()}-{os.urandom(3).hex()}"
        if url.startswith("sqlite:///"):
            _write_ahead(Path(url.removeprefix("sqlite:///")))
        liveness = Liveness.of(url)
        liveness.hold(executor)
        logging.getLogger("dbos").addFilter(_quiet_cancellation)
        DBOS(
            config={
                "name": APP,
                "system_database_url": url,
                "application_version": WORKFLOW_VERSION,
                "executor_id": executor,
                "log_level": "ERROR",
                # SQLite's notification listener sleeps this long between looks, and DBOS.destroy
                # waits for it (half a second on average at DBOS's 1 s); it has nothing to look for.
                "notification_listener_polling_interval_sec": 0.1,
            }
        )
        store = cls(url, executor, liveness)
        if worker is not None:
            worker(store.running)
        for batch, (concurrency, share) in batches.items():
            store.declare(batch, concurrency, share)
        try:
            DBOS.launch()
        except Exception as exc:
            DBOS.destroy()
            liveness.close()
            raise StoreError(f"cannot open the batch database {_shown(url)}: {_first_line(exc)}") from None
        return store

    @property
    def name(self) -> str:
        """The database, as messages name it (a file, or a URL without its password)."""
        return self.url.removeprefix("sqlite:///") if self.url.startswith("sqlite:///") else _shown(self.url)

    def close(self) -> None:
        from dbos import DBOS

        DBOS.destroy(workflow_completion_timeout_sec=0)
        self.liveness.close()

    def declare(self, batch: str, concurrency: int, share: int | None) -> None:
        """Work on batch `batch` here: its queue, at most `concurrency` repositories at once across
        every executor and `share` (or `concurrency`) here."""
        from dbos import Queue

        name = QUEUE_PREFIX + batch
        if name not in self.declared:
            local = min(share or concurrency, concurrency)
            Queue(name, global_concurrency=concurrency, worker_concurrency=local, polling_interval_sec=QUEUE_POLL)
            self.declared[name] = local

    def enqueue(self, spec: BatchSpec, repos: list[tuple[Repo, int]]) -> None:
        """Put each repository's workflow (of its generation) on the batch's queue."""
        from dbos import DBOSClient

        client = DBOSClient(system_database_url=self.url, application_name=APP)
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
                client.enqueue(options, spec.to_dict(), repo.to_dict())
        finally:
            client.destroy()

    def rows(self, batch: str | None = None) -> list[Row]:
        """Each repository's latest workflow (of batch `batch`, or of every batch), in order of submission."""
        from dbos import DBOS

        prefix = f"{batch}:" if batch is not None else None
        return per_repository(_row(status) for status in DBOS.list_workflows(workflow_id_prefix=prefix, name=WORKFLOW))

    def follow(
        self, known: dict[str, Row], *, batch: str | None = None, executor: str | None = None, phases: bool = False
    ) -> list[Row]:
        """The workflows of batch `batch` (or run by executor `executor`), read again: their states
        each time, and in full (`known` keeps them) only those that are new or changed state (a
        workflow's inputs never change, its output once, when it ends); with `phases`, where each
        running one is."""
        from dbos import DBOS

        prefix = f"{batch}:" if batch is not None else None
        found = DBOS.list_workflows(
            workflow_id_prefix=prefix, executor_id=executor, name=WORKFLOW, load_input=False, load_output=False
        )
        changed = [
            s.workflow_id for s in found if s.workflow_id not in known or known[s.workflow_id].status != s.status
        ]
        if changed:
            for status in DBOS.list_workflows(workflow_ids=changed, name=WORKFLOW):
                row = _row(status)
                if row is not None:
                    known[row.workflow] = row
        rows = [known[s.workflow_id] for s in found if s.workflow_id in known]
        for row in rows if phases else ():
            row.phase = DBOS.get_event(row.workflow, "phase", timeout_seconds=0) if row.status == "PENDING" else None
        return rows

    def declare_queued(self, share: int | None) -> bool:
        """Work here on each batch with repositories waiting on its queue (at most `share` of them at
        once here); whether any is waiting."""
        from dbos import DBOS

        waiting, specs = _queued(DBOS, skip=self.declared.keys())
        for spec in specs:
            self.declare(spec.batch, spec.concurrency, share)
        return waiting

    @staticmethod
    def queued_now(url: str) -> list[BatchSpec]:
        """The batches with repositories waiting in the database at `url`, read before this process
        launches DBOS (a worker declares their queues before; DBOS looks for a queue declared after
        its launch only once a second)."""
        from dbos import DBOSClient

        try:
            client = DBOSClient(system_database_url=url, application_name=APP)
        except Exception:  # Store.open says what is wrong with the database
            return []
        try:
            return _queued(client, skip=())[1]
        except Exception:  # a database DBOS has not made its tables in yet
            return []
        finally:
            client.destroy()

    def cancel(self, workflows: list[str]) -> None:
        from dbos import DBOS

        DBOS.cancel_workflows(workflows)  # at once: a queued one cannot start as a running one is cancelled

    def recover_dead(self) -> list[str]:
        """Put back on their queues the repositories whose executors died (their locks let go);
        those executors' ids."""
        from dbos import DBOS

        pending = DBOS.list_workflows(status="PENDING", name=WORKFLOW, load_input=False, load_output=False)
        executors = {row.executor_id for row in pending if row.executor_id and row.executor_id != self.executor}
        dead = sorted(executor for executor in executors if not self.liveness.alive(executor))
        if dead:  # what DBOS's admin server and Conductor call for an executor found dead (public in DBOS 3)
            DBOS._recover_pending_workflows(dead)
        return dead


def _queued(dbos: Any, skip: Collection[str]) -> tuple[bool, list[BatchSpec]]:
    """Whether repositories wait on queues, and the batches of the queues they wait on but `skip`,
    read by `dbos` (DBOS, or a DBOSClient): the states of those waiting, the inputs of one a queue."""
    waiting = dbos.list_workflows(status="ENQUEUED", name=WORKFLOW, load_input=False, load_output=False)
    specs = []
    for queue in sorted({status.queue_name for status in waiting if status.queue_name} - set(skip)):
        first = dbos.list_workflows(queue_name=queue, status="ENQUEUED", name=WORKFLOW, limit=1, load_output=False)
        row = _row(first[0]) if first else None
        if row is not None:
            specs.append(row.spec)
    return bool(waiting), specs


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
    `crew ui` reads); the connection is made at the first read and kept until close()."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._client: Any = None

    def rows(self) -> list[Row]:
        from dbos import DBOSClient  # for start-up speed, as everywhere: only batches load DBOS

        if self._client is None:
            self._client = DBOSClient(system_database_url=self.url, application_name=APP)
        return per_repository(_row(status) for status in self._client.list_workflows(name=WORKFLOW))

    def close(self) -> None:
        if self._client is not None:
            self._client.destroy()
            self._client = None


def _row(status: Any) -> Row | None:
    """A Row of DBOS's WorkflowStatus (None for a workflow that is not a batch's repository)."""
    try:
        spec_data, repo_data = status.input["args"][:2]
        spec, repo = BatchSpec.of(spec_data), Repo.of(repo_data)
        generation = int(status.workflow_id.rsplit(":", 1)[1])
    except (TypeError, KeyError, ValueError, IndexError, CrewError):
        return None
    output = status.output if isinstance(status.output, dict) else None
    error = _first_line(status.error) if status.error is not None else None
    created = (status.created_at or 0) / 1000
    return Row(status.workflow_id, spec, repo, generation, status.status, status.executor_id, output, error, created)


class Liveness(ABC):
    """Whether an executor still runs: each working process holds a lock named after its executor id
    while it lives, and the system lets go of it when the process dies (Postgres a session's
    advisory lock when its connection ends; the kernel a flock when its file closes)."""

    @staticmethod
    def of(url: str) -> Liveness:
        if url.startswith("sqlite:///"):
            return FileLiveness(Path(url.removeprefix("sqlite:///") + ".executors"))
        return PostgresLiveness(url)

    @abstractmethod
    def hold(self, executor: str) -> None: ...

    @abstractmethod
    def alive(self, executor: str) -> bool: ...

    @abstractmethod
    def close(self) -> None: ...


class FileLiveness(Liveness):
    """A lock file per executor beside the SQLite database (one machine: SQLite is local)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._held: IO[str] | None = None

    def hold(self, executor: str) -> None:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._held = open(self._file(executor), "w")
        fcntl.flock(self._held, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def alive(self, executor: str) -> bool:
        try:
            with open(self._file(executor), "r+") as probe:
                try:
                    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return True
                self._file(executor).unlink(missing_ok=True)  # its process is gone: nothing left to ask
                return False
        except FileNotFoundError:
            return False

    def close(self) -> None:
        if self._held is not None:
            Path(self._held.name).unlink(missing_ok=True)
            self._held.close()
            self._held = None

    def _file(self, executor: str) -> Path:
        return self.folder / f"{hashlib.sha256(executor.encode()).hexdigest()[:24]}.lock"


class PostgresLiveness(Liveness):
    """A session-level advisory lock per executor, on a connection of its own held open."""

    def __init__(self, url: str) -> None:
        import psycopg  # installed with DBOS

        conninfo = url.replace("postgresql+psycopg://", "postgresql://", 1)
        try:
            self._connection = psycopg.connect(conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise StoreError(f"cannot reach the batch database {_shown(url)}: {_first_line(exc)}") from None
        self._lock = threading.Lock()

    def hold(self, executor: str) -> None:
        with self._lock:
            self._connection.execute("SELECT pg_advisory_lock(%s)", (_key(executor),))

    def alive(self, executor: str) -> bool:
        with self._lock:
            row = self._connection.execute("SELECT pg_try_advisory_lock(%s)", (_key(executor),)).fetchone()
            if row is None or not row[0]:
                return True
            self._connection.execute("SELECT pg_advisory_unlock(%s)", (_key(executor),))
            return False

    def close(self) -> None:
        with self._lock:
            self._connection.close()


def _key(executor: str) -> int:
    """A signed 64-bit advisory lock key of an executor id."""
    return int.from_bytes(hashlib.sha256(b"crew-batch:" + executor.encode()).digest()[:8], "big", signed=True)


def _shown(url: str) -> str:
    """`url` with its password left out (it goes into messages)."""
    head, at, tail = url.rpartition("@")
    if not at or "://" not in head:
        return url
    scheme, _, credentials = head.partition("://")
    return f"{scheme}://{credentials.split(':', 1)[0]}:***@{tail}" if ":" in credentials else url


def _first_line(exc: object) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
