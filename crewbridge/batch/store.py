"""DBOS as crew batch uses it: the system database, this process as one executor, the batch's queue,
and the recovery of the work of executors that died.

- **The database**: `--db URL`, else $CREW_BATCH_DB, else a SQLite file in crew's state folder
  (state/batch/batches.sqlite). DBOS creates its tables there at the first start.
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

import fcntl
import hashlib
import logging
import os
import socket
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from crewbridge.batch.spec import BatchSpec, Repo
from crewbridge.config import state_dir
from crewbridge.errors import CrewError, UsageError

APP = "crew-batch"  # DBOS's application name
WORKFLOW_VERSION = "crew-batch-1"  # DBOS's application version: change it when the workflow's steps change
WORKFLOW = "BatchWorker.repo"  # the workflow's name as DBOS records it
QUEUE_PREFIX = "crew-batch:"
INSTANCE = "crew"  # the name DBOS records for the workflows' instance (crewbridge.batch.workflow)
POLL = 0.2  # seconds between two looks of a queue for work
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


@dataclass
class Store:
    """This process's DBOS (launched), its executor id and liveness lock."""

    url: str
    executor: str
    liveness: Liveness
    declared: dict[str, int | None] = field(default_factory=dict)  # queue → this process's share

    @classmethod
    def open(
        cls, url: str, *, worker: Callable[[], object] | None = None, batches: Mapping[str, tuple[int, int | None]] = {}
    ) -> Store:
        """Launch DBOS on `url` as a new executor; `worker()` registers the workflows' instance (a
        process that runs repositories); `batches` (id → concurrency, this process's share) are the
        queues it works on from the start."""
        try:
            from dbos import DBOS  # for start-up speed: only crew batch loads DBOS (and SQLAlchemy)
        except ImportError:
            raise UsageError("crew batch needs DBOS, which is not installed: pip install 'crewbridge[batch]'") from None
        executor = f"{socket.gethostname()}-{os.getpid()}-{os.urandom(3).hex()}"
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
            }
        )
        store = cls(url, executor, liveness)
        if worker is not None:
            worker()
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
            Queue(name, global_concurrency=concurrency, worker_concurrency=local, polling_interval_sec=POLL)
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

    def rows(self, batch: str | None = None, *, phases: bool = False) -> list[Row]:
        """Each repository's latest workflow (of batch `batch`, or of every batch), in order of submission."""
        from dbos import DBOS

        prefix = f"{batch}:" if batch is not None else None
        rows = latest(DBOS.list_workflows(workflow_id_prefix=prefix, name=WORKFLOW, sort_desc=False))
        if phases:
            for row in rows:
                if row.status == "PENDING":
                    row.phase = DBOS.get_event(row.workflow, "phase", timeout_seconds=0)
        return rows

    def queued(self) -> dict[str, BatchSpec]:
        """The batches that have repositories waiting on their queue, by queue name."""
        from dbos import DBOS

        found: dict[str, BatchSpec] = {}
        for status in DBOS.list_workflows(status="ENQUEUED", name=WORKFLOW, load_output=False):
            row = _row(status)
            if row is not None and status.queue_name:
                found.setdefault(status.queue_name, row.spec)
        return found

    def running_here(self) -> int:
        from dbos import DBOS

        return len(
            DBOS.list_workflows(status="PENDING", executor_id=self.executor, load_input=False, load_output=False)
        )

    def cancel(self, workflows: list[str]) -> None:
        from dbos import DBOS

        for workflow in workflows:
            DBOS.cancel_workflow(workflow)

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


def _quiet_cancellation(record: logging.LogRecord) -> bool:
    """DBOS logs a cancelled workflow (crew batch cancel) as an error with its traceback: not one."""
    return not (record.exc_info and type(record.exc_info[1]).__name__.endswith("CancelledError"))


def latest(statuses: list[Any]) -> list[Row]:
    """Each repository's latest workflow among DBOS's `statuses`, by batch and in order of submission."""
    found: dict[tuple[str, str], Row] = {}
    for status in statuses:
        row = _row(status)
        if row is None:
            continue
        key = (row.spec.batch, row.repo.key)
        if key not in found or found[key].generation < row.generation:
            found[key] = row
    return sorted(found.values(), key=lambda r: (r.spec.batch, r.repo.position))


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
        return latest(self._client.list_workflows(name=WORKFLOW, sort_desc=False))

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
