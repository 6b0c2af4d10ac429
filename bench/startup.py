"""Figure 3b: start-up. `crew --version` against `python -c pass` (the checkout before too, with
--before), in rounds, all in venvs where crew is installed as users install it
(bench.common.installed: not the editable install of .venv, whose .pth hook adds ~15 ms to every
start of its Python), with their bytecode."""

from __future__ import annotations

from bench.common import Row, Settings, installed, interleaved, median, run_timed, side_rows

TARGET = 1.5


def run(settings: Settings) -> list[Row]:
    cpu: dict[str, list[float]] = {}

    def timed(name: str, argv: list[str]) -> float:
        result = run_timed(argv)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed (exit {result.returncode})")
        cpu.setdefault(name, []).append(result.cpu)
        return result.wall

    python = str(installed() / "python")
    measures = {"python": lambda: timed("python", [python, "-c", "pass"])}
    for side, repo in settings.sides().items():
        crew = str(installed(repo) / "crew")
        measures[side] = lambda side=side, crew=crew: timed(side, [crew, "--version"])  # type: ignore[misc]
    values = interleaved(measures, settings.repeats(21, 7))
    base = median(cpu["python"][1:])  # [0]: the warm-up
    notes = {
        side: f"CPU (medians): python {base * 1000:.0f} ms, crew {median(cpu[side][1:]) * 1000:.0f} ms "
        f"({median(cpu[side][1:]) / base:.2f}×)"
        for side in settings.sides()
    }
    return side_rows(
        "3 start-up",
        "crew --version vs python -c pass, installed (wall)",
        values,
        "python",
        unit="ms",
        scale=1000,
        target=TARGET,
        note=notes,
    )
