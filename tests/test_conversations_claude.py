"""The live Claude conversation's side of the stream-json protocol, against a small fake `claude -p
--input-format stream-json` that logs every line it is sent (the real CLI is in tests/e2e)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import pytest
from crewbridge.providers.base import Turn
from crewbridge.providers.claude import ClaudeProvider

from crewbridge.base.decoded import Failure, Session, Text, Usage
from crewbridge.conversations import EXACT, FULL
from crewbridge.conversations.claude import ClaudeLiveConversation
from crewbridge.errors import CLINotFound, CrewTimeout, ProviderError

BLOCK = '```json\n{"type":"tool_use","name":"crew:read_file","input":{"path":"a"}}\n```\n'
REPLY = ["Reading.\n", BLOCK, "It says 7.", " Invented."]

# Streams REPLY as text deltas to every user line that queries, then its result line. argv[1] is the
# log, argv[2] a behaviour: "ok", "refuse" (the rewind fails), "native" (a native tool result comes
# first), "crash" (exits mid-reply), "hang" (stops writing mid-reply) or "mute" (never answers a rewind).
FAKE = """
import json, sys
log, mode = open(sys.argv[1], "a"), sys.argv[2]
REPLY = json.loads(sys.argv[3])
cost = 0.0  # like Claude, each result reports the process's total cost so far
def out(obj):
    print(json.dumps(obj), flush=True)
for line in sys.stdin:
    log.write(line); log.flush()
    obj = json.loads(line)
    if obj["type"] == "control_request":
        if mode == "mute" and obj["request"]["subtype"] == "rewind_conversation":
            continue
        answer = {}
        if obj["request"]["subtype"] == "rewind_conversation":
            answer = {"rewound": mode != "refuse"}
        out({"type": "control_response", "response": {"subtype": "success", "request_id": obj["request_id"],
                                                      "response": answer}})
    elif obj["type"] == "user" and obj.get("shouldQuery") is False:
        out({"type": "result", "subtype": "success", "is_error": False, "session_id": "S1"})
    elif obj["type"] == "user":
        out({"type": "system", "subtype": "init", "session_id": "S1", "model": "m"})
        out({"type": "stream_event", "event": {"type": "message_start", "message": {"id": "m1"}}})
        if mode == "native":
            out({"type": "user", "message": {"role": "user", "content": [{"type": "tool_result"}]}})
        for n, text in enumerate(REPLY):
            if mode == "hang" and n == 2:
                import time; time.sleep(60)
            if mode == "crash" and n == 2:
                sys.stderr.write("boom: lost the connection\\n")
                sys.exit(5)
            out({"type": "stream_event", "event": {"type": "content_block_delta",
                                                   "delta": {"type": "text_delta", "text": text}}})
        cost += 0.5
        out({"type": "result", "subtype": "success", "is_error": False, "session_id": "S1",
             "usage": {"input_tokens": 3, "output_tokens": 4}, "total_cost_usd": cost})
