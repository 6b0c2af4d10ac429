"""The live Codex conversation's side of the app-server protocol, against a small fake `codex
app-server` that logs every request (the real CLI is in tests/e2e/test_live.py), and the decoder of
its notifications (shapes as codex 0.169.0 sends them)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from crewbridge.providers.base import Turn
from crewbridge.providers.codex import CodexProvider

from crewbridge.base.decoded import Done, Failure, MessageEnd, Notice, OwnCall, OwnResult, Session, Text, Usage
from crewbridge.conversations import EXACT, FULL
from crewbridge.conversations.codex import AppServerDecoder, CodexLiveConversation
from crewbridge.toolkit.registry import Tool, ToolResult

FIXTURES = Path(__file__).parent / "fixtures"
BLOCK = '```json\n{"type":"tool_use","name":"crew:read_file","input":{"path":"a"}}\n```\n'

# Streams argv[3] (a list of agent messages, each a list of deltas) for every turn. argv[2]: "slow"
# (each message completes only after the last delta, and an interrupt stops it), "race" (the whole
# turn completes before any interrupt is read), "native" (a command item runs first, then as race),
# "native-first" (native in the first turn only), "fail" (the turn fails), "late" (the answer to
# turn/start comes after the whole turn: codex answers and streams from different tasks). argv[4]
# (optional): what the server sends first in each turn, [method, params, request?] each; it waits
# for the answer to each request, answering crew's own requests (turn/steer) meanwhile.
FAKE = r"""
import json, sys
log, mode, messages = open(sys.argv[1], "a"), sys.argv[2], json.loads(sys.argv[3])
asks = json.loads(sys.argv[4]) if len(sys.argv) > 4 else []
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
        for n, (ask, params, request) in enumerate(asks):
            params = {"threadId": "T1", "turnId": "U%d" % turns, **params}
            if not request:
                note(ask, **params)
                continue
            out({"id": n, "method": ask, "params": params})
            while True:  # the turn waits for the answer
                line = sys.stdin.readline()
                log.write(line); log.flush()
                got = json.loads(line)
                if got.get("id") == n and "method" not in got:
                    break
                if "method" in got and "id" in got:
                    out({"id": got["id"], "result": {"turnId": "U%d" % turns}})
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

    def go(mode, *messages, asks=(), channel=None, native=False):
        log = tmp_path / "requests.jsonl"
        conversation = CodexLiveConversation(CodexProvider(), Turn(prompt="", native=native), cwd=tmp_path)
        conversation.argv = [
            sys.executable,
            "-c",
            FAKE,
            str(log),
            mode,
            json.dumps([list(m) for m in messages]),
            json.dumps(list(asks)),
        ]
        if channel is not None:
            conversation.serve(channel)
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
    return [(r["method"], r["params"]) for r in requests() if r["method"] in ("thread/inject_items", "thread/revert")]


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
    assert calls(requests) == [
        (
            "thread/inject_items",
            {
                "threadId": "T1",
                "items": [user("hello"), assistant(earlier), user("read a"), assistant("Reading.\n" + BLOCK)],
            },
        )
    ]


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
    assert starts == [
        {"threadId": "T1", "input": [{"type": "text", "text": "read a"}]},
        {"threadId": "T1", "input": [{"type": "text", "text": "the result"}]},
    ]
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


def answers(tmp_path):
    """crew's answers to the server's requests, in order."""
    lines = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    return [line for line in lines if "method" not in line]


def test_a_request_from_the_server_is_answered_so_the_turn_goes_on(start, tmp_path):
    conversation, _ = start("race", ["Hi."], asks=[("item/tool/requestUserInput", {"questions": []}, True)])
    events = list(conversation.send("hi", None))
    assert "".join(e.text for e in events if isinstance(e, Text)) == "Hi."
    [answer] = answers(tmp_path)
    assert answer["error"]["message"] == "crew does not handle item/tool/requestUserInput"


READ = Tool(
    "read_file",
    "Read a file.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    func=lambda ctx, path: path,
)


class Channel:
    """A loop's channel (crewbridge.toolkit.native.Channel) that records what it is asked."""

    def __init__(self, refusal=None, decides=True):
        self.refusal, self.decides_ = refusal, decides
        self.calls, self.asked, self.refs, self.owned = [], [], [], []

    def decides(self):
        return self.decides_

    def tools(self):
        return [READ]

    def call(self, name, arguments, stop=None):
        self.calls.append((name, arguments))
        return (
            ToolResult(True, data="the secret is 42")
            if "path" in arguments
            else ToolResult(False, error="invalid input for crew:read_file: 'path' is a required property")
        )

    def permit(self, tool, arguments, read_only, ref=None):
        self.asked.append((tool, arguments, read_only))
        self.refs.append(ref)
        return self.refusal

    def own(self, event):
        self.owned.append(event)


