"""Figure 3a: overhead per turn. `crew query "@claude …"` answered without a tool call, against the
raw `claude -p …` it wraps, both the real CLI talking to the mock model server; timed in pairs."""

from __future__ import annotations

import functools

from bench.common import Row, Settings, Timed, installed, median, paired, ratio_row, run_timed
from bench.harness import claude_env, without_live

TARGET = 1.10
ANSWER = "Hello from the mock model."


def run(settings: Settings) -> list[Row]:
    if not settings.cli:
        return []
    rows = []
    crew_command = str(installed() / "crew")  # as users install it: not .venv's editable install
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
            mine, theirs, ratios = paired(
                functools.partial(timed, "crew", [crew_command, "query", "@claude say hello"], crew_env),
                lambda: timed("claude", ["claude", "-p", "say hello"], env),
                settings.repeats(9, 3),
            )
            crew, claude = median(cpu["crew"][1:]), median(cpu["claude"][1:])  # [0]: the warm-up
            rows.append(
                ratio_row(
                    "3 overhead",
                    f"crew query, {label}, vs claude -p (wall)",
                    mine,
                    theirs,
                    ratios,
                    unit="s",
                    scale=1,
                    target=TARGET,
                    note=f"CPU per turn (medians): claude -p {claude:.2f} s, "
                    f"crew query with its claude {crew:.2f} s "
                    f"({crew / claude:.2f}×)",
                )
            )
    return rows


def _last(result: Timed) -> str:
    text = (result.stderr or result.stdout).decode("utf-8", "replace").strip().splitlines()
    return text[-1] if text else "no output"
