"""crewbridge.engine.dialogue: one agent's conversation across messages. Its CLI starts when the chat opens
and stays open until it is closed; the first message carries the tool catalogue, later ones go as
they are; what a message's run left for git is disarmed before the next; a cancel stops the reply
and the chat goes on; an error ends only that reply. `open_chat` refuses what a chat cannot take
before anything starts. Over a scripted conversation (tests/chatfakes.py), or a small script as CLI."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest
from crewbridge.providers.generic import GenericSpec

from chatfakes import CATALOGUE_MARK, Script, block, scripted_loop, text
from crewbridge.config import AgentSpec, Config, default_agents
from crewbridge.engine.context import RunContext
from crewbridge.engine.dialogue import Chat, open_chat
from crewbridge.errors import AgentNotFound, CrewError, UsageError
from crewbridge.record.transcript import read_run
from crewbridge.sandbox import MECHANISM_ENV, Sandboxing
from crewbridge.terminal.render import Renderer

# A model run as a CLI: it answers each message with how many messages the prompt holds.
COUNTS = "import sys; p = sys.stdin.read(); print('messages: %d' % (p.count('[new message]') + 1))"


@pytest.fixture
def chat_with(tmp_path):
    """chat_with(*replies) → (chat, script): a chat over a scripted conversation."""
    (tmp_path / "notes.txt").write_text("the secret is 42\n")

    def make(*replies):
        script = Script(*replies)
        return Chat(scripted_loop(tmp_path, script)), script

    return make


def context(tmp_path: Path) -> RunContext:
    providers = {"counts": GenericSpec(name="counts", command=[sys.executable, "-c", COUNTS])}
    agents = {
        **default_agents(),
        "counts": AgentSpec(id="counts", provider="counts"),
        "lost": AgentSpec(id="lost", provider="nowhere"),
    }
    config = Config(agents=agents, providers=providers)
    return RunContext(config, tmp_path, sandboxing=Sandboxing({MECHANISM_ENV: "none"}))


# -- a chat over its conversation ------------------------------------------------------------------


def test_each_message_continues_one_conversation_and_only_the_first_carries_the_catalogue(chat_with):
    chat, script = chat_with(text("Hello."), text("You said hi."))
    assert chat.ask("hi").answer == "Thinking" + "Hello."
    assert chat.ask("what did I say?").answer == "ThinkingYou said hi."
    first, second = script.sent
    assert CATALOGUE_MARK in first and first.rstrip().endswith("hi")
    assert second == "what did I say?"
    assert not script.closed  # the conversation stays open between messages
    chat.close()
    assert script.closed


def test_tools_work_within_a_message(chat_with):
    chat, script = chat_with(text("Reading.\n", block(path="notes.txt")), text("It says 42."))
    result = chat.ask("what does notes.txt say?")
    assert result.answer == "ThinkingIt says 42."
    assert [call.result.data["content"] for call in result.tool_calls] == ["the secret is 42\n"]
    assert "the secret is 42" in script.sent[1]


def test_a_message_whose_reply_never_came_back_leaves_the_catalogue_for_the_next(chat_with):
    chat, script = chat_with(KeyboardInterrupt, text("Two."))
    with pytest.raises(KeyboardInterrupt):
        chat.ask("first")
    assert chat.ask("second").answer == "ThinkingTwo."
    assert CATALOGUE_MARK in script.sent[1] and script.sent[1].rstrip().endswith("second")


def test_cancel_stops_the_reply_being_written_and_the_chat_goes_on(chat_with):
    chat, script = chat_with(text("One."), text("Two."))
    chat.ask("first")
    chat.cancel()
    assert script.stops == 1 and not script.closed
    chat.loop.policy.reopen()  # as the face does before the next message
    assert chat.ask("second").answer == "ThinkingTwo." and script.sent[1] == "second"


def test_the_chats_agent_is_its_loops(chat_with):
    chat, _ = chat_with()
    assert chat.agent == "claude"


def test_in_execute_mode_what_a_message_left_for_git_is_disarmed_before_the_next(tmp_path):
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)

    class Planting(Script):
        def send(self, message, deadline):  # the CLI's own tools plant a repository while it replies
            subprocess.run(["git", "init", "-q", f"sub{len(self.sent)}"], cwd=tmp_path, check=True)
            yield from super().send(message, deadline)

    out, err = io.StringIO(), io.StringIO()
    renderer = Renderer(out=out, err=err, env={}, agents=["claude"])
    loop = scripted_loop(tmp_path, Planting(text("One."), text("Two.")), "execute", sink=renderer.progress)
    chat = Chat(loop)
    chat.ask("hi")
    assert not (tmp_path / "sub0" / ".git").exists()  # before the person's next line
    chat.ask("again")
    assert [armed.path for armed in loop.disarmed] == ["sub0/.git", "sub1/.git"], err.getvalue()
    assert "crew: @claude:   sub1/.git: a new git repository" in err.getvalue(), err.getvalue()
    chat.close()


# -- opening a chat --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"worktree": True}, "a chat takes no worktree or review; crew execute --worktree or --review runs a task so"),
        (
            {"review": "gemini"},
            "a chat takes no worktree or review; crew execute --worktree or --review runs a task so",
        ),
        ({"max_turn": 3}, "unknown run option max_turn; the options are: max_turns"),
    ],
)
def test_a_chat_refuses_what_it_cannot_take_before_anything_starts(tmp_path, started_clis, values, message):
    with pytest.raises(UsageError) as raised:
        open_chat(context(tmp_path), "@counts", "execute", **values)
    assert str(raised.value).startswith(message) and started_clis == []


def test_a_chat_in_a_mode_that_is_not_one_or_with_an_agent_that_is_not_configured_is_refused(tmp_path, started_clis):
    with pytest.raises(UsageError, match="mode 'talk' is not one of query, execute"):
        open_chat(context(tmp_path), "@counts", "talk")
    with pytest.raises(AgentNotFound, match="agent 'count' not found"):
        open_chat(context(tmp_path), "count")
    assert started_clis == []


def test_a_chat_whose_cli_cannot_start_raises_why_and_leaves_no_transcript(tmp_path):
    seen: list = []
    ctx = context(tmp_path).reporting(seen.append)
    with pytest.raises(CrewError, match="provider 'nowhere' not found"):
        open_chat(ctx, "@lost")
    # the run failed before its transcript was made (its CLI did not start): its sink heard why
    assert [e.kind for e in seen] == ["start", "notice", "error", "end"]  # the notice: no sandbox here
    assert (seen[0].command, seen[1].about, seen[-1].status) == ("chat", "sandbox", "failed")
    assert "provider 'nowhere' not found" in seen[2].message
    assert not list(Path(os.environ["XDG_STATE_HOME"]).rglob("*.jsonl"))


@pytest.mark.slow
def test_an_opened_chat_answers_each_message_in_one_transcript_closed_with_its_status(tmp_path, started_clis):
    chat = open_chat(context(tmp_path), "counts")
    assert chat.agent == "counts" and len(started_clis) == 1  # its CLI started when the chat opened
    assert chat.ask("hi").answer == "messages: 1"
    assert chat.ask("again").answer == "messages: 2"  # a CLI that holds nothing is given the conversation
    chat.failed(CrewError("the reply was cut"))
    chat.close("cancelled")
    assert all(child.proc.poll() is not None for child in started_clis)
    events = read_run("last")
    assert (events[0].command, events[0].agents) == ("chat", ["counts"])
    assert [e.turn for e in events if e.kind == "turn"] == [1, 1]  # each message is a task of its own
    assert [e.text for e in events if e.kind == "answer"] == ["messages: 1", "messages: 2"]
    assert [(e.agent, e.message) for e in events if e.kind == "error"] == [("counts", "the reply was cut")]
    assert events[-1].kind == "end" and events[-1].status == "cancelled" and events[-1].errors == 1
