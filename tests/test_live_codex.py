"""The live Codex conversation's side of the app-server protocol, against a small fake `codex
app-server` that logs every request (the real CLI is in tests/e2e/test_live.py), and the decoder of
its notifications (shapes as codex 0.169.0 sends them)."""
from __future__ import annotations

import json
import sys

import pytest

from crewbridge.conversation import EXACT, FULL
from crewbridge.events import Done, Failure, MessageEnd, Notice, Session, Text, Usage
from crewbridge.providers.base import Turn
from crewbridge.providers.codex import CodexProvider
from crewbridge.providers.live_codex import AppServerDecoder, CodexLiveConversation

BLOCK = '```json\n{"type":"tool_use","name":"crew:read_file","input":{"path":"a"}}\n```\n'

# Streams argv[3] (a list of agent messages, each a list of deltas) for every turn. argv[2]: "slow"
# (each message completes only after the last delta, and an interrupt stops it), "race" (the whole
# turn completes before any interrupt is read), "native" (a command item runs first, then as race),
# "native-first" (native in the first turn only), "ask" (the server asks for an approval first and
# waits for the answer), "fail" (the turn fails), "late" (the answer to turn/start comes after the
# whole turn: codex answers and streams from different tasks).
FAKE = r"""
import json, sys
log, mode, messages = open(sys.argv[1], "a"), sys.argv[2], json.loads(sys.argv[3])
def out(obj):
    print(json.dumps(obj), flush=True)
def note(method, **params):
    out({"method": method, "params": {"threadId": "T1", "turnId": "U%d" % turns, **params}})
def complete(status):
    note("turn/completed", turn={"id": "U%d" % turns, "items": [], "status": status,
                                 "error": {"message": "model overloaded"} if status == "failed" else None})
turns = 0
for line in sys.stdin:
    log.write(line); log.flush()
    obj = json.loads(line)
    method, rid = obj.get("method"), obj.get("id")
    if rid is None or method is None:
        continue
    if method == "thread/start":
        out({"id": rid, "result": {"thread": {"id": "T1"}}})
    elif method == "turn/start":
        turns += 1
        answer = {"id": rid, "result": {"turn": {"id": "U%d" % turns, "status": "inProgress", "items": []}}}
        note("turn/started", turn={"id": "U%d" % turns, "status": "inProgress", "items": []})  # as codex does
        if mode != "late":
            out(answer)
        if mode == "ask":
            out({"id": "s1", "method": "item/commandExecution/requestApproval", "params": {}})
            log.write(sys.stdin.readline()); log.flush()  # the turn waits for the answer
        if mode == "native" or (mode == "native-first" and turns == 1):
            note("item/started", item={"type": "commandExecution", "id": "c1"})
        if mode == "fail":
            complete("failed")
            continue
        for n, deltas in enumerate(messages):
            note("item/started", item={"type": "agentMessage", "id": "m%d" % n, "text": ""})
            for delta in deltas:
                note("item/agentMessage/delta", itemId="m%d" % n, delta=delta)
            if mode != "slow" or n < len(messages) - 1:
                note("item/completed", item={"type": "agentMessage", "id": "m%d" % n, "text": "".join(deltas)})
        if mode != "slow":
            note("thread/tokenUsage/updated", tokenUsage={"last": {"inputTokens": 5, "outputTokens": 6},
                                                          "total": {"inputTokens": 5, "outputTokens": 6}})
            complete("completed")
        if mode == "late":
            out(answer)
    elif method == "turn/interrupt":
        out({"id": rid, "result": {}})
        if mode == "slow":
            complete("interrupted")
    else:
        out({"id": rid, "result": {}})
"""


