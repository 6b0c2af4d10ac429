"""`crew mcp`, the MCP server: driven by the official MCP SDK's own client over stdio and streamable
HTTP (initialize, tools/list, tools/call, progress, cancel, background jobs, jobs per session).
Agents are the offline `demo` and small fake CLIs. What a client should never send: test_protocol_mcp.py,
test_mcp_stdio.py, test_protocol_mcp_http.py."""

from __future__ import annotations

import json
import re
import subprocess
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from crewbridge.config import Config, default_agents
from crewbridge.mcp.server import McpServer
from crewbridge.protocol.mcp import INTERNAL_ERROR, PROTOCOL_VERSIONS
from crewcli import CREW, end_group, run_crew, running, start_crew, write_config
from mcpfakes import env_for, gone, mcp_project, slow_pid

TOKEN = "server-test-token-0123456789"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return mcp_project(tmp_path, guarded={"provider": "demo", "deny": ["grep"], "approval": ["list_files"]})


def serve(project: Path, tmp_path: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(command=CREW[0], args=[*CREW[1:], "mcp", *args], env=env_for(tmp_path), cwd=project)


def session(params: StdioServerParameters):  # an async context manager: an initialized ClientSession
    @asynccontextmanager
    async def open_session():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            yield client

    return open_session()


def text(result) -> str:
    return "".join(part.text for part in result.content)


# -- over stdio, with the SDK's client ------------------------------------------------------------


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_an_agents_policy_governs_the_clients_calls_and_the_record_has_them(project, tmp_path):
    async def main():
        async with session(serve(project, tmp_path, "--policy-of", "guarded")) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            listed = await client.call_tool("list_files", {})
            read = await client.call_tool("read_file", {"path": "notes.txt"})
            return names, listed, read

    names, listed, read = anyio.run(main)
    assert "grep" not in names and "list_files" in names
    assert listed.is_error and "needs a person's approval and there is nobody to ask" in text(listed)
    assert not read.is_error
    log = run_crew(["log"], env=env_for(tmp_path), cwd=project)
    run_id = log.stdout.split()[0]
    events = run_crew(["log", "show", "--json", run_id], env=env_for(tmp_path), cwd=project).stdout
    calls = [e for e in map(json.loads, events.splitlines()) if e["kind"] in ("call", "decision", "result")]
    assert [(e["kind"], e["call"], e.get("name"), e["agent"]) for e in calls] == [
        ("call", "c1", "list_files", "guarded"),
        ("decision", "c1", None, "guarded"),
        ("result", "c1", "list_files", "guarded"),
        ("call", "c2", "read_file", "guarded"),
        ("decision", "c2", None, "guarded"),
        ("result", "c2", "read_file", "guarded"),
    ]
    assert calls[0]["via"] == "mcp"
    assert (calls[1]["decision"], calls[1]["by"]) == ("refused", "nobody")  # nobody could be asked
    assert (calls[4]["decision"], calls[4].get("by", "policy")) == ("allowed", "policy")  # the default, left out
    start = json.loads(events.splitlines()[0])
    assert (start["command"], start["agents"], start["cwd"]) == ("mcp", ["guarded"], str(project))


@pytest.mark.slow
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
    [answered] = result.structured_content["results"]
    assert answered["agent"] == "demo" and answered["tool_calls"][0]["name"] == "crew:read_file"
    assert result.structured_content["run"]  # the run an ask was: crew log show RUN
    assert progress[0] == "@demo turn 1"
    assert any(m.startswith("@demo calls crew:read_file") for m in progress)
    assert progress[-1] == "@demo answered"


@pytest.mark.slow
def test_an_execute_asks_checks_are_in_its_progress(tmp_path):
    """crew.yaml's check runs on an ask in execute mode, and the client sees each run of it."""
    project = mcp_project(tmp_path, check="grep -q Tuesday notes.txt")
    progress: list[str] = []

    async def on_progress(value, total, message):
        progress.append(message)

    async def main():
        async with session(serve(project, tmp_path, "--execute")) as client:
            arguments = {"task": "@demo what is in notes.txt?", "mode": "execute"}
            return await client.call_tool("ask", arguments, progress_callback=on_progress)

    result = anyio.run(main)
    assert not result.is_error, text(result)
    assert progress[-2:] == ["@demo answered", "@demo check 1/3 passed: grep -q Tuesday notes.txt"]


@pytest.mark.slow
def test_ask_refuses_execute_mode_unless_the_server_allows_it(project, tmp_path):
    async def main():
        async with session(serve(project, tmp_path)) as client:
            return await client.call_tool("ask", {"task": "@demo write a file", "mode": "execute"})

    result = anyio.run(main)
    assert result.is_error and "crew mcp --execute" in text(result)


@pytest.mark.slow
def test_ask_takes_worktree_review_and_rounds_checked_like_its_other_arguments(project, tmp_path):
    from gitrepo import make_repo, status

    make_repo(project, {})

    async def main():
        async with session(serve(project, tmp_path, "--execute")) as client:
            schema = next(t.input_schema for t in (await client.list_tools()).tools if t.name == "ask")
            bad = [
                await client.call_tool("ask", {"task": "@demo hi", **arguments})
                for arguments in ({"worktree": "yes"}, {"review": ""}, {"review": "demo", "rounds": 0}, {"rounds": 2})
            ]
            done = await client.call_tool(
                "ask",
                {
                    "task": "@demo what is in notes.txt?",
                    "mode": "execute",
                    "worktree": True,
                    "review": "demo",
                    "rounds": 1,
                },
            )
            return schema, bad, done

    schema, bad, done = anyio.run(main)
    assert {"worktree", "review", "rounds"} <= set(schema["properties"])
    assert [text(result) for result in bad] == [
        "worktree must be true or false",
        "review must name an agent, e.g. 'gemini'",
        "rounds must be a whole number of 1 or more",
        "rounds counts review rounds; give review too",
    ]
    assert all(result.is_error for result in bad)
    # the demo agent answers in prose, never with crew:verdict: its words stand as a finding, not approved
    [data] = done.structured_content["results"]
    assert done.is_error and data["exit_code"] == 6
    assert data["review"]["rounds"] == 1 and data["review"]["verdict"] == "changes"
    assert data["branch"] == f"crew/{data['run_id']}/demo" and Path(data["worktree"]).is_dir()
    assert f"`crew apply {data['run_id']} demo` takes them into the checkout]" in text(done)
    assert "[crew: @demo did not approve the change in 1 round: [medium] (no file): " in text(done)
    assert status(project) == ""


@pytest.mark.slow
def test_ask_past_the_depth_limit_starts_no_cli(project, tmp_path):
    params = serve(project, tmp_path)
    params.env["CREW_ASK_DEPTH"] = "2"  # as if an agent asked by an agent had started this server

    async def main():
        async with session(params) as client:
            return await client.call_tool("ask", {"task": "@slow hello"})

    result = anyio.run(main)
    assert result.is_error and "2 asks deep" in text(result)
    assert not (tmp_path / "pids" / "slow").exists()


@pytest.mark.slow
def test_a_cancelled_ask_ends_its_cli_and_the_server_goes_on(project, tmp_path):
    async def main():
        async with session(serve(project, tmp_path)) as client:
            with anyio.move_on_after(20) as scope:
                async with anyio.create_task_group() as group:
                    group.start_soon(client.call_tool, "ask", {"task": "@slow hello"})
                    pid = await anyio.to_thread.run_sync(slow_pid, tmp_path)  # while it runs: found by its program
                    group.cancel_scope.cancel()  # the SDK sends notifications/cancelled
            assert not scope.cancelled_caught
            assert await anyio.to_thread.run_sync(gone, pid)
            return await client.call_tool("read_file", {"path": "notes.txt"})

    assert not anyio.run(main).is_error


@pytest.mark.slow
def test_a_cancelled_tool_call_ends_its_command_and_the_server_goes_on(project, tmp_path):
    command = f"echo $$ > {tmp_path / 'pids' / 'slow'}; exec sleep 600"  # outside the project: no sandbox here

    async def main():
        async with session(serve(project, tmp_path, "--execute", "--sandbox", "off")) as client:
            with anyio.move_on_after(20) as scope:
                async with anyio.create_task_group() as group:
                    group.start_soon(client.call_tool, "run_command", {"command": command})
                    pid = await anyio.to_thread.run_sync(slow_pid, tmp_path)
                    group.cancel_scope.cancel()  # the SDK sends notifications/cancelled
            assert not scope.cancelled_caught
            assert await anyio.to_thread.run_sync(gone, pid)
            return await client.call_tool("read_file", {"path": "notes.txt"})

    assert "deploy window" in text(anyio.run(main))


@pytest.mark.slow
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
    assert '@demo calls crew:read_file {"path": "notes.txt"}' in status.structured_content["progress"]
    assert cancelled.structured_content["status"] == "cancelled"
    assert gone(pid)
    assert unknown.is_error and "no job 'nope'" in text(unknown)


# -- over streamable HTTP ---------------------------------------------------------------------------


@contextmanager
def http_server(project: Path, tmp_path: Path):
    """`crew mcp --http` on a free port: a function opening an initialized SDK client session on it
    (an async context manager), which sends the token."""
    proc = start_crew(["mcp", "--http", "127.0.0.1:0"], env={**env_for(tmp_path), "CREW_MCP_TOKEN": TOKEN}, cwd=project)

    @asynccontextmanager
    async def open_session():
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            yield client

    try:
        url = re.search(r"serving MCP at (\S+);", proc.stderr.readline()).group(1)
        yield open_session
    finally:
        end_group(proc)


@pytest.mark.slow
def test_streamable_http_serves_the_same_tools_with_progress(project, tmp_path):
    with http_server(project, tmp_path) as open_session:
        progress: list[str] = []

        async def on_progress(value, total, message):
            progress.append(message)

        async def main():
            async with open_session() as client:
                names = [tool.name for tool in (await client.list_tools()).tools]
                read_result = await client.call_tool("read_file", {"path": "notes.txt"})
                asked = await client.call_tool(
                    "ask", {"task": "@demo what is in notes.txt?"}, progress_callback=on_progress
                )
                return names, read_result, asked

        names, read_result, asked = anyio.run(main)
    assert "read_file" in names and "write_file" not in names
    assert "deploy window: Tuesday" in text(read_result)
    assert "deploy window: Tuesday" in text(asked) and "@demo answered" in progress


@pytest.mark.slow
def test_jobs_belong_to_the_session_that_started_them(project, tmp_path):
    with http_server(project, tmp_path) as open_session:

        async def main():
            async with open_session() as mine, open_session() as theirs:
                started = await mine.call_tool("ask", {"task": "@slow hello", "background": True})
                job = started.structured_content["id"]
                pid = await anyio.to_thread.run_sync(slow_pid, tmp_path)
                seen = await theirs.call_tool("job", {"id": job})
                cancelled = await theirs.call_tool("cancel", {"id": job})
                still = await anyio.to_thread.run_sync(running, pid)
                mine_cancelled = await mine.call_tool("cancel", {"id": job})
                return job, seen, cancelled, still, mine_cancelled, pid

        job, seen, cancelled, still, mine_cancelled, pid = anyio.run(main)
    assert seen.is_error and text(seen) == f"no job '{job}'; jobs of this session: none yet"
    assert cancelled.is_error and still  # another session's cancel stopped nothing
    assert mine_cancelled.structured_content["status"] == "cancelled" and gone(pid)


# -- the protocol, in-process ---------------------------------------------------------------------


def test_initialize_gives_instructions_naming_the_working_directory(tmp_path):
    server = McpServer(Config(agents=default_agents(), transcripts=False), tmp_path)
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}
    result = server.answer(message)["result"]
    assert result["protocolVersion"] == "2025-06-18" and str(tmp_path) in result["instructions"]


