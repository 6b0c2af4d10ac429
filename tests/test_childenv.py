"""crew's own secrets stay with crew: the token of `crew mcp --http` (and of `crew ui`) reaches none of
what crew starts, neither a command the model runs nor a CLI an MCP ask starts nor a hook."""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from crewbridge.childenv import SECRETS, without_secrets
from crewbridge.sandbox import spawn
from crewcli import CREW, crew_env, executable, write_config

TOKENS = {"CREW_MCP_TOKEN": "mcp-token-0123456789abcdef", "CREW_UI_TOKEN": "ui-token-0123456789abcdef"}
SHOW = "echo ${CREW_MCP_TOKEN:-no-mcp-token} ${CREW_UI_TOKEN:-no-ui-token} ${CREW_LATER_TOKEN:-no-later-token}"


def test_the_secrets_are_left_out_and_everything_else_is_kept():
    env = {**TOKENS, "CREW_LATER_TOKEN": "x", "CREW_ASK_DEPTH": "1", "ANTHROPIC_API_KEY": "sk", "PATH": "/bin"}
    assert without_secrets(env) == {"CREW_ASK_DEPTH": "1", "ANTHROPIC_API_KEY": "sk", "PATH": "/bin"}
    assert set(TOKENS) == set(SECRETS)


def test_a_process_crew_starts_with_its_own_environment_does_not_inherit_them(monkeypatch, tmp_path):
    for name, value in {**TOKENS, "CREW_LATER_TOKEN": "x"}.items():
        monkeypatch.setenv(name, value)
    proc, launch = spawn(["sh", "-c", SHOW], sandbox=None, env=None, cwd=tmp_path, stdout=subprocess.PIPE)
    assert proc.communicate()[0] == b"no-mcp-token no-ui-token no-later-token\n"
    launch.ended()


# A configured CLI that answers with what its environment holds of the tokens.
SPY = """\
import os, sys
sys.stdin.read()
names = {"CREW_MCP_TOKEN": "no-mcp-token", "CREW_UI_TOKEN": "no-ui-token", "CREW_LATER_TOKEN": "no-later-token"}
print(" ".join(os.environ.get(name, absent) for name, absent in names.items()))
"""


def test_run_command_a_hook_and_the_cli_an_mcp_ask_starts_see_none_of_them(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    spy = executable(tmp_path / "bin" / "spy", SPY)
    write_config(
        work / "crew.yaml",
        providers={"spy": {"command": [str(spy)]}},
        agents={"spy": {"provider": "spy"}},
        hooks={"after_tool_call": [{"shell": f"{SHOW} > {tmp_path / 'hook-saw'}"}]},
    )
    env = crew_env(tmp_path / "home", **TOKENS, CREW_LATER_TOKEN="later-token-0123456789")
    subprocess.run([*CREW, "config", "trust", str(work / "crew.yaml")], env=env, check=True, capture_output=True)
    params = StdioServerParameters(command=sys.executable, args=[*CREW[1:], "mcp", "--execute"], env=env, cwd=work)

    async def main() -> tuple[str, str]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            ran = await client.call_tool("run_command", {"command": SHOW})
            asked = await client.call_tool("ask", {"task": "@spy what do you see?"})
            return ran.content[0].text, asked.content[0].text

    ran, asked = anyio.run(main)
    assert json.loads(ran)["output"] == "no-mcp-token no-ui-token no-later-token\n"
    assert "no-mcp-token no-ui-token no-later-token" in asked
    assert (tmp_path / "hook-saw").read_text() == "no-mcp-token no-ui-token no-later-token\n"
    assert not any(value in ran + asked for value in (*TOKENS.values(), "later-token-0123456789"))


def test_the_list_is_the_one_the_mcp_server_reads_its_token_from():
    from crewbridge.mcp.http import TOKEN_VARIABLE

    assert TOKEN_VARIABLE in SECRETS
