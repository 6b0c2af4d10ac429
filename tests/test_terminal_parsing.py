"""`crew parse` runs whole before click loads when its arguments are sure, and says what is wrong
as the command always did when they are not (click reads them then)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from crewbridge.terminal.parsing import BUFFER, early
from crewcli import CREW, crew_env, error_line, run_crew

FIXTURES = Path(__file__).parent / "fixtures"
CALL = (
    '{"type":"assistant","message":{"content":[{"type":"text","text":"```json\\n{\\"type\\": \\"tool_use\\", '
    '\\"name\\": \\"crew:read_file\\", \\"input\\": {\\"path\\": \\"a.txt\\"}}\\n```\\n"}]}}\n'
)


@pytest.mark.parametrize(
    "args",
    [
        [],  # no --format: click says it is required
        ["--format"],  # no value
        ["--format", "claude", "extra"],  # a word the command takes none of
        ["--format", "claude", "--sandbox", "off"],  # an option it does not have
        ["--format", "claude", "--config", ""],  # a path click reads as "."
        ["--help"],
    ],
)
def test_arguments_it_is_not_sure_of_are_left_to_click(args: list[str]) -> None:
    assert early(args) is None


def test_the_command_runs_without_click(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from crewbridge.__main__ import run\n"
        "sys.argv = ['crew', 'parse', '--format', 'claude']\n"
        "try:\n"
        "    run()\n"
        "finally:\n"
        "    sys.stderr.write(repr(sorted(m for m in ('click', 'crewbridge.cli') if m in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=CALL,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=crew_env(tmp_path / "home"),
    )
    assert done.returncode == 0, done.stderr
    assert [json.loads(line) for line in done.stdout.splitlines()] == [
        {"name": "crew:read_file", "input": {"path": "a.txt"}, "error": None}
    ]
    assert done.stderr == "[]"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (["--format", "clade"], 2, "format 'clade' is not known; use one of: claude, gemini, codex, demo, text"),
        (["--prefix", "x"], 2, "Missing option '--format'."),
        (["--format", "claude", "extra"], 2, "Got unexpected extra argument (extra)"),
    ],
)
def test_a_wrong_command_line_says_what_is_wrong(tmp_path: Path, args: list[str], code: int, said: str) -> None:
    done = run_crew(["parse", *args], env=crew_env(tmp_path / "home"), cwd=tmp_path, input=CALL)
    assert (done.returncode, done.stdout) == (code, "")
    assert said in done.stderr


@pytest.mark.slow
def test_a_broken_crew_yaml_is_reported_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "crew.yaml").write_text("agents: [\n")
    done = run_crew(["parse", "--format", "claude"], env=crew_env(tmp_path / "home"), cwd=tmp_path, input=CALL)
    assert done.returncode == 2
    assert error_line(done.stderr).startswith("crew: error: ")
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_reader_that_goes_away_ends_it_quietly(tmp_path: Path) -> None:
    """`claude … | crew parse … | head -1`: the first record comes while the stream goes on, then
    the reader closes the pipe under crew."""
    calls = CALL * (3 * BUFFER // len(CALL))  # more than the pipe and stdout's buffer hold
    crew = subprocess.Popen(
        [*CREW, "parse", "--format", "claude"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=crew_env(tmp_path / "home"),
    )
    assert crew.stdin is not None and crew.stdout is not None and crew.stderr is not None
    guard = threading.Timer(60, crew.kill)  # a crew that holds its record back fails the test, not hangs it
    guard.start()
    crew.stdin.write(CALL.encode())
    crew.stdin.flush()  # and kept open: the record comes as soon as its block closes
    assert json.loads(crew.stdout.readline())["name"] == "crew:read_file"
    crew.stdout.close()
    try:
        crew.stdin.write(calls.encode())
        crew.stdin.close()
    except BrokenPipeError:
        pass  # crew ended first
    assert crew.wait(timeout=60) == 0
    guard.cancel()
    assert crew.stderr.read() == b""
