"""crew chat: one conversation across messages (the catalogue once, the context kept), commands,
Ctrl-C stopping only the reply, errors ending only the reply; with the demo agent and the real claude."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import stat

import pytest

from chatfakes import CATALOGUE_MARK, Script, block, scripted_loop, text
from crewbridge.base.decoded import Failure
from crewbridge.bridge import Bridge
from crewbridge.config import load_config
from crewbridge.engine.dialogue import Chat
from crewbridge.errors import CLINotFound
from crewbridge.system.process import LOGGER
from crewbridge.terminal.chat import HISTORY_LENGTH, LineReader, converse, run_chat
from crewbridge.terminal.render import Renderer
from mockserver import reply


@pytest.fixture
def chat_with(tmp_path):
    """chat_with(*replies) → (chat, script, out, err): a chat over a scripted conversation."""
    (tmp_path / "notes.txt").write_text("the secret is 42\n")

    def make(*replies):
        script = Script(*replies)
        out, err = io.StringIO(), io.StringIO()
        renderer = Renderer(out=out, err=err, env={}, agents=["claude"])
        return Chat(scripted_loop(tmp_path, script, sink=renderer.progress)), renderer, script, out, err

    return make


def talk(chat, renderer, *lines):
    converse(chat, LineReader(io.StringIO("".join(line + "\n" for line in lines)), history=None), renderer, "hi")


def test_the_chat_answers_each_line_until_exit(chat_with):
    chat, renderer, script, out, _ = chat_with(text("One."), text("Two."))
    talk(chat, renderer, "first", "", "   ", "second", "/exit", "never sent")
    assert script.sent[1:] == ["second"]
    assert out.getvalue() == "ThinkingOne.\nThinkingTwo.\n"  # piped: each answer once
    assert script.closed


def test_a_command_is_not_sent_to_the_model(chat_with):
    chat, renderer, script, _out, _ = chat_with(text("One."))
    talk(chat, renderer, "/help", "/nope", "first")
    assert len(script.sent) == 1 and script.sent[0].rstrip().endswith("first")


def test_ctrl_c_stops_the_reply_and_the_chat_goes_on(chat_with):
    chat, renderer, script, out, _ = chat_with(KeyboardInterrupt, text("Two."))
    talk(chat, renderer, "first", "second")
    assert script.stops == 1
    assert out.getvalue() == "ThinkingTwo.\n"
    assert CATALOGUE_MARK in script.sent[1]  # the first reply never came back: the catalogue goes again


def test_an_error_ends_only_that_reply(chat_with):
    chat, renderer, _script, out, err = chat_with([Failure("API error 500")], text("Two."))
    talk(chat, renderer, "first", "second")
    assert "crew: error: @claude: API error 500" in err.getvalue()
    assert out.getvalue() == "ThinkingTwo.\n"


def test_a_chat_its_cli_left_ends_its_record_failed_with_the_error(tmp_path):
    class Gone(Script):
        def send(self, message, deadline):
            raise CLINotFound("claude is not installed")
            yield

    out, err, seen = io.StringIO(), io.StringIO(), []
    renderer = Renderer(out=out, err=err, env={}, agents=["claude"])
    chat = Chat(scripted_loop(tmp_path, Gone(), sink=seen.append))
    with pytest.raises(CLINotFound):
        talk(chat, renderer, "first", "second")
    errors = [e.message for e in seen if e.kind == "error"]
    assert errors == ["claude is not installed"] and seen[-1].kind == "end" and seen[-1].status == "failed"


def test_a_chat_an_interrupt_ends_ends_its_record_cancelled(tmp_path):
    seen: list = []
    chat = Chat(scripted_loop(tmp_path, Script(), sink=seen.append))

    class Interrupting(LineReader):  # an interrupt past the prompt's own (which clears the line)
        def __iter__(self):
            raise KeyboardInterrupt
            yield

    with pytest.raises(KeyboardInterrupt):
        converse(chat, Interrupting(io.StringIO(), history=None), Renderer(out=io.StringIO(), env={}), "hi")
    assert [(e.kind, getattr(e, "status", None)) for e in seen] == [("end", "cancelled")]


class Sent(logging.Handler):
    """What crew wrote to the CLIs it ran (the process log)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())

    def __enter__(self):
        logging.getLogger(LOGGER).addHandler(self)
        logging.getLogger(LOGGER).setLevel(logging.DEBUG)
        return self

    def __exit__(self, *exc):
        logging.getLogger(LOGGER).removeHandler(self)
        logging.getLogger(LOGGER).setLevel(logging.NOTSET)

    def matching(self, mark):
        return [line.split(f"] {mark} ", 1)[1] for line in self.lines if f"] {mark} " in line]