@pytest.fixture
def start(tmp_path):
    made = []

    def go(mode, *messages):
        log = tmp_path / "requests.jsonl"
        conversation = CodexLiveConversation(CodexProvider(), Turn(prompt=""), cwd=tmp_path)
        conversation.argv = [sys.executable, "-c", FAKE, str(log), mode, json.dumps([list(m) for m in messages])]
        made.append(conversation)

        def requests():
            return [r for r in map(json.loads, log.read_text().splitlines()) if "method" in r and "id" in r]
        return conversation, requests
    yield go
    for conversation in made:
        conversation.close()


def stop_at_the_tail(conversation, message="read a"):
    events = conversation.send(message, None)
    text = ""
    for event in events:
        if isinstance(event, Text):
            text += event.text
            if "It says 7" in text:
                conversation.stop()
                break
    events.close()
    return text


def calls(requests):
    return [(r["method"], r["params"]) for r in requests()
            if r["method"] in ("thread/inject_items", "thread/revert")]


def assistant(text):
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def test_a_reply_stopped_mid_message_gets_the_text_up_to_the_block_injected(start):
    conversation, requests = start("slow", ["Reading.\n", BLOCK, "It says 7", " really."])
    stop_at_the_tail(conversation)
    assert conversation.keep("Reading.\n" + BLOCK, stopped=True) == EXACT
    assert calls(requests) == [("thread/inject_items", {"threadId": "T1", "items": [assistant("Reading.\n" + BLOCK)]})]
    interrupt = [r for r in requests() if r["method"] == "turn/interrupt"]
    assert [r["params"] for r in interrupt] == [{"threadId": "T1", "turnId": "U1"}]


def test_messages_codex_completed_before_the_stop_are_not_injected_again(start):
    conversation, requests = start("slow", ["Reading.\n"], [BLOCK, "It says 7", " really."])
    stop_at_the_tail(conversation)
    assert conversation.keep("Reading.\n" + BLOCK, stopped=True) == EXACT
    assert calls(requests) == [("thread/inject_items", {"threadId": "T1", "items": [assistant(BLOCK)]})]


def user(text):
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def thread_starts(requests):
    return [r["params"] for r in requests() if r["method"] == "thread/start"]


def test_a_turn_that_completed_with_its_tail_moves_to_a_new_thread_holding_the_exact_history(start):
    conversation, requests = start("race", ["Reading.\n", BLOCK, "It says 7."])
    list(conversation.send("hello", None))  # an earlier exchange, kept whole
    assert conversation.keep("", stopped=False) == FULL
    stop_at_the_tail(conversation)
    assert conversation.keep("Reading.\n" + BLOCK, stopped=True) == EXACT
    assert len(thread_starts(requests)) == 2  # an ephemeral thread cannot be reverted
    earlier = "Reading.\n" + BLOCK + "It says 7."
    assert calls(requests) == [("thread/inject_items", {"threadId": "T1", "items": [
        user("hello"), assistant(earlier), user("read a"), assistant("Reading.\n" + BLOCK)]})]


def test_a_completed_turn_that_ran_codexs_own_tools_is_left_whole(start):
    conversation, requests = start("native", ["Reading.\n", BLOCK, "It says 7."])
    stop_at_the_tail(conversation)
    assert conversation.keep("Reading.\n" + BLOCK, stopped=True) == FULL
    assert calls(requests) == []


def test_after_a_turn_with_codexs_own_tools_a_race_is_left_whole(start):
    conversation, requests = start("native-first", ["Reading.\n", BLOCK, "It says 7."])
    list(conversation.send("look around", None))
    conversation.keep("", stopped=False)
    stop_at_the_tail(conversation)
    assert conversation.keep("Reading.\n" + BLOCK, stopped=True) == FULL
    assert calls(requests) == [] and len(thread_starts(requests)) == 1


