"""Figure 2: time to dispatch — from the moment the CLI writes the closing fence of a tool block to
the moment the tool starts, while the CLI keeps running for a second or more afterwards.

Two CLIs: bench/fake_claude.py (claude's stream-json deltas, a process per turn: Child.lines), and
the real claude CLI, live (the default), against the mock model server, where the clock starts when
the mock sends the chunk holding the closing fence (so claude's own relay time is included)."""
from __future__ import annotations

import time
from pathlib import Path

from bench.common import Row, Settings, median, scratch, spread
from bench.harness import claude_conversation, claude_env, fake_conversation, python_argv, run_loop
from crewbridge.loop import Progress
from crewbridge.registry import ToolContext, ToolRegistry, tool

TARGET_MS = 20.0
FAKE = Path(__file__).with_name("fake_claude.py")


class Marks:
    """A `crew:mark` tool that notes when it starts."""

    def __init__(self) -> None:
        self.times: list[float] = []

        @tool(schema={"type": "object", "properties": {}, "additionalProperties": False}, read_only=True,
              name="mark")
        def mark(ctx: ToolContext) -> str:
            """Set the benchmark's mark."""
            self.times.append(time.monotonic())
            return "marked"

        self.registry = ToolRegistry()
        self.registry.register(mark)


class StampedChunks(list):
    """Reply chunks that note when the mock takes the first one to send (the first has no delay)."""

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
    delays, while_running = [], 0

    def once() -> None:
        nonlocal while_running
        stamps.write_text("")
        argv = python_argv(FAKE, "--stamps", str(stamps), "--linger", str(linger))
        result = run_loop(fake_conversation(argv, work), marks.registry, "set the mark", work)
        written = float(stamps.read_text().split()[0])
        started = marks.times[-1]
        assert result.tool_calls and result.tool_calls[0].result.success, result
        delays.append(started - written)
        while_running += started < written + linger

    once()  # warm-up
    delays.clear()
    while_running = 0
    for _ in range(settings.repeats(9, 3)):
        once()
    return Row("2 dispatch", f"fake claude (deltas, a process per turn), CLI lingers {linger:g} s after the fence",
               median(delays) * 1000, "ms", target=TARGET_MS, spread=spread(delays, "ms", 1000),
               note=f"tool started while the CLI ran: {while_running}/{len(delays)}")


def real_claude(settings: Settings) -> Row:
    from mockserver import Reply

    linger = 1.0 if settings.quick else 2.0
    marks = Marks()
    delays, own = [], []
    call = '{"type": "tool_use", "name": "crew:mark", "input": {}}'
    with claude_env() as (mock, env, work):
        for run in range(settings.repeats(5, 2) + 1):  # the first is a warm-up
            chunks = StampedChunks([f"I will set the mark now.\n```json\n{call}\n```\n",
                                    "This prose came long after the block."])
            mock.script(Reply(chunks, delay=linger), "Done: the mark was set.")
            texts: list[float] = []  # when each text delta reached the loop

            def progress(event: Progress) -> None:
                if event.kind == "text":
                    texts.append(time.monotonic())

            result = run_loop(claude_conversation(env, work), marks.registry, "set the mark", work,
                              on_progress=progress)
            assert result.tool_calls and result.tool_calls[0].result.success, result
            assert chunks.sent is not None
            started = marks.times[-1]
            if run:
                delays.append(started - chunks.sent)
                own.append(started - max(t for t in texts if t <= started))
    return Row("2 dispatch", f"real claude, live, mock sends the fence then {linger:g} s of nothing",
               median(delays) * 1000, "ms", target=TARGET_MS, spread=spread(delays, "ms", 1000),
               note=f"of which crew, from the decoded delta to the tool: {median(own) * 1000:.1f} ms; "
                    "the rest is claude relaying it")


def run(settings: Settings) -> list[Row]:
    return [fake_cli(settings)] + ([real_claude(settings)] if settings.cli else [])