def test_with_a_channel_codex_asks_crew_before_its_own_tools_and_without_one_it_does_not(start):
    conversation, requests = start("race", ["Hi."], channel=Channel())
    list(conversation.send("hi", None))
    [thread] = thread_starts(requests)
    assert thread["approvalPolicy"] == "untrusted" and "dynamicTools" not in thread  # text mode


def test_when_crews_policy_could_refuse_nothing_codexs_sandbox_decides_alone(start):
    conversation, requests = start("race", ["Hi."], channel=Channel(decides=False))
    list(conversation.send("hi", None))
    [thread] = thread_starts(requests)
    assert thread["approvalPolicy"] == "never"  # an allowed command the sandbox blocks is not rerun outside it


def test_native_tools_are_the_threads_dynamic_tools_named_with_crews_prefix(start):
    conversation, requests = start("race", ["Hi."], channel=Channel(), native=True)
    list(conversation.send("hi", None))
    [thread] = thread_starts(requests)
    assert thread["dynamicTools"] == [
        {"type": "function", "name": "crew_read_file", "description": "Read a file.", "inputSchema": READ.input_schema}
    ]


def test_a_native_call_runs_through_the_channel_and_its_result_is_the_answer(start, tmp_path):
    channel = Channel()
    conversation, _ = start(
        "race",
        ["It says 42."],
        channel=channel,
        native=True,
        asks=[
            ("item/tool/call", {"callId": "c1", "tool": "crew_read_file", "arguments": {"path": "a"}}, True),
            ("item/tool/call", {"callId": "c2", "tool": "crew_read_file", "arguments": {"paht": "a"}}, True),
            ("item/tool/call", {"callId": "c3", "tool": "read_file", "arguments": {"path": "a"}}, True),
        ],
    )
    events = list(conversation.send("read a", None))
    assert "".join(e.text for e in events if isinstance(e, Text)) == "It says 42."
    assert channel.calls == [("read_file", {"path": "a"}), ("read_file", {"paht": "a"})]  # the bare names
    found, invalid, unknown = [answer["result"] for answer in answers(tmp_path)]
    assert found == {"contentItems": [{"type": "inputText", "text": "the secret is 42"}], "success": True}
    assert invalid == {
        "contentItems": [
            {"type": "inputText", "text": "invalid input for crew:read_file: 'path' is a required property"}
        ],
        "success": False,
    }
    assert unknown["success"] is False and "not one of crew's tools" in unknown["contentItems"][0]["text"]


COMMAND = {
    "itemId": "c1",
    "command": "/bin/bash -lc 'touch made.txt'",
    "cwd": "/w",
    "availableDecisions": ["accept", "cancel"],
}


def test_a_command_crews_policy_allows_is_accepted(start, tmp_path):
    channel = Channel()
    conversation, _ = start(
        "race", ["Done."], channel=channel, asks=[("item/commandExecution/requestApproval", COMMAND, True)]
    )
    list(conversation.send("make it", None))
    assert channel.asked == [("exec_command", {"command": "/bin/bash -lc 'touch made.txt'", "cwd": "/w"}, False)]
    assert channel.refs == ["c1"]  # the item's id: the record links the question to codex's item
    assert [answer["result"] for answer in answers(tmp_path)] == [{"decision": "accept"}]


def test_a_refused_patch_is_declined_after_codex_has_the_reason_for_the_model(start):
    channel = Channel(refusal="crew does not allow apply_patch for query mode")
    change = {"path": "/w/made.txt", "kind": {"type": "add"}, "diff": "hi\n"}
    conversation, _ = start(
        "race",
        ["Done."],
        channel=channel,
        asks=[
            ("item/started", {"item": {"type": "fileChange", "id": "p1", "changes": [change]}}, False),
            ("item/fileChange/requestApproval", {"itemId": "p1", "reason": None}, True),
        ],
    )
    list(conversation.send("make it", None))
    assert channel.asked == [("apply_patch", {"changes": [change]}, False)]
    log = [json.loads(line) for line in (conversation.cwd / "requests.jsonl").read_text().splitlines()]
    steer_at = next(i for i, line in enumerate(log) if line.get("method") == "turn/steer")
    decline_at = next(i for i, line in enumerate(log) if line.get("result") == {"decision": "decline"})
    assert steer_at < decline_at  # the model reads the reason with the refusal, in the same request
    assert log[steer_at]["params"] == {
        "threadId": "T1",
        "expectedTurnId": "U1",
        "input": [
            {
                "type": "text",
                "text": "crew, which runs your tools under the user's policy, did not let your apply_patch "
                "call run: crew does not allow apply_patch for query mode",
            }
        ],
    }


