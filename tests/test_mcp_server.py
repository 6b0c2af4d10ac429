"""`crew mcp`, the MCP server: driven by the official MCP SDK's own client over stdio and streamable
HTTP (initialize, tools/list, tools/call, progress, cancel, background jobs), and by raw lines for
what a client should never send. Agents are the offline `demo` and small fake CLIs."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from crewbridge.config import Config, default_agents
from crewbridge.mcp_server import PROTOCOL_VERSIONS, McpServer
from crewcli import CREW, crew_env, end_group, executable, running, start_crew, write_config

# A CLI that never answers: it says it started in $FAKE_PIDS/slow (its pid, its PID namespace's inside
# crew's sandbox) and sleeps.
SLOW = """\
import os, time
open(os.path.join(os.environ["FAKE_PIDS"], "slow"), "w").write(str(os.getpid()))
time.sleep(600)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("deploy window: Tuesday\n")
    (tmp_path / "pids").mkdir()
    slow = executable(tmp_path / "bin" / "slow", SLOW)
    write_config(work / "crew.yaml", providers={"slow": {"command": [str(slow)], "state_dirs": ["$FAKE_PIDS"]}},
                 agents={"slow": {"provider": "slow"},
                         "guarded": {"provider": "demo", "deny": ["grep"], "approval": ["list_files"]}})
    subprocess.run([*CREW, "config", "trust", str(work / "crew.yaml")], env=env_for(tmp_path), check=True,
                   capture_output=True)
    return work


def env_for(tmp_path: Path) -> dict[str, str]:
    return crew_env(tmp_path / "home", FAKE_PIDS=str(tmp_path / "pids"))


def slow_pid(tmp_path: Path) -> int:
    """The slow CLI's process id (as this test sees it), once it has started."""
    path = tmp_path / "pids" / "slow"
    for _ in range(200):
        if path.exists() and path.read_text():
            return running_program(tmp_path / "bin" / "slow")
        time.sleep(0.05)
    raise AssertionError("the slow agent never started")


def running_program(program: Path) -> int:
    """The one process running `program`: its command line starts with it, or with its interpreter
    and it (a sandbox's wrapper names it further on)."""
    [pid] = [int(entry.name) for entry in Path("/proc").iterdir()
             if entry.name.isdigit() and str(program) in _argv(entry)[:2]]
    return pid


