"""Figure 3b: start-up. `crew --version` against `python -c pass` (the same interpreter), in pairs,
both with their bytecode as an installed package has it (bench.common.with_bytecode)."""
from __future__ import annotations

from bench.common import CREW, PYTHON, Row, Settings, median, paired, ratio_row, run_timed

TARGET = 3.0


def run(settings: Settings) -> list[Row]:
    cpu: dict[str, list[float]] = {"crew": [], "python": []}

    def timed(name: str, argv: list[str]) -> float:
        result = run_timed(argv)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed (exit {result.returncode})")
        cpu[name].append(result.cpu)
        return result.wall

    mine, theirs, ratios = paired(lambda: timed("crew", [CREW, "--version"]),
                                  lambda: timed("python", [PYTHON, "-c", "pass"]),
                                  settings.repeats(21, 7))
    crew, python = median(cpu["crew"][1:]), median(cpu["python"][1:])  # [0]: the warm-up
    return [ratio_row("3 start-up", "crew --version vs python -c pass (wall)", mine, theirs, ratios,
                      unit="ms", scale=1000, target=TARGET,
                      note=f"CPU (medians): python {python * 1000:.0f} ms, crew "
                           f"{crew * 1000:.0f} ms ({crew / python:.2f}×)")]
