"""What the Python API adds to the engine: a run's events as an iterator (`Bridge.stream`).

from crewbridge import Bridge

with Bridge().stream("@claude what does notes.txt say?") as events:
    for event in events:
        if event.kind == "text":
            print(event.visible, end="", flush=True)
answer = events.outcomes[0].result.answer
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from crewbridge.base.stop import Stop
from crewbridge.errors import CrewError, UsageError

if TYPE_CHECKING:
    from crewbridge.engine.loop import RunResult
    from crewbridge.record.events import Check, Event, Pull
    from crewbridge.system.git import Change
    from crewbridge.system.gitguard import Armed
    from crewbridge.toolkit.verdict import Review
    from crewbridge.work.worktrees import Worktree

__all__ = ["EventStream", "Outcome", "Stop"]  # Stop lives in crewbridge.base.stop; it is the API's too

# runs the task, reporting to a callback, ended by the Stop (its CLIs and commands at once)
Start = Callable[[Callable[["Event"], None], Stop], "list[Outcome]"]
_END = object()


@dataclass
class Outcome:
    """One agent's run: its result, or the error that ended it."""

    agent: str  # the agent that answered (or failed last)
    result: RunResult | None = None
    error: CrewError | None = None
    fell_back_from: str | None = None  # the agent asked, when another took its task over
    worktree: Worktree | None = None  # where it worked, with --worktree
    changes: list[Change] | None = None  # what it changed there
    review: Review | None = None  # with --review: the review's rounds and last verdict
    disarmed: list[Armed] = field(
        default_factory=list
    )  # what the run left for git, disarmed (crewbridge.system.gitguard)
    run: str | None = None  # the run's id (what --resume takes); None when transcripts are off
    checks: list[Check] = field(default_factory=list)  # each run of its check (crewbridge.engine.gate)
    pull: Pull | None = None  # with --pr: the pull request opened or updated (crewbridge.engine.pulls)

    def __post_init__(self) -> None:
        # An answer whose calls were refused because nobody could be asked is not the run's success.
        if self.error is None and self.result is not None and self.result.needed_approval:
            from crewbridge.work.policy import not_approved  # for start-up speed, as the loop's modules are

            self.error = not_approved(self.result.agent, self.result.needed_approval)


@dataclass
class _Run:
    """What the worker thread shares with the reader (never the EventStream itself, so a stream
    nobody holds any more is collected, and stops its run)."""

    queue: queue.SimpleQueue[Any] = field(default_factory=queue.SimpleQueue)
    stop: Stop = field(default_factory=Stop)
    outcomes: list[Outcome] | None = None
    error: BaseException | None = None

    def emit(self, event: Event) -> None:
        """Hand `event` to the reader; once it stopped reading, nothing (the stop ends the run, which
        still records how it ended)."""
        if not self.stop.is_set():
            self.queue.put(event)

    def work(self, start: Start) -> None:
        try:
            self.outcomes = start(self.emit, self.stop)
        except BaseException as exc:  # handed to the reader, raised there
            self.error = exc
        finally:
            self.queue.put(_END)


class EventStream:
    """The events of a run's record (crewbridge.record.events), in the order they happen, as the
    run goes on in a thread of its own. Iterate over it; once the iteration ends, `outcomes` holds
    each agent's result or error. To leave early, `close()` it or read it in a `with` block (a
    stream dropped unfinished stops too): the run is stopped at once (its Stop: the CLIs' process
    groups and the commands' are ended), and each unfinished outcome holds an Interrupted error."""

    def __init__(self, start: Start) -> None:
        self._run = _Run()
        self._thread = threading.Thread(target=self._run.work, args=(start,), name="crew-stream", daemon=True)
        self._thread.start()

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> Event:
        item = self._run.queue.get()
        if item is _END:
            self._run.queue.put(_END)  # a later next() ends at once too
            self._thread.join()
            if self._run.error is not None and not self._run.stop.is_set():
                raise self._run.error
            raise StopIteration
        return item

    def close(self) -> None:
        """Stop the run now and wait for it to end."""
        self._run.stop.set()
        self._thread.join()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        self._run.stop.set()

    @property
    def outcomes(self) -> list[Outcome]:
        """Each mentioned agent's Outcome, once the run has ended."""
        if self._thread.is_alive():
            raise UsageError("the run is still going; iterate over the stream to its end (or close it) first")
        if self._run.error is not None:
            raise self._run.error
        assert self._run.outcomes is not None
        return self._run.outcomes