def test_a_command_codex_would_run_outside_its_sandbox_tells_the_policy_why(start):
    channel = Channel()
    reason = "command failed; retry without sandbox?"
    conversation, _ = start(
        "race",
        ["Done."],
        channel=channel,
        asks=[("item/commandExecution/requestApproval", {**COMMAND, "reason": reason}, True)],
    )
    list(conversation.send("make it", None))
    [(_, asked, _)] = channel.asked
    assert asked["reason"] == "command failed; retry without sandbox?"


# as codex 0.169.0 asks before a tool of an MCP server whose default_tools_approval_mode is "prompt"
MCP_TOOL = {
    "serverName": "vault",
    "mode": "form",
    "_meta": {"codex_approval_kind": "mcp_tool_call", "tool_name": "launch_code", "tool_params": {"which": 1}},
    "message": 'Allow the vault MCP server to run tool "launch_code"?',
    "requestedSchema": {"type": "object", "properties": {}},
}


def test_an_mcp_servers_tool_is_run_as_crews_policy_says(start, tmp_path):
    channel = Channel()
    conversation, _ = start(
        "race", ["Done."], channel=channel, asks=[("mcpServer/elicitation/request", MCP_TOOL, True)]
    )
    list(conversation.send("ask the vault", None))
    assert channel.asked == [("mcp__vault__launch_code", {"which": 1}, False)]
    assert channel.refs == [None]  # codex's question names no item: the record links it by the tool
    assert [answer["result"] for answer in answers(tmp_path)] == [{"action": "accept"}]


def test_a_refused_mcp_tool_is_declined_after_codex_has_the_reason_for_the_model(start):
    channel = Channel(refusal="crew does not allow mcp__vault__launch_code for query mode")
    conversation, _ = start(
        "race", ["Done."], channel=channel, asks=[("mcpServer/elicitation/request", MCP_TOOL, True)]
    )
    list(conversation.send("ask the vault", None))
    log = [json.loads(line) for line in (conversation.cwd / "requests.jsonl").read_text().splitlines()]
    steer_at = next(i for i, line in enumerate(log) if line.get("method") == "turn/steer")
    decline_at = next(i for i, line in enumerate(log) if line.get("result") == {"action": "decline"})
    assert steer_at < decline_at and "for query mode" in log[steer_at]["params"]["input"][0]["text"]


def test_what_an_mcp_server_itself_asks_is_declined_unasked(start, tmp_path):
    channel = Channel()
    form = {"serverName": "vault", "mode": "form", "message": "Your name?", "requestedSchema": {"type": "object"}}
    conversation, _ = start("race", ["Done."], channel=channel, asks=[("mcpServer/elicitation/request", form, True)])
    list(conversation.send("ask the vault", None))
    assert channel.asked == [] and [answer["result"] for answer in answers(tmp_path)] == [{"action": "decline"}]


def test_a_new_thread_after_a_race_offers_the_same_dynamic_tools(start):
    conversation, requests = start("race", ["Reading.\n", BLOCK, "It says 7."], channel=Channel(), native=True)
    stop_at_the_tail(conversation)
    assert conversation.keep("Reading.\n" + BLOCK, stopped=True) == EXACT
    first, second = thread_starts(requests)
    assert first == second and [tool["name"] for tool in second["dynamicTools"]] == ["crew_read_file"]


def test_a_turn_that_completes_before_codex_answers_its_turn_start_ends_all_the_same(start):
    conversation, _ = start("late", ["It says 7."])
    events = list(conversation.send("hi", None))
    assert "".join(e.text for e in events if isinstance(e, Text)) == "It says 7." and events[-1] == Done()
    assert conversation.keep("It says 7.", stopped=False) == FULL
    assert "".join(e.text for e in conversation.send("again", None) if isinstance(e, Text)) == "It says 7."


def test_a_failed_turn_is_a_failure(start):
    conversation, _ = start("fail", ["Hi."])
    events = list(conversation.send("hi", None))
    assert events[-2:] == [Failure("model overloaded"), Done()]


