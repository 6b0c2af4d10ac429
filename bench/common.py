"""What every figure shares: the result row, repeated timing with medians and spreads, timed child
processes, and the scratch folder. The mock model server and CLI environments come from tests/."""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
if str(REPO / "tests") not in sys.path:
    sys.path.insert(0, str(REPO / "tests"))  # mockserver, clienv: the harness for the real CLIs


@dataclass
class Settings:
    quick: bool = False
    runs: int | None = None  # repetitions of a timed measurement (None: the figure's default)
    cli: bool = True  # run the rows that need the real claude CLI (node_modules/.bin/claude)

    def repeats(self, full: int, quick: int) -> int:
        return self.runs or (quick if self.quick else full)


@dataclass
class Row:
    """One printed figure: `value` (a median), as a ratio to `baseline` when there is one."""

    figure: str
    what: str
    value: float
    unit: str = ""
    baseline: float | None = None  # the median of the baseline, in `unit`
    ratio: float | None = None  # the median of the paired ratios value / baseline
    target: float | None = None  # upper bound on `ratio` when there is one, else on `value`
    spread: str = ""  # how much the runs varied
    note: str = ""

    @property
    def ok(self) -> bool | None:
        if self.target is None:
            return None
        return (self.ratio if self.ratio is not None else self.value) <= self.target


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def spread(values: Sequence[float], unit: str = "", scale: float = 1.0) -> str:
    """`n=5 2.10–2.60 ms`: the number of runs and their range (`unit` as written after it)."""
    if len(values) == 1:
        return "n=1"
    return f"n={len(values)} {fmt(min(values) * scale)}–{fmt(max(values) * scale)}{unit}"


def fmt(value: float) -> str:
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}" if magnitude >= 0.1 else f"{value:.3f}"


def paired(
    ours: Callable[[], float], base: Callable[[], float], runs: int, warmup: int = 1
) -> tuple[list[float], list[float], list[float]]:
    """Alternate the two measurements, the order swapped every run so that drift and load hit
    both alike, after `warmup` unrecorded pairs: (ours, base, ours/base per pair)."""
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
    return mine, theirs, [a / b for a, b in zip(mine, theirs, strict=True)]


def ratio_row(
    figure: str,
    what: str,
    mine: list[float],
    theirs: list[float],
    ratios: list[float],
    *,
    unit: str,
    scale: float,
    target: float,
    note: str = "",
) -> Row:
    """A row for paired measurements in seconds: medians in `unit` (× `scale`), the median ratio."""
    return Row(
        figure,
        what,
        median(mine) * scale,
        unit,
        median(theirs) * scale,
        median(ratios),
        target,
        spread(ratios, "×"),
        note,
    )


@dataclass
class Timed:
    wall: float  # seconds
    cpu: float  # user + system seconds of the process and the children it waited for
    returncode: int
    stdout: bytes
    stderr: bytes


def run_timed(
    argv: list[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdin: bytes = b"",
    timeout: float = 120.0,
) -> Timed:
    """Run a command in its own process group to its end; reaped with os.wait4, so its CPU time is
    exact. Output goes through files: nothing blocks on a full pipe, no reader thread competes."""
    env = with_bytecode(os.environ if env is None else env)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as inp:
        inp.write(stdin)
        inp.seek(0)
        start = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=inp, stdout=out, stderr=err, start_new_session=True)
        timer = threading.Timer(timeout, kill_group, (proc.pid,))
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        kill_group(proc.pid)  # anything it left behind in its group
        out.seek(0)
        err.seek(0)
        return Timed(wall, usage.ru_utime + usage.ru_stime, proc.returncode, out.read(), err.read())


def with_bytecode(env: Mapping[str, str]) -> dict[str, str]:
    """`env` for a Python command timed as users run it. An installed package has its bytecode,
    but PYTHONDONTWRITEBYTECODE (set in some dev shells) would make every run compile crewbridge's
    modules from source again (~0.1 s). Bytecode goes to a scratch folder, not the source tree."""
    env = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(scratch("pycache"))
    return env


def installed() -> Path:
    """The bin folder of a venv with crew installed from this checkout as users install it (a
    wheel, not the editable install of .venv, whose .pth hook adds ~15 ms to every Python start),
    its dependencies taken from .venv; built once per state of the sources (a few seconds)."""
    import hashlib

    digest = hashlib.sha1()
    for folder in ("crewbridge", "providers", "tools", "prompts"):
        for path in sorted((REPO / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(REPO)).encode() + path.read_bytes())
    digest.update((REPO / "setup.cfg").read_bytes())
    venv = scratch("installed") / digest.hexdigest()[:12]
    bin_dir = venv / "bin"
    if (bin_dir / "crew").exists():
        return bin_dir
    for old in venv.parent.iterdir():  # venvs of earlier sources
        shutil.rmtree(old, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    deps = next((Path(sys.prefix) / "lib").glob("python*/site-packages"))
    (site / "crew-deps.pth").write_text(f"{deps}\n")  # a plain path: .venv's own hooks stay off
    with tempfile.TemporaryDirectory() as wheels:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--quiet",
                "--no-deps",
                "--no-build-isolation",
                "--wheel-dir",
                wheels,
                str(REPO),
            ],
            check=True,
        )
        subprocess.run(
            [
                str(bin_dir / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                *map(str, Path(wheels).glob("*.whl")),
            ],
            check=True,
            env=with_bytecode(os.environ),
        )
    return bin_dir


def kill_group(pgid: int) -> None:
    """SIGKILL a process group (started with start_new_session) that may already be gone."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def scratch(name: str) -> Path:
    """A cache folder for generated inputs, kept between runs (they take seconds to write)."""
    root = os.environ.get("CREW_BENCH_DIR") or Path(tempfile.gettempdir()) / "crewbridge-bench"
    path = Path(root) / name
    path.mkdir(parents=True, exist_ok=True)
    return path
