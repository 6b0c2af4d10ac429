"""The record written down: a run's events, one JSON object a line, appended and flushed as they
happen, secrets redacted; and read back, typed.

One file per run under `$XDG_STATE_HOME/crewbridge/runs/` (default `~/.local/state`), named by the run
id (start time + random suffix, so names sort by time), 0600 in a 0700 folder. The first event is
`start`, the last `end` (absent when the process died: the run is `unfinished`).

A record is bounded: a string longer than MAX_TEXT characters keeps its head and says how long it
was, nesting past jsonio.MAX_DEPTH is replaced by a note, and a record still larger than MAX_RECORD
bytes has its largest fields replaced by their size. Text that is not UTF-8 (a lone surrogate) is
written as JSON escapes. A transcript crew wrote before the record (version 0: `tool_call`,
`tool_result`, `native_tool`, …) is read as the events it stands for (`upgraded`).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from crewbridge.base import jsonio
from crewbridge.base.globs import NATIVE
from crewbridge.base.places import state_dir
from crewbridge.base.redact import Redactor
from crewbridge.errors import CrewError, UsageError
from crewbridge.record import events as ev

RUN_ID = re.compile(r"^[0-9]{8}-[0-9]{6}-[0-9a-f]{6}$")
MAX_TEXT = 1 << 20  # characters of one string in a record; a longer one keeps its head
MAX_RECORD = 4 << 20  # bytes of one record (a line), the newline included
_KEPT = ("kind", "t", "agent", "call", "run")  # fields a record too large always keeps


def runs_dir(env: Mapping[str, str] | None = None) -> Path:
    return state_dir(env) / "runs"


class Transcript:
    """A run's transcript file, written event by event (thread-safe: the record holds its lock)."""

    def __init__(self, path: Path, handle: IO[bytes], redactor: Redactor) -> None:
        self.path = path
        self._file: IO[bytes] | None = handle
        self._redactor = redactor
        self._lock = threading.Lock()

    @classmethod
    def create(
        cls,
        run: str,
        directory: Path | None = None,
        *,
        env: Mapping[str, str] | None = None,
        secrets: Mapping[str, str] | None = None,
    ) -> Transcript:
        """The new file of run `run`. Secrets are taken from `env` (default: this process's
        environment: the variables whose names say so) and from `secrets`, variables crew gives its
        CLIs besides (the `env:` of crew.yaml's providers: every value, whatever its name)."""
        directory = directory or runs_dir(env)
        path = directory / f"{run}.jsonl"
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            # 0600: a transcript holds prompts, file contents and command output
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise CrewError(
                f"cannot write the run transcript in {directory}: {exc.strerror or exc}; "
                "set XDG_STATE_HOME to a writable directory"
            ) from None
        return cls(path, os.fdopen(fd, "wb"), Redactor(env, provided=secrets))

    def write(self, event: ev.Event) -> None:
        """Append one event; it is on disk before this returns. Ignored once closed."""
        line = self._record(ev.to_builtins(event))
        with self._lock:
            if self._file is not None:
                self._file.write(line)
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
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


def read_run(run_id: str, directory: Path | None = None) -> list[ev.AnyEvent]:
    """Every event of one run. `run_id` may be a unique prefix, or `last`."""
    return read_path(find_run(run_id, directory))


def read_path(path: Path) -> list[ev.AnyEvent]:
    """Every event of transcript `path`. A line that cannot be read (the run died while writing
    it, a line not JSON or not an event, nested too deeply or larger than any record crew writes)
    comes back as an `unreadable` event."""
    with path.open("rb") as handle:
        return list(decoded(_lines(handle)))


def decoded(lines: Iterable[tuple[bytes, int]]) -> Iterator[ev.AnyEvent]:
    """The events of a transcript's lines (each with its size), version 0 upgraded."""
    reader = Reader()
    for number, (raw, size) in enumerate(lines, 1):
        yield from reader.line(raw, size, number)


