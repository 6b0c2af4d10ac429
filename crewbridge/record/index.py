"""The runs index: one row per run (id, agents, mode, task, the run's own working folder, status,
tokens, cost, calls, what it is part of), read from the transcripts' first and last events and kept
between commands. `crew log`, `--continue`/`--resume`, the editor's session list and load, and
`crew ui` all read it; the one status rule is here.

A run's status: its `end` event's (done, failed, cancelled); without one, `running` while the
process its `start` event names lives (and started before the run did: a pid the system gave to
another process since is not the run), `waiting` while it waits for a person's answer, else
`unfinished` (it died without a word).

The rows of finished runs are kept in `index.json` (0600) beside the runs folder, each with its
file's size and time: a row is used again only while its file is unchanged; a row of a running run
is read anew each time.
"""

from __future__ import annotations

import os
import threading
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from crewbridge.base import jsonio
from crewbridge.record import events as ev
from crewbridge.record.transcript import MAX_RECORD, RUN_ID, Reader, decoded, runs_dir

INDEX_NAME = "index.json"
INDEX_FORMAT = 2  # of the index file: another one is not read
_TAIL = 1 << 16  # bytes read from the end of a file to find its `end` event (and a pending question)
MAX_READ = 4 << 20  # bytes of events read at once for a page


