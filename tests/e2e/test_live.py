"""Exact, live continuation against the real claude, gemini and codex: the mock streams a reply that
goes on past its tool block with an invented result, crew acts on the call and stops the reply, and
the next request the model receives holds the reply cut exactly at the block, then the result —
never the invented tail."""

from __future__ import annotations

import json
import os

import pytest
from crewbridge.providers.base import Turn
from crewbridge.tools import builtin_registry

from crewbridge import providers
from crewbridge.config import AgentSpec
from crewbridge.conversations import new_conversation
from crewbridge.engine.loop import AgentLoop
from crewbridge.errors import ProviderError
from crewbridge.record.stream import Record
from crewbridge.work.policy import Policy
from mockserver import error, reply

pytestmark = pytest.mark.e2e

TASK = "what do notes.txt and plan.txt say?"
INVENTED = "The file says the secret is 7."  # what the model makes up before any result exists
SLOW = 0.25  # seconds between streamed chunks: the stop lands mid-reply


def block(path: str) -> str:
    return "```json\n" + json.dumps({"type": "tool_use", "name": "crew:read_file", "input": {"path": path}}) + "\n```\n"


@pytest.fixture
def run(cli_env, mock_server, workdir):
    """run(cli, *replies) → (result, conversation): the agent loop on the real CLI, live."""
    (workdir / "notes.txt").write_text("the secret is 42")
    (workdir / "plan.txt").write_text("ship on friday")

    def go(cli, *replies, sink=None):
        mock_server.script(*replies)
        env = {**cli_env(cli), "CREW_LIVE": "1"}  # whatever the caller set
        conversation = new_conversation(providers.load(cli), Turn(prompt=""), cwd=workdir, env=env)
        record = Record()
        if sink is not None:
            record.attach(sink(conversation))
        loop = AgentLoop(
            cli,
            conversation,
            builtin_registry(),
            Policy(AgentSpec(cli, cli), "query"),
            workdir=workdir,
            timeout=90,
            record=record,
        )
        return loop.run(TASK), conversation

    return go


def watching(pids: set[int]):
    """A sink factory noting the pid of the CLI process behind each piece of the record's text."""
    return lambda conversation: lambda event: event.kind == "text" and pids.add(conversation.process.pid)


def assistant_texts(request) -> list[str]:
    return [text for role, text in request.messages() if role == "assistant"]


def last_user_text(request) -> str:
    return [text for role, text in request.messages() if role == "user"][-1]


def test_a_reply_stopped_after_its_call_continues_from_the_text_up_to_the_block(cli, run, mock_server):
    result, _ = run(
        cli,
        reply("Let me read it.\n", block("notes.txt"), INVENTED, " So the answer", " is 7.", delay=SLOW),
        "It says 42.",
    )
    assert result.answer == "It says 42." and result.turns == 2
    _, follow_up = mock_server.requests
    assert assistant_texts(follow_up)[-1] == "Let me read it.\n" + block("notes.txt")
    assert "the secret is 42" in last_user_text(follow_up)
    assert TASK in follow_up.text()
    assert INVENTED not in follow_up.text() and "is 7" not in follow_up.text()
    assert "Your previous reply was stopped" not in follow_up.text()  # nothing to restate


def test_several_calls_in_one_reply_are_all_acted_on_and_kept_in_order(cli, run, mock_server):
    result, _ = run(
        cli,
        reply(
            "Reading both.\n",
            block("notes.txt"),
            "\n",
            block("plan.txt"),
            INVENTED,
            " And the plan is monday.",
            delay=SLOW,
        ),
        "42, friday.",
    )
    assert [call.input["path"] for call in result.tool_calls] == ["notes.txt", "plan.txt"]
    follow_up = mock_server.requests[1]
    assert assistant_texts(follow_up)[-1] == "Reading both.\n" + block("notes.txt") + "\n" + block("plan.txt")
    results = last_user_text(follow_up)
    assert results.index("the secret is 42") < results.index("ship on friday")
    assert INVENTED not in follow_up.text() and "monday" not in follow_up.text()


def test_a_reply_that_arrived_all_at_once_still_leaves_no_tail_in_the_history(cli, run, mock_server):
    # One chunk: the CLI has the whole reply, tail included, before crew can stop it (the race).
    result, _ = run(cli, reply("Let me read it.\n" + block("notes.txt") + INVENTED), "It says 42.")
    assert result.answer == "It says 42."
    follow_up = mock_server.requests[1]
    assert assistant_texts(follow_up)[-1] == "Let me read it.\n" + block("notes.txt")
    assert TASK in follow_up.text() and "the secret is 42" in last_user_text(follow_up)
    assert INVENTED not in follow_up.text()


def test_a_race_in_a_later_turn_keeps_every_earlier_turn_exact(cli, run, mock_server):
    result, _ = run(
        cli,
        reply("First.\n", block("notes.txt"), INVENTED, delay=SLOW),
        reply("Then.\n" + block("plan.txt") + "The plan says monday."),
        "42, friday.",
    )
    assert result.answer == "42, friday." and result.turns == 3
    last = mock_server.requests[2]
    assert assistant_texts(last)[-2:] == ["First.\n" + block("notes.txt"), "Then.\n" + block("plan.txt")]
    assert TASK in last.text() and "the secret is 42" in last.text() and "ship on friday" in last.text()
    assert INVENTED not in last.text() and "monday" not in last.text()


@pytest.mark.parametrize("cli", ["claude", "codex"])
def test_one_process_carries_every_turn_and_ends_with_the_run(cli, run, mock_server):
    pids = set()  # the CLI process that streamed each piece of text, over all turns
    result, _ = run(
        cli,
        reply("First.\n", block("notes.txt"), INVENTED, delay=SLOW),
        reply("Then.\n", block("plan.txt"), "The plan says monday.", delay=SLOW),
        "42, friday.",
        sink=watching(pids),
    )
    assert result.answer == "42, friday." and result.turns == 3
    [pid] = pids
    last = mock_server.requests[2]
    assert assistant_texts(last)[-2:] == ["First.\n" + block("notes.txt"), "Then.\n" + block("plan.txt")]
    assert INVENTED not in last.text() and "monday" not in last.text()
    with pytest.raises(ProcessLookupError):  # the whole process group is gone after the run
        os.killpg(pid, 0)


@pytest.mark.parametrize(
    "cli, message", [("claude", "mock overloaded"), ("codex", "high demand")]
)  # codex words a 500 its own way
def test_a_model_error_mid_conversation_ends_the_run_with_its_message_and_the_process(cli, message, run):
    pids = set()
    with pytest.raises(ProviderError, match=message):
        run(
            cli,
            reply("Let me read it.\n", block("notes.txt"), INVENTED, delay=SLOW),
            error(500, "mock overloaded"),
            sink=watching(pids),
        )
    [pid] = pids
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
