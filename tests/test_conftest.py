"""The suite's own guard (tests/conftest.py): whatever runs the tests, and however pytest captures,
nothing a test starts reads the runner's stdin. Without it, a crew started with `pytest -s` from a pipe
took what another program wrote there (a path, a number, an error line) as the task's context."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

PROBE = """\
import subprocess


def test_what_a_started_process_reads():
    said = subprocess.run(["cat"], capture_output=True, text=True, timeout=60).stdout
    assert said == "", said
"""


@pytest.mark.parametrize("capture", ["-s", "--capture=sys", "--capture=fd"])  # a pytest each: spread over workers
def test_a_process_a_test_starts_never_reads_the_runners_stdin_even_with_capture_off(tmp_path, capture):
    (tmp_path / "test_probe.py").write_text(PROBE)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "conftest", capture, str(tmp_path / "test_probe.py")],
        input="outside text the runner's pipe carries\n",
        env={**os.environ, "PYTHONPATH": str(TESTS)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, capture + "\n" + done.stdout + done.stderr
