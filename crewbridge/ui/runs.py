"""The runs `crew ui` shows, read from crew's transcripts (crewbridge.transcript): the list, each row
summarised once and kept while its file does not change (a thousand runs list fast); a run's events
from a byte offset, for the live page's tail; usage over time, summed as `crew log --by agent` sums.

A run's status: `done`, `failed` or `cancelled` from its `end` event; without one, `running` while
the process its `start` event names is alive (and started before the run did: a pid the system gave
to another process since is not the run), else `failed` (it died without a word).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from crewbridge import jsonio
from crewbridge.transcript import MAX_RECORD, RUN_ID, RunSummary, summary
from crewbridge.usage import Tally, by_agent

STATUSES = ("running", "done", "failed", "cancelled")
_ENDED = {"ok": "done", "interrupted": "cancelled", "cancelled": "cancelled"}  # any other end: failed
MAX_READ = 4 << 20  # bytes of events read at once for a page
INDEX_FORMAT = 1  # of the index file: another one is not read


@dataclass
class Row:
    """One run as the list shows it."""

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
    tool_calls: int
    cwd: str
    pid: int | None
    usage: dict[str, dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "started": self.started,
            "command": self.command,
            "mode": self.mode,
            "agents": self.agents,
            "models": self.models,
            "task": self.task,
            "status": self.status,
            "seconds": self.seconds,
            "tokens": self.tokens,
            "cost": self.cost,
            "tool_calls": self.tool_calls,
            "cwd": self.cwd,
        }

    def matches(self, agent: str | None, status: str | None, text: str | None) -> bool:
        if agent and agent not in self.agents:
            return False
        if status and status != self.status:
            return False
        if text:
            wanted = text.lower()
            return any(wanted in field.lower() for field in (self.task, self.run_id, self.cwd, self.command))
        return True


def row_of(run: RunSummary) -> Row:
    fields = run.fields
    pid = fields.get("pid")
    agents = [str(agent) for agent in fields.get("agents") or [] if isinstance(agent, str)]
    models = fields.get("models") if isinstance(fields.get("models"), dict) else {}
    total = run.total
    status = _ENDED.get(run.status, "failed") if run.end else "running"
    if status == "running" and not (isinstance(pid, int) and alive(pid, run.started)):
        status = "failed"
    command = str(fields.get("command") or "")
    return Row(
        run_id=run.run_id,
        started=run.started,
        command=command,
        mode=str(fields.get("mode") or command),
        agents=agents,
        models={str(agent): str(model) for agent, model in (models or {}).items() if model},
        task=str(fields.get("task") or ""),
        status=status,
        seconds=run.seconds,
        tokens=total.tokens,
        cost=total.cost_usd,
        tool_calls=run.tool_calls,
        cwd=str(fields.get("cwd") or ""),
        pid=pid if isinstance(pid, int) else None,
        usage=run.usage,
    )


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
    """The runs of transcript folder `directory`. The rows of finished runs are kept in `index`
    (0600 beside the folder) between starts of `crew ui`, each with its file's size and time: a
    row is used again only while its file is unchanged."""

    def __init__(self, directory: Path, index: Path | None = None) -> None:
        self.directory = directory
        self.index = index
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
                run_id: [key[0], key[1], vars(row)]
                for run_id, (key, row) in self._rows.items()
                if row.status != "running"
            }
        data = jsonio.dumps_bytes({"format": INDEX_FORMAT, "rows": rows})
        scratch = self.index.with_name(f".{self.index.name}.{os.getpid()}")
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

    def rows(self) -> list[Row]:
        """Every run, newest first (one reading at a time: a second waits, then finds them read)."""
        with self._reading:
            rows = self._rows_now()
            if not self._kept:
                self._keep()
            return rows

    def _rows_now(self) -> list[Row]:
        try:
            names = sorted((entry.name for entry in os.scandir(self.directory)), reverse=True)
        except OSError:
            return []
        rows = []
        for name in names:
            run_id = name[: -len(".jsonl")]
            if not name.endswith(".jsonl") or not RUN_ID.match(run_id):
                continue
            row = self.row(run_id)
            if row is not None:
                rows.append(row)
        with self._lock:
            gone = self._rows.keys() - {row.run_id for row in rows}
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
        if kept is not None and kept[0] == key and kept[1].status != "running":
            return kept[1]
        try:
            row = row_of(summary(path))
        except OSError:
            return None
        with self._lock:
            self._rows[run_id] = (key, row)
            if row.status != "running":
                self._kept = False
        return row

    def running(self) -> list[str]:
        """The runs last seen running."""
        with self._lock:
            return [run_id for run_id, (_, row) in self._rows.items() if row.status == "running"]

    def listed(
        self, agent: str | None = None, status: str | None = None, text: str | None = None
    ) -> list[dict[str, Any]]:
        return [row.to_dict() for row in self.rows() if row.matches(agent, status, text)]

    def usage(self) -> dict[str, Any]:
        """Tokens and cost per day, agent and model (the runs' `end` events), and the totals per
        agent that `crew log --by agent` prints."""
        rows = [row for row in self.rows() if row.usage]
        series: dict[tuple[str, str, str], Tally] = {}
        for row in rows:
            day = row.started[:10]
            for agent, data in row.usage.items():
                key = (day, agent, row.models.get(agent, "default"))
                series.setdefault(key, Tally()).add(Tally.of(data))
        return {
            "series": [
                {"day": day, "agent": agent, "model": model, "tokens": tally.tokens, **tally.to_dict()}
                for (day, agent, model), tally in sorted(series.items())
            ],
            "agents": [row.to_dict() for row in by_agent(row.usage for row in rows)],
        }


def read_events(path: Path, offset: int) -> tuple[list[tuple[int, dict[str, Any]]], int]:
    """The whole events of `path` from byte `offset` (a line's start) on, each with the offset
    after it, and where the next read starts (a line still being written waits for its end)."""
    events: list[tuple[int, dict[str, Any]]] = []
    with path.open("rb") as handle:
        handle.seek(offset)
        data = handle.read(MAX_READ)
    end = data.rfind(b"\n")
    if end < 0:
        if len(data) >= MAX_READ:  # one line longer than any record crew writes: skipped
            return [], offset + len(data)
        return [], offset
    position = offset
    for line in data[: end + 1].split(b"\n")[:-1]:
        position += len(line) + 1
        if not line.strip() or len(line) > MAX_RECORD:
            continue
        try:
            event = jsonio.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append((position, event))
    return events, offset + end + 1
