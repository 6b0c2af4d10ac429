"""What every figure shares: the result row, repeated timing with medians and spreads, timed child
processes, and the scratch folder. The mock model server and CLI environments come from tests/."""

from __future__ import annotations

import json
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
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
if str(REPO / "tests") not in sys.path:
    sys.path.insert(0, str(REPO / "tests"))  # mockserver, clienv: the harness for the real CLIs


@dataclass
class Settings:
    quick: bool = False
    runs: int | None = None  # repetitions of a timed measurement (None: the figure's default)
    cli: bool = True  # run the rows that need the real claude CLI (node_modules/.bin/claude)
    before: Path | None = None  # another checkout (its .venv too), measured beside this one

    def sides(self) -> dict[str, Path]:
        """The checkouts to measure, by label: this one ("crew"), and the one before when given."""
        return {"crew": REPO, **({"before": self.before} if self.before else {})}

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


def interleaved(measures: Mapping[str, Callable[[], float]], runs: int, warmup: int = 1) -> dict[str, list[float]]:
    """Take every measurement in turn, the order rotated each run so that drift and load hit all
    alike, after `warmup` unrecorded rounds: the values of each, by name."""
    names = list(measures)
    for _ in range(warmup):
        for name in names:
            measures[name]()
    values: dict[str, list[float]] = {name: [] for name in names}
    for i in range(runs):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            values[name].append(measures[name]())
    return values


def paired(
    ours: Callable[[], float], base: Callable[[], float], runs: int, warmup: int = 1
) -> tuple[list[float], list[float], list[float]]:
    """`interleaved` for two: (ours, base, ours/base per pair)."""
    values = interleaved({"base": base, "ours": ours}, runs, warmup)
    return values["ours"], values["base"], [a / b for a, b in zip(values["ours"], values["base"], strict=True)]


def side_rows(
    figure: str,
    what: str,
    values: Mapping[str, list[float]],
    base: str,
    *,
    unit: str,
    scale: float,
    target: float,
    note: str | Mapping[str, str] = "",
) -> list[Row]:
    """One ratio row per checkout measured (`values` by Settings.sides' labels, and `base`, the
    baseline they are compared with, measured in the same rounds); the one before is labelled so.
    `note`: one for every row, or each side's."""
    rows = []
    for side, mine in values.items():
        if side == base:
            continue
        ratios = [a / b for a, b in zip(mine, values[base], strict=True)]
        label = what if side == "crew" else f"{what} [{side}]"
        rows.append(
            ratio_row(
                figure,
                label,
                mine,
                values[base],
                ratios,
                unit=unit,
                scale=scale,
                target=target,
                note=note if isinstance(note, str) else note[side],
            )
        )
    return rows


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
    stdin: bytes | Path = b"",
    timeout: float = 120.0,
) -> Timed:
    """Run a command in its own process group to its end; reaped with os.wait4, so its CPU time is
    exact. Output goes through files: nothing blocks on a full pipe, no reader thread competes.
    `stdin`: its bytes, or a file to read them from."""
    env = with_bytecode(os.environ if env is None else env)
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        stdin.open("rb") if isinstance(stdin, Path) else tempfile.TemporaryFile() as inp,
    ):
        if not isinstance(stdin, Path):
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


SOURCES = ("crewbridge", "providers", "tools", "prompts", "bin")  # what an installed crew is built from


def installed(repo: Path = REPO) -> Path:
    """The bin folder of a venv with crew installed from the checkout `repo` as users install it (a
    wheel, not the editable install of .venv, whose .pth hook adds ~15 ms to every Python start),
    its dependencies taken from this .venv; built once per state of the sources (a few seconds)."""
    import hashlib

    digest = hashlib.sha1()
    for folder in SOURCES:
        for path in sorted((repo / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(repo)).encode() + path.read_bytes())
    digest.update((repo / "setup.cfg").read_bytes())
    checkout = hashlib.sha1(str(repo.resolve()).encode()).hexdigest()[:8]
    venv = scratch("installed") / checkout / digest.hexdigest()[:12]
    bin_dir = venv / "bin"
    if (bin_dir / "crew").exists():
        return bin_dir
    venv.parent.mkdir(parents=True, exist_ok=True)
    for old in venv.parent.iterdir():  # venvs of earlier sources
        shutil.rmtree(old, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    deps = next((Path(sys.prefix) / "lib").glob("python*/site-packages"))
    (site / "crew-deps.pth").write_text(f"{deps}\n")  # a plain path: .venv's own hooks stay off
    with tempfile.TemporaryDirectory() as wheels, tempfile.TemporaryDirectory() as source:
        for name in (*SOURCES, "setup.cfg", "pyproject.toml", "README.md"):  # built from a copy: the
            if (repo / name).exists():  # build writes beside
                copy = shutil.copytree if (repo / name).is_dir() else shutil.copy2  # its sources
                copy(repo / name, Path(source) / name)
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
                source,
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


def in_process(repo: Path, *args: str) -> Any:
    """What `python -m bench.worker ARGS` prints (JSON), run by the Python of the checkout `repo`
    (this one's: this interpreter; another's: its .venv), so that it measures that checkout's
    crewbridge. Only this `bench` is on its path, never this checkout's crewbridge."""
    python = sys.executable if repo == REPO else str(repo / ".venv" / "bin" / "python")
    path = scratch("worker-path")
    if not (path / "bench").exists():
        (path / "bench").symlink_to(REPO / "bench")
    env = {**os.environ, "PYTHONPATH": str(path)}
    out = subprocess.run(
        [python, "-m", "bench.worker", *args], capture_output=True, text=True, cwd=path, env=env, timeout=300
    )
    if out.returncode != 0:
        raise RuntimeError(f"bench.worker {' '.join(args)} with {python} failed: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout)


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
