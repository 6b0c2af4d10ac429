"""bench/run.py, the benchmark suite, runs and prints its table, so its code cannot rot. The figures
themselves are measurements, printed for people; they are not checked here."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from clienv import REPO, require_cli


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "bench" / "run.py"), *args], capture_output=True, text=True, timeout=300, cwd=REPO
    )


@pytest.mark.slow
def test_the_catalogue_figure_prints_a_table_with_the_compact_size_against_its_target() -> None:
    out = bench("--quick", "--only", "catalogue", "--no-cli")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["figure", "what", "value", "baseline", "ratio", "target", "ok", "spread"]
    [compact] = [line for line in lines if "100 registered tools, compact catalogue" in line]
    assert compact.startswith("4 catalogue") and "tokens" in compact and "≤ 2,000 tokens" in compact
    assert "running catalogue" in out.stderr


@pytest.mark.slow
def test_json_gives_one_object_per_row_with_its_target_and_verdict() -> None:
    out = bench("--quick", "--only", "catalogue", "--no-cli", "--json")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [row["figure"] for row in rows] == ["4 catalogue"] * 4
    compact, skills = rows[-2:]
    assert skills["target"] == 1500 and skills["ok"] == (skills["value"] <= 1500)
    assert compact["unit"] == "tokens" and compact["target"] == 2000
    assert compact["ok"] == (compact["value"] <= 2000)


@pytest.mark.slow
def test_an_unknown_figure_is_refused_with_the_known_ones() -> None:
    out = bench("--only", "catalog")
    assert out.returncode == 2
    assert (
        "unknown figure catalog; choose from: overhead, launch, turn, dispatch, parse, startup, mcp, "
        "throughput, catalogue, parallel, memory" in out.stderr
    )


@pytest.mark.e2e
def test_the_compact_round_trip_goes_through_the_real_claude() -> None:
    require_cli("claude")
    out = bench("--quick", "--only", "catalogue")
    assert out.returncode == 0, out.stderr
    [trip] = [line for line in out.stdout.splitlines() if "compact round trip" in line]
    assert "the tool ran with the model's input" in out.stdout
    assert "3.00 turns" in trip and trip.split()[-1] == "yes"


@pytest.mark.slow
def test_every_figure_and_the_live_benchmark_import() -> None:
    # the figures that need minutes or the real CLIs run only by hand: they must not rot either
    code = (
        "import importlib, bench.run\n"
        "for name in [*bench.run.FIGURES.values(), 'bench.bench_live', 'bench.worker', 'bench.steps',\n"
        "             'bench.parse_stages', 'bench.acp', 'bench.install']:\n"
        "    importlib.import_module(name)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr


@pytest.mark.slow
def test_before_must_name_a_checkout_with_its_venv(tmp_path) -> None:
    out = bench("--only", "startup", "--before", str(tmp_path))
    assert out.returncode == 2
    assert f"--before {tmp_path} is not a crewbridge checkout with a .venv" in out.stderr
