"""Fixtures for running the `crew` command itself against the real CLIs and the mock model server."""

from __future__ import annotations

import pytest

from crewcli import processes_in, run_crew

SECRET = "the launch code is 7-4-1"  # only notes.txt holds it: no model could guess it


@pytest.fixture
def crew(cli_env, workdir, tmp_path):
    """crew(cli, *args, input=None) → the finished `crew ARGS` in the work directory, with `cli`'s
    scratch env (and `input` on stdin); then checks that nothing it started runs on."""

    def run(cli, *args, input=None):
        done = run_crew(list(args), env=cli_env(cli), cwd=workdir, input=input)
        assert processes_in(tmp_path) == []
        return done

    return run


@pytest.fixture
def notes(workdir) -> str:
    """notes.txt in the work directory; → what it says."""
    (workdir / "notes.txt").write_text(SECRET + "\n")
    return SECRET
