"""crewbridge.terminal.early: `crew query|execute` read quickly, before click, to start the agents' CLIs while
crew loads; a reading it is not sure of starts nothing, and the run takes only what it would start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crewbridge.system import process
from crewbridge.terminal.early import Reading, read, start


@pytest.fixture(autouse=True)
def scratch_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No crew.yaml of the person running the tests; the demo agent; run in tmp_path/work."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.setenv("CREW_LIVE", "0")
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")


@pytest.mark.parametrize(
    ("args", "reading"),
    [
        (["query", "@claude", "hi"], Reading("query", "@claude hi")),
        (["execute", "--timeout", "5", "@claude fix it", "-y", "--json"], Reading("execute", "@claude fix it")),
        (
            ["query", "--config=team.yaml", "@a @b", "go", "--tools-via", "native", "-y"],
            Reading("query", "@a @b go", Path("team.yaml"), "native"),
        ),
        (["query", "--max-cost", "0.5", "--max-turns=3", "@gemini", "-"], Reading("query", "@gemini -")),
        (
            ["execute", "--network", "open", "--sandbox=required", "@codex go"],
            Reading("execute", "@codex go", sandbox="required", network="open"),
        ),
    ],
)
def test_the_task_and_the_options_that_name_the_clis_are_read(args: list[str], reading: Reading) -> None:
    assert read(args) == reading


@pytest.mark.parametrize(
    "args",
    [
        ["query"],
        ["chat", "@claude"],
        ["query", "--help", "@claude hi"],
        ["query", "-h"],
        ["query", "--continue", "@claude more"],
        ["query", "--resume", "20250101-x", "@claude more"],
        ["query", "--", "@claude -x"],
        ["query", "-yv", "@claude hi"],
        ["query", "--tiemout", "5", "@claude hi"],
        ["query", "@claude hi", "--timeout"],
        ["query", "--json"],
        ["query", "--timeout", "soon", "@claude hi"],
        ["query", "--max-turns=0", "@claude hi"],
        ["query", "--tools-via", "Native", "@claude hi"],
        ["query", "--network", "closed", "@claude hi"],
        ["query", "--json", "--jsonl", "@claude hi"],
        ["query", "-v", "@claude hi"],
        ["execute", "--worktree", "@claude fix it"],
        ["execute", "--review", "gemini", "@claude fix it"],
        ["execute", "--rounds", "0", "@claude fix it"],
    ],
)
def test_a_reading_it_is_not_sure_of_starts_nothing(args: list[str], started_clis: list[process.Child]) -> None:
    assert read(args) is None
    assert start(args) is None
    assert started_clis == []


@pytest.mark.slow
def test_the_clis_start_at_once_and_the_run_takes_them(started_clis: list[process.Child]) -> None:
    Path("notes.txt").write_text("Buy milk.\n")
    early = start(["query", "@demo", "what is in notes.txt?"])
    assert early is not None and len(started_clis) == 1 and started_clis[0].proc.poll() is None
    [outcome] = early.bridge.run("@demo what is in notes.txt?", "query")
    assert outcome.error is None and outcome.result is not None and outcome.result.tool_calls
    assert len(started_clis) == 2  # the first turn's CLI was the one started early; the second turn's
    assert all(child.proc.poll() is not None for child in started_clis)


def test_a_configuration_it_cannot_read_starts_nothing(started_clis: list[process.Child]) -> None:
    assert start(["query", "--config", "missing.yaml", "@demo hi"]) is None
    assert started_clis == []


def test_a_sandbox_that_is_required_and_not_to_be_had_starts_nothing(
    started_clis: list[process.Child], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CREW_SANDBOX_MECHANISM", "none")  # as on a machine where no mechanism works
    assert start(["query", "--sandbox", "required", "@demo hi"]) is None
    assert started_clis == []
    early = start(["query", "--sandbox", "off", "@demo hi"])
    assert early is not None and early.reading.sandbox == "off" and len(started_clis) == 1
    early.bridge.close()


# What crew query must not load before its CLI starts: each is first needed once the run is under
# way (bench/launch.py times the start; these keep it from growing back).
AFTER_THE_START = (
    "click",
    "yaml",
    "jsonschema",
    "pexpect",
    "logging",
    "socket",
    "shlex",
    "concurrent.futures",
    "crewbridge.toolkit.registry",
    "crewbridge.base.validation",
    "crewbridge.base.config_layers",
    "crewbridge.base.templates",
    "crewbridge.base.piped",
    "crewbridge.engine.loop",
    "crewbridge.record.events",  # the record's types: decoding into them costs the launch nothing
    "crewbridge.record.stream",
    "crewbridge.record.transcript",
    "msgspec",
)


def test_the_cli_starts_before_what_only_the_run_needs_loads(tmp_path: Path) -> None:
    program = tmp_path / "bin" / "claude"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    script = (
        "import json, sys\n"
        "def started(event, args):\n"
        "    if event == 'subprocess.Popen':  # the CLI's start: refused, so nothing runs and its view goes\n"
        f"        print(json.dumps(sorted(m for m in {AFTER_THE_START!r} if m in sys.modules)), flush=True)\n"
        "        raise SystemExit(0)\n"
        "sys.addaudithook(started)\n"
        "from crewbridge.terminal.early import start\n"
        "start(['query', '@claude', 'hi'])\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "CREW_LIVE"}  # live, crew query's default
    env["PATH"] = f"{program.parent}{os.pathsep}{env['PATH']}"
    env["HOME"] = str(tmp_path / "home")  # claude's state folder is made there, not in the user's
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout, f"claude was not started: {done.stderr[-500:]}"
    assert json.loads(done.stdout) == []
