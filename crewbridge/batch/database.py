"""crew batch's database as crew itself sees it, beside DBOS: which one (`--db`, $CREW_BATCH_DB, or
SQLite in crew's state folder), how it is named in messages (never with its password), crew's own
connection to it (`Side`: which executors still live, which rows are not crew's JSON), and the guard
that keeps DBOS from unpickling anything in crew's process.

**Nothing the database holds runs.** crew's workflows store JSON (DBOS's portable JSON serializer,
SERIALIZATION). DBOS (2.31 as 3.4, `dbos/_serialization.py`) unpickles any value whose row says
`py_pickle`, whatever serializer is configured, and anyone who can write to the database can say
so. crew therefore (1) reads the `serialization` of every row it is about to have DBOS load, and a
row that says anything but crew's JSON is refused (its repository fails, the message names the row
and why); (2) has its workflow refuse itself when its own rows are not crew's JSON, before DBOS
replays a step; (3) for what DBOS reads on its own (a dequeue, a step replayed) between crew's
look and its read, installs an audit hook (PEP 578) that refuses every look-up of a name by pickle
while a DBOS function is on the stack: a pickle can only run code through such a look-up
(`pickle.find_class`, for GLOBAL, STACK_GLOBAL, INST, OBJ and EXT alike), so none runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import sqlite3
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from crewbridge.config import state_dir
from crewbridge.errors import CrewError, UsageError

DB_ENV = "CREW_BATCH_DB"
SERIALIZATION = "portable_json"  # the name DBOS's portable JSON serializer writes in each row
CONNECT_TIMEOUT = 10  # seconds crew waits for a Postgres that does not answer
_PASSWORD = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#@:]*:(?P<secret>[^/?#@]*)@")  # scheme://user:SECRET@
_URL_SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://", "sqlite:///")


class StoreError(CrewError):
    """The batch database cannot be reached or used (exit 3, as a CLI that cannot reach its API)."""

    exit_code = 3


class PickleRefused(CrewError):
    """DBOS was about to unpickle something in crew's process: refused (see the top)."""


def database_url(given: str | None, env: Mapping[str, str] | None = None) -> str:
    """The system database: `given` (--db, which may not carry a password: every local user sees a
    command line), $CREW_BATCH_DB, or SQLite in crew's state folder."""
    env = os.environ if env is None else env
    url = given or env.get(DB_ENV) or ""
    if not url:
        folder = state_dir(env) / "batch"
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        return f"sqlite:///{folder / 'batches.sqlite'}"
    if not url.startswith(_URL_SCHEMES):
        raise UsageError(
            f"--db '{shown(url)}' is not a database URL crew batch takes; give postgresql://USER@HOST/DB "
            "(or sqlite:///PATH), or leave it out for the SQLite file in crew's state folder"
        )
    if given and password(given):
        raise UsageError(
            f"--db '{shown(given)}' carries a password, which every user of this machine sees on the command "
            f"line; put it in ~/.pgpass (or a file named by ?passfile=PATH), or give the URL in ${DB_ENV}"
        )
    return url


def database_files(url: str) -> list[str]:
    """The files of a SQLite database `url` names (its journals too), absolute: what the agents'
    sandbox hides besides crew's state folder, where it usually is. None for a server's URL."""
    if not url.startswith("sqlite:///"):
        return []
    path = os.path.abspath(url[len("sqlite:///") :])
    return [path, *(f"{path}-{suffix}" for suffix in ("wal", "shm", "journal"))]


def take_database_url(given: str | None) -> str:
    """database_url(), then $CREW_BATCH_DB out of this process's environment: nothing crew starts
    (an agent's CLI, its commands) inherits the database's address or password."""
    url = database_url(given)
    os.environ.pop(DB_ENV, None)
    return url


def password(url: str) -> str | None:
    """The password `url` carries (in its address, or as a `password` parameter), if any; read
    without parsing the rest (a URL malformed elsewhere still hides it)."""
    found = _PASSWORD.match(url)
    secret = unquote(found["secret"]) if found and found["secret"] else None
    for name, value in parse_qsl(urlsplit(url.split("@", 1)[-1]).query if "?" in url else ""):
        if name == "password" and value:
            secret = value
    return secret or None


def shown(url: str) -> str:
    """`url` with its password left out (it goes into messages)."""
    found = _PASSWORD.match(url)
    if found and found["secret"]:
        url = url[: found.start("secret")] + "***" + url[found.end("secret") :]
    return scrubbed(url, url)


def scrubbed(text: str, url: str) -> str:
    """`text` (a driver's message) with `url`'s password left out (as written, and decoded)."""
    secret = password(url)
    for form in {secret, quote(secret or "", safe="")} if secret else ():
        text = text.replace(form, "***")
    return text