"""


class FakeClaude(ClaudeProvider):
    def __init__(self, log, mode):
        self.log, self.mode = log, mode

    def argv(self, turn):
        return [sys.executable, "-c", FAKE, str(self.log), self.mode, json.dumps(REPLY)]


@pytest.fixture
def start(tmp_path):
    made = []

    def go(mode="ok"):
        log = tmp_path / "stdin.jsonl"
        conversation = ClaudeLiveConversation(FakeClaude(log, mode), Turn(prompt=""), cwd=tmp_path)
        made.append(conversation)
        return conversation, lambda: [json.loads(line) for line in log.read_text().splitlines()]

    yield go
    for conversation in made:
        conversation.close()


def until_the_tail(conversation, message):
    """Read the reply as the loop does: stop at the first text after the block."""
    events = conversation.send(message, None)
    text = ""
    for event in events:
        if isinstance(event, Text):
            text += event.text
            if text.endswith("It says 7."):
                conversation.stop()
                break
    events.close()
    return text


def test_the_process_starts_with_an_empty_assistant_line_to_rewind_the_first_message_against(start):
    conversation, sent = start()
    assert until_the_tail(conversation, "first") == "Reading.\n" + BLOCK + "It says 7."
    anchor, first = sent()[:2]
    assert anchor["type"] == "assistant" and anchor["message"]["content"] == [{"type": "text", "text": ""}]
    assert first["type"] == "user" and first["message"] == {"role": "user", "content": "first"}


def test_a_stopped_reply_is_rewound_and_replaced_by_the_text_up_to_the_block(start):
    conversation, sent = start()
    until_the_tail(conversation, "first")
    pid = conversation.process.pid
    assert conversation.keep("Reading.\n" + BLOCK, stopped=True) == EXACT
    events = list(conversation.send("the result", None))  # on the same process
    assert conversation.process.pid == pid
    _, first, interrupt, rewind, again, kept, result = sent()
    assert interrupt["request"] == {"subtype": "interrupt"}
    assert rewind["request"] == {
        "subtype": "rewind_conversation",
        "interrupt_if_running": True,
        "target_message_uuid": first["uuid"],
    }
    assert again["message"] == first["message"] and again["shouldQuery"] is False
    assert again["uuid"] != first["uuid"]
    assert kept["type"] == "assistant"
    assert kept["message"]["content"] == [{"type": "text", "text": "Reading.\n" + BLOCK}]
    assert result["message"] == {"role": "user", "content": "the result"}
    assert "".join(e.text for e in events if isinstance(e, Text)) == "".join(REPLY)
    assert Session("S1", "m") in events and conversation.session_id == "S1"


def test_each_reply_costs_its_share_and_a_stopped_ones_usage_comes_late(start):
    conversation, _ = start()
    until_the_tail(conversation, "first")
    assert conversation.late_usage() == []  # its result line is not read yet
    conversation.keep("Reading.\n" + BLOCK, stopped=True)
    assert conversation.late_usage() == [Usage(3, 4, 0.5)]
    assert [e for e in conversation.send("the result", None) if isinstance(e, Usage)] == [Usage(3, 4, 0.5)]
    assert conversation.late_usage() == []


def test_a_reply_that_was_not_stopped_is_left_whole(start):
    conversation, sent = start()
    list(conversation.send("first", None))
    assert conversation.keep("Reading.\n" + BLOCK, stopped=False) == FULL
    assert [line["type"] for line in sent()] == ["assistant", "user"]


def test_when_the_rewind_is_refused_the_history_keeps_the_reply_and_says_so(start):
    conversation, sent = start("refuse")
    until_the_tail(conversation, "first")
    assert conversation.keep("Reading.\n" + BLOCK, stopped=True) == FULL
    assert sent()[-1]["request"]["subtype"] == "rewind_conversation"  # nothing put back after it


@pytest.mark.slow
def test_the_rewind_waits_only_as_long_as_the_run(start):
    conversation, _ = start("mute")
    list(conversation.send("boot", None))
    conversation.keep("".join(REPLY), stopped=False)
    events = conversation.send("first", time.monotonic() + 2)  # this run has two seconds
    for event in events:
        if isinstance(event, Text) and event.text == "It says 7.":
            conversation.stop()
            break
    events.close()
    with pytest.raises(CrewTimeout, match="gave no complete reply in time"):
        conversation.keep("Reading.\n" + BLOCK, stopped=True)
    assert conversation.process.child.proc.poll() is not None


def test_a_reply_that_used_claudes_own_tools_is_not_rewound(start):
    conversation, sent = start("native")
    until_the_tail(conversation, "first")
    assert conversation.keep("Reading.\n" + BLOCK, stopped=True) == FULL
    assert not any(line.get("request", {}).get("subtype") == "rewind_conversation" for line in sent())


def test_a_cli_that_exits_mid_reply_is_a_failure_with_its_last_stderr_line(start):
    conversation, _ = start("crash")
    events = list(conversation.send("first", None))
    cli = os.path.basename(sys.executable)
    assert events[-1] == Failure(f"{cli} exited with status 5: boom: lost the connection")
    assert "".join(e.text for e in events if isinstance(e, Text)) == "".join(REPLY[:2])


@pytest.mark.slow
def test_close_from_another_thread_ends_a_reply_in_progress_and_its_process(start):
    conversation, _ = start("hang")
    events = conversation.send("first", None)
    assert next(events) == Session("S1", "m")
    threading.Timer(0.2, conversation.close).start()  # as Ctrl-C does, from the main thread
    rest = list(events)
    assert isinstance(rest[-1], Failure) and "exited with status" in rest[-1].message
    assert conversation.process.child.proc.poll() is not None


def test_a_closed_conversation_starts_no_process(start):
    conversation, _ = start()
    conversation.close()
    with pytest.raises(ProviderError, match="claude: the conversation was already closed"):
        list(conversation.send("first", None))
    assert conversation.process is None


def test_started_before_the_first_message_the_process_waits_for_it_and_is_set_up_once(start):
    conversation, sent = start()
    conversation.start()  # as crew does, before it builds the catalogue
    pid = conversation.process.pid
    conversation.start()  # again: the same process
    assert conversation.process.pid == pid
    list(conversation.send("first", None))
    assert conversation.keep("Reading.\n" + BLOCK, stopped=False) == FULL
    list(conversation.send("second", None))
    assert conversation.process.pid == pid
    assert [line["type"] for line in sent()] == ["assistant", "user", "user"]  # one anchor, first


def test_a_cli_that_cannot_start_early_is_reported_by_the_first_message(tmp_path):
    conversation = ClaudeLiveConversation(ClaudeProvider(), Turn(prompt=""), cwd=tmp_path, env={"PATH": str(tmp_path)})
    conversation.start()
    assert conversation.process is None
    with pytest.raises(CLINotFound, match="'claude' not found on PATH"):
        list(conversation.send("hi", None))


def test_a_closed_conversation_is_not_started_early(start):
    conversation, _ = start()
    conversation.close()
    conversation.start()
    assert conversation.process is None