def n(method, **params):
    return {"method": method, "params": {"threadId": "T1", "turnId": "U1", **params}}


@pytest.mark.parametrize(
    "notification, events",
    [
        (n("item/agentMessage/delta", itemId="m1", delta="Let me read.\n"), [Text("Let me read.\n")]),
        (n("item/started", item={"type": "agentMessage", "id": "m1", "text": ""}), []),
        (n("item/completed", item={"type": "agentMessage", "id": "m1", "text": "Hi"}), [MessageEnd()]),
        (n("item/started", item={"type": "userMessage", "id": "u", "content": []}), []),
        (n("item/started", item={"type": "reasoning", "id": "r"}), [Notice("item", "reasoning")]),
        (n("item/started", item={"type": "dynamicToolCall", "id": "d", "tool": "crew_read_file"}), []),
        (
            n(
                "thread/tokenUsage/updated",
                tokenUsage={
                    "last": {"inputTokens": 11, "outputTokens": 7},
                    "total": {"inputTokens": 30, "outputTokens": 9},
                },
            ),
            [Usage(11, 7)],
        ),
        (
            n(
                "thread/tokenUsage/updated",
                tokenUsage={"last": {"inputTokens": 11, "outputTokens": 7}, "modelContextWindow": 258_400},
            ),
            [Usage(11, 7, context_window=258_400)],
        ),
        (n("turn/completed", turn={"id": "U1", "status": "interrupted", "items": []}), [Done()]),
        (
            n("turn/completed", turn={"id": "U1", "status": "failed", "error": {"message": "429 slow down"}}),
            [Failure("429 slow down"), Done()],
        ),
        (n("error", error={"message": "stream lost"}, willRetry=True), [Notice("retry", "stream lost")]),
        (n("error", error={"message": "stream lost"}, willRetry=False), [Failure("stream lost")]),
        (n("account/rateLimits/updated"), [Notice("unknown", "account/rateLimits/updated")]),
    ],
)
def test_app_server_notifications_decode_to_events(notification, events):
    assert AppServerDecoder().event(notification) == events


def own_events(name):
    """The OwnCall and OwnResult events of a captured app-server stream (fixtures/own_*.jsonl)."""
    decoder = AppServerDecoder()
    lines = map(json.loads, (FIXTURES / name).read_text().splitlines())
    notifications = [line for line in lines if "method" in line and "id" not in line]
    return [e for line in notifications for e in decoder.event(line) if isinstance(e, (OwnCall, OwnResult))]


def test_codexs_own_items_are_own_calls_named_and_read_as_its_questions_are():
    # codex 0.169.0 asked about each (approval policy untrusted): the command crew allowed, the one
    # crew refused (rm: declined), the patch; each item's input is what its question carried
    cwd = "/tmp/cap-296856wo/work"
    made, rm, patch = (e for e in own_events("own_codex_app_asked.jsonl") if isinstance(e, OwnCall))
    assert (made.name, made.input) == ("exec_command", {"command": "/bin/bash -lc 'echo made > made.txt'", "cwd": cwd})
    assert (rm.name, rm.input["command"]) == ("exec_command", "/bin/bash -lc 'rm notes.txt'")
    change = {"path": f"{cwd}/p.txt", "kind": {"type": "add"}, "diff": "made\n"}
    assert (patch.name, patch.input) == ("apply_patch", {"changes": [change]})
    results = [
        (e.ref, e.ok, e.output, e.exit_code)
        for e in own_events("own_codex_app_asked.jsonl")
        if isinstance(e, OwnResult)
    ]
    assert results == [
        (made.ref, True, "", 0),
        (rm.ref, False, "codex: declined", None),
        (patch.ref, True, f"add {cwd}/p.txt", None),
    ]


def test_a_command_codex_runs_unasked_and_an_mcp_tool_are_own_calls_with_their_output():
    command = own_events("own_codex_app_command.jsonl")
    assert [type(e).__name__ for e in command] == ["OwnCall", "OwnResult"]
    assert command[0].input["command"] == "/bin/bash -lc 'echo made > made.txt; cat notes.txt'"
    assert (command[1].ok, command[1].output, command[1].exit_code) == (True, "secret 7-4-1\n", 0)
    ref = "exec-ec4b2f9b-9d92-4d42-929c-45ea4bd67387"
    assert own_events("own_codex_app_mcp.jsonl") == [
        OwnCall(ref, "mcp__vault__launch_code", {}),
        OwnResult(ref, True, "the vault says 7-4-1"),
    ]