def test_a_reply_that_was_not_stopped_is_left_whole_and_the_next_turn_uses_the_same_thread(start):
    conversation, requests = start("race", ["Reading.\n", BLOCK, "It says 7."])
    first = list(conversation.send("read a", None))
    assert conversation.keep("Reading.\n" + BLOCK, stopped=False) == FULL
    second = list(conversation.send("the result", None))
    assert first[0] == Session("T1") and second[0] == Session("T1")
    assert first[-1] == Done() and Usage(5, 6) in first
    starts = [r["params"] for r in requests() if r["method"] == "turn/start"]
    assert starts == [{"threadId": "T1", "input": [{"type": "text", "text": "read a"}]},
                      {"threadId": "T1", "input": [{"type": "text", "text": "the result"}]}]
    assert calls(requests) == []


def test_the_thread_is_started_once_with_the_experimental_api_and_the_modes_sandbox(start):
    conversation, requests = start("race", ["Hi."])
    list(conversation.send("hi", None))
    initialize, thread = requests()[:2]
    assert initialize["method"] == "initialize"
    assert initialize["params"]["capabilities"] == {"experimentalApi": True}
    assert thread["method"] == "thread/start"
    assert thread["params"]["sandbox"] == "read-only" and thread["params"]["approvalPolicy"] == "never"
    assert thread["params"]["ephemeral"] is True  # no session file for Codex to read again each turn


def test_a_request_from_the_server_is_answered_so_the_turn_goes_on(start, tmp_path):
    conversation, _ = start("ask", ["Hi."])
    events = list(conversation.send("hi", None))
    assert "".join(e.text for e in events if isinstance(e, Text)) == "Hi."
    answers = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    [answer] = [a for a in answers if a.get("id") == "s1"]
    assert answer["error"]["message"] == "crew does not handle item/commandExecution/requestApproval"


def test_a_turn_that_completes_before_codex_answers_its_turn_start_ends_all_the_same(start):
    conversation, _ = start("late", ["It says 7."])
    events = list(conversation.send("hi", None))
    assert "".join(e.text for e in events if isinstance(e, Text)) == "It says 7." and events[-1] == Done()
    assert conversation.keep("It says 7.", stopped=False) == FULL
    assert "".join(e.text for e in conversation.send("again", None) if isinstance(e, Text)) == "It says 7."


def test_a_failed_turn_is_a_failure(start):
    conversation, _ = start("fail", ["Hi."])
    events = list(conversation.send("hi", None))
    assert events[-2:] == [Failure("model overloaded"), Done(ok=False)]


def n(method, **params):
    return {"method": method, "params": {"threadId": "T1", "turnId": "U1", **params}}


@pytest.mark.parametrize("notification, events", [
    (n("item/agentMessage/delta", itemId="m1", delta="Let me read.\n"), [Text("Let me read.\n")]),
    (n("item/started", item={"type": "agentMessage", "id": "m1", "text": ""}), []),
    (n("item/completed", item={"type": "agentMessage", "id": "m1", "text": "Hi"}), [MessageEnd()]),
    (n("item/started", item={"type": "userMessage", "id": "u", "content": []}), []),
    (n("item/started", item={"type": "commandExecution", "id": "c"}), [Notice("native_commandExecution")]),
    (n("item/completed", item={"type": "commandExecution", "id": "c"}), []),
    (n("thread/tokenUsage/updated", tokenUsage={"last": {"inputTokens": 11, "outputTokens": 7},
                                                "total": {"inputTokens": 30, "outputTokens": 9}}), [Usage(11, 7)]),
    (n("turn/completed", turn={"id": "U1", "status": "interrupted", "items": []}), [Done()]),
    (n("turn/completed", turn={"id": "U1", "status": "failed", "error": {"message": "429 slow down"}}),
     [Failure("429 slow down"), Done(ok=False)]),
    (n("error", error={"message": "stream lost"}, willRetry=True), [Notice("retry", "stream lost")]),
    (n("error", error={"message": "stream lost"}, willRetry=False), [Failure("stream lost")]),
    (n("account/rateLimits/updated"), [Notice("unknown", "account/rateLimits/updated")]),
])
def test_app_server_notifications_decode_to_events(notification, events):
    assert AppServerDecoder().event(notification) == events
