"""Fixtures for running the `crew` command itself against the real CLIs and the mock model server."""

from __future__ import annotations

import pytest

from clienv import user_mcp_starts
from crewcli import processes_in, run_crew

SECRET = "the launch code is 7-4-1"  # only notes.txt holds it: no model could guess it


@pytest.fixture
def crew(cli_env, mock_server, workdir, tmp_path):
    """crew(cli, *args, input=None) → the finished `crew ARGS` in the work directory, with `cli`'s
    env (and `input` on stdin); then checks that nothing it started runs on, and that it started
    none of the MCP servers the user added to the CLI in its lived-in home."""

    def run(cli, *args, input=None):
        env = cli_env(cli)
        started = user_mcp_starts(mock_server, tmp_path)
        done = run_crew(list(args), env=env, cwd=workdir, input=input)
        assert processes_in(tmp_path) == []
        assert user_mcp_starts(mock_server, tmp_path) == started, "crew's run started the user's own MCP server"
        return done

    return run


@pytest.fixture
def notes(workdir) -> str:
    """notes.txt in the work directory; → what it says."""
    (workdir / "notes.txt").write_text(SECRET + "\n")
    return SECRET