class Reader:
    """Reads a transcript's lines in order: the first event says which shape the file has."""

    def __init__(self) -> None:
        self.upgrade: Upgrade | None = None
        self._first = True

    def line(self, raw: bytes, size: int, number: int = 0) -> list[ev.AnyEvent]:
        """The events of one line (none for a blank one)."""
        if not raw.strip():
            return []
        if size > MAX_RECORD:
            return [ev.Unreadable(line=number, error=f"a record of {size:,} bytes, more than crew writes; not read")]
        text = raw.decode("utf-8", "replace")[:200]
        try:
            obj = jsonio.loads(raw)
        except ValueError as exc:
            return [ev.Unreadable(line=number, error=str(exc), text=text)]
        if not isinstance(obj, dict):
            return [ev.Unreadable(line=number, error="not a JSON object", text=text)]
        if self._first:
            self._first = False
            if obj.get("kind") == "start" and "run_id" in obj:  # version 0 named it so
                self.upgrade = Upgrade()
        try:
            return self.upgrade.of(obj) if self.upgrade is not None else [ev.convert(obj)]
        except (ValueError, TypeError) as exc:
            return [ev.Unreadable(line=number, error=str(exc), text=text)]


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


_STATUS_V0: dict[str, ev.Ended] = {
    "ok": "done",
    "interrupted": "cancelled",
    "cancelled": "cancelled",
    "error": "failed",
}


