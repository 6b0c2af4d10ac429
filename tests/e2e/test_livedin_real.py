"""The real claude, gemini and codex from homes where each already ran plainly in the project's own
folder, as on a user's machine: its sessions of that folder, its project registries (gemini's
projects.json, claude's ~/.claude.json, codex's databases), what it writes about itself, the MCP
servers the user added (for the whole user, and for claude also for that folder), the folder
trusted. Every e2e test starts from a lived-in home (tests/conftest.py `cli_env`, where the CLI ran
in another folder); these add the runs in this very folder, and the state files the sandbox once
could not serve: gemini waited for ever for a lock beside its projects.json (docs/sandbox.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from clienv import PLAIN_ANSWER, USER_MCP, plainly, run_plainly, trust, user_mcp_starts
from crewbridge.sandbox import MECHANISM_ENV
from crewcli import processes_in, run_crew, tool_block
from mockserver import tool_call

pytestmark = pytest.mark.e2e

MODEL = {"codex": ":gpt-5.5"}  # the model codex offers crew's native tools to by name
TIMEOUT = ["--timeout", "90"]  # a CLI that waits for ever fails the test in bounded time


@pytest.fixture
def lived_in(cli_env, mock_server, workdir, tmp_path):
    """lived_in(cli) → the environment of `cli`, whose (lived-in) home also saw it run plainly twice
    in the work directory, that folder trusted, and for claude a server of the user's added for that
    folder alone (`claude mcp add --scope local`); the mock's record of those plain runs cleared."""

    def make(cli: str) -> dict[str, str]:
        env = cli_env(cli)
        mock_server.respond(lambda request: PLAIN_ANSWER)
        if cli == "claude":
            server = ["localtools", "--", sys.executable, str(USER_MCP), mock_server.url]
            plainly(env, workdir, ["claude", "mcp", "add", "--scope", "local", *server])
        run_plainly(cli, env, workdir)
        trust(cli, env, workdir)
        mock_server.responder = None
        mock_server.requests.clear()
        return env

    return make


def crew_in(env: dict[str, str], workdir: Path, tmp_path: Path, *args: str, input: str | None = None):
    done = run_crew([*args], env=env, cwd=workdir, input=input)
    assert processes_in(tmp_path) == []
    return done


def test_every_path_answers_from_a_home_where_the_cli_ran_in_this_folder(
    cli, lived_in, mock_server, notes, workdir, tmp_path
):
    env = lived_in(cli)
    starts = user_mcp_starts(mock_server, tmp_path)
    assert starts >= 2  # the plain runs started the user's servers: crew's must not
    at = f"@{cli}{MODEL.get(cli, '')}"
    runs = [
        # the text catalogue in one live process, a crew tool called
        (["query", f"{at} what does notes.txt say?"], None, {}),
        # crew's tools through the CLI's own channel, in execute mode
        (["execute", "--tools-via", "native", f"{at} what does notes.txt say?"], None, {}),
        # a process per turn (the CLI's own resume between turns)
        (["query", f"{at} what does notes.txt say?"], None, {"CREW_LIVE": "0"}),
        # a chat of two messages, then the last run continued
        (["chat", at], "What does notes.txt say?\nAnd now?\n", {}),
        (["query", "--continue", f"{at} and again?"], None, {}),
    ]
    mock_server.script(
        tool_block("crew:read_file", path="notes.txt"),
        "It says 7-4-1.",
        tool_call("read_file", {"path": "notes.txt"}),
        "It says 7-4-1.",
        tool_block("crew:read_file", path="notes.txt"),
        "It says 7-4-1.",
        "I will look.",
        "Still 7-4-1.",
        "As before: 7-4-1.",
    )
    for args, stdin, extra in runs:
        done = crew_in(
            {**env, **extra}, workdir, tmp_path, *args[:1], "--sandbox", "required", *TIMEOUT, *args[1:], input=stdin
        )
        assert done.returncode == 0, (args, done.stderr)
    assert done.stdout == "As before: 7-4-1.\n"
    assert mock_server.pending == 0
    said = mock_server.requests[-1].text()
    assert "And now?" in said and "and again?" in said  # the CLI held its session across the runs
    assert user_mcp_starts(mock_server, tmp_path) == starts  # none of the user's servers started


@pytest.mark.parametrize(
    "mechanism, held", [("bwrap", False), ("landlock", False), ("bwrap", True)], ids=["bwrap", "landlock", "held"]
)
def test_gemini_answers_once_its_projects_json_exists(mechanism, held, lived_in, mock_server, workdir, tmp_path):
    """Any plain gemini run writes ~/.gemini/projects.json; gemini rewrites it at each start under a
    lock folder made beside the file (proper-lockfile, links resolved) and retries that lock with a
    doubling delay. Through a link in the view the lock could not be made: no request ever left.
    `held`: a lock folder left beside the real file, as by a plain gemini killed while it held it."""
    env = lived_in("gemini")
    registry = Path(env["HOME"]) / ".gemini" / "projects.json"
    assert str(workdir) in registry.read_text()
    if held:
        (registry.parent / "projects.json.lock").mkdir()
    mock_server.script("Hello.")
    env = {**env, MECHANISM_ENV: mechanism}
    done = crew_in(env, workdir, tmp_path, "query", "--sandbox", "required", *TIMEOUT, "@gemini say hello")
    assert (done.returncode, done.stdout) == (0, "Hello.\n"), done.stderr
    assert str(workdir) in registry.read_text()  # the user's registry, as it was
