"""Fallback through the `crew` command against the real CLIs and the mock model server: a provider
that answers 429 hands the task to the agent's fallback, with one line saying so; without a
fallback the run ends with exit 3 and the CLI's own words, naming the cause."""

from __future__ import annotations

import pytest

from clienv import cli_env as build_env
from clienv import require_cli
from crewcli import error_line, only_result, processes_in, run_crew, tool_block, write_config
from mockserver import MockServer, error

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("output", ["text", "json"])
def test_claude_rate_limited_falls_back_to_gemini_with_the_same_task_and_tools(
    output, tmp_path, mock_server, workdir, notes
):
    require_cli("claude"), require_cli("gemini")
    write_config(workdir / "crew.yaml", agents={"claude": {"fallback": ["gemini"]}})
    with MockServer() as gemini_mock:
        env = {
            **build_env("claude", mock_server.url, tmp_path / "home"),
            **build_env("gemini", gemini_mock.url, tmp_path / "home"),
        }
        mock_server.script(error(429, "Number of request tokens has exceeded your per-minute rate limit"))
        gemini_mock.script(tool_block("crew:read_file", path="notes.txt"), "Gemini: the code is 7-4-1.")
        args = ["query", *(["--json"] if output == "json" else []), "@claude what does notes.txt say?"]
        done = run_crew(args, env=env, cwd=workdir)
    assert processes_in(tmp_path) == []
    assert not gemini_mock.problems, gemini_mock.problems
    assert done.returncode == 0, done.stderr
    assert "crew: @claude cannot answer (rate limited (HTTP 429)); @gemini takes over\n" in done.stderr
    first, second = gemini_mock.requests
    assert "what does notes.txt say?" in first.text() and "crew:read_file" in first.text()
    assert notes in second.text()
    if output == "json":
        result = only_result(done.stdout)
        assert (result["agent"], result["fell_back_from"]) == ("gemini", "claude")
        assert result["answer"] == "Gemini: the code is 7-4-1."
    else:
        assert done.stdout.splitlines()[-2:] == [
            "── @gemini ──",
            "Gemini: the code is 7-4-1.",
        ] or done.stdout.splitlines()[-2:] == ["-- @gemini --", "Gemini: the code is 7-4-1."]


def test_without_a_fallback_a_429_is_exit_3_and_the_message_names_it(cli, crew, mock_server):
    mock_server.script(error(429, "rate limit reached for requests"))
    done = crew(cli, "query", f"@{cli} hi")
    assert done.returncode == 3
    line = error_line(done.stderr)
    assert line.startswith(f"crew: error: @{cli}: ") and "429" in line
