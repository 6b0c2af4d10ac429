"""No secret of the user's or of crew's reaches what crew starts unless named: crew's CREW_* settings,
variables whose names say they hold a secret or that are a vendor's key, URLs with a password. A
CLI gets its own logins and what crew sets for it; crew.yaml's env.pass lets named ones through. And
every place crew starts a process goes through the rule."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from crewbridge.sandbox import spawn
from crewbridge.system.childenv import SECRETS, withheld, withheld_names, without_secrets
from crewcli import CREW, crew_env, executable, write_config

TOKENS = {"CREW_MCP_TOKEN": "mcp-token-0123456789abcdef", "CREW_UI_TOKEN": "ui-token-0123456789abcdef"}
# The user's own secrets, each as a person's environment holds it.
USERS = {
    "AWS_ACCESS_KEY_ID": "AKIA-secret-id",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "AWS_SESSION_TOKEN": "aws-session",
    "GITHUB_TOKEN": "gh-token",
    "GH_TOKEN": "gh-token-2",
    "NPM_TOKEN": "npm-token",
    "OPENAI_API_KEY": "openai-key",
    "SSH_AUTH_SOCK": "/run/user/1000/keyring/ssh",
    "PGPASSWORD": "pg-password",
    "MYSQL_PWD": "mysql-password",
    "DATABASE_URL": "postgres://app:db-password@db.example/app",
    "CREW_BATCH_DB": "postgresql://crew:batch-password@127.0.0.1/crew",
    "SENTRY_DSN": "https://public:dsn-secret@sentry.example/1",
    "GOOGLE_APPLICATION_CREDENTIALS": "/home/me/sa.json",
    "npm_config_//registry.npmjs.org/:_authToken": "npm-auth-token",
}
SHOW = "echo ${CREW_MCP_TOKEN:-no-mcp-token} ${CREW_UI_TOKEN:-no-ui-token} ${GITHUB_TOKEN:-no-github-token}"


@pytest.mark.parametrize("name", [*TOKENS, "CREW_LATER_TOKEN", "CREW_SANDBOX_MECHANISM", "CREW_LIVE", *USERS])
def test_crews_settings_and_the_users_secrets_are_withheld(name):
    assert withheld(name, {**TOKENS, **USERS}.get(name, "x"))


@pytest.mark.parametrize(
    "name, value",
    [
        ("PATH", "/usr/bin"),
        ("HOME", "/home/me"),
        ("GIT_AUTHOR_NAME", "Me"),  # AUTH, not a secret's word
        ("MONKEY", "x"),  # KEY, but not _KEY
        ("ANTHROPIC_BASE_URL", "https://gateway.example/v1"),
        ("HTTPS_PROXY", "http://me:proxy-password@proxy.example:3128"),  # the CLI needs its proxy
        ("NO_PROXY", "127.0.0.1,localhost"),
        ("REPO_URL", "https://github.com/me/repo.git"),
    ],
)
def test_the_rest_is_kept(name, value):
    assert not withheld(name, value)


def test_names_passed_go_through_but_crews_own_tokens_never():
    env = {**TOKENS, **USERS, "PATH": "/bin", "CREW_ASK_DEPTH": "1"}
    assert without_secrets(env) == {"PATH": "/bin"}
    kept = without_secrets(env, passed=["OPENAI_API_KEY", "CREW_ASK_DEPTH", *TOKENS])
    assert kept == {"PATH": "/bin", "OPENAI_API_KEY": "openai-key", "CREW_ASK_DEPTH": "1"}
    assert set(TOKENS) == set(SECRETS)
    assert withheld_names(env, passed=["CREW_ASK_DEPTH"]) == sorted({*TOKENS, *USERS})


def test_a_process_crew_starts_with_its_own_environment_inherits_none_of_them(monkeypatch, tmp_path):
    for name, value in {**TOKENS, **USERS}.items():
        monkeypatch.setenv(name, value)
    proc, launch = spawn(["env"], sandbox=None, env=None, cwd=tmp_path, stdout=subprocess.PIPE)
    seen = proc.communicate()[0].decode()
    launch.ended()
    assert [value for value in (*TOKENS.values(), *USERS.values()) if value in seen] == []


# A configured CLI that answers with what its environment holds of the tokens and keys.
SPY = """\
import os, sys
sys.stdin.read()
names = ("CREW_MCP_TOKEN", "CREW_UI_TOKEN", "GITHUB_TOKEN", "OPENAI_API_KEY", "SPY_API_KEY", "PASSED_TOKEN")
print(" ".join(f"{name}={os.environ.get(name, '-')}" for name in names))
"""
SECRETS_SEEN = (
    "CREW_MCP_TOKEN=- CREW_UI_TOKEN=- GITHUB_TOKEN=- OPENAI_API_KEY=- SPY_API_KEY=spy-key PASSED_TOKEN=passed"
)


def test_run_command_a_hook_and_the_cli_an_mcp_ask_starts_get_only_what_is_theirs(tmp_path):
    """The spy CLI's provider declares SPY_API_KEY its login, crew.yaml passes PASSED_TOKEN (to the
    CLIs and hooks, not to run_command); no one gets crew's tokens, GITHUB_TOKEN or another
    vendor's key. The hook still gets the variables crew sets for it."""
    work = tmp_path / "work"
    work.mkdir()
    spy = executable(tmp_path / "bin" / "spy", SPY)
    hook = f"{SHOW} ${{PASSED_TOKEN:-no-passed}} $CREW_HOOK_EVENT > {tmp_path / 'hook-saw'}"
    write_config(
        work / "crew.yaml",
        providers={"spy": {"command": [str(spy)], "login_env": ["SPY_API_KEY"]}},
        agents={"spy": {"provider": "spy"}},
        hooks={"after_tool_call": [{"shell": hook}]},
        env={"pass": ["PASSED_TOKEN"]},
    )
    secrets = {"GITHUB_TOKEN": "github-0123456789", "OPENAI_API_KEY": "openai-0123456789"}
    env = crew_env(tmp_path / "home", **TOKENS, **secrets, SPY_API_KEY="spy-key", PASSED_TOKEN="passed")
    subprocess.run([*CREW, "config", "trust", str(work / "crew.yaml")], env=env, check=True, capture_output=True)
    params = StdioServerParameters(command=sys.executable, args=[*CREW[1:], "mcp", "--execute"], env=env, cwd=work)

    async def main() -> tuple[str, str]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            ran = await client.call_tool("run_command", {"command": f"{SHOW} ${{PASSED_TOKEN:-no-passed}}"})
            asked = await client.call_tool("ask", {"task": "@spy what do you see?"})
            return ran.content[0].text, asked.content[0].text

    ran, asked = anyio.run(main)
    assert json.loads(ran)["output"] == "no-mcp-token no-ui-token no-github-token no-passed\n"
    assert SECRETS_SEEN in asked
    assert (tmp_path / "hook-saw").read_text() == "no-mcp-token no-ui-token no-github-token passed after_tool_call\n"
    assert not any(value in ran + asked for value in (*TOKENS.values(), *secrets.values()))


