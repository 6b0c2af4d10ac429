"""What every figure shares: the result row, repeated timing with medians and spreads, timed child
processes, and the scratch and mock-server plumbing (reused from tests/)."""
from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
CREW = str(Path(PYTHON).with_name("crew"))
if str(REPO / "tests") not in sys.path:
    sys.path.insert(0, str(REPO / "tests"))  # mockserver, clienv: the test harness for the real CLIs


@dataclass
class Settings:
    quick: bool = False
    runs: int | None = None  # repetitions of a timed measurement (None: the figure's default)
    cli: bool = True  # run the rows that need the real claude CLI (node_modules/.bin/claude)

    def repeats(self, full: int, quick: int) -> int:
        return self.runs or (quick if self.quick else full)


@dataclass
class Row:
    """One printed figure: `value` (a median) against `target`, optionally as a ratio to `baseline`."""

    figure: str
    what: str
    value: float
    unit: str = ""
    baseline: float | None = None  # the median of the baseline, in `unit`
    ratio: float | None = None  # value / baseline (the median of paired ratios when timed in pairs)
    target: float | None = None  # upper bound on `ratio` when a baseline is given, else on `value`
    spread: str = ""  # how much the runs varied
    note: str = ""

    @property
    def measured(self) -> float:
        return self.ratio if self.ratio is not None else self.value

    @property
    def ok(self) -> bool | None:
        return None if self.target is None else self.measured <= self.target


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def spread(values: Sequence[float], unit: str = "", scale: float = 1.0) -> str:
    """`n=5 2.1–2.6 ms`: the number of runs and their range."""
    if len(values) == 1:
        return "n=1"
    return f"n={len(values)} {fmt(min(values) * scale)}–{fmt(max(values) * scale)}{' ' + unit if unit else ''}"


def fmt(value: float) -> str:
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}" if magnitude >= 0.1 else f"{value:.3f}"


def repeat(func: Callable[[], float], runs: int, warmup: int = 1) -> list[float]:
    """`func()` (which returns one measurement) `warmup` times unrecorded, then `runs` times."""
    for _ in range(warmup):
        func()
    return [func() for _ in range(runs)]


def paired(ours: Callable[[], float], base: Callable[[], float], runs: int,
           warmup: int = 1) -> tuple[list[float], list[float], list[float]]:
    """Alternate the two measurements (order swapped every run, so drift and load hit both alike);
    (ours, base, ours/base per pair)."""
    for _ in range(warmup):
        base()
        ours()
    mine, theirs = [], []
    for i in range(runs):
        if i % 2:
            mine.append(ours())
            theirs.append(base())
        else:
            theirs.append(base())
            mine.append(ours())
    return mine, theirs, [a / b for a, b in zip(mine, theirs)]


def ratio_row(figure: str, what: str, mine: list[float], theirs: list[float], ratios: list[float], *,
              unit: str, scale: float, target: float, note: str = "") -> Row:
    """A row for paired measurements: medians in `unit` (seconds × `scale`), the median ratio."""
    return Row(figure, what, median(mine) * scale, unit, median(theirs) * scale, median(ratios), target,
               spread(ratios, "×"), note)


@dataclass
class Timed:
    wall: float  # seconds
    cpu: float  # user + system seconds of the process and the children it waited for
    returncode: int
    stdout: bytes
    stderr: bytes


def run_timed(argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
              stdin: bytes = b"", timeout: float = 120.0) -> Timed:
    """Run a command (in its own process group) to its end; reaped with os.wait4, so its CPU time
    is exact. Output goes through files: nothing blocks on a full pipe, no reader thread competes."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as inp:
        inp.write(stdin)
        inp.seek(0)
        start = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=inp, stdout=out, stderr=err,
                                start_new_session=True)
        timer = threading.Timer(timeout, _signal, (proc.pid, signal.SIGKILL))
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        _signal(proc.pid, signal.SIGKILL)  # anything it left behind in its group
        out.seek(0)
        err.seek(0)
        return Timed(wall, usage.ru_utime + usage.ru_stime, proc.returncode, out.read(), err.read())


def _signal(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def scratch(name: str) -> Path:
    """A cache directory for generated inputs, kept between runs (they take seconds to write)."""
    path = Path(os.environ.get("CREW_BENCH_DIR") or Path(tempfile.gettempdir()) / "crewbridge-bench") / name
    path.mkdir(parents=True, exist_ok=True)
    return path
