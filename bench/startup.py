"""Figure 3b: start-up. `crew --version` against `python -c pass`, in pairs, both in a venv where
crew is installed as users install it (bench.common.installed: not the editable install of .venv,
whose .pth hook adds ~15 ms to every start of its Python), with their bytecode."""

from __future__ import annotations

from bench.common import Row, Settings, installed, median, paired, ratio_row, run_timed

TARGET = 3.0


def run(settings: Settings) -> list[Row]:
    cpu: dict[str, list[float]] = {"crew": [], "python": []}

    def timed(name: str, argv: list[str]) -> float:
        result = run_timed(argv)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed (exit {result.returncode})")
        cpu[name].append(result.cpu)
        return result.wall

    bin_dir = installed()
    mine, theirs, ratios = paired(
        lambda: timed("crew", [str(bin_dir / "crew"), "--version"]),
        lambda: timed("python", [str(bin_dir / "python"), "-c", "pass"]),
        settings.repeats(21, 7),
    )
    crew, python = median(cpu["crew"][1:]), median(cpu["python"][1:])  # [0]: the warm-up
    return [
        ratio_row(
            "3 start-up",
            "crew --version vs python -c pass, installed (wall)",
            mine,
            theirs,
            ratios,
            unit="ms",
            scale=1000,
            target=TARGET,
            note=f"CPU (medians): python {python * 1000:.0f} ms, crew {crew * 1000:.0f} ms ({crew / python:.2f}×)",
        )
    ]
