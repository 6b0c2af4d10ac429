"""Each provider's command line and decoder, driven against the real claude, gemini and codex binaries
talking to the mock model server (a prompt on stdin, through crew's own process handling)."""

from __future__ import annotations

import json

import pytest
from crewbridge.providers.base import Turn

from clienv import run_cli
from crewbridge.base.decoded import Done
from mockserver import error, reply

pytestmark = pytest.mark.e2e

# The CLIs' own tools that write files or run commands (names as sent to the model API).
WRITE_TOOLS = {
    "claude": {"Bash", "Edit", "Write", "NotebookEdit", "Agent"},
    "gemini": {"write_file", "replace", "run_shell_command"},
}
MODELS = {"claude": "claude-sonnet-4-5", "gemini": "gemini-2.5-flash", "codex": "gpt-5.5"}


def sandbox_mode(request) -> str:
    """The sandbox codex says it ran the turn in (it reports it in a request header)."""
    return json.loads(request.headers["x-codex-turn-metadata"])["sandbox_mode"]


def test_a_plain_reply_decodes_to_exactly_the_mock_text(cli, cli_env, mock_server, workdir):
    mock_server.script(reply("Hello", " from ", "the mock\n", "second line"))
    run = run_cli(cli, Turn("say hello"), cli_env(cli), workdir)
    assert run.returncode == 0, run.stderr
    assert run.text == "Hello from the mock\nsecond line"
    assert run.session_id
    assert (run.usage[-1].input_tokens, run.usage[-1].output_tokens) == (11, 7)
    assert run.events[-1] == Done()
    assert run.failures == []
    [request] = mock_server.requests
    assert request.messages()[-1][0] == "user" and request.messages()[-1][1].endswith("say hello")


def test_query_mode_offers_only_the_clis_read_only_tools(cli, cli_env, mock_server, workdir):
    mock_server.script("ok")
    run = run_cli(cli, Turn("look around", mode="query"), cli_env(cli), workdir)
    assert run.returncode == 0, run.stderr
    [request] = mock_server.requests
    if cli == "codex":
        assert sandbox_mode(request) == "read-only"
    else:
        offered = set(request.tool_names())
        assert offered and not offered & WRITE_TOOLS[cli]
        if cli == "claude":
            assert offered == {"Read", "Glob", "Grep"}


def test_execute_mode_with_a_model_reaches_the_api_with_that_model(cli, cli_env, mock_server, workdir):
    mock_server.script("done")
    run = run_cli(cli, Turn("change things", mode="execute", model=MODELS[cli]), cli_env(cli), workdir)
    assert run.returncode == 0, run.stderr
    assert run.text == "done"
    [request] = mock_server.requests
    assert request.model == MODELS[cli]
    if cli == "codex":
        assert sandbox_mode(request) == "workspace-write"
    else:
        assert set(request.tool_names()) & WRITE_TOOLS[cli]


def test_a_resumed_query_carries_the_first_turns_history_and_stays_read_only(cli, cli_env, mock_server, workdir):
    env = cli_env(cli)
    mock_server.script(reply("Noted: ", "PAPAYA."), "It was PAPAYA.")
    first = run_cli(cli, Turn("Remember the word PAPAYA.", mode="execute"), env, workdir)
    assert first.returncode == 0, first.stderr
    second = run_cli(cli, Turn("Which word?", mode="query", session_id=first.session_id), env, workdir)
    assert second.returncode == 0, second.stderr
    assert second.text == "It was PAPAYA."
    assert second.session_id == first.session_id
    request = mock_server.requests[1]
    talk = request.messages()
    asked = next(
        i for i, (role, text) in enumerate(talk) if role == "user" and text.endswith("Remember the word PAPAYA.")
    )
    answered = talk.index(("assistant", "Noted: PAPAYA."))
    assert asked < answered < len(talk) - 1  # (codex notes the new sandbox in between)
    assert talk[-1][0] == "user" and talk[-1][1].endswith("Which word?")
    if cli == "codex":
        assert sandbox_mode(request) == "read-only"
    else:
        assert not set(request.tool_names()) & WRITE_TOOLS[cli]


def test_codex_resumed_with_another_model_keeps_the_history_through_its_compaction(cli_env, mock_server, workdir):
    """Resuming with a model other than the session's makes codex first ask the old model for a
    summary ("compaction"); the mock answers that aside, with the conversation itself."""
    env = cli_env("codex")
    mock_server.script("Noted: PAPAYA.", "It was PAPAYA.")
    first = run_cli("codex", Turn("Remember the word PAPAYA."), env, workdir)
    second = run_cli("codex", Turn("Which word?", session_id=first.session_id, model="gpt-5.5"), env, workdir)
    assert second.returncode == 0, second.stderr
    assert second.text == "It was PAPAYA."
    assert len(mock_server.aux) == 1
    last = mock_server.requests[-1]
    assert last.model == "gpt-5.5"
    assert "Remember the word PAPAYA." in last.text() and "Noted: PAPAYA." in last.text()


EXIT_ON_500 = {"claude": 1, "gemini": 244, "codex": 1}  # gemini exits with the HTTP status mod 256
MESSAGE_ON_500 = {
    "claude": "the mock model is down",
    "gemini": "the mock model is down",
    "codex": "high demand",
}  # codex shows its own words, not the server's


def test_an_api_error_500_gives_a_failure_and_a_non_zero_exit(cli, cli_env, mock_server, workdir):
    mock_server.script(error(500, "the mock model is down"))
    run = run_cli(cli, Turn("say hello"), cli_env(cli), workdir)
    assert run.returncode == EXIT_ON_500[cli]
    assert run.failures and all(MESSAGE_ON_500[cli] in f.message for f in run.failures)
    assert run.events[-1] == Done()
    assert run.text == ""
    assert len(mock_server.requests) == 1  # no retries


def test_a_200_kb_prompt_on_stdin_arrives_whole(cli, cli_env, mock_server, workdir):
    prompt = "BEGIN\n" + "".join(f"line {i}: ünïcödé ✓ {'x' * 40}\n" for i in range(3300)) + "END"
    assert len(prompt.encode()) > 200_000
    mock_server.script("received")
    run = run_cli(cli, Turn(prompt), cli_env(cli), workdir)
    assert run.returncode == 0, run.stderr
    assert run.text == "received"  # the output after a 200 KB echo (gemini) is not lost
    role, text = mock_server.requests[0].messages()[-1]
    assert role == "user" and text.endswith(prompt)