@pytest.mark.slow
def test_a_chat_with_the_demo_agent_keeps_the_context_and_a_transcript(tmp_path, monkeypatch, capsys):
    (tmp_path / "notes.txt").write_text("alpha\nbeta\n")
    (tmp_path / "plan.txt").write_text("ship\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    with Sent() as sent:
        run_chat(
            Bridge(load_config(None, tmp_path), tmp_path),
            "@demo",
            stdin=io.StringIO("what is in notes.txt?\nand in plan.txt?\n"),
            history=tmp_path / "h",
        )
    out = capsys.readouterr().out
    assert out == (
        "notes.txt has 2 non-empty lines (2 lines in all). It begins:\n  alpha\n  beta\n"
        "plan.txt has 1 non-empty line (1 line in all). It begins:\n  ship\n"
    )
    prompts = sent.matching("<")  # the demo has no resume: crew replays the conversation
    assert len(prompts) == 4  # two messages, each a call and an answer
    [transcript] = (tmp_path / "state" / "crewbridge" / "runs").glob("*.jsonl")
    events = [json.loads(line) for line in transcript.read_text().splitlines()]
    assert (events[0]["kind"], events[0]["command"], events[-1]["kind"], events[-1]["status"]) == (
        "start",
        "chat",
        "end",
        "done",
    )
    assert [e["text"].split(" has")[0] for e in events if e["kind"] == "answer"] == ["notes.txt", "plan.txt"]
    second = prompts[2]
    assert "what is in notes.txt?" in second and "alpha" in second and second.rstrip().endswith("and in plan.txt?")
    assert second.count(CATALOGUE_MARK) == 1  # in the history only: not sent again


@pytest.mark.e2e
def test_a_chat_with_the_real_claude_resumes_its_session(tmp_path, monkeypatch, capsys, cli_env, mock_server):
    env = {**cli_env("claude"), "CREW_LIVE": "0"}  # a new claude per message: resumed by session id
    for key in list(os.environ):
        if key not in env:
            monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    (tmp_path / "notes.txt").write_text("the secret is 42\n")
    monkeypatch.chdir(tmp_path)
    mock_server.script(reply("Reading.\n", block(path="notes.txt")), "It says 42.", "You asked about notes.txt.")
    with Sent() as sent:
        run_chat(
            Bridge(load_config(None, tmp_path), tmp_path),
            "@claude",
            stdin=io.StringIO("what does notes.txt say?\nwhat did I ask first?\n"),
            history=tmp_path / "h",
        )
    assert capsys.readouterr().out == "It says 42.\nYou asked about notes.txt.\n"
    commands = sent.matching("$")
    assert len(commands) == 3 and "--resume" not in commands[0]
    session = re.search(r"--resume (\S+)", commands[2])
    assert session and f"--resume {session[1]}" in commands[1]  # one session throughout
    last = mock_server.requests[-1]
    assert "what does notes.txt say?" in last.text() and "the secret is 42" in last.text()
    assert last.messages()[-1] == ("user", "what did I ask first?")


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_history_file_is_private_and_kept_to_its_last_lines(tmp_path):
    import readline

    fresh = tmp_path / "state" / "chat_history"
    LineReader(Terminal(), fresh)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600 and fresh.read_text() == ""
    long = tmp_path / "long_history"
    long.write_text("".join(f"message {n}\n" for n in range(HISTORY_LENGTH + 5)))
    try:
        LineReader(Terminal(), long)
    finally:
        readline.clear_history()
    assert long.read_text().splitlines() == [f"message {n}" for n in range(5, HISTORY_LENGTH + 5)]
