"""`crew mcp` with real MCP clients: the real claude, gemini and codex load it as an MCP server,
against the mock model server, whose replies call crew's tools natively (a tool_use, functionCall
or function_call to the tool the request offers). The answers depend on notes.txt, which only crew's
read_file gives them here."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from clienv import BIN, cli_env
from crewcli import end_group, processes_in, tool_block
from mockserver import tool_call

pytestmark = pytest.mark.e2e

SECRET = "the launch code is 7-4-1"
TOKEN = "e2e-mcp-token-0123456789abcdef"
CODEX_READ = 'const r = await tools.mcp__crew__read_file({path: "notes.txt"});\ntext(r);'  # from its code mode
CREW_MCP = [sys.executable, "-m", "crewbridge", "mcp"]


def all_env(mock_url: str, home: Path) -> dict[str, str]:
    """One environment in which claude, gemini and codex all talk to the mock (one scratch HOME):
    the MCP client's, and so that of the `crew mcp` it starts and of the agents that one asks."""
    env: dict[str, str] = {}
    for name in ("gemini", "codex", "claude"):
        env.update(cli_env(name, mock_url, home))
    env["XDG_STATE_HOME"] = str(home / "state")
    return env


def run(argv: list[str], env: dict[str, str], cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(stdin, timeout=120)
    finally:
        end_group(proc)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


STDIO = {"type": "stdio", "command": CREW_MCP[0], "args": CREW_MCP[1:]}


def claude(prompt: str, env: dict[str, str], cwd: Path, server: dict = STDIO) -> subprocess.CompletedProcess[str]:
    config = {"mcpServers": {"crew": server}}
    return run(
        [
            str(BIN / "claude"),
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--mcp-config",
            json.dumps(config),
            "--strict-mcp-config",
            "--allowedTools",
            "mcp__crew__read_file,mcp__crew__ask",
        ],
        env,
        cwd,
        stdin=prompt,
    )


def tool_results(request) -> str:
    """The text of the tool results a request carried back to the model."""
    return "\n".join(text for role, text in request.messages() if role in ("user", "tool"))


@pytest.fixture
def project(workdir: Path) -> Path:
    (workdir / "notes.txt").write_text(SECRET + "\n")
    return workdir


def test_claude_calls_crews_read_file(mock_server, project, tmp_path):
    mock_server.script(tool_call("read_file", {"path": "notes.txt"}), "The code is 7-4-1.")
    done = claude("what is the launch code in notes.txt?", all_env(mock_server.url, tmp_path / "home"), project)
    assert done.returncode == 0, done.stderr
    first, second = mock_server.requests
    assert "mcp__crew__read_file" in first.tool_names()
    assert "mcp__crew__write_file" not in first.tool_names()  # query mode: not even listed
    assert SECRET in tool_results(second)
    assert json.loads(done.stdout.splitlines()[-1])["result"] == "The code is 7-4-1."
    assert processes_in(tmp_path) == []


@pytest.mark.parametrize("asked", ["gemini", "codex"])
def test_claude_asks_another_agent_through_crew(asked, mock_server, project, tmp_path):
    mock_server.script(
        tool_call("ask", {"task": f"@{asked} what is the launch code in notes.txt?"}),
        tool_block("crew:read_file", path="notes.txt"),  # the asked agent, through crew's catalogue
        f"{asked} says: 7-4-1",
        "They say the code is 7-4-1.",
    )
    done = claude("ask another agent for the launch code", all_env(mock_server.url, tmp_path / "home"), project)
    assert done.returncode == 0, done.stderr
    ask, asked_first, asked_second, last = mock_server.requests
    assert ask.vendor == "anthropic" and asked_first.vendor == asked_second.vendor != "anthropic"
    assert "crew:read_file" in asked_first.text()  # the asked agent got crew's catalogue
    assert SECRET in asked_second.text()
    assert f"{asked} says: 7-4-1" in tool_results(last)
    assert processes_in(tmp_path) == []


def gemini_settings(env: dict[str, str], server: dict) -> None:
    settings = Path(env["HOME"]) / ".gemini" / "settings.json"
    settings.write_text(json.dumps({**json.loads(settings.read_text()), "mcpServers": {"crew": server}}))


def gemini(prompt: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run([str(BIN / "gemini"), "-o", "stream-json", "-m", "gemini-2.5-flash", "-p", prompt], env, cwd)


def codex(prompt: str, env: dict[str, str], cwd: Path, *server: str) -> subprocess.CompletedProcess[str]:
    """codex exec with crew as MCP server `crew` (by default `crew mcp` on stdio; else `server`'s -c settings)."""
    server = server or (
        "-c",
        f"mcp_servers.crew.command={json.dumps(CREW_MCP[0])}",
        "-c",
        f"mcp_servers.crew.args={json.dumps(CREW_MCP[1:])}",
    )
    return run([str(BIN / "codex"), "exec", "--json", "--skip-git-repo-check", *server, prompt], env, cwd)


def test_gemini_calls_crews_read_file(mock_server, project, tmp_path):
    env = all_env(mock_server.url, tmp_path / "home")
    gemini_settings(env, {"command": CREW_MCP[0], "args": CREW_MCP[1:], "trust": True})
    mock_server.script(tool_call("read_file", {"path": "notes.txt"}), "The code is 7-4-1.")
    done = gemini("what is the launch code in notes.txt?", env, project)
    assert done.returncode == 0, done.stderr
    first, second = mock_server.requests
    assert "mcp_crew_read_file" in first.tool_names() and "read_file" in first.tool_names()  # its own, apart
    assert SECRET in tool_results(second)
    assert "The code is 7-4-1." in done.stdout
    assert processes_in(tmp_path) == []


def test_codex_calls_crews_read_file(mock_server, project, tmp_path):
    """codex 0.169 defers MCP tools behind its code mode: the model writes JavaScript for its `exec`
    tool that calls `tools.mcp__crew__read_file`, and codex calls crew mcp."""
    mock_server.script(tool_call("exec", {"code": CODEX_READ}), "The code is 7-4-1.")
    done = codex("what is the launch code in notes.txt?", all_env(mock_server.url, tmp_path / "home"), project)
    assert done.returncode == 0, done.stderr
    first, second = mock_server.requests
    assert "mcp__crew" in first.text() + json.dumps(first.body)  # listed among its deferred namespaces
    assert SECRET in tool_results(second)
    assert "The code is 7-4-1." in done.stdout
    assert processes_in(tmp_path) == []


# -- over streamable HTTP, with the token as docs/mcp.md shows --------------------------------------


@contextmanager
def crew_over_http(env: dict[str, str], cwd: Path):
    """`crew mcp --http` on a free port with CREW_MCP_TOKEN=TOKEN: its URL."""
    proc = subprocess.Popen(
        [*CREW_MCP, "--http", "127.0.0.1:0"],
        cwd=cwd,
        env={**env, "CREW_MCP_TOKEN": TOKEN},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        yield re.search(r"serving MCP at (\S+);", proc.stderr.readline()).group(1)
    finally:
        end_group(proc)


@pytest.mark.parametrize("client", ["claude", "gemini", "codex"])
def test_each_cli_calls_crews_read_file_over_http_with_the_token(client, mock_server, project, tmp_path):
    env = all_env(mock_server.url, tmp_path / "home")
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    prompt = "what is the launch code in notes.txt?"
    with crew_over_http(env, project) as url:
        if client == "claude":
            mock_server.script(tool_call("read_file", {"path": "notes.txt"}), "The code is 7-4-1.")
            done = claude(prompt, env, project, {"type": "http", "url": url, "headers": bearer})
        elif client == "gemini":
            gemini_settings(env, {"httpUrl": url, "headers": bearer, "trust": True})
            mock_server.script(tool_call("read_file", {"path": "notes.txt"}), "The code is 7-4-1.")
            done = gemini(prompt, env, project)
        else:
            mock_server.script(tool_call("exec", {"code": CODEX_READ}), "The code is 7-4-1.")
            done = codex(
                prompt,
                {**env, "CREW_MCP_TOKEN": TOKEN},
                project,
                "-c",
                f"mcp_servers.crew.url={json.dumps(url)}",
                "-c",
                'mcp_servers.crew.bearer_token_env_var="CREW_MCP_TOKEN"',
            )
    assert done.returncode == 0, done.stderr
    _first, second = mock_server.requests
    assert SECRET in tool_results(second)
    assert "The code is 7-4-1." in done.stdout


# -- crew's own runs start only the MCP servers crew gives them -----------------------------------------
# A server registered with the CLI's own command, named "crew" as `crew mcp install` names crew: it
# touches a file when started. A crew run must not start it (nor, had it been crew, crew again); an
# agent with user_mcp_servers: true passes the user's servers on, which shows the check can fail.

REGISTER = {
    "claude": ["claude", "mcp", "add", "--scope", "user", "crew", "--", "touch"],
    "gemini": ["gemini", "mcp", "add", "--scope", "user", "crew", "touch"],
    "codex": ["codex", "mcp", "add", "crew", "--", "touch"],
}


@pytest.mark.parametrize(
    "path, options, passed_on",
    [
        ("live", [], False),
        ("native", ["--tools-via", "native"], False),
        ("process-per-turn", [], False),
        ("live", [], True),
    ],
)
def test_a_crew_run_starts_none_of_the_mcp_servers_the_user_registered(
    cli, path, options, passed_on, cli_env, mock_server, workdir, tmp_path
):
    env = {**cli_env(cli), "CREW_LIVE": "0" if path == "process-per-turn" else "1"}
    started = tmp_path / "started"
    registered = subprocess.run([*REGISTER[cli], str(started)], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert registered.returncode == 0, registered.stderr
    (workdir / "crew.yaml").write_text(json.dumps({"agents": {cli: {"user_mcp_servers": passed_on}}}))
    assert run([*CREW_MCP[:-1], "config", "trust"], env, workdir).returncode == 0
    mock_server.script("Hello.")
    model = ":gpt-5.5" if cli == "codex" else ""
    done = run([*CREW_MCP[:-1], "query", "--sandbox", "off", *options, f"@{cli}{model} say hello"], env, workdir)
    assert done.returncode == 0, done.stderr
    assert started.exists() == passed_on
