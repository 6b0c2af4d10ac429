"""Figure 2b: what the bridge adds per live tool turn, for claude and codex against the mock model
server, on a chain of 5 calls (bench/bench_live.py's "streamed" replies: prose, a crew:read_file
block, and an invented tail 50 ms later, so the stop lands mid-reply). crew's part of a turn is from
the moment the model's part is over to the next message handed to the CLI: stopping the reply,
running the tool, putting the history right, sending the result. Each run in a fresh interpreter
(bench.worker), this checkout's and the one before (--before) in rounds."""

from __future__ import annotations

import statistics

from bench.common import Row, Settings, in_process, interleaved, median, spread

TARGET_MS = 20.0
TURNS = 5
SHAPE = "streamed"


def run(settings: Settings) -> list[Row]:
    if not settings.cli:
        return []
    rows = []
    for cli in ("claude", "codex"):
        turns: dict[str, list[float]] = {}
        crews: dict[str, list[float]] = {}

        def once(side: str, repo, cli: str = cli, turns=turns, crews=crews) -> float:  # type: ignore[no-untyped-def]
            got = in_process(repo, "turn", cli, SHAPE, str(TURNS))
            turns.setdefault(side, []).extend(got["turn"])
            crews.setdefault(side, []).extend(got["crew"])
            return statistics.median(got["crew"])

        values = interleaved(
            {
                side: lambda side=side, repo=repo: once(side, repo)  # type: ignore[misc]
                for side, repo in settings.sides().items()
            },
            settings.repeats(5, 2),
            warmup=0,
        )
        for side, runs in values.items():
            rows.append(
                Row(
                    "2 turn",
                    f"{cli}, live: crew's part of a tool turn, {TURNS}-call chain"
                    + ("" if side == "crew" else f" [{side}]"),
                    median(crews[side]),
                    "ms",
                    target=TARGET_MS,
                    spread=spread(crews[side], " ms"),
                    note=f"the whole turn, the CLI's part too, less the model's time: "
                    f"{median(turns[side]):.1f} ms (n={len(turns[side])} turns, "
                    f"{len(runs)} runs)",
                )
            )
    return rows