def test_a_tool_named_like_a_server_tool_is_a_server_error_not_bad_params(tmp_path):
    from crewbridge.config import read_config

    config = write_config(tmp_path / "crew.yaml", tools={"ask": {"command": ["true"], "read_only": True}})
    server = McpServer(read_config(config), tmp_path)
    server.answer({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}})
    answer = server.answer({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert answer["error"]["code"] == INTERNAL_ERROR
    assert "a tool is named 'ask', as crew mcp's own" in answer["error"]["message"]


@pytest.mark.slow
def test_execute_disarms_what_a_run_command_left_for_git_before_answering(project, tmp_path):
    """The attack of issue 31 through `crew mcp --execute`, sandboxed: a repository whose fsmonitor
    is the agent's, added as a gitlink. The result names it; the client's next git status runs nothing."""
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    marker = tmp_path / "ran"
    git = "git -c user.name=a -c user.email=a@a"
    plant = (
        f"{git} init -q sub && {git} -C sub commit -q --allow-empty -m x && "
        f"git -C sub config core.fsmonitor 'touch {marker}; false' && git add sub && echo planted"
    )

    async def main():
        async with session(serve(project, tmp_path, "--execute", "--sandbox", "required")) as client:
            return await client.call_tool("run_command", {"command": plant})

    result = anyio.run(main)
    assert not result.is_error and "planted" in text(result)
    assert "sub/.git: a new git repository" in text(result) and "sub: a gitlink added to the index" in text(result)
    subprocess.run(["git", "status"], cwd=project, capture_output=True, check=True)
    subprocess.run(["git", "status"], cwd=project / "sub", capture_output=True, check=False)
    assert not marker.exists()
    assert "160000" not in subprocess.run(["git", "ls-files", "-s"], cwd=project, capture_output=True, text=True).stdout
