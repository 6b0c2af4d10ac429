"""Run transcripts: JSONL events appended and flushed as they happen, secrets redacted.

One file per run under `$XDG_STATE_HOME/crewbridge/runs/` (default `~/.local/state`), named by the run
id (start time + random suffix, so names sort by time). The first event is `start`, the last `end`
(absent when the process died: the run shows as unfinished). `list_runs` and `read_run` serve `crew log`.
While a transcript is open, the run attends a `crew ui` of the user, which may cancel it (crewbridge.uilink).

A record is bounded: a string longer than MAX_TEXT characters keeps its head and says how long it
was, nesting past jsonio.MAX_DEPTH is replaced by a note, and a record still larger than MAX_RECORD
bytes has its largest fields replaced by their size. Text that is not UTF-8 (a lone surrogate) is
written as JSON escapes.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from crewbridge import jsonio
from crewbridge.approval import Answer, Question
from crewbridge.config import state_dir
from crewbridge.errors import CrewError, Interrupted, UsageError
from crewbridge.redact import Redactor
from crewbridge.stop import Stop
from crewbridge.uilink import Attendance
from crewbridge.usage import Row, Tally
from crewbridge.version import __version__

RUN_ID = re.compile(r"^[0-9]{8}-[0-9]{6}-[0-9a-f]{6}$")
_TAIL = 1 << 16  # bytes read from the end of a file to find its `end` event
MAX_TEXT = 1 << 20  # characters of one string in a record; a longer one keeps its head
MAX_RECORD = 4 << 20  # bytes of one record (a line), the newline included
_KEPT = ("kind", "time", "ms")  # fields a record too large always keeps


def runs_dir(env: Mapping[str, str] | None = None) -> Path:
    return state_dir(env) / "runs"


class Transcript:
    """A run's event log. `Transcript()` discards everything; `Transcript.open()` writes a file."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.path: Path | None = None
        self._file: IO[bytes] | None = None
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._redactor: Redactor | None = None
        self._counts = {"tool_call": 0, "error": 0}  # events counted for the `end` summary
        self._usage: dict[str, Row] = {}  # `usage` events summed per agent, for the `end` summary
        self._attendance: Attendance | None = None
        self._on_cancel = Stop()  # set by cancel(): its callbacks end the run's loops
        self.cancelled = False

    @classmethod
    def open(
        cls,
        directory: Path | None = None,
        *,
        env: Mapping[str, str] | None = None,
        secrets: Mapping[str, str] | None = None,
        run_id: str | None = None,
        **fields: Any,
    ) -> Transcript:
        """Start a transcript file and write its `start` event with `fields` (command, agents, task…).
        Secrets are taken from `env` (default: this process's environment: the variables whose names
        say so) and from `secrets`, variables crew gives its CLIs besides (the `env:` of crew.yaml's
        providers: every value, whatever its name; see crewbridge.redact). `run_id`: the id the run
        already has (its worktrees' branches name it); by default a new one."""
        self = cls()
        directory = directory or runs_dir(env)
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            self.run_id = run_id or new_run_id()
            self.path = directory / f"{self.run_id}.jsonl"
            # 0600: a transcript holds prompts, file contents and command output
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        except OSError as exc:
            raise CrewError(
                f"cannot write the run transcript in {directory}: {exc.strerror or exc}; "
                "set XDG_STATE_HOME to a writable directory"
            ) from None
        self._file = os.fdopen(fd, "wb")
        self._redactor = Redactor(env, provided=secrets)
        self.write("start", run_id=self.run_id, version=__version__, pid=os.getpid(), cwd=os.getcwd(), **fields)
        self._attendance = Attendance(self.run_id, lambda: self.cancel("browser"))
        return self

    def write(self, kind: str, **fields: Any) -> None:
        """Append one event (thread-safe); it is on disk before this returns. Ignored once closed
        (a tool still running when its run ended may report late)."""
        if self._file is not None:
            self._append(kind, fields)

    def answered(self, question: Question, answer: Answer | None) -> None:
        """Record a person's answer to an approval question (None: nobody answered) and where it came from."""
        self.write(
            "approval",
            agent=question.agent,
            name=question.tool,
            input=question.input,
            answer=answer.verdict if answer else None,
            source=answer.source if answer else None,
        )

    def live(self, agent: str, text: str) -> None:
        """Show `agent`'s reply text as it streams on a `crew ui` that attends the run (nothing is
        written: the transcript gets the reply whole)."""
        if text and self._attendance is not None:
            self._attendance.tell({"op": "text", "agent": agent, "text": text})

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Call `callback` (it ends an agent's loop) when the run is cancelled (now, if it was)."""
        self._on_cancel.on_set(callback)

    def cancel(self, source: str) -> None:
        """Cancel the run (from `source`, e.g. "browser"): recorded, then every loop ended; its end
        status is then `cancelled` unless it finished all the same."""
        with self._lock:
            if self.cancelled or self._file is None:
                return
            self.cancelled = True
        self.write("cancel", source=source)
        self._on_cancel.set()

    def close(self, status: str) -> None:
        """Write the `end` event (status, counts) and close; a second close does nothing."""
        if self._attendance is not None:
            self._attendance.close()
        if self.cancelled and status != "ok":
            status = "cancelled"
        if self._file is not None:
            self._append("end", {"status": status}, last=True)

    def _append(self, kind: str, fields: dict[str, Any], last: bool = False) -> None:
        assert self._redactor is not None
        with self._lock:
            if self._file is None:
                return
            if kind in self._counts:
                self._counts[kind] += 1
            if kind == "usage":
                row = self._usage.setdefault(str(fields.get("agent")), Row(str(fields.get("agent"))))
                row.turns += 1
                row.usage.add(Tally.of(fields))
            if last:
                usage = {agent: {"turns": row.turns, **row.usage.to_dict()} for agent, row in self._usage.items()}
                fields = {
                    **fields,
                    "tool_calls": self._counts["tool_call"],
                    "errors": self._counts["error"],
                    "usage": usage,
                }
            event = {"kind": kind, "time": _now(), "ms": round((time.monotonic() - self._start) * 1000, 1), **fields}
            self._file.write(self._record(event))
            self._file.flush()
            if last:
                self._file.close()
                self._file = None

    def _record(self, event: dict[str, Any]) -> bytes:
        """`event` as one line of the file: redacted and bounded (see the module's docstring)."""
        event = self._bounded(event, 0)
        line = jsonio.dumps_bytes(event) + b"\n"
        if len(line) > MAX_RECORD:  # many strings, each under MAX_TEXT: the largest fields go first
            sizes = {key: len(jsonio.dumps_bytes(value)) for key, value in event.items() if key not in _KEPT}
            for key in sorted(sizes, key=lambda key: sizes[key], reverse=True):
                event[key] = {"cut": f"crew left this field out: {sizes[key]:,} bytes made the record too large"}
                line = jsonio.dumps_bytes(event) + b"\n"
                if len(line) <= MAX_RECORD:
                    break
        return line

    def _bounded(self, value: Any, depth: int) -> Any:
        """`value` redacted, with long strings cut and deep nesting replaced; anything that is not
        JSON (a Path, an exception) as its text."""
        assert self._redactor is not None
        if isinstance(value, str):
            if len(value) <= MAX_TEXT:
                return self._redactor.text(value)
            head = self._redactor.head(value, MAX_TEXT)
            return f"{head}…[crew cut this text: {len(value):,} characters in all, the first {MAX_TEXT:,} kept]"
        if value is None or isinstance(value, (bool, int, float)):
            return value
        if isinstance(value, (dict, list, tuple)) and depth >= jsonio.MAX_DEPTH:
            return f"[crew left this out: nested more than {jsonio.MAX_DEPTH} levels deep]"
        if isinstance(value, dict):
            return {self._bounded(str(key), depth): self._bounded(item, depth + 1) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._bounded(item, depth + 1) for item in value]
        return self._bounded(str(value), depth)

    def __enter__(self) -> Transcript:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if kind is None:
            self.close("ok")
        elif issubclass(kind, (KeyboardInterrupt, Interrupted)):
            self.close("interrupted")
        else:
            self.write("error", message=str(exc), type=kind.__name__)
            self.close("error")


@dataclass
class RunSummary:
    """One line of `crew log`: from a transcript's first and last events."""

    run_id: str
    path: Path
    started: str
    status: str  # the `end` status, or "unfinished" when the run has no end event
    fields: dict[str, Any]  # the `start` event (command, agents, task, …)
    end: dict[str, Any]  # the `end` event (counts, ms), empty when unfinished

    @property
    def tool_calls(self) -> int:
        return int(self.end.get("tool_calls", 0))

    @property
    def usage(self) -> dict[str, dict[str, Any]]:
        """Each agent's usage in the run (turns, tokens, cost), from the `end` event."""
        usage = self.end.get("usage")
        return usage if isinstance(usage, dict) else {}

    @property
    def total(self) -> Tally:
        """The run's usage, every agent's added up."""
        total = Tally()
        for data in self.usage.values():
            total.add(Tally.of(data))
        return total

    @property
    def seconds(self) -> float | None:
        return self.end["ms"] / 1000 if "ms" in self.end else None

    def line(self) -> str:
        """The run on one line of `crew log`: id, status, calls, usage, agents, task."""
        task = (str(self.fields.get("task", "")).splitlines() or [""])[0]
        total = self.total
        cost = f"${total.cost_usd:.4f}" if total.cost_usd is not None else "-"
        agents = " ".join(f"@{agent}" for agent in self.usage or self.fields.get("agents", []))
        calls = f"{self.tool_calls:3} calls {total.tokens:>9,} tokens {cost:>9}"
        return f"{self.run_id}  {self.status:11} {calls}  {agents}  {task[:50]}"

    def to_dict(self) -> dict[str, Any]:
        """The run for `crew log --json`."""
        return {
            "run_id": self.run_id,
            "started": self.started,
            "status": self.status,
            "command": self.fields.get("command"),
            "agents": self.fields.get("agents", []),
            "task": self.fields.get("task", ""),
            "tool_calls": self.tool_calls,
            "seconds": self.seconds,
            "usage": self.usage,
            **self.total.to_dict(),
        }


def list_runs(limit: int | None = 20, directory: Path | None = None, since: datetime | None = None) -> list[RunSummary]:
    """The most recent runs, newest first: at most `limit`, those started at `since` or later."""
    directory = directory or runs_dir()
    if not directory.is_dir():
        return []
    files = sorted((p for p in directory.glob("*.jsonl") if RUN_ID.match(p.stem)), reverse=True)
    if since is not None:  # a run id starts with its start time (UTC)
        first = since.astimezone(timezone.utc).strftime("%Y%m%d-%H%M%S")
        files = [path for path in files if path.stem >= first]
    return [summary(path) for path in files[: None if limit is None else max(limit, 0)]]


def read_run(run_id: str, directory: Path | None = None) -> list[dict[str, Any]]:
    """Every event of one run. `run_id` may be a unique prefix, or `last`. A line that cannot be
    read (the run died while writing it, a line not JSON, nested too deeply or larger than any
    record crew writes) comes back as `{"kind": "corrupt", "line": n, "error": …, "text": …}`."""
    path = find_run(run_id, directory)
    events: list[dict[str, Any]] = []
    with path.open("rb") as handle:
        for number, (raw, size) in enumerate(_lines(handle), 1):
            if not raw.strip():
                continue
            text = raw.decode("utf-8", "replace")
            if size > MAX_RECORD:
                error = f"a record of {size:,} bytes, more than crew writes ({MAX_RECORD:,}); not read"
            else:
                try:
                    event = jsonio.loads(text)
                except ValueError as exc:
                    error = str(exc)
                else:
                    if isinstance(event, dict):
                        events.append(event)
                        continue
                    error = "not a JSON object"
            events.append({"kind": "corrupt", "line": number, "error": error, "text": text[:200]})
    return events


def _lines(handle: IO[bytes]) -> Iterator[tuple[bytes, int]]:
    """Each line of `handle` and its size; of a line longer than a record, only its first
    MAX_RECORD + 1 bytes (the rest is skipped)."""
    while line := handle.readline(MAX_RECORD + 1):
        size, tail = len(line), line
        while not tail.endswith(b"\n") and (tail := handle.readline(1 << 20)):
            size += len(tail)
        yield line, size


def find_run(run_id: str, directory: Path | None = None) -> Path:
    """The transcript file of `run_id` (a full id, a unique prefix, or `last`)."""
    directory = directory or runs_dir()
    names = sorted(p.stem for p in directory.glob("*.jsonl") if RUN_ID.match(p.stem)) if directory.is_dir() else []
    if run_id == "last":
        if not names:
            raise UsageError(f"no runs recorded yet in {directory}")
        return directory / f"{names[-1]}.jsonl"
    if not re.fullmatch(r"[0-9a-f-]+", run_id):
        raise UsageError(
            f"run id '{run_id}' is not valid; `crew log` lists runs (ids look like 20250101-120000-ab12cd)"
        )
    found = [name for name in names if name.startswith(run_id)]
    if len(found) == 1:
        return directory / f"{found[0]}.jsonl"
    if not found:
        raise UsageError(f"run '{run_id}' not found in {directory}; `crew log` lists runs")
    raise UsageError(f"run id '{run_id}' matches {len(found)} runs ({', '.join(found[:5])}); give more of it")


def summary(path: Path) -> RunSummary:
    """The run of transcript file `path`, from its first and last events."""
    with path.open("rb") as handle:
        first = _json(handle.readline(MAX_RECORD + 1))
        size = handle.seek(0, os.SEEK_END)
        handle.seek(max(size - _TAIL, 0))
        tail = handle.read().splitlines()
    # the end event is normally last; a tool that reported after its run ended may follow it
    end = next((event for event in map(_json, reversed(tail)) if event.get("kind") == "end"), {})
    return RunSummary(
        run_id=path.stem,
        path=path,
        started=str(first.get("time", "")),
        status=str(end.get("status", "unfinished")),
        fields=first,
        end=end,
    )


def _json(raw: bytes) -> dict[str, Any]:
    try:
        value = jsonio.loads(raw)
    except ValueError:  # not JSON (cut short: the run died writing it), or nested too deeply
        return {}
    return value if isinstance(value, dict) else {}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def new_run_id() -> str:
    """The start time to the second, then its milliseconds in 3 hex digits (so runs of one second
    sort too: `last` and --continue take the newest) and 3 random ones."""
    now = time.time()
    # os.urandom rather than secrets, which takes 7 ms to import (at every crew start)
    return time.strftime("%Y%m%d-%H%M%S-", time.gmtime(now)) + f"{int(now % 1 * 1000):03x}" + os.urandom(2).hex()[:3]
