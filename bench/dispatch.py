"""Figure 2: time to dispatch — from the moment the CLI writes the closing fence of a tool block to
the moment the tool starts, while the CLI keeps running for a second or more afterwards.

Two CLIs: bench/fake_claude.py (claude's stream-json text deltas, a process per turn: Child.lines),
and the real claude CLI, live (the default), against the mock model server, where the clock starts
when the mock sends the chunk that closes the block (so claude's own relay time is included); each
real-claude run in a fresh interpreter, as a `crew query` is (the checkout before too, with --before:
so this module imports only what that checkout has too)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.common import Row, Settings, in_process, interleaved, median, scratch, spread
from bench.harness import claude_conversation, claude_env, fake_conversation, python_argv, reporting, run_loop
from crewbridge.engine.loop import RunResult
from crewbridge.toolkit.functions import tool
from crewbridge.toolkit.registry import ToolContext, ToolRegistry

TARGET_MS = 20.0
FAKE = Path(__file__).with_name("fake_claude.py")
CALL = '{"type": "tool_use", "name": "crew:mark", "input": {}}'


class Marks:
    """A registry with one tool, `crew:mark`, that notes when it starts."""

    def __init__(self) -> None:
        self.times: list[float] = []

        @tool(schema={"type": "object", "properties": {}, "additionalProperties": False}, read_only=True, name="mark")
        def mark(ctx: ToolContext) -> str:
            """Set the benchmark's mark."""
            self.times.append(time.monotonic())
            return "marked"

        self.registry = ToolRegistry()
        self.registry.register(mark)

    def check(self, result: RunResult) -> float:
        """When the mark was set in this run (which must have called it, successfully)."""
        if not (result.tool_calls and result.tool_calls[0].result.success):
            raise RuntimeError(f"the run did not set the mark: {result.tool_calls!r}, answer {result.answer!r}")
        return self.times[-1]


class StampedChunks(list):  # type: ignore[type-arg]
    """Reply chunks that note when the mock takes the first to send it (the first has no delay)."""

    sent: float | None = None

    def __iter__(self):  # type: ignore[no-untyped-def]
        for index, chunk in enumerate(super().__iter__()):
            if index == 0:
                self.sent = time.monotonic()
            yield chunk


def fake_cli(settings: Settings) -> Row:
    linger = 0.5 if settings.quick else 1.0
    work = scratch("dispatch")
    stamps = work / "stamps.txt"
    marks = Marks()
    argv = python_argv(FAKE, "--stamps", str(stamps), "--linger", str(linger))

    def once() -> float:
        stamps.write_text("")
        started = marks.check(run_loop(fake_conversation(argv, work), marks.registry, "mark", work))
        return started - float(stamps.read_text().split()[0])

    once()  # warm-up
    delays = [once() for _ in range(settings.repeats(9, 3))]
    running = sum(delay < linger for delay in delays)
    return Row(
        "2 dispatch",
        f"fake claude (text deltas, a process per turn) that runs {linger:g} s past the fence",
        median(delays) * 1000,
        "ms",
        target=TARGET_MS,
        spread=spread(delays, " ms", 1000),
        note=f"the tool started while the CLI still ran: {running}/{len(delays)}",
    )


def real_claude_once(linger: float = 2.0) -> dict[str, float]:
    """One run with the real claude, live, in this process: seconds from the mock sending the chunk
    that closes the block to the tool's start ("delay"), and from the loop's decoded delta ("own")."""
    from mockserver import Reply

    marks = Marks()
    with claude_env() as (mock, env, work):
        chunks = StampedChunks(
            [f"I will set the mark now.\n```json\n{CALL}\n```\n", "This prose came long after the block."]
        )
        mock.script(Reply(chunks, delay=linger), "Done: the mark was set.")
        texts: list[float] = []  # when each text delta reached the loop

        def progress(event: Any) -> None:  # an event of the record (a Progress before it)
            if event.kind == "text":
                texts.append(time.monotonic())

        started = marks.check(
            run_loop(claude_conversation(env, work), marks.registry, "mark", work, **reporting(progress))
        )
        assert chunks.sent is not None
        return {"delay": started - chunks.sent, "own": started - max(t for t in texts if t <= started)}


def real_claude(settings: Settings) -> list[Row]:
    """Each run in a fresh interpreter (bench.worker), as a `crew query` is: this checkout's, and
    the one before with --before, in rounds."""
    own: dict[str, list[float]] = {}

    def once(side: str, repo: Path) -> float:
        got = in_process(repo, "dispatch")
        own.setdefault(side, []).append(got["own"])
        return float(got["delay"])

    values = interleaved(
        {
            side: lambda side=side, repo=repo: once(side, repo)  # type: ignore[misc]
            for side, repo in settings.sides().items()
        },
        settings.repeats(7, 3),
    )
    return [
        Row(
            "2 dispatch",
            "real claude, live; the mock sends the fence, then nothing for 2 s"
            + ("" if side == "crew" else f" [{side}]"),
            median(delays) * 1000,
            "ms",
            target=TARGET_MS,
            spread=spread(delays, " ms", 1000),
            note=f"crew's part, from the decoded delta to the tool: "
            f"{median(own[side][1:]) * 1000:.1f} ms; the rest is claude relaying the delta",
        )
        for side, delays in values.items()
    ]


def run(settings: Settings) -> list[Row]:
    return [fake_cli(settings)] + (real_claude(settings) if settings.cli else [])
