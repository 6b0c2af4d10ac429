"""Figure 1b: `crew parse --format claude` on a 40 MB claude stream (the whole command, as users run
it: start, imports, decode, extract, print), against a bare loop that reads the same file and
json.loads each line; wall time, in rounds (the checkout before too, with --before), both with the
Python of a venv where crew is installed as users install it."""

from __future__ import annotations

import functools
from pathlib import Path

from bench.common import Row, Settings, installed, interleaved, run_timed, scratch, side_rows
from bench.throughput import count_calls, stream_file

TARGET = 1.0
BARE = "import json, sys\nfor line in sys.stdin:\n    json.loads(line)\n"


def run(settings: Settings) -> list[Row]:
    rows = []
    for partial in (False, True):
        path = stream_file(settings, partial=partial)
        calls = count_calls(path.read_text(encoding="utf-8").splitlines(keepends=True))

        def timed(argv: list[str], printed: int, path: Path = path) -> float:
            result = run_timed(argv, stdin=path, cwd=scratch("parse"))
            if result.returncode != 0 or result.stdout.count(b"\n") != printed:
                raise RuntimeError(
                    f"{' '.join(argv)} failed (exit {result.returncode}): "
                    f"{result.stderr.decode(errors='replace')[-300:]}"
                )
            return result.wall

        python = str(installed() / "python")
        measures = {"json.loads": functools.partial(timed, [python, "-c", BARE], 0)}
        for side, repo in settings.sides().items():
            argv = [str(installed(repo) / "crew"), "parse", "--format", "claude"]
            measures[side] = functools.partial(timed, argv, calls)
        values = interleaved(measures, settings.repeats(7, 3))
        megabytes = path.stat().st_size / 1e6
        kind = "text deltas" if partial else "whole messages"
        rows += side_rows(
            "1 parse",
            f"crew parse, {megabytes:.0f} MB of {kind} ({calls} calls), vs a bare json.loads loop (wall)",
            values,
            "json.loads",
            unit="s",
            scale=1,
            target=TARGET,
        )
    return rows
