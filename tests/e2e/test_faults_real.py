"""Faults on the model's side, through the `crew` command on the real claude, gemini and codex: API
errors (500, 429, 401) before and after a tool call, slow replies, a reply slower than --timeout,
Ctrl-C while the model is streaming, and a model that never stops calling tools. After every run,
nothing the test started is left running."""

from __future__ import annotations

import json
import signal
import time

import pytest

from crewcli import end_group, error_line, processes_in, run_crew, start_crew, tool_block
from mockserver import error, reply

pytestmark = pytest.mark.e2e

# What each CLI says about an API error. Claude and Gemini pass the server's message on; Codex has
# its own words for a 500 and a 429.
SAYS = {
    ("claude", 500): "API Error: 500 the mock model is down",
    ("claude", 429): "API Error: Request rejected (429) · the mock model is down",
    ("claude", 401): "Failed to authenticate. API Error: 401 the mock model is down",
    ("gemini", 500): "the mock model is down",
    ("gemini", 429): "[API Error: the mock model is down]",
    ("gemini", 401): "the mock model is down",
    ("codex", 500): "experiencing high demand",
    ("codex", 429): "last status: 429 Too Many Requests",
    ("codex", 401): "unexpected status 401 Unauthorized: the mock model is down",
}


@pytest.mark.parametrize("status", [500, 429, 401])
def test_an_api_error_fails_with_the_clis_own_message_and_exit_3(status, cli, crew, mock_server):
    mock_server.script(error(status, "the mock model is down"))
    done = crew(cli, "query", f"@{cli} hello")
    assert done.returncode == 3
    message = error_line(done.stderr)
    assert message.startswith(f"crew: error: @{cli}: ") and SAYS[cli, status] in message
    assert done.stdout == ""
    assert len(mock_server.requests) == 1  # no retries


def test_an_api_error_after_a_tool_call_ends_the_run_the_same_way(cli, crew, mock_server, notes):
    mock_server.script(tool_block("crew:read_file", path="notes.txt"), error(500, "the mock model is down"))
    done = crew(cli, "query", f"@{cli} what does notes.txt say?")
    assert done.returncode == 3
    assert SAYS[cli, 500] in error_line(done.stderr)
    assert "crew:read_file notes.txt" in done.stderr
    assert notes in mock_server.requests[1].text()


def test_slow_replies_still_work_within_the_timeout(cli, crew, mock_server, notes):
    block = tool_block("crew:read_file", path="notes.txt")
    third = len(block) // 3
    mock_server.script(
        reply("Reading.\n", block[:third], block[third : 2 * third], block[2 * third :], delay=0.3),
        reply("The code ", "is ", "7-4-1.", delay=0.3),
    )
    done = crew(cli, "query", "--timeout", "30", f"@{cli} what does notes.txt say?")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The code is 7-4-1.\n"
    assert all(request.finished for request in mock_server.requests[1:])


def test_a_reply_slower_than_timeout_ends_the_cli_with_exit_124(cli, crew, mock_server):
    mock_server.script(reply("This ", "takes ", "far ", "too ", "long.", delay=5))
    done = crew(cli, "query", "--timeout", "3", f"@{cli} hello")
    assert done.returncode == 124
    assert "--timeout" in error_line(done.stderr)
    assert not any(request.finished for request in mock_server.requests)


def test_timeout_ends_a_tool_that_sleeps_with_the_cli_and_exits_124(cli, crew, mock_server, workdir):
    # `crew` checks afterwards that nothing it started runs on: the CLI, the shell, both sleeps
    mock_server.script(tool_block("crew:run_command", command="sleep 300 & sleep 300"), "never sent")
    started = time.monotonic()
    done = crew(cli, "execute", "--timeout", "5", f"@{cli} wait a while")
    assert time.monotonic() - started < 10  # a generous bound: without the run's deadline it took 60 s
    assert done.returncode == 124
    # the tool was given what was left of the 5 s; the run ends on the tool, or on a CLI still replying
    assert error_line(done.stderr) in (
        f"crew: error: @{cli} did not finish in 5s: crew:run_command was still running; crew ended it and "
        "everything the run started (raise --timeout if the task needs longer)",
        f"crew: error: '{cli}' gave no complete reply in time; it was stopped (raise --timeout if it needs longer)",
    )
    assert "command timed out after" in done.stderr
    assert len(mock_server.requests) == 1  # the time was up: no turn after the tool


def test_ctrl_c_while_the_model_streams_ends_the_cli_and_exits_130(cli, cli_env, mock_server, workdir, tmp_path):
    mock_server.script(reply("This ", "never ", "ends.", delay=30))
    proc = start_crew(["query", f"@{cli} hello"], env=cli_env(cli), cwd=workdir)
    try:
        while not mock_server.requests:  # the CLI is up and waiting for the model
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        end_group(proc)
    assert proc.returncode == 130
    assert "crew: interrupted" in err
    assert processes_in(tmp_path) == []
    [transcript] = (tmp_path / f"home-{cli}" / ".local" / "state" / "crewbridge" / "runs").glob("*.jsonl")
    last = json.loads(transcript.read_text().splitlines()[-1])
    assert (last["kind"], last["status"]) == ("end", "cancelled")


def test_a_model_that_keeps_calling_tools_stops_at_max_turns_with_exit_4(cli, crew, mock_server, notes):
    mock_server.script(*[tool_block("crew:read_file", path="notes.txt")] * 2)
    done = crew(cli, "query", "--max-turns", "2", f"@{cli} what does notes.txt say?")
    assert done.returncode == 4
    assert "still called tools after 2 turns; raise --max-turns" in error_line(done.stderr)
    assert len(mock_server.requests) == 2


def test_a_cli_that_fails_before_the_model_shows_the_line_that_names_the_fix(cli_env, mock_server, workdir):
    # gemini without its key says which variable on its first line, then "Update your environment…"
    env = {key: value for key, value in cli_env("gemini").items() if key != "GEMINI_API_KEY"}
    done = run_crew(["query", "@gemini hello"], env=env, cwd=workdir)
    assert done.returncode != 0
    assert "you must specify the GEMINI_API_KEY environment variable" in error_line(done.stderr)
    assert mock_server.requests == []