@dataclass
class Row:
    """One run as every list shows it."""

    run_id: str
    started: str
    command: str
    mode: str
    agents: list[str]
    models: dict[str, str]
    task: str
    status: str
    seconds: float | None
    tokens: int
    cost: float | None
    calls: int
    errors: int
    cwd: str
    pid: int | None
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    parent: dict[str, str] = field(default_factory=dict)  # batch, repo, session, run
    resumed_from: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The row for programs (`crew log --json`, the UI's list)."""
        data = asdict(self)
        del data["pid"]
        return data

    def matches(self, agent: str | None = None, status: str | None = None, text: str | None = None) -> bool:
        if agent and agent not in self.agents:
            return False
        if status and status != self.status:
            return False
        if text:
            wanted = text.lower()
            return any(wanted in part.lower() for part in (self.task, self.run_id, self.cwd, self.command))
        return True


def row_of(path: Path) -> Row:
    """The row of transcript `path`, from its first event and its tail (OSError when unreadable)."""
    with path.open("rb") as handle:
        first = handle.readline(MAX_RECORD + 1)
        size = handle.seek(0, os.SEEK_END)
        handle.seek(max(size - _TAIL, 0))
        tail = handle.read().splitlines()
        if size > _TAIL:
            tail = tail[1:]  # the first line of the tail may be cut
    start = next(decoded([(first, len(first))]), None)
    if not isinstance(start, ev.Start):
        start = ev.Start(run=path.stem)
    upgrade_tail = [first, *tail] if start.v == 0 else tail  # a version 0 tail reads after its start
    events = list(decoded((line, len(line)) for line in upgrade_tail))
    end = next((e for e in reversed(events) if isinstance(e, ev.End)), None)
    status: str
    if end is not None:
        status = end.status
    elif start.pid and alive(start.pid, start.at):
        status = "waiting" if _asking(events) else "running"
    else:
        status = "unfinished"
    usage = end.usage if end is not None else {}
    tokens = sum(int(u.get("input_tokens", 0)) + int(u.get("output_tokens", 0)) for u in usage.values())
    costs = [float(u["cost_usd"]) for u in usage.values() if isinstance(u.get("cost_usd"), (int, float))]
    parent = {k: v for k, v in jsonio_builtins(start.parent).items() if v} if start.parent else {}
    return Row(
        run_id=path.stem,
        started=start.at,
        command=start.command,
        mode=start.mode or start.command,
        agents=list(start.agents),
        models={agent: model for agent, model in start.models.items() if model},
        task=start.task,
        status=status,
        seconds=end.t / 1000 if end is not None else None,
        tokens=tokens,
        cost=round(sum(costs), 8) if costs else None,
        calls=end.calls if end is not None else 0,
        errors=end.errors if end is not None else 0,
        cwd=start.cwd,
        pid=start.pid or None,
        usage=usage,
        parent=parent,
        resumed_from=start.resumed_from,
    )


def jsonio_builtins(parent: ev.Parent) -> dict[str, Any]:
    return {key: getattr(parent, key) for key in parent.__struct_fields__}


def _asking(events: list[ev.AnyEvent]) -> bool:
    """Whether a question was asked in these (the tail's) events and not yet answered."""
    open_ = 0
    for event in events:
        if isinstance(event, ev.Ask):
            open_ += 1
        elif isinstance(event, ev.Approval):
            open_ = max(open_ - 1, 0)
    return open_ > 0


def alive(pid: int, started: str) -> bool:
    """Whether process `pid` lives and is the one that started a run at `started` (ISO time): a
    process that began after the run did holds a reused pid. Where /proc is missing, whether the pid
    lives at all."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = next(line for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime "))
    except (OSError, StopIteration):
        if Path("/proc/self/stat").exists():
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return False
    began = int(boot.split()[1]) + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    try:
        run_began = datetime.fromisoformat(started).timestamp()
    except ValueError:
        return True
    return began <= run_began + 1.0  # clock ticks and the start event's write: within a second


class Runs:
    """The runs of transcript folder `directory` (default: crew's), indexed in `index` (default:
    index.json beside it; None: not kept)."""

    def __init__(self, directory: Path | None = None, index: Path | bool | None = True) -> None:
        self.directory = directory or runs_dir()
        self.index: Path | None = self.directory.parent / INDEX_NAME if index is True else index or None
        self._lock = threading.Lock()
        self._reading = threading.Lock()
        self._rows: dict[str, tuple[tuple[int, int], Row]] = {}  # run id → (size, mtime) of its file, row
        self._kept = False  # the index holds every finished row read
        self._load()

    def _load(self) -> None:
        try:
            data = jsonio.loads(self.index.read_bytes()) if self.index is not None else None
            if isinstance(data, dict) and data.get("format") == INDEX_FORMAT:
                for run_id, (size, mtime, fields) in data["rows"].items():
                    self._rows[run_id] = ((size, mtime), Row(**fields))
                self._kept = True
        except (OSError, ValueError, TypeError, KeyError):
            self._rows.clear()  # no index, or one this crew cannot read: the runs are read anew

    def _keep(self) -> None:
        """Write the finished rows to the index (a new file renamed over the old one)."""
        if self.index is None:
            return
        with self._lock:
            rows = {
                run_id: [key[0], key[1], asdict(row)]
                for run_id, (key, row) in self._rows.items()
                if row.status in ev.ENDED or row.status == "unfinished"
            }
        data = jsonio.dumps_bytes({"format": INDEX_FORMAT, "rows": rows})
        scratch = self.index.with_name(f".{self.index.name}.{os.getpid()}.{threading.get_ident()}")
        try:
            fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(scratch, self.index)
            self._kept = True
        except OSError:
            pass  # a read-only state folder: the runs are read anew next time

    def path(self, run_id: str) -> Path | None:
        """The transcript of `run_id` (a full id only), if there is one."""
        if not RUN_ID.match(run_id):
            return None
        path = self.directory / f"{run_id}.jsonl"
        return path if path.is_file() else None

    def rows(self, since: datetime | None = None) -> list[Row]:
        """Every run (started at `since` or later), newest first."""
        with self._reading:
            rows = self._rows_now(since)
            if not self._kept:
                self._keep()
            return rows

    def _rows_now(self, since: datetime | None) -> list[Row]:
        try:
            names = sorted((entry.name for entry in os.scandir(self.directory)), reverse=True)
        except OSError:
            return []
        first = since.astimezone(timezone.utc).strftime("%Y%m%d-%H%M%S") if since else ""
        rows = []
        seen = set()
        for name in names:
            run_id = name[: -len(".jsonl")]
            if not name.endswith(".jsonl") or not RUN_ID.match(run_id):
                continue
            seen.add(run_id)
            if run_id < first:  # a run id starts with its start time (UTC)
                continue
            row = self.row(run_id)
            if row is not None:
                rows.append(row)
        with self._lock:
            gone = self._rows.keys() - seen
            for run_id in gone:  # its transcript was deleted
                del self._rows[run_id]
            self._kept = self._kept and not gone
        return rows

    def row(self, run_id: str) -> Row | None:
        path = self.directory / f"{run_id}.jsonl"
        try:
            info = path.stat()
        except OSError:
            return None
        key = (info.st_size, info.st_mtime_ns)
        with self._lock:
            kept = self._rows.get(run_id)
        if kept is not None and kept[0] == key and kept[1].status in (*ev.ENDED, "unfinished"):
            return kept[1]
        try:
            row = row_of(path)
        except OSError:
            return None
        with self._lock:
            self._rows[run_id] = (key, row)
            if row.status not in ("running", "waiting"):
                self._kept = False
        return row

    def live(self) -> list[str]:
        """The runs last seen running or waiting."""
        with self._lock:
            return [run_id for run_id, (_, row) in self._rows.items() if row.status in ("running", "waiting")]

    def latest(self, cwd: str, commands: tuple[str, ...]) -> Row | None:
        """The newest run in folder `cwd` by one of `commands` (what --continue goes on with)."""
        return next((row for row in self.rows() if row.cwd == cwd and row.command in commands), None)


def read_from(path: Path, offset: int, reader: Reader) -> tuple[list[tuple[int, ev.AnyEvent]], int]:
    """The whole events of `path` from byte `offset` (a line's start) on, each with the offset
    after it, and where the next read starts (a line still being written waits for its end).
    `reader`: the one that read the file up to `offset` (a fresh one for offset 0)."""
    with path.open("rb") as handle:
        handle.seek(offset)
        data = handle.read(MAX_READ)
    end = data.rfind(b"\n")
    if end < 0:
        if len(data) >= MAX_READ:  # one line longer than any record crew writes: skipped
            return [], offset + len(data)
        return [], offset
    found: list[tuple[int, ev.AnyEvent]] = []
    position = offset
    for line in data[: end + 1].split(b"\n")[:-1]:
        position += len(line) + 1
        for event in reader.line(line, len(line)):
            if not isinstance(event, ev.Unreadable):
                found.append((position, event))
    return found, offset + end + 1
