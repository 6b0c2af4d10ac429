"""Figure 1b: `crew parse --format claude` on a 40 MB claude stream (the whole command, as users run
it: start, imports, decode, extract, print), against a bare loop that reads the same file and
json.loads each line; wall time, in rounds (the checkout before too, with --before), both with the
Python of a venv where crew is installed as users install it. Each row's note gives the CPU time
(user + system) of both: steadier than wall time on a loaded machine."""

from __future__ import annotations

import functools
from pathlib import Path
from statistics import median

from bench.common import Row, Settings, installed, interleaved, run_timed, scratch, side_rows
from bench.throughput import count_calls, stream_file

TARGET = 1.0
BARE = "import json, sys\nfor line in sys.stdin:\n    json.loads(line)\n"


def run(settings: Settings) -> list[Row]:
    rows = []
    for partial in (False, True):
        path = stream_file(settings, partial=partial)
        calls = count_calls(path.read_text(encoding="utf-8").splitlines(keepends=True))

        cpu: dict[str, list[float]] = {}

        def timed(argv: list[str], printed: int, name: str, path: Path = path, cpu: dict = cpu) -> float:
            result = run_timed(argv, stdin=path, cwd=scratch("parse"))
            cpu.setdefault(name, []).append(result.cpu)
            if result.returncode != 0 or result.stdout.count(b"\n") != printed:
                raise RuntimeError(
                    f"{' '.join(argv)} failed (exit {result.returncode}): "
                    f"{result.stderr.decode(errors='replace')[-300:]}"
                )
            return result.wall

        python = str(installed() / "python")
        measures = {"json.loads": functools.partial(timed, [python, "-c", BARE], 0, "json.loads")}
        for side, repo in settings.sides().items():
            argv = [str(installed(repo) / "crew"), "parse", "--format", "claude"]
            measures[side] = functools.partial(timed, argv, calls, side)
        values = interleaved(measures, settings.repeats(7, 3))
        megabytes = path.stat().st_size / 1e6
        kind = "text deltas" if partial else "whole messages"
        base = median(cpu["json.loads"][1:])  # [0]: the warm-up
        notes = {
            side: f"CPU (medians): json.loads {base * 1000:.0f} ms, crew {median(cpu[side][1:]) * 1000:.0f} ms "
            f"({median(cpu[side][1:]) / base:.2f}×)"
            for side in settings.sides()
        }
        rows += side_rows(
            "1 parse",
            f"crew parse, {megabytes:.0f} MB of {kind} ({calls} calls), vs a bare json.loads loop (wall)",
            values,
            "json.loads",
            unit="s",
            scale=1,
            target=TARGET,
            note=notes,
        )
    return rows
