"""One in-process measurement of crewbridge in a fresh interpreter, printed as JSON: run by a figure
with this checkout's Python, or another checkout's (bench.common.in_process), so that both are
measured the same way. It imports the crewbridge of the interpreter running it.

    python -m bench.worker turn CLI SHAPE TURNS   # bench_live.one_run: per tool turn, ms
    python -m bench.worker dispatch               # one real-claude dispatch, seconds
    python -m bench.worker steps CLI TURNS        # bench/steps.py: ms per tool turn, by step
    python -m bench.worker parse-stages FILE      # bench/parse_stages.py: CPU ms by stage
"""

from __future__ import annotations

import json
import sys


def main(name: str, *args: str) -> object:
    if name == "turn":
        from bench.bench_live import one_run

        cli, shape, turns = args
        gaps, keeps, crews = one_run(cli, True, int(turns), shape)
        return {"turn": gaps, "keep": keeps, "crew": crews}
    if name == "steps":
        from bench.steps import measure

        cli, turns = args
        return measure(cli, int(turns))
    if name == "parse-stages":
        from bench.parse_stages import measure as stages

        return stages(*args)
    if name == "dispatch":
        from bench.dispatch import real_claude_once

        return real_claude_once()
    raise SystemExit(f"unknown measurement {name}")


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:])))