def _argv(entry: Path) -> list[str]:
    try:
        return (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def gone(pid: int) -> bool:
    for _ in range(100):
        if not running(pid):
            return True
        time.sleep(0.05)
    return False


def serve(project: Path, tmp_path: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(command=CREW[0], args=[*CREW[1:], "mcp", *args], env=env_for(tmp_path), cwd=project)


def session(params: StdioServerParameters):  # an async context manager: an initialized ClientSession
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def open_session():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            yield client

    return open_session()


def text(result) -> str:
    return "".join(part.text for part in result.content)


# -- over stdio, with the SDK's client ------------------------------------------------------------


def test_initialize_and_list_the_query_tools(project, tmp_path):
    async def main():
        async with stdio_client(serve(project, tmp_path)) as (read, write), ClientSession(read, write) as client:
            init = await client.initialize()
            assert init.server_info.name == "crew"
            assert init.protocol_version in PROTOCOL_VERSIONS
            return [tool.name for tool in (await client.list_tools()).tools]

    names = anyio.run(main)
    assert names[:4] == ["read_file", "list_files", "grep", "help"]
    assert names[-3:] == ["ask", "job", "cancel"]
    assert not {"write_file", "edit_file", "run_command"} & set(names)  # query mode: not even listed


def test_execute_lists_every_tool_and_writes_inside_the_working_directory(project, tmp_path):
    async def main():
        async with session(serve(project, tmp_path, "--execute")) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            written = await client.call_tool("write_file", {"path": "out.txt", "content": "hi\n"})
            outside = await client.call_tool("write_file", {"path": "../escape.txt", "content": "x"})
            return names, written, outside

    names, written, outside = anyio.run(main)
    assert {"write_file", "edit_file", "run_command"} <= set(names)
    assert not written.is_error and (project / "out.txt").read_text() == "hi\n"
    assert outside.is_error and "outside the working directory" in text(outside)
    assert not (tmp_path / "escape.txt").exists()


def test_tool_calls_give_crews_results_and_errors(project, tmp_path):
    async def main():
        async with session(serve(project, tmp_path)) as client:
            read = await client.call_tool("read_file", {"path": "notes.txt"})
            bad = await client.call_tool("read_file", {"pth": "notes.txt"})
            secret = await client.call_tool("read_file", {"path": "/etc/passwd"})
            with pytest.raises(MCPError) as unknown:
                await client.call_tool("write_file", {"path": "x", "content": "y"})
            return read, bad, secret, unknown.value

    read, bad, secret, unknown = anyio.run(main)
    assert not read.is_error and "deploy window: Tuesday" in text(read)
    assert bad.is_error and text(bad) == "invalid input for crew:read_file at $: 'path' is a required property"
    assert secret.is_error and "root:" not in text(secret)
    assert "write_file" in str(unknown) and "crew mcp --execute" in str(unknown)


def test_an_agents_policy_governs_the_clients_calls_and_the_transcript_records_them(project, tmp_path):
    async def main():
        async with session(serve(project, tmp_path, "--policy-of", "guarded")) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            listed = await client.call_tool("list_files", {})
            read = await client.call_tool("read_file", {"path": "notes.txt"})
            return names, listed, read

    names, listed, read = anyio.run(main)
    assert "grep" not in names and "list_files" in names
    assert listed.is_error and "needs a person's approval and there is no terminal" in text(listed)
    assert not read.is_error
    log = subprocess.run([*CREW, "log"], env=env_for(tmp_path), cwd=project, capture_output=True, text=True)
    run_id = log.stdout.split()[0]
    events = subprocess.run([*CREW, "log", "show", run_id], env=env_for(tmp_path), cwd=project,
                            capture_output=True, text=True).stdout
    calls = [e for e in map(json.loads, events.splitlines()) if e["kind"].startswith("tool_")]
    assert [(e["kind"], e["name"], e["agent"]) for e in calls] == [
        ("tool_call", "list_files", "guarded"), ("tool_result", "list_files", "guarded"),
        ("tool_call", "read_file", "guarded"), ("tool_result", "read_file", "guarded")]
    assert json.loads(events.splitlines()[0])["command"] == "mcp"


def test_ask_runs_the_agent_with_crews_tools_and_reports_progress(project, tmp_path):
    progress: list[str] = []

    async def on_progress(value, total, message):
        progress.append(message)

    async def main():
        async with session(serve(project, tmp_path)) as client:
            return await client.call_tool("ask", {"task": "@demo what is in notes.txt?"}, progress_callback=on_progress)

    result = anyio.run(main)
    assert not result.is_error, text(result)
    assert "deploy window: Tuesday" in text(result)
    assert result.structured_content["agent"] == "demo"
    assert result.structured_content["tool_calls"][0]["name"] == "crew:read_file"
    assert progress[0] == "@demo turn 1"
    assert any(m.startswith("@demo calls crew:read_file") for m in progress)
    assert progress[-1] == "@demo answered"


def test_ask_refuses_execute_mode_unless_the_server_allows_it(project, tmp_path):
    async def main():
        async with session(serve(project, tmp_path)) as client:
            return await client.call_tool("ask", {"task": "@demo write a file", "mode": "execute"})

    result = anyio.run(main)
    assert result.is_error and "crew mcp --execute" in text(result)


def test_ask_past_the_depth_limit_starts_no_cli(project, tmp_path):
    params = serve(project, tmp_path)
    params.env["CREW_ASK_DEPTH"] = "2"  # as if an agent asked by an agent had started this server

    async def main():
        async with session(params) as client:
            return await client.call_tool("ask", {"task": "@slow hello"})

    result = anyio.run(main)
    assert result.is_error and "2 asks deep" in text(result)
    assert not (tmp_path / "pids" / "slow").exists()


def test_a_cancelled_ask_ends_its_cli_and_the_server_goes_on(project, tmp_path):
    async def main():
        async with session(serve(project, tmp_path)) as client:
            with anyio.move_on_after(20) as scope:
                async with anyio.create_task_group() as group:
                    group.start_soon(client.call_tool, "ask", {"task": "@slow hello"})
                    pid = await anyio.to_thread.run_sync(slow_pid, tmp_path)
                    group.cancel_scope.cancel()  # the SDK sends notifications/cancelled
            assert not scope.cancelled_caught
            assert await anyio.to_thread.run_sync(gone, pid)
            return await client.call_tool("read_file", {"path": "notes.txt"})

    assert not anyio.run(main).is_error


def test_a_background_ask_is_a_job_to_follow_and_to_cancel(project, tmp_path):
    async def main():
        async with session(serve(project, tmp_path)) as client:
            started = await client.call_tool("ask", {"task": "@demo what is in notes.txt?", "background": True})
            job = started.structured_content["id"]
            for _ in range(200):
                status = await client.call_tool("job", {"id": job})
                if status.structured_content["status"] != "running":
                    break
                await anyio.sleep(0.05)
            slow = await client.call_tool("ask", {"task": "@slow hello", "background": True})
            pid = await anyio.to_thread.run_sync(slow_pid, tmp_path)
            cancelled = await client.call_tool("cancel", {"id": slow.structured_content["id"]})
            unknown = await client.call_tool("job", {"id": "nope"})
            return status, cancelled, pid, unknown

    status, cancelled, pid, unknown = anyio.run(main)
    assert status.structured_content["status"] == "done"
    assert "deploy window: Tuesday" in status.structured_content["answer"]
    assert "@demo calls crew:read_file {\"path\": \"notes.txt\"}" in status.structured_content["progress"]
    assert cancelled.structured_content["status"] == "cancelled"
    assert gone(pid)
    assert unknown.is_error and "no job 'nope'" in text(unknown)


# -- the channel itself ---------------------------------------------------------------------------


def test_malformed_lines_get_errors_and_the_server_lives_on(project, tmp_path):
    lines = [
        "not json",
        json.dumps({"jsonrpc": "2.0", "id": 1}),
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "nope"}),
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"arguments": {}}}),
        json.dumps({"jsonrpc": "2.0", "id": 4, "method": "ping"}),
    ]
    done = subprocess.run([*CREW, "mcp"], input="\n".join(lines) + "\n", capture_output=True, text=True,
                          env=env_for(tmp_path), cwd=project, timeout=60)
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == [None, 1, 2, 3, 4]
    assert [a.get("error", {}).get("code") for a in answers] == [-32700, -32600, -32601, -32602, None]
    assert "send one JSON-RPC message a line" in answers[0]["error"]["message"]
    assert answers[4]["result"] == {}


