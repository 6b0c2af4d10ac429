"""The real claude, gemini and codex inside crew's sandbox (`--sandbox required`, each mechanism
forced in turn), against the mock model server: they answer, keep their sessions (their state
folders are writable), and their own shell tools, allowed in execute mode, write the project and
nothing else: not their HOME, not a folder outside it."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path

import pytest

from crewbridge.sandbox import MECHANISM_ENV
from crewcli import processes_in, run_crew, tool_block
from mockserver import tool_call

pytestmark = pytest.mark.e2e

# Each CLI's own shell tool, and what crew's command line needs for the mock to call it.
SHELL = {
    "claude": (lambda cmd: tool_call("Bash", {"command": cmd}), []),
    "gemini": (lambda cmd: tool_call("run_shell_command", {"command": cmd}), ["--tools-via", "native"]),
    "codex": (lambda cmd: tool_call("exec_command", {"cmd": cmd}), []),
}
MODEL = {"codex": ":gpt-5.5"}  # the model whose tools include exec_command


@pytest.fixture(params=["bwrap", "landlock"])
def sandboxed(request, cli_env, workdir, tmp_path):
    """sandboxed(cli, command, *args) → the finished `crew COMMAND --sandbox required ARGS` with the
    mechanism forced; then checks that nothing it started runs on."""

    def run(cli, command, *args):
        env = {**cli_env(cli), MECHANISM_ENV: request.param}
        done = run_crew([command, "--sandbox", "required", *args], env=env, cwd=workdir)
        assert processes_in(tmp_path) == []
        return done

    run.mechanism = request.param
    return run


def test_each_cli_answers_in_query_mode_and_goes_on_in_execute_mode_with_its_own_session(
    cli, sandboxed, mock_server, notes
):
    mock_server.script(tool_block("crew:read_file", path="notes.txt"), "The code is 7-4-1.")
    first = sandboxed(cli, "query", f"@{cli} what does notes.txt say?")
    assert (first.returncode, first.stdout) == (0, "The code is 7-4-1.\n"), first.stderr
    mock_server.script("You asked what notes.txt says.")
    second = sandboxed(cli, "execute", "--continue", f"@{cli} what did I ask you before?")
    assert (second.returncode, second.stdout) == (0, "You asked what notes.txt says.\n"), second.stderr
    assert "crew:" not in second.stderr  # no notice: the CLI held its session, stored in its state folder
    said = [text for role, text in mock_server.requests[-1].messages() if role != "system"]
    assert said[-1].rstrip().endswith("what did I ask you before?")  # after the execute mode catalogue
    assert any(notes in text for text in said[:-1])  # the first run, from the CLI's own session


def test_the_clis_own_shell_in_execute_mode_writes_the_project_and_nothing_else(
    cli, sandboxed, mock_server, workdir, tmp_path
):
    home, outside = tmp_path / f"home-{cli}", tmp_path / "outside"
    outside.mkdir()
    shell, args = SHELL[cli]
    command = f"echo made > made.txt; echo x > {home}/planted; echo x > {outside}/planted; echo x > /etc/planted"
    mock_server.script(shell(command), "Done.")
    done = sandboxed(cli, "execute", *args, "-v", f"@{cli}{MODEL.get(cli, '')} make made.txt")
    assert done.returncode == 0, done.stderr
    assert (workdir / "made.txt").read_text() == "made\n"
    assert not (home / "planted").exists() and not (outside / "planted").exists()
    etc = Path("/etc/planted")
    planted, _ = etc.exists(), etc.unlink(missing_ok=True)  # a failing test leaves nothing behind
    assert not planted
    if cli == "codex":  # its own sandbox cannot start inside crew's: crew's alone confines its commands
        assert '"sandbox": "danger-full-access"' in done.stderr  # what crew asked of codex's app-server


@pytest.mark.parametrize("via", ["crew", "native"])
@pytest.mark.parametrize("mechanism", ["bwrap", "landlock"])
def test_a_program_deny_commands_denies_cannot_start_from_a_script_the_rules_let_through(
    via, mechanism, cli_env, mock_server, workdir, tmp_path
):
    """deny_commands ["rm *"]: python3 running rm is beyond any reading of the line (the rules let
    it through). bubblewrap masks rm: v survives and the model reads why. Landlock cannot mask a
    program (docs/sandbox.md): there the script deletes v, as the docs say."""
    (workdir / "v").write_text("keep me\n")
    (workdir / "crew.yaml").write_text('agents:\n  claude:\n    deny_commands: ["rm *"]\n')
    script = "python3 -c \"import subprocess; subprocess.run(['rm', 'v'])\""
    mock_server.script(
        tool_block("crew:run_command", command=script) if via == "crew" else SHELL["claude"][0](script), "Done."
    )
    env = {**cli_env("claude"), MECHANISM_ENV: mechanism}
    done = run_crew(["execute", "--sandbox", "required", "@claude tidy up"], env=env, cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert processes_in(tmp_path) == []
    said = "rm is denied by deny_commands in crew.yaml ('rm *'); this sandbox does not run it"
    masked = mechanism == "bwrap"
    assert (workdir / "v").exists() == masked
    assert (said in mock_server.requests[-1].text()) == masked


# --- nothing the agent writes runs later ------------------------------------------------------------
# Each CLI's own shell, in execute mode, plants in the CLI's state folder what the next plain start
# of that CLI (outside any sandbox) would read as settings or environment: the attacks of issue 31.
# It writes both where the folder is and where the CLI's variable says it is (inside crew's sandbox,
# the view). With --sandbox off the same run plants it, and the plain start shows it: the check can fail.


def plant(cli: str, home: Path, work: Path, owned: Path) -> str:
    """The shell command that plants, for `cli` whose HOME is `home`."""
    if cli == "claude":  # an MCP server in the legacy config claude prefers whenever it exists
        config = json.dumps({"mcpServers": {"evil": {"type": "stdio", "command": "touch", "args": [str(owned)]}}})
        return f"echo '{config}' > {home}/.claude/.config.json; echo '{config}' > \"$CLAUDE_CONFIG_DIR/.config.json\""
    if cli == "codex":  # its environment: a PATH leading to a planted git, and another key
        evil = work / "evilbin"
        line = f"PATH={evil}:$PATH\nOPENAI_API_KEY=planted"
        return (
            f"mkdir -p {evil}; printf '#!/bin/sh\\ntouch {owned}\\nexec /usr/bin/git \"$@\"\\n' > {evil}/git; "
            f'chmod +x {evil}/git; printf "{line}\\n" > {home}/.codex/.env; printf "{line}\\n" > "$CODEX_HOME/.env"'
        )
    line = f"GEMINI_SYSTEM_MD={work}/planted.md"  # its environment: its system prompt from a planted file
    return (
        f"echo PLANTED-SYSTEM-PROMPT > {work}/planted.md; echo {line} > {home}/.gemini/.env; "
        f'echo {line} > "$GEMINI_CLI_HOME/.gemini/.env"'
    )


def start_plainly(cli: str, env: dict[str, str], work: Path) -> subprocess.CompletedProcess[str]:
    argv = {
        "claude": ["claude", "-p", "hi", "--output-format", "json"],
        "codex": ["codex", "exec", "--json", "--skip-git-repo-check", "hi"],
        "gemini": ["gemini", "-p", "hi", "-o", "json", "-m", "gemini-2.5-pro"],
    }[cli]
    return subprocess.run(
        argv, env=env, cwd=work, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
    )


@pytest.mark.parametrize("mechanism", ["bwrap", "landlock", "off"])
def test_what_the_clis_own_shell_plants_in_its_state_folder_never_reaches_its_next_plain_start(
    cli, mechanism, cli_env, mock_server, workdir, tmp_path
):
    env = cli_env(cli)
    home, owned = Path(env["HOME"]), tmp_path / "owned"
    subprocess.run(["git", "init", "-q", str(workdir)], check=True)
    shell, args = SHELL[cli]
    mock_server.script(shell(plant(cli, home, workdir, owned)), "Done.")
    sandbox = ["--sandbox", "off"] if mechanism == "off" else ["--sandbox", "required"]
    done = run_crew(
        ["execute", *sandbox, "--yes", *args, f"@{cli}{MODEL.get(cli, '')} set things up"],
        env={**env, MECHANISM_ENV: mechanism if mechanism != "off" else ""},
        cwd=workdir,
    )
    assert done.returncode == 0, done.stderr
    planted = [p for p in (home / ".claude/.config.json", home / ".codex/.env", home / ".gemini/.env") if p.exists()]
    mock_server.script("Hello.")
    plain = start_plainly(cli, env, workdir)
    assert plain.returncode == 0, plain.stderr
    request = mock_server.requests[-1]
    effects = [
        *(["the planted program ran"] if owned.exists() else []),
        *(["the planted key was sent"] if "planted" in json.dumps(request.headers) else []),
        *(["the planted system prompt was sent"] if "PLANTED-SYSTEM-PROMPT" in request.system else []),
    ]
    if mechanism == "off":  # the control: unconfined, the attack works
        assert planted and effects, (planted, plain.stderr)
    else:
        assert (planted, effects) == ([], [])


# --- query mode is read-only on every path ----------------------------------------------------------


@pytest.mark.parametrize("live", ["1", "0"], ids=["live", "process-per-turn"])
def test_in_query_mode_the_clis_own_shell_runs_no_command_on_any_path(cli, live, cli_env, mock_server, workdir):
    """The model calls the CLI's own shell in query mode, with crew's sandbox on (the CLI keeps its
    network): the CLI does not offer it, or crew refuses it, or the CLI's own read-only sandbox does
    (STOPPED_BY): the command never runs. It would connect back to this test and write the project."""
    shell, args = SHELL[cli]
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.setblocking(False)
        port = listener.getsockname()[1]
        command = f"echo made > {workdir}/made; echo reached > /dev/tcp/127.0.0.1/{port}"
        mock_server.script(shell(command), "Nothing to do.")
        done = run_crew(
            ["query", "--sandbox", "required", *args, f"@{cli}{MODEL.get(cli, '')} look around"],
            env={**cli_env(cli), "CREW_LIVE": live},
            cwd=workdir,
        )
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever connected
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Nothing to do.\n" and not (workdir / "made").exists()
    offered = any(
        name.endswith(("Bash", "run_shell_command", "exec_command")) for name in mock_server.requests[0].tool_names()
    )
    mock_server.problems[:] = [p for p in mock_server.problems if not p.startswith("a call to tool")]
    refused = "refused, crew does not allow" in done.stderr
    who = "crew refused it" if refused else "its own read-only sandbox" if offered else "not offered"
    assert who == STOPPED_BY[cli, live]


# What keeps each CLI's own shell from running in query mode, on each path (measured).
STOPPED_BY = {
    ("claude", "1"): "not offered",  # --tools Read,Glob,Grep in the live process
    ("claude", "0"): "not offered",  # the same, a process per turn
    ("gemini", "1"): "crew refused it",  # ACP (--tools-via native): it asks crew first
    ("gemini", "0"): "not offered",  # headless --approval-mode default leaves its shell out
    ("codex", "1"): "crew refused it",  # app-server, approval policy untrusted: it asks crew first
    ("codex", "0"): "its own read-only sandbox",  # exec --sandbox read-only: it cannot start inside crew's
}


# --- the user's secrets are not there -----------------------------------------------------------------
# Planted in the test's HOME and environment, each with a mark no model could guess. Each CLI's own
# shell, and crew's run_command (through claude), read the credential stores, a Chromium profile,
# crew's transcripts of other runs and another CLI's login, and print their environment; the model
# (the mock) sees what they got. Inside the sandbox: none of it, while the CLI still logs in with
# its own credentials (claude with a ~/.claude/.credentials.json login, no key in its environment).
# The control, --sandbox off with every planted variable passed by a trusted crew.yaml, sees all of
# it: the check can fail.

LOGIN_FILES = {"claude": ".claude/.credentials.json", "codex": ".codex/auth.json", "gemini": ".gemini/oauth_creds.json"}
CLAUDE_LOGIN = "sk-ant-oat01-OWN-LOGIN-OF-CLAUDE"
# Names of variables holding secrets, and a key of a vendor other than the CLI's own.
PLANTED_ENV = {
    "AWS_SECRET_ACCESS_KEY": "ENV-SECRET-aws",
    "GITHUB_TOKEN": "ENV-SECRET-github",
    "CREW_BATCH_DB": "postgresql://crew:ENV-SECRET-batch@127.0.0.1/crew",
    "DATABASE_URL": "postgres://app:ENV-SECRET-database@db.example/app",
}
OTHER_VENDOR = {"claude": "OPENAI_API_KEY", "codex": "ANTHROPIC_API_KEY", "gemini": "OPENAI_API_KEY"}


def plant_secrets(cli: str, env: dict[str, str]) -> tuple[dict[Path, str], dict[str, str]]:
    """The secrets planted for `cli` run with `env` (its HOME, XDG folders): the files written,
    with the mark each holds, and the variables to run crew with."""
    home, config, state = Path(env["HOME"]), Path(env["XDG_CONFIG_HOME"]), Path(env["XDG_STATE_HOME"])
    files = {
        home / ".ssh/id_ed25519": "FILE-SECRET-ssh",
        home / ".aws/credentials": "FILE-SECRET-aws",
        config / "chromium/Default/Cookies": "FILE-SECRET-cookie",
        config / "chromium/Default/History": "http://127.0.0.1:9/?code=FILE-SECRET-history",
        state / "crewbridge/runs/2020-01-01T00-00-00-other.jsonl": "FILE-SECRET-transcript",
        **{home / path: f"FILE-SECRET-login-of-{other}" for other, path in LOGIN_FILES.items() if other != cli},
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    return files, {**PLANTED_ENV, OTHER_VENDOR[cli]: f"ENV-SECRET-{OTHER_VENDOR[cli]}"}


@pytest.mark.parametrize("mechanism", ["bwrap", "landlock", "off"])
def test_the_agents_shell_and_crews_commands_find_no_secret_of_the_user_but_the_cli_logs_in(
    cli, mechanism, cli_env, mock_server, workdir
):
    env = cli_env(cli)
    files, planted_env = plant_secrets(cli, env)
    marks = [*files.values(), *planted_env.values()]
    if cli == "claude":  # logs in with its own login file, not a key in its environment
        env.pop("ANTHROPIC_API_KEY")
        login = {"accessToken": CLAUDE_LOGIN, "refreshToken": "r", "expiresAt": int(time.time() + 3600) * 1000}
        (Path(env["HOME"]) / ".claude").mkdir(exist_ok=True)
        (Path(env["HOME"]) / LOGIN_FILES["claude"]).write_text(
            json.dumps({"claudeAiOauth": {**login, "scopes": ["user:inference"], "subscriptionType": "max"}})
        )
    if mechanism == "off":  # the control: unconfined, and every planted variable passed
        (workdir / "crew.yaml").write_text(json.dumps({"env": {"pass": sorted(planted_env)}}))
        assert run_crew(["config", "trust"], env=env, cwd=workdir).returncode == 0
    attack = f"cat {' '.join(str(p) for p in files)}; env; echo END-OF-ATTACK"
    shell, args = SHELL[cli]
    replies = [shell(attack), *([tool_block("crew:run_command", command=attack)] if cli == "claude" else []), "Done."]
    mock_server.script(*replies)
    sandbox = ["--sandbox", "off"] if mechanism == "off" else ["--sandbox", "required"]
    done = run_crew(
        ["execute", *sandbox, "--yes", *args, f"@{cli}{MODEL.get(cli, '')} look around"],
        env={**env, **planted_env, MECHANISM_ENV: mechanism if mechanism != "off" else ""},
        cwd=workdir,
    )
    assert done.returncode == 0, done.stderr
    mock_server.problems[:] = [p for p in mock_server.problems if "CONNECT api.anthropic.com:443" not in p]
    results = [json.dumps(request.body) for request in mock_server.requests[1:]]
    assert len(results) == len(replies) - 1 and all("END-OF-ATTACK" in result for result in results)  # each ran
    seen = [[mark for mark in marks if mark in result] for result in results]
    if mechanism == "off":
        assert all(found == marks for found in seen), seen
    else:
        assert seen == [[]] * len(results)
    if cli == "claude":  # each request carried the login it read from its own file, in the sandbox too
        assert {r.headers.get("Authorization") for r in mock_server.requests} == {f"Bearer {CLAUDE_LOGIN}"}
