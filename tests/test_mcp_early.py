"""crewbridge.mcp.early: `crew mcp` on stdio answers initialize before click and the engine load,
only when nothing that loads could refuse to start the server; a server that cannot start says so
as before, with no answer to initialize (a client that got one shows the server as connected)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crewbridge.config import Config, default_agents
from crewbridge.errors import AgentNotFound, ConfigError, UsageError
from crewbridge.mcp.early import Greeter, instructions, read
from crewbridge.mcp.server import McpServer
from crewcli import CREW, crew_env, error_line, write_config

INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
READ = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "read_file", "arguments": {"path": "notes.txt"}},
}
ENGINE = (
    "click",
    "crewbridge.cli",
    "crewbridge.config",
    "crewbridge.mcp.server",
    "crewbridge.toolkit.registry",
    "crewbridge.sandbox",
    "yaml",
    "jsonschema",
)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    (path / "notes.txt").write_text("deploy window: Tuesday\n")
    return path


def crew_mcp(
    work: Path, tmp_path: Path, messages: list[dict | str], *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    data = "".join((m if isinstance(m, str) else json.dumps(m)) + "\n" for m in messages)
    return subprocess.run(
        [*CREW, "mcp", *args],
        input=data,
        capture_output=True,
        text=True,
        cwd=work,
        env=crew_env(tmp_path / "home", **env),
        timeout=120,
    )


def answers(done: subprocess.CompletedProcess[str]) -> dict:
    return {a["id"]: a for a in map(json.loads, done.stdout.splitlines())}


# -- what is read here is what click takes ---------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], {}),
        (
            ["--execute", "--timeout", "600", "--max-turns=3", "--ask-depth", "0", "--sandbox", "off"],
            {"--execute": "", "--timeout": "600", "--max-turns": "3", "--ask-depth": "0", "--sandbox": "off"},
        ),
        (["--sandbox=auto"], {"--sandbox": "auto"}),
        (["--sandbox", "required"], None),  # refused where no sandbox works
        (["--timeout"], None),
        (["--config", "team.yaml"], None),
        (["--policy-of", "claude"], None),
        (["--http", "127.0.0.1:0"], None),
        (["--help"], None),
        (["install", "claude"], None),
        (["--execute", "extra"], None),
    ],
)
def test_only_arguments_that_cannot_be_refused_are_read(args: list[str], expected: dict | None) -> None:
    assert read(args) == expected


# -- the answer, before the engine ----------------------------------------------------------------


def test_initialize_is_answered_before_click_and_the_engine_load(work: Path, tmp_path: Path) -> None:
    script = (
        "import json, sys\nfrom crewbridge.mcp import stdio\nsend = stdio.Link.send\n"
        "def sending(link, message):\n"
        f"    print(json.dumps(sorted(m for m in {ENGINE!r} if m in sys.modules)), file=sys.stderr)\n"
        "    send(link, message)\n"
        "stdio.Link.send = sending\nfrom crewbridge.mcp.early import greet\ngreet([])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps(INITIALIZE) + "\n",
        capture_output=True,
        text=True,
        cwd=work,
        env=crew_env(tmp_path / "home"),
        timeout=60,
    )
    assert json.loads(done.stderr.splitlines()[-1]) == []
    result = json.loads(done.stdout)["result"]
    assert result["protocolVersion"] == "2025-06-18" and result["instructions"] == instructions(work)
    assert result["capabilities"] == {"tools": {"listChanged": False}} and result["serverInfo"]["name"] == "crew"


@pytest.mark.parametrize(
    "params",
    [
        {"protocolVersion": "2025-06-18"},
        {"protocolVersion": "1999-01-01"},
        {},
        {"protocolVersion": 5},
        None,
        [],
        "x" * 100,
    ],
)
@pytest.mark.slow
def test_the_early_answer_is_the_one_the_server_gives(params, tmp_path: Path) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", **({} if params is None else {"params": params})}
    server = McpServer(Config(agents=default_agents(), transcripts=False), tmp_path)
    assert Greeter(str(tmp_path)).answer(message) == server.answer(message)


@pytest.mark.slow
def test_the_server_that_loads_next_serves_the_same_session(work: Path, tmp_path: Path) -> None:
    done = crew_mcp(work, tmp_path, [INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"}, LIST, READ])
    assert done.returncode == 0, done.stderr
    by_id = answers(done)
    assert by_id[0]["result"]["instructions"] == instructions(work)
    assert "read_file" in {tool["name"] for tool in by_id[1]["result"]["tools"]}
    assert "Tuesday" in by_id[2]["result"]["content"][0]["text"]


@pytest.mark.parametrize(
    "first", ["not json", json.dumps(LIST), json.dumps({"jsonrpc": "2.0", "id": 9, "method": "ping"})]
)
@pytest.mark.slow
def test_a_first_line_that_is_not_initialize_is_answered_by_the_server_once_loaded(first, work, tmp_path) -> None:
    done = crew_mcp(work, tmp_path, [first, INITIALIZE, READ])
    assert done.returncode == 0, done.stderr
    by_id = answers(done)
    assert len(by_id) == 3 and by_id[0]["result"]["protocolVersion"] == "2025-06-18"
    first_answer = json.loads(done.stdout.splitlines()[0])
    if first == "not json":
        assert first_answer["error"]["code"] == -32700
    elif "tools/list" in first:
        assert first_answer["error"]["code"] == -32002  # before initialize
    else:
        assert first_answer["result"] == {}
    assert "Tuesday" in by_id[2]["result"]["content"][0]["text"]


@pytest.mark.slow
def test_a_first_line_past_the_bound_is_skipped_unread_and_the_next_initialize_answered(work, tmp_path) -> None:
    from crewbridge.mcp.stdio import MAX_LINE

    done = crew_mcp(work, tmp_path, ['{"jsonrpc": "2.0", "id": 7, "x": "' + "a" * MAX_LINE + '"}', INITIALIZE, READ])
    assert done.returncode == 0, done.stderr
    skipped, *rest = map(json.loads, done.stdout.splitlines())
    assert skipped["id"] is None and "was skipped" in skipped["error"]["message"]
    assert {answer["id"] for answer in rest} == {0, 2} and "Tuesday" in answers(done)[2]["result"]["content"][0]["text"]


# -- a server that cannot start says so before any answer, as before ------------------------------


def broken_project(work: Path, tmp_path: Path) -> dict[str, str]:
    (work / "crew.yaml").write_text("agents: [unclosed\n")
    return {}


def broken_user_file(work: Path, tmp_path: Path) -> dict[str, str]:
    (tmp_path / "home" / ".config" / "crewbridge").mkdir(parents=True)
    write_config(tmp_path / "home" / ".config" / "crewbridge" / "crew.yaml", agents={"a": {"timeout": "soon"}})
    return {}


def both_names(work: Path, tmp_path: Path) -> dict[str, str]:
    write_config(work / "crew.yaml")
    write_config(work / ".crew.yaml")
    return {}


def bad_mechanism(work: Path, tmp_path: Path) -> dict[str, str]:
    return {"CREW_SANDBOX_MECHANISM": "chroot"}


@pytest.mark.parametrize(
    ("make", "args", "error", "said"),
    [
        (broken_project, [], ConfigError, "crew.yaml"),
        (broken_user_file, [], ConfigError, "'soon' is not of type 'number'"),
        (both_names, [], ConfigError, "keep one of them"),
        (bad_mechanism, [], UsageError, "CREW_SANDBOX_MECHANISM=chroot is not one of"),
        (None, ["--policy-of", "nobody"], AgentNotFound, "agent 'nobody' not found"),
        (None, ["--timeout", "0.01"], None, "0.01 is not in the range x>=0.1"),
    ],
)
@pytest.mark.slow
def test_a_server_that_cannot_start_gives_no_answer_and_one_line(make, args, error, said, work, tmp_path) -> None:
    extra = make(work, tmp_path) if make else {}
    done = crew_mcp(work, tmp_path, [INITIALIZE, LIST], *args, **extra)
    assert done.stdout == ""
    assert done.returncode == (error.exit_code if error else 2)
    assert said in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("closed", [0, 1])
@pytest.mark.slow
def test_a_closed_stdin_or_stdout_is_reported_in_one_line_as_before(closed: int, work: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [*CREW, "mcp"],
        stdin=subprocess.DEVNULL,
        preexec_fn=lambda: os.close(closed),
        stderr=subprocess.PIPE,
        text=True,
        cwd=work,
        env=crew_env(tmp_path / "home"),
        timeout=120,
    )
    assert done.returncode != 0 and error_line(done.stderr).startswith("crew: ")
