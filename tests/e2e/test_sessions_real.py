"""Continuing a run in a later command (`--continue`, `--resume RUN_ID`) against the real claude,
gemini and codex and the mock model server: the model is sent the earlier conversation (by the CLI's
own session, or replayed from crew's transcript when the CLI no longer has it) and only the new
task, never a silent fresh start."""

from __future__ import annotations

import json
import shutil

import pytest

from crewcli import processes_in, run_crew, tool_block
from mockserver import reply

pytestmark = pytest.mark.e2e


def log_events(crew, cli, run="last"):
    return [json.loads(line) for line in crew(cli, "log", "show", "--json", run).stdout.splitlines()]


def first_exchange(cli, crew, mock_server):
    mock_server.script(tool_block("crew:read_file", path="notes.txt"), "The code is 7-4-1.")
    first = crew(cli, "query", f"@{cli} what does notes.txt say?")
    assert first.returncode == 0, first.stderr
    return first


@pytest.mark.parametrize("how", ["--continue", "--resume"])
def test_a_second_command_continues_the_conversation_by_the_clis_session(how, cli, crew, mock_server, notes):
    first_exchange(cli, crew, mock_server)
    run_id = log_events(crew, cli)[0]["run"]
    mock_server.script("You asked what notes.txt says.")
    args = ["--continue"] if how == "--continue" else ["--resume", run_id]
    second = crew(cli, "query", *args, f"@{cli} what did I ask you before?")
    assert second.returncode == 0, second.stderr
    assert second.stdout == "You asked what notes.txt says.\n"
    assert "crew:" not in second.stderr  # no notice: the CLI had the conversation
    request = mock_server.requests[-1]
    said = [text for role, text in request.messages() if role != "system"]
    assert said[-1] == "what did I ask you before?"  # the new task alone: the catalogue is in the history
    earlier = "\n\n".join(said[:-1])
    assert "what does notes.txt say?" in earlier and notes in earlier and "The code is 7-4-1." in earlier
    assert earlier.count("[crew tools]") == 1
    events = log_events(crew, cli)
    assert events[0]["resumed_from"] == run_id
    [resume] = [e for e in events if e["kind"] == "resume"]
    assert (resume["agent"], resume["how"], resume["of"]) == (cli, "continued", run_id)


def test_a_third_command_continues_the_chain(cli, crew, mock_server, notes):
    first_exchange(cli, crew, mock_server)
    mock_server.script("Second answer.", "Third answer.")
    assert crew(cli, "query", "--continue", f"@{cli} second question").returncode == 0
    third = crew(cli, "query", "--continue", f"@{cli} third question")
    assert third.returncode == 0, third.stderr
    said = [text for role, text in mock_server.requests[-1].messages() if role != "system"]
    assert said[-1] == "third question" and "second question" in said and "Second answer." in said
    assert any(notes in text for text in said)


SESSION_STORES = {"claude": ".claude/projects", "gemini": ".gemini/tmp", "codex": ".codex/sessions"}


def test_a_session_the_cli_no_longer_has_is_replayed_from_crews_transcript_with_a_notice(
    cli, cli_env, workdir, tmp_path, mock_server, notes
):
    env = cli_env(cli)
    if cli == "codex":  # the live codex thread is crew's own (never stored): its stored sessions are exec's
        env["CREW_LIVE"] = "0"

    def crew(*args):
        return run_crew(list(args), env=env, cwd=workdir)

    mock_server.script(tool_block("crew:read_file", path="notes.txt"), "The code is 7-4-1.")
    assert crew("query", f"@{cli} what does notes.txt say?").returncode == 0
    session = next(
        e["session"]
        for e in map(json.loads, crew("log", "show", "--json", "last").stdout.splitlines())
        if e["kind"] == "session"
    )
    shutil.rmtree(tmp_path / f"home-{cli}" / SESSION_STORES[cli])  # deleted, or expired
    mock_server.script("You asked what notes.txt says.")
    second = crew("query", "--continue", f"@{cli} what did I ask you before?")
    assert second.returncode == 0, second.stderr
    assert second.stdout == "You asked what notes.txt says.\n"
    assert (
        f"crew: @{cli}'s CLI no longer has session {session} here (deleted, expired, or another directory's): "
        "crew replays the conversation from its transcript\n" in second.stderr
    )
    said = [text for role, text in mock_server.requests[-1].messages() if role != "system"]
    replayed = said[-1]  # one message: the conversation so far, then the catalogue and the new task
    assert replayed.index("[crew conversation so far") < replayed.index("what does notes.txt say?")
    assert (
        replayed.index("what does notes.txt say?")
        < replayed.index(notes)
        < replayed.index("The code is 7-4-1.")
        < replayed.index("[new message]")
        < replayed.index("what did I ask you before?")
    )
    assert processes_in(tmp_path) == []


