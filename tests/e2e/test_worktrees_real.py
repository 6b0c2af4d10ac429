"""Agents in worktrees of their own (`crew execute --worktree`), through the `crew` command against
the real claude, gemini and codex and the mock model server: each CLI runs in its worktree, writes
there and nowhere else; the person's checkout is untouched until `crew apply`; `crew worktrees clean`
keeps what is not applied unless forced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clienv import cli_env as build_env
from clienv import require_cli
from crewcli import error_line, only_result, processes_in, run_crew, tool_block
from gitrepo import make_repo, status
from mockserver import MockServer

pytestmark = pytest.mark.e2e


def test_each_cli_works_in_its_worktree_and_cannot_reach_the_checkout(cli, crew, mock_server, workdir, tmp_path):
    make_repo(workdir, {"notes.txt": "deploy: Friday\n"})
    mock_server.script(
        tool_block("crew:write_file", path="todo.md", content="- ship it\n")
        + tool_block("crew:read_file", path=str(workdir / "notes.txt")),
        "Wrote the todo.",
    )
    done = crew(cli, "execute", "--json", "--worktree", f"@{cli} write todo.md, then read notes.txt")
    assert done.returncode == 0, done.stderr
    result = only_result(done.stdout)
    worktree = Path(result["worktree"])
    kept = tmp_path / f"home-{cli}" / ".local" / "state" / "crewbridge" / "worktrees"
    assert worktree.parent == next(kept.glob("work-*")).resolve() / result["run_id"]  # outside the checkout
    assert result["branch"] == f"crew/{result['run_id']}/{cli}"
    assert (worktree / "todo.md").read_text() == "- ship it\n"
    assert result["changes"] == [{"path": "todo.md", "status": "added", "added": 1, "removed": 0}]
    assert status(workdir) == ""  # nothing in the person's checkout
    assert str(worktree) in json.dumps(mock_server.requests[0].body)  # the CLI tells its model where it runs
    # the checkout is outside the agent's working directory: crew's tools refuse it
    assert [(c["name"], c["success"]) for c in result["tool_calls"]] == [
        ("crew:write_file", True),
        ("crew:read_file", False),
    ]
    assert "is outside the working directory" in result["tool_calls"][1]["error"]
    assert str(worktree) in mock_server.requests[1].text()  # the error names where the agent works
    assert not (workdir / "todo.md").exists()


def test_two_agents_write_the_same_file_apart_then_one_is_applied_and_all_are_cleaned(tmp_path, mock_server, workdir):
    require_cli("claude"), require_cli("gemini")
    make_repo(workdir, {"notes.txt": "deploy: Friday\nowner: dana\n"})
    with MockServer() as gemini_mock:
        env = {
            **build_env("claude", mock_server.url, tmp_path / "home"),
            **build_env("gemini", gemini_mock.url, tmp_path / "home"),
        }
        mock_server.script(
            tool_block("crew:write_file", path="notes.txt", content="deploy: Tuesday\nowner: dana\n"),
            "Claude: Tuesday.",
        )
        gemini_mock.script(
            tool_block("crew:write_file", path="notes.txt", content="deploy: Monday\nowner: dana\n"), "Gemini: Monday."
        )
        done = run_crew(["execute", "--worktree", "@claude @gemini set the deploy day"], env=env, cwd=workdir)
    assert processes_in(tmp_path) == []
    assert not gemini_mock.problems, gemini_mock.problems
    assert done.returncode == 0, done.stderr
    assert "Claude: Tuesday." in done.stdout and "Gemini: Monday." in done.stdout
    run = done.stderr.split("crew apply ")[1].split()[0]
    store = next((tmp_path / "home" / ".local" / "state" / "crewbridge" / "worktrees").glob("work-*")).resolve()
    for agent in ("claude", "gemini"):
        assert (
            f"crew: @{agent}: 1 file changed, +1 -1, on branch crew/{run}/{agent} in "
            f"{store / run / agent}\n  M notes.txt +1 -1\n"
        ) in done.stderr
    assert (workdir / "notes.txt").read_text() == "deploy: Friday\nowner: dana\n" and status(workdir) == ""

    applied = run_crew(["apply", run, "claude"], env=env, cwd=workdir)
    assert applied.returncode == 0, applied.stderr
    assert (workdir / "notes.txt").read_text() == "deploy: Tuesday\nowner: dana\n"
    assert status(workdir) == " M notes.txt\n"  # uncommitted, for the person to look at
    conflict = run_crew(["apply", run, "gemini"], env=env, cwd=workdir)
    assert conflict.returncode == 1 and "nothing was applied" in error_line(conflict.stderr)
    assert (workdir / "notes.txt").read_text() == "deploy: Tuesday\nowner: dana\n"

    kept = run_crew(["worktrees", "clean", run], env=env, cwd=workdir)  # claude's were applied: it goes
    assert kept.returncode == 1 and kept.stderr.count("uncommitted changes (1 file)") == 1
    assert f"/claude and branch crew/{run}/claude (its changes are in your checkout" in kept.stdout
    removed = run_crew(["worktrees", "clean", "--force"], env=env, cwd=workdir)
    assert removed.returncode == 0 and removed.stdout.count("removed ") == 1
    assert not store.exists()  # the repository's folder goes with its last worktree
    assert status(workdir) == " M notes.txt\n"
