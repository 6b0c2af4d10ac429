"""Configuration files in layers, through the `crew` command and the real claude, gemini and codex
against the mock model server: a project's own crew.yaml cannot drop the rules of the user's."""

from __future__ import annotations

from pathlib import Path

import pytest

from crewcli import only_result, tool_block, write_config

pytestmark = pytest.mark.e2e


def test_the_users_deny_holds_in_a_project_with_its_own_crew_yaml(cli, crew, cli_env, mock_server, workdir, notes):
    user = Path(cli_env(cli)["XDG_CONFIG_HOME"]) / "crewbridge" / "crew.yaml"
    user.parent.mkdir(parents=True)
    write_config(user, agents={cli: {"deny": ["read_file"], "deny_commands": ["rm *"]}})
    write_config(workdir / "crew.yaml", agents={cli: {"timeout": 120, "deny": [], "deny_commands": []}})
    mock_server.script(
        tool_block("crew:read_file", path="notes.txt"),
        tool_block("crew:run_command", command="rm notes.txt"),
        "I may not.",
    )
    done = crew(cli, "execute", "--json", f"@{cli} read notes.txt, then remove it")
    assert done.returncode == 0, done.stderr
    assert [(c["name"], c["success"]) for c in only_result(done.stdout)["tool_calls"]] == [
        ("crew:read_file", False),
        ("crew:run_command", False),
    ]
    assert (workdir / "notes.txt").read_text() == notes + "\n"
    first, denied, forbidden = mock_server.requests
    assert "crew:list_files" in first.text() and "crew:read_file" not in first.text()  # not even offered
    assert "tool 'read_file' is not allowed for agent" in denied.text()
    assert "the command policy forbids 'rm notes.txt'" in forbidden.text()
    assert all(notes not in request.text() for request in mock_server.requests)