def test_an_agent_not_in_the_continued_run_starts_fresh_and_says_so(crew, mock_server, cli_env, notes):
    first_exchange("claude", crew, mock_server)
    mock_server.script("Fresh.")
    done = crew("claude", "query", "--continue", "@demo hello")
    assert done.returncode == 0, done.stderr
    assert "crew: @demo was not in run " in done.stderr and "it starts a fresh conversation" in done.stderr


def test_chat_continues_the_last_run_and_query_continues_the_chat(cli, cli_env, workdir, mock_server, notes):
    first_exchange(cli, lambda name, *args: run_crew(list(args), env=cli_env(name), cwd=workdir), mock_server)
    mock_server.script("You asked what notes.txt says.", "Still 7-4-1.")
    chat = run_crew(
        ["chat", "--continue", f"@{cli}"], env=cli_env(cli), cwd=workdir, input="what did I ask you before?\n"
    )
    assert chat.returncode == 0, chat.stderr
    assert "You asked what notes.txt says." in chat.stdout
    said = [text for role, text in mock_server.requests[-1].messages() if role != "system"]
    assert said[-1] == "what did I ask you before?" and any(notes in text for text in said[:-1])
    again = run_crew(["query", "--continue", f"@{cli} and the code?"], env=cli_env(cli), cwd=workdir)
    assert again.returncode == 0, again.stderr
    said = [text for role, text in mock_server.requests[-1].messages() if role != "system"]
    assert said[-1] == "and the code?" and "what did I ask you before?" in said


def test_the_continued_history_is_exact_a_reply_cut_at_its_block_stays_cut(cli, crew, mock_server, notes):
    invented = "The notes surely say Friday."
    mock_server.script(
        reply("Reading.\n", tool_block("crew:read_file", path="notes.txt"), invented),
        "The code is 7-4-1.",
        "You asked what notes.txt says.",
    )
    assert crew(cli, "query", f"@{cli} what does notes.txt say?").returncode == 0
    second = crew(cli, "query", "--continue", f"@{cli} what did I ask you before?")
    assert second.returncode == 0, second.stderr
    said = [text for role, text in mock_server.requests[-1].messages() if role != "system"]
    assert said[-1] == "what did I ask you before?"
    earlier = "\n\n".join(said[:-1])
    assert "Reading." in earlier and notes in earlier and "The code is 7-4-1." in earlier
    assert invented not in earlier


def test_resuming_a_run_from_another_directory_replays_it_with_a_notice(
    cli, cli_env, workdir, tmp_path, mock_server, notes
):
    env = cli_env(cli)
    first_exchange(cli, lambda name, *args: run_crew(list(args), env=env, cwd=workdir), mock_server)
    run_id = json.loads(run_crew(["log", "show", "--json", "last"], env=env, cwd=workdir).stdout.splitlines()[0])["run"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text(notes + "\n")
    mock_server.script("You asked what notes.txt says.")
    done = run_crew(["query", "--resume", run_id, f"@{cli} what did I ask you before?"], env=env, cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "You asked what notes.txt says.\n"
    said = "\n\n".join(text for role, text in mock_server.requests[-1].messages() if role != "system")
    assert "what does notes.txt say?" in said and "The code is 7-4-1." in said
    if cli != "codex":  # claude and gemini keep sessions per directory; live codex is given its history
        assert "no longer has session" in done.stderr and "crew replays the conversation" in done.stderr
