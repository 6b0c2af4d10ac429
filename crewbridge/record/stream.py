"""A run's record: the one stream of typed events (crewbridge.record.events) that everything of a
run reports to, in one order, and every face reads.

The engine emits; the program that composes a run attaches the sinks: the transcript file
(crewbridge.record.transcript), the terminal's renderer or the --jsonl writer, an editor's updates,
the browser's link, the OpenTelemetry exporter. A sink is called under the record's lock, so every
sink sees the events in the same order; a sink that raises (a reader that stopped reading) stops
the emitting thread and is told nothing more, so the run still records how it ends.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from crewbridge.base.stop import Stop
from crewbridge.base.usage import Row, Tally
from crewbridge.errors import Interrupted
from crewbridge.record import events as ev
from crewbridge.record.ids import new_run_id

if TYPE_CHECKING:
    from crewbridge.record.transcript import Transcript

Sink = Callable[[ev.Event], None]


class Record:
    """One run's events. `Record()` has an id and sinks but keeps nothing on disk; `kept` says
    whether a transcript holds them (then the id is what `--resume` takes). With `pending`, the
    events are held until keep() says where they are written down (the transcript is made once
    the run's CLIs have started: they boot meanwhile)."""

    def __init__(self, run: str | None = None, transcript: Transcript | None = None, pending: bool = False) -> None:
        self.run = run or new_run_id()
        self.transcript = transcript
        self._pending: list[ev.Event] | None = [] if pending and transcript is None else None
        self.sinks: list[Sink] = []
        self.started = time.monotonic()
        self._lock = threading.RLock()  # a sink may emit in turn (a notice about what it saw)
        self._calls = 0
        self._counts = {"call": 0, "error": 0}
        self._usage: dict[str, Row] = {}  # each agent's turns and usage so far
        self._parts: dict[str, int] = {}
        self._cancel = Stop()  # set by cancel(): its callbacks end the run's loops
        self.cancelled_by: str | None = None
        self.start: ev.Start | None = None  # the run's first event (for a sink that joins later)
        self.ended: ev.End | None = None

    @property
    def kept(self) -> bool:
        return self.transcript is not None

    def attach(self, sink: Sink) -> None:
        with self._lock:
            self.sinks.append(sink)

    def keep(self, transcript: Transcript | None) -> None:
        """Write the events down in `transcript` (None: nowhere), those held so far first."""
        with self._lock:
            held, self._pending = self._pending or [], None
            self.transcript = transcript
            if transcript is not None:
                for event in held:
                    transcript.write(event)

    def emit(self, event: ev.Event) -> None:
        """Stamp `event` with the run's clock and hand it to the transcript, then to every sink.
        Ignored once the run ended (a tool still running when its run ended may report late)."""
        with self._lock:
            if self.ended is not None:
                return
            event.t = round((time.monotonic() - self.started) * 1000, 1)
            if isinstance(event, ev.Start):
                self.start = event
            self._count(event)
            if self.transcript is not None:
                self.transcript.write(event)
            elif self._pending is not None:
                self._pending.append(event)
            for sink in list(self.sinks):
                try:
                    sink(event)
                except Exception:
                    self.sinks.remove(sink)  # told no more: the run still records how it ends
                    raise

    def _count(self, event: ev.Event) -> None:
        if isinstance(event, ev.Call):
            self._counts["call"] += 1
        elif isinstance(event, ev.Error):
            self._counts["error"] += 1
        elif isinstance(event, ev.Usage) and event.agent:
            self._usage.setdefault(event.agent, Row(event.agent)).usage.add(Tally.of(ev.to_builtins(event)))
        elif isinstance(event, ev.Turn) and event.agent:
            self._usage.setdefault(event.agent, Row(event.agent)).turns += 1

    def next_call(self) -> str:
        """A new call id, unique in the run."""
        with self._lock:
            self._calls += 1
            return f"c{self._calls}"

    def part(self, agent: str) -> int:
        """A new part number for `agent` (its first part is 1)."""
        with self._lock:
            self._parts[agent] = self._parts.get(agent, 0) + 1
            return self._parts[agent]

    def usage(self) -> dict[str, dict[str, Any]]:
        """Each agent's turns, tokens and cost in the run so far (as `crew log --by agent` sums them)."""
        with self._lock:
            return {agent: {"turns": row.turns, **row.usage.to_dict()} for agent, row in self._usage.items()}

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Call `callback` (it ends an agent's loop) when the run is cancelled (now, if it was)."""
        self._cancel.on_set(callback)

    def cancel(self, source: str) -> None:
        """Cancel the run (from `source`: terminal, editor, browser, caller): recorded, then every
        loop ended; the run then ends `cancelled` unless it finished all the same."""
        with self._lock:
            if self.cancelled_by is not None or self.ended is not None:
                return
            self.cancelled_by = source
        self.emit(ev.Cancel(source=source))
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self.cancelled_by is not None

    def fail(self, exc: BaseException) -> ev.Ended:
        """How a run that `exc` ended ends: `cancelled` (Ctrl-C, a stop), else `failed`, with the
        error recorded. Events still held (it failed before its transcript was made) are dropped."""
        if self._pending is not None:
            self.keep(None)
        if isinstance(exc, (KeyboardInterrupt, Interrupted)):
            return "cancelled"
        self.emit(ev.Error(message=str(exc), exit_code=getattr(exc, "exit_code", 1)))
        return "failed"

    def end(self, status: ev.Ended) -> ev.End:
        """Emit the `end` event (status, counts, usage) and close the transcript; a second end
        does nothing. A run cancelled that did not finish ends `cancelled`."""
        with self._lock:
            if self.ended is not None:
                return self.ended
            if self.cancelled and status != "done":
                status = "cancelled"
            end = ev.End(status=status, at=now(), calls=self._counts["call"], errors=self._counts["error"])
            end.usage = self.usage()
            try:
                self.emit(end)
            finally:
                self.ended = end
                if self.transcript is not None:
                    self.transcript.close()
            return end


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