class Upgrade:
    """A version 0 transcript's records as events: calls get ids (a result is given to the oldest
    open call of its agent and tool: version 0 wrote none), the CLI's own tools are named as the
    record names them (`native:Bash`), per-turn usage stays per turn and the session's totals it
    reported come as a `session` event (what a resumed session starts from)."""

    def __init__(self) -> None:
        self._calls = 0
        self._open: list[tuple[str, str, str]] = []  # (agent, tool, call id)
        self._turns: dict[str, int] = {}  # each agent's last turn (version 0's replies name none)

    def _call_id(self, agent: str, name: str) -> str:
        self._calls += 1
        call = f"c{self._calls}"
        self._open.append((agent, name, call))
        return call

    def of(self, old: dict[str, Any]) -> list[ev.AnyEvent]:
        """The events version 0 record `old` stands for."""
        kind = str(old.get("kind"))
        t = old.get("ms", 0.0) if isinstance(old.get("ms"), (int, float)) else 0.0
        agent = old.get("agent") if isinstance(old.get("agent"), str) else None
        base: dict[str, Any] = {"t": t, "agent": agent}
        upgrade = getattr(self, f"_{kind}", None)
        if upgrade is not None:
            return list(upgrade(old, base))
        text = old.get("text") or old.get("reason") or ""
        return [ev.Notice(text=str(text), about=kind, **base)]

    def _start(self, old: dict[str, Any], base: dict[str, Any]) -> list[ev.AnyEvent]:
        models = old.get("models") if isinstance(old.get("models"), dict) else {}
        start = ev.Start(
            run=str(old.get("run_id", "")),
            at=str(old.get("time", "")),
            v=0,
            version=str(old.get("version", "")),
            command=str(old.get("command", "")),
            mode=str(old.get("mode") or old.get("command") or ""),
            agents=[str(a) for a in old.get("agents") or []],
            models={str(k): (str(v) if v else None) for k, v in (models or {}).items()},
            task=str(old.get("task", "")),
            cwd=str(old.get("cwd", "")),
            pid=old["pid"] if isinstance(old.get("pid"), int) else 0,
            resumed_from=old.get("resumed_from") if isinstance(old.get("resumed_from"), str) else None,
            **base,
        )
        return [start]

    def _prompt(self, old: dict[str, Any], base: dict[str, Any]) -> list[ev.AnyEvent]:
        turn = int(old.get("turn") or 0)
        self._turns[base["agent"] or ""] = turn
        return [ev.Turn(turn=turn, prompt=str(old.get("text", "")), **base)]

    def _tool_call(self, old: dict[str, Any], base: dict[str, Any]) -> list[ev.AnyEvent]:
        name = str(old.get("name", ""))
        return [ev.Call(call=self._call_id(base["agent"] or "", name), name=name, input=old.get("input"), **base)]

    def _native_tool(self, old: dict[str, Any], base: dict[str, Any]) -> list[ev.AnyEvent]:
        self._calls += 1
        call = f"c{self._calls}"
        decision = str(old.get("decision", ""))
        return [
            ev.Call(call=call, name=NATIVE + str(old.get("tool", "")), input=old.get("input"), via="own", **base),
            ev.Decision(call=call, decision=decision, reason=old.get("reason"), by="policy", **base),
        ]

    def _usage(self, old: dict[str, Any], base: dict[str, Any]) -> list[ev.AnyEvent]:
        usage: dict[str, Any] = {
            k: old[k] for k in ("input_tokens", "output_tokens", "cached_tokens", "cost_usd") if k in old
        }
        found: list[ev.AnyEvent] = [ev.convert({"kind": "usage", "turn": old.get("turn"), **usage, **base})]
        if isinstance(old.get("reported"), dict):  # the session's totals, as the CLI last reported them
            found.append(ev.Session(reported=old["reported"], **base))
        return found

    def _reply(self, old: dict[str, Any], base: dict[str, Any]) -> list[ev.AnyEvent]:
        return [ev.Reply(turn=self._turns.get(base["agent"] or "", 0), text=str(old.get("text", "")), **base)]

    def _answer(self, old: dict[str, Any], base: dict[str, Any]) -> list[ev.AnyEvent]:
        return [ev.Answer(text=str(old.get("text", "")), turns=self._turns.get(base["agent"] or "", 0), **base)]

    def _session(self, old: dict[str, Any], base: dict[str, Any]) -> list[ev.AnyEvent]:
        return [ev.Session(session=old.get("session"), **base)]

    def _error(self, old: dict[str, Any], base: dict[str, Any]) -> list[ev.AnyEvent]:
        status = old.get("status") if isinstance(old.get("status"), int) else None
        return [ev.Error(message=str(old.get("message", "")), status=status, **base)]

    def _end(self, old: dict[str, Any], base: dict[str, Any]) -> list[ev.AnyEvent]:
        totals = old.get("usage")
        end = ev.End(
            status=_STATUS_V0.get(str(old.get("status")), "failed"),
            at=str(old.get("time", "")),
            calls=int(old.get("tool_calls") or 0),
            errors=int(old.get("errors") or 0),
            usage=totals if isinstance(totals, dict) else {},
            **base,
        )
        return [end]

    def _resume(self, old: dict[str, Any], base: dict[str, Any]) -> list[ev.AnyEvent]:
        return [ev.Resume(of=str(old.get("run", "")), how=str(old.get("how", "")), session=old.get("session"), **base)]

    def _fallback(self, old: dict[str, Any], base: dict[str, Any]) -> list[ev.AnyEvent]:
        return [ev.Fallback(to=str(old.get("to", "")), reason=str(old.get("reason", "")), **base)]

    def _approval(self, old: dict[str, Any], base: dict[str, Any]) -> list[ev.AnyEvent]:
        name, answer, source = str(old.get("name", "")), old.get("answer"), old.get("source")
        return [ev.Approval(call=None, name=name, input=old.get("input"), answer=answer, source=source, **base)]

    def _cancel(self, old: dict[str, Any], base: dict[str, Any]) -> list[ev.AnyEvent]:
        return [ev.Cancel(source=str(old.get("source", "")), **base)]

    def _review(self, old: dict[str, Any], base: dict[str, Any]) -> list[ev.AnyEvent]:
        fields = ("round", "rounds", "verdict", "findings", "called", "disputed")
        return [ev.convert({"kind": "review", **{k: old[k] for k in fields if k in old}, **base})]

    def _disarmed(self, old: dict[str, Any], base: dict[str, Any]) -> list[ev.AnyEvent]:
        return [ev.Disarmed(text="", found=list(old.get("found") or []), **base)]

    def _worktree(self, old: dict[str, Any], base: dict[str, Any]) -> list[ev.AnyEvent]:
        worktree, branch, at = (str(old.get(key, "")) for key in ("worktree", "branch", "base"))
        return [ev.Worktree(worktree=worktree, branch=branch, base=at, **base)]

    def _tool_result(self, old: dict[str, Any], base: dict[str, Any]) -> list[ev.AnyEvent]:
        agent, name = base["agent"] or "", str(old.get("name", ""))
        call = next((entry for entry in self._open if entry[0] == agent and entry[1] == name), None)
        if call is None:
            call = (agent, name, self._call_id(agent, name))
        self._open.remove(call)
        found = old.get("result")
        envelope: dict[str, Any] = found if isinstance(found, dict) else {}
        metadata = envelope.get("metadata")
        return [
            ev.Result(
                call=call[2],
                name=name,
                success=envelope.get("success") is True,
                data=envelope.get("data"),
                error=envelope.get("error"),
                metadata=metadata if isinstance(metadata, dict) else {},
                **base,
            )
        ]