def first_line(exc: object) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def guard() -> None:
    """Refuse, in this process from now on, every look-up of a name by pickle while DBOS is on the
    stack (see the top). Installed once; an audit hook cannot be removed."""
    if not getattr(sys, "_crew_batch_guard", False):
        sys.addaudithook(_refuse_dbos_unpickling)
        sys._crew_batch_guard = True  # type: ignore[attr-defined]


def _refuse_dbos_unpickling(event: str, args: tuple[Any, ...]) -> None:
    if event != "pickle.find_class":
        return
    frame = sys._getframe(1)
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).partition(".")[0] == "dbos":
            raise PickleRefused(
                f"the batch database holds a pickle (naming {args[0]}.{args[1]}); crew batch stores JSON and "
                "unpickles nothing: refused"
            )
        frame = frame.f_back  # type: ignore[assignment]


class Side(ABC):
    """crew's own connection to the batch database, beside DBOS's.

    Whether an executor still runs: each working process holds a lock named after its executor id
    while it lives, and the system lets go of it when the process dies (Postgres a session's
    advisory lock when its connection ends; the kernel a flock when its file closes).

    Which rows are not crew's JSON (`foreign`): read from DBOS's tables (workflow_status,
    operation_outputs, workflow_events; docs/batch.md, "What DBOS stores"), whose `serialization`
    column DBOS's API does not show."""

    _MARK = "?"  # the database's placeholder of a value in SQL
    _LATER = "max"  # … and its function of the later of two values

    @staticmethod
    def of(url: str) -> Side:
        if url.startswith("sqlite:///"):
            return SqliteSide(Path(url.removeprefix("sqlite:///")))
        return PostgresSide(url)

    @abstractmethod
    def hold(self, executor: str) -> None: ...

    @abstractmethod
    def alive(self, executor: str) -> bool: ...

    def foreign(self, workflows: Sequence[str]) -> dict[str, str]:
        """Of `workflows`, those with a row that is not crew's JSON: workflow → why it is refused."""
        found: dict[str, str] = {}
        for start in range(0, len(workflows), 500):
            for workflow, what, said in self._query(_FOREIGN, list(workflows[start : start + 500])):
                found.setdefault(
                    workflow,
                    f"its {what} in the batch database say{'' if what.endswith('s') else 's'} '{said}', not crew's "
                    f"JSON ({SERIALIZATION}); crew batch unpickles nothing and refuses the repository "
                    f"(workflow {workflow}; someone else wrote to the database: see docs/batch.md)",
                )
        return found

    @abstractmethod
    def _query(self, sql: str, workflows: list[str]) -> list[tuple[str, str, str]]: ...

    @abstractmethod
    def close(self) -> None: ...

    def pace(self) -> Paced:
        """The forges' pace of every process working on this database (Paced)."""
        return Paced(self)

    @abstractmethod
    def forge_turn(self, forge: str) -> AbstractContextManager[None]:
        """The block holds `forge`'s turn among every process of this database."""

    def not_before(self, forge: str) -> float:
        """The time before which no request may go to `forge` (seconds since the epoch; 0: none)."""
        found = self._pace(f"SELECT not_before FROM {PACE_TABLE} WHERE forge = {self._MARK}", (forge,))
        return float(found[0][0]) if found else 0.0

    def hold_forge(self, forge: str, until: float) -> None:
        """No request goes to `forge` before `until` (a later time already held stays)."""
        later = f"not_before = {self._LATER}({PACE_TABLE}.not_before, excluded.not_before)"
        values = f"({self._MARK}, {self._MARK})"
        self._pace(
            f"INSERT INTO {PACE_TABLE} VALUES {values} ON CONFLICT (forge) DO UPDATE SET {later}", (forge, until)
        )

    @abstractmethod
    def _pace(self, sql: str, values: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """The rows of `sql` on the forges' pace table (made when first used)."""


class Paced:
    """crew batch's Pace of each forge (crewbridge.system.forge.Pace), kept in the batch database and
    shared by every worker of every batch there: a request to a forge at a time across all of them
    (a lock of the database: a file lock beside SQLite, an advisory lock on Postgres, with a thread
    lock in each process), and the time before which none may go (a row of crew_forge_pace), set by
    the request the forge limited. One pace per forge: its API's address names it."""

    def __init__(self, side: Side) -> None:
        self.side = side
        self._turns: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def turn(self, forge: str) -> Iterator[None]:
        with self._lock:
            local = self._turns.setdefault(forge, threading.Lock())
        with local, self.side.forge_turn(forge):
            while (left := self.side.not_before(forge) - time.time()) > 0:
                time.sleep(left)
            yield

    def hold(self, forge: str, until: float) -> None:
        self.side.hold_forge(forge, until)


PACE_TABLE = "crew_forge_pace"  # crew's own table beside DBOS's: each forge's time before which none may be asked
_PACE = f"CREATE TABLE IF NOT EXISTS {PACE_TABLE} (forge TEXT PRIMARY KEY, not_before DOUBLE PRECISION NOT NULL)"


# A row's serialization is crew's JSON, or none (DBOS reads those with crew's JSON serializer too).
_FOREIGN = """
SELECT workflow_uuid, 'inputs and record', serialization FROM {schema}workflow_status
 WHERE workflow_uuid IN ({ids}) AND serialization IS NOT NULL AND serialization <> '{json}'
UNION ALL
SELECT workflow_uuid, 'step ' || function_name, serialization FROM {schema}operation_outputs
 WHERE workflow_uuid IN ({ids}) AND serialization IS NOT NULL AND serialization <> '{json}'
UNION ALL
SELECT workflow_uuid, 'event ' || key, serialization FROM {schema}workflow_events
 WHERE workflow_uuid IN ({ids}) AND serialization IS NOT NULL AND serialization <> '{json}'
"""


class SqliteSide(Side):
    """A lock file per executor beside the SQLite database (one machine: SQLite is local)."""

    def __init__(self, database: Path) -> None:
        self.database = database
        self.folder = Path(f"{database}.executors")
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

    def _query(self, sql: str, workflows: list[str]) -> list[tuple[str, str, str]]:
        if not workflows:
            return []
        text = sql.format(schema="", ids=", ".join("?" * len(workflows)), json=SERIALIZATION)
        try:
            with contextlib.closing(sqlite3.connect(f"file:{self.database}?mode=ro", uri=True, timeout=30)) as db:
                return list(db.execute(text, workflows * 3))
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the batch database {self.database}: {exc}") from None

    def close(self) -> None:
        if self._held is not None:
            Path(self._held.name).unlink(missing_ok=True)
            self._held.close()
            self._held = None

    def _file(self, executor: str) -> Path:
        return self.folder / f"{hashlib.sha256(executor.encode()).hexdigest()[:24]}.lock"

    @contextlib.contextmanager
    def forge_turn(self, forge: str) -> Iterator[None]:
        folder = Path(f"{self.database}.forges")
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(folder / f"{hashlib.sha256(forge.encode()).hexdigest()[:24]}.lock", "a") as turn:
            fcntl.flock(turn, fcntl.LOCK_EX)
            yield

    def _pace(self, sql: str, values: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        try:
            with contextlib.closing(sqlite3.connect(self.database, timeout=30)) as db, db:
                db.execute(_PACE)
                return list(db.execute(sql, values))
        except sqlite3.Error as exc:
            raise StoreError(f"cannot keep the forges' pace in the batch database {self.database}: {exc}") from None


class PostgresSide(Side):
    """A session-level advisory lock per executor, on a connection of crew's own held open."""

    _MARK, _LATER = "%s", "GREATEST"

    def __init__(self, url: str) -> None:
        import psycopg  # installed with DBOS

        conninfo = url.replace("postgresql+psycopg://", "postgresql://", 1)
        self._conninfo = conninfo
        self._pacer: Any = None  # the forges' pace's own connection, made when first used
        try:
            self._connection = psycopg.connect(conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot reach the batch database {shown(url)}: {scrubbed(first_line(exc), url)}; "
                "check that it runs and that --db (or $CREW_BATCH_DB) names it"
            ) from None
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

    def _query(self, sql: str, workflows: list[str]) -> list[tuple[str, str, str]]:
        if not workflows:
            return []
        text = sql.format(schema="dbos.", ids=", ".join(["%s"] * len(workflows)), json=SERIALIZATION)
        with self._lock:
            return [tuple(row) for row in self._connection.execute(text, workflows * 3).fetchall()]

    def close(self) -> None:
        with self._lock:
            self._connection.close()
            if self._pacer is not None:
                self._pacer.close()

    @contextlib.contextmanager
    def forge_turn(self, forge: str) -> Iterator[None]:
        key = _key("forge:" + forge)
        self._pace("SELECT pg_advisory_lock(%s)", (key,))  # one thread at a time here (Paced): it may wait
        try:
            yield
        finally:
            self._pace("SELECT pg_advisory_unlock(%s)", (key,))

    def _pace(self, sql: str, values: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """`sql` on a connection of the pace's own (a turn's lock may wait: the side's other uses do not)."""
        import psycopg

        try:
            with self._lock:
                if self._pacer is None:
                    self._pacer = psycopg.connect(self._conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
                    with contextlib.suppress(psycopg.errors.UniqueViolation):  # made at once by another process
                        self._pacer.execute(_PACE)
                pacer = self._pacer
            cursor = pacer.execute(sql, values)
            return [tuple(row) for row in cursor.fetchall()] if cursor.description else []
        except psycopg.Error as exc:
            url = self._conninfo
            raise StoreError(
                f"cannot keep the forges' pace in the batch database {shown(url)}: {scrubbed(first_line(exc), url)}"
            ) from None


def _key(executor: str) -> int:
    """A signed 64-bit advisory lock key of an executor id."""
    return int.from_bytes(hashlib.sha256(b"crew-batch:" + executor.encode()).digest()[:8], "big", signed=True)
