"""Figure 3a: overhead per turn. `crew query "@claude …"` answered without a tool call, against the
raw `claude -p …` it wraps, both the real CLI talking to the mock model server; timed in rounds
(the checkout before too, with --before), the order rotated."""

from __future__ import annotations

import functools

from bench.common import Row, Settings, Timed, installed, interleaved, median, run_timed, side_rows
from bench.harness import claude_env, without_live

TARGET = 1.05
ANSWER = "Hello from the mock model."


def run(settings: Settings) -> list[Row]:
    if not settings.cli:
        return []
    rows = []
    crews = {side: str(installed(repo) / "crew") for side, repo in settings.sides().items()}
    with claude_env() as (mock, env, work):
        cpu: dict[str, list[float]] = {}

        def timed(name: str, argv: list[str], run_env: dict[str, str]) -> float:
            mock.script(ANSWER)
            result = run_timed(argv, env=run_env, cwd=work)
            if result.returncode != 0 or ANSWER not in result.stdout.decode():
                raise RuntimeError(f"{argv[0]} failed (exit {result.returncode}): {_last(result)}")
            cpu.setdefault(name, []).append(result.cpu)
            return result.wall

        for label, crew_env in (("live (the default)", env), ("CREW_LIVE=0, a process per turn", without_live(env))):
            cpu.clear()
            measures = {"claude": lambda: timed("claude", ["claude", "-p", "say hello"], env)}
            for side, crew in crews.items():
                measures[side] = functools.partial(timed, side, [crew, "query", "@claude say hello"], crew_env)
            values = interleaved(measures, settings.repeats(9, 3))
            claude = median(cpu["claude"][1:])  # [0]: the warm-up
            notes = {
                side: f"CPU per turn (medians): claude -p {claude:.2f} s, crew query with its claude "
                f"{median(cpu[side][1:]):.2f} s ({median(cpu[side][1:]) / claude:.2f}×)"
                for side in crews
            }
            rows += side_rows(
                "3 overhead",
                f"crew query, {label}, vs claude -p (wall)",
                values,
                "claude",
                unit="s",
                scale=1,
                target=TARGET,
                note=notes,
            )
    return rows


def _last(result: Timed) -> str:
    text = (result.stderr or result.stdout).decode("utf-8", "replace").strip().splitlines()
    return text[-1] if text else "no output"
