"""Figure 1: how fast decoder + extractor get through a big claude stream-json output, against a
baseline that only does json.loads per line (CPU time); and the same stream read from a child
process's pipe through the readers crew uses (Child.lines for a process per turn, LiveProcess.read
for a live CLI), against readline + json.loads on the same pipe (wall time)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from crewbridge.providers.claude import ClaudeDecoder

from bench.common import Row, Settings, kill_group, paired, ratio_row, scratch
from bench.streams import write_stream
from crewbridge.base.decoded import Event, MessageEnd, Text
from crewbridge.conversations.transport import LiveProcess
from crewbridge.errors import ProviderError
from crewbridge.system.process import Child
from crewbridge.toolkit.extract import Extractor

TARGET = 1.5


def stream_file(settings: Settings, *, partial: bool) -> Path:
    size = 8_000_000 if settings.quick else 40_000_000
    name = f"claude-{size // 1_000_000}MB-{'partial' if partial else 'whole'}.jsonl"
    return write_stream(scratch("streams") / name, size, partial=partial)


def timed(func: Callable[[], object], clock: Callable[[], float] = time.perf_counter) -> Callable[[], float]:
    """A measurement: how long `func()` takes by `clock` (time.process_time: this process's CPU)."""

    def measure() -> float:
        start = clock()
        func()
        return clock() - start

    return measure


def count_calls(lines: Iterable[str]) -> int:
    """Decode each line and feed its text to the extractor, as the loop does; the calls found."""
    decoder, extractor = ClaudeDecoder(), Extractor()
    return sum(_feed(extractor, decoder.decode(line)) for line in lines) + len(extractor.finish())


def run(settings: Settings) -> list[Row]:
    rows = []
    for partial in (False, True):
        path = stream_file(settings, partial=partial)
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        megabytes = path.stat().st_size / 1e6
        calls = count_calls(lines)

        def baseline(lines: list[str] = lines) -> None:
            for line in lines:
                json.loads(line)

        mine, theirs, ratios = paired(
            timed(functools.partial(count_calls, lines), time.process_time),
            timed(baseline, time.process_time),
            settings.repeats(7, 3),
        )
        kind = "text deltas" if partial else "whole messages"
        rows.append(
            ratio_row(
                "1 throughput",
                f"decode+extract, {megabytes:.0f} MB of {kind} ({calls} calls), CPU vs json.loads per line",
                mine,
                theirs,
                ratios,
                unit="s",
                scale=1,
                target=TARGET,
                note=f"{megabytes / min(mine):.0f} MB/s at best",
            )
        )
    path = stream_file(settings, partial=True)
    readers = {"Child.lines (a process per turn)": _child_reader, "LiveProcess.read (a live CLI)": _live_reader}
    for name, reader in readers.items():
        mine, theirs, ratios = paired(
            timed(functools.partial(reader, path)), timed(lambda: _plain_reader(path)), settings.repeats(5, 2)
        )
        rows.append(
            ratio_row(
                "1 throughput",
                f"the deltas from a pipe through {name}, wall vs readline + json.loads",
                mine,
                theirs,
                ratios,
                unit="s",
                scale=1,
                target=TARGET,
            )
        )
    return rows


def _feed(extractor: Extractor, events: list[Event]) -> int:
    calls = 0
    for event in events:
        if isinstance(event, Text):
            calls += len(extractor.feed(event.text))
        elif isinstance(event, MessageEnd):
            calls += len(extractor.end_message())
    return calls


def _plain_reader(path: Path) -> int:
    proc = subprocess.Popen(["cat", str(path)], stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None
    try:
        return sum(1 for line in proc.stdout if json.loads(line) is not None)
    finally:
        kill_group(proc.pid)
        proc.wait()
        proc.stdout.close()


def _child_reader(path: Path) -> int:
    child = Child(["cat", str(path)])
    decoder, extractor = ClaudeDecoder(), Extractor()
    try:
        calls = sum(_feed(extractor, decoder.decode(line)) for line in child.lines())
        return calls + len(extractor.finish())
    finally:
        child.close()


def _live_reader(path: Path) -> int:
    process = LiveProcess(["cat", str(path)], env=dict(os.environ), cwd=Path.cwd())
    decoder, extractor = ClaudeDecoder(), Extractor()
    calls = 0
    try:
        while True:
            calls += _feed(extractor, decoder.decode_object(process.read(None)))
    except ProviderError:  # cat ended
        return calls
    finally:
        process.close()