@pytest.mark.parametrize("how", ["stdin closes", "SIGTERM"])
def test_the_server_ends_every_child_when_it_stops(how, project, tmp_path):
    proc = start_crew(["mcp"], env=env_for(tmp_path), cwd=project, stdin=subprocess.PIPE)
    try:
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "ask", "arguments": {"task": "@slow hello", "background": True}}}
        proc.stdin.write(json.dumps(call) + "\n")
        proc.stdin.flush()
        pid = slow_pid(tmp_path)
        if how == "SIGTERM":
            proc.send_signal(signal.SIGTERM)
        else:
            proc.stdin.close()
        proc.wait(timeout=30)
        assert proc.returncode == (143 if how == "SIGTERM" else 0), proc.stderr.read()
        assert gone(pid)
    finally:
        end_group(proc)


def test_streamable_http_serves_the_same_tools_with_progress(project, tmp_path):
    proc = start_crew(["mcp", "--http", "127.0.0.1:0"], env=env_for(tmp_path), cwd=project)
    try:
        url = re.search(r"serving MCP at (\S+)", proc.stderr.readline()).group(1)
        progress: list[str] = []

        async def on_progress(value, total, message):
            progress.append(message)

        async def main():
            async with streamable_http_client(url) as (read, write), ClientSession(read, write) as client:
                await client.initialize()
                names = [tool.name for tool in (await client.list_tools()).tools]
                read_result = await client.call_tool("read_file", {"path": "notes.txt"})
                asked = await client.call_tool("ask", {"task": "@demo what is in notes.txt?"},
                                               progress_callback=on_progress)
                return names, read_result, asked

        names, read_result, asked = anyio.run(main)
        assert "read_file" in names and "write_file" not in names
        assert "deploy window: Tuesday" in text(read_result)
        assert "deploy window: Tuesday" in text(asked) and "@demo answered" in progress
    finally:
        end_group(proc)


# -- the protocol, in-process ---------------------------------------------------------------------


def test_initialize_answers_the_clients_version_or_the_newest():
    server = McpServer(Config(agents=default_agents(), transcripts=False), Path.cwd())
    for asked, answered in (("2025-03-26", "2025-03-26"), ("1999-01-01", PROTOCOL_VERSIONS[-1])):
        message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": asked}}
        assert server.respond(message, print)["result"]["protocolVersion"] == answered


def test_a_tool_named_like_a_server_tool_is_refused(tmp_path):
    from crewbridge.config import read_config

    config = write_config(tmp_path / "crew.yaml", tools={"ask": {"command": ["true"], "read_only": True}})
    server = McpServer(read_config(config), tmp_path)
    answer = server.respond({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, print)
    assert "a tool is named 'ask', as crew mcp's own" in answer["error"]["message"]