def test_the_list_is_the_one_the_mcp_server_reads_its_token_from():
    from crewbridge.protocol.mcp_http import TOKEN_VARIABLE

    assert TOKEN_VARIABLE in SECRETS


# Every place crew starts a process, and how it holds to the rule. A new one fails this test until
# it is decided here (and in docs/sandbox.md).
STARTS = {
    "crewbridge.sandbox:spawn": "the rule",  # the CLIs, run_command, command tools, hooks, doctor's probes
    "crewbridge.system.git:run_git": "the rule",  # crew's own git (crew batch's forge commands pass FORGE)
    "crewbridge.sandbox.bwrap:probe": "the rule",  # crew doctor's try of bwrap
    "crewbridge.mcp.install:_run": "the rule",  # `claude mcp add`, … for crew mcp install
    "crewbridge.acp.check:__aenter__": "the user's own command",  # crew acp check's agent, as the user runs it
    "crewbridge.acp.commands:acp_login_command": "the user's own command",  # the CLI's login, exec'd in its place
    "crewbridge.system.forge:_gh_token": "the rule",  # `gh auth token` for a pull request's forge
    "crewbridge.sandbox.netns:_forked": "no program",  # a fork of crew that makes a sandbox's doors, then exits
}
PACKAGES = {"crewbridge": "crewbridge", "providers": "crewbridge.providers", "tools": "crewbridge.tools"}
STARTERS = {
    "subprocess": {"Popen", "run", "call", "check_call", "check_output", "getoutput", "getstatusoutput"},
    "os": {"system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp", "spawnv", "spawnvp", "spawnl"}
    | {"execv", "execve", "execvp", "execvpe", "execl", "execlp"},
    "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
    "pty": {"spawn", "fork"},
    "pexpect": {"spawn", "run"},
}


def test_every_place_crew_starts_a_process_holds_to_the_rule():
    root = Path(__file__).resolve().parent.parent
    found = {}
    for folder, package in PACKAGES.items():
        for path in sorted((root / folder).rglob("*.py")):
            module = ".".join([package, *path.relative_to(root / folder).with_suffix("").parts]).removesuffix(
                ".__init__"
            )
            tree = ast.parse(path.read_text())
            for function in ast.walk(tree):
                if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                calls = [node.func for node in ast.walk(function) if isinstance(node, ast.Call)]
                if any(
                    isinstance(call, ast.Attribute)
                    and isinstance(call.value, ast.Name)
                    and call.attr in STARTERS.get(call.value.id, ())
                    for call in calls
                ):
                    found[f"{module}:{function.name}"] = ast.get_source_segment(path.read_text(), function) or ""
    assert set(found) == set(STARTS)
    for where, how in STARTS.items():
        assert ("without_secrets(" in found[where]) == (how == "the rule"), where
