"""The native Gemini conversation's side of ACP (`gemini --acp`), against a small fake ACP agent that
logs every message it reads and, like gemini, reaches crew's MCP server over HTTP with the URL and
header session/new gave it (the real CLI is in tests/e2e/test_native_gemini_real.py); and the pieces
that read Gemini's messages (shapes as gemini 0.61.0 sends them)."""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import tomllib
from crewbridge.providers.base import McpServer, Turn
from crewbridge.providers.gemini import GeminiProvider

from crewbridge.base.decoded import Done, Failure, MessageEnd, Notice, OwnCall, OwnResult, Session, Text, Usage
from crewbridge.conversations import FULL
from crewbridge.conversations.gemini_acp import (
    AcpDecoder,
    GeminiAcpConversation,
    asking_policy,
    choose,
    native_input,
    prompt_end,
)
from crewbridge.errors import MaxTurnsReached
from crewbridge.protocol.jsonrpc import Reply
from crewbridge.toolkit.registry import Tool, ToolResult

FIXTURES = Path(__file__).parent / "fixtures"

OPTIONS = [
    {"optionId": "proceed_always", "name": "Allow for this session", "kind": "allow_always"},
    {"optionId": "proceed_once", "name": "Allow", "kind": "allow_once"},
    {"optionId": "cancel", "name": "Reject", "kind": "reject_once"},
]

# argv[2] is what every prompt does: "text" (streams two chunks), "ask" (asks permission for tool
# argv[3], a shell command, then says which option crew chose), "crew" (calls crew's read_file over the session's
# MCP server, first without its header, then as a client does, and says what it got), "fail" (a rate limit), "cancel"
# (streams a chunk, then waits for session/cancel).
FAKE = r"""
import json, sys, urllib.request, urllib.error
log, mode, asked = open(sys.argv[1], "a"), sys.argv[2], sys.argv[3]
server = None
def out(obj):
    print(json.dumps(obj), flush=True)
def update(sid, **update):
    out({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}})
def chunk(sid, text):
    update(sid, sessionUpdate="agent_message_chunk", content={"type": "text", "text": text})
def read():
    line = sys.stdin.readline()
    log.write(line); log.flush()
    return json.loads(line)
session = {}
def mcp(message, headers):
    request = urllib.request.Request(server["url"], json.dumps(message).encode(), method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                 **session, **headers})
    try:
        with urllib.request.urlopen(request) as answer:
            body = answer.read().decode()
            session.update({"Mcp-Session-Id": answer.headers["Mcp-Session-Id"]} if "Mcp-Session-Id" in answer.headers
                           else {})
    except urllib.error.HTTPError as exc:
        return exc.code
    data = [line[6:] for line in body.splitlines() if line.startswith("data: ") and line[6:].strip()]
    return json.loads(data[-1] if data else body or "null")
while True:
    obj = read()
    method, rid, params = obj.get("method"), obj.get("id"), obj.get("params") or {}
    if method == "initialize":
        out({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": 1, "agentCapabilities": {}}})
    elif method == "session/new":
        server = (params.get("mcpServers") or [None])[0]
        out({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": "S1"}})
    elif method == "session/prompt":
        sid, end = params["sessionId"], "end_turn"
        if mode == "text":
            chunk(sid, "Hello ")
            chunk(sid, "there.")
        elif mode == "ask":
            call = {"toolCallId": asked + "__" + asked + "_1_0", "status": "pending",
                    "title": "touch made.txt", "kind": "execute", "content": [], "locations": []}
            out({"jsonrpc": "2.0", "id": 0, "method": "session/request_permission",
                 "params": {"sessionId": sid, "options": OPTIONS, "toolCall": call}})
            chunk(sid, json.dumps(read()["result"]))
        elif mode == "crew":
            headers = {server["headers"][0]["name"]: server["headers"][0]["value"]}
            without = mcp({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {})
            mcp({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}},
                headers)
            mcp({"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
            listed = mcp({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers)
            update(sid, sessionUpdate="tool_call", toolCallId="mcp_crewbridge_read_file__1", status="in_progress",
                   title="read_file", kind="other")
            called = mcp({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                          "params": {"name": "read_file", "arguments": {"path": "a.txt"}}}, headers)
            chunk(sid, json.dumps({"without": without, "listed": [t["name"] for t in listed["result"]["tools"]],
                                   "called": called.get("result", called)}))
        elif mode == "fail":
            out({"jsonrpc": "2.0", "id": rid, "error": {"code": 429, "message": "Rate limit exceeded."}})
            continue
        elif mode == "cancel":
            chunk(sid, "Reading")
            read()  # session/cancel
            end = "cancelled"
        out({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": end, "_meta": {"quota": {
            "token_count": {"input_tokens": 12, "output_tokens": 5}}}}})
""".replace("OPTIONS", json.dumps(OPTIONS))


class FakeChannel:
    """A Channel that records what it is asked and answers as told."""

    def __init__(self, refusal=None, error=None):
        self.refusal, self.error = refusal, error
        self.calls, self.permits, self.threads, self.refs, self.owned = [], [], [], [], []

    def tools(self):
        return [
            Tool(
                "read_file",
                "Read a file.",
                {"type": "object", "properties": {"path": {"type": "string"}}},
                lambda ctx, **_: None,
                read_only=True,
            )
        ]

    def call(self, name, arguments, stop=None):
        self.calls.append((name, arguments))
        self.threads.append(threading.current_thread())
        if self.error is not None:
            raise self.error
        return ToolResult(True, data="the secret is 42")

    def permit(self, tool, arguments, read_only, ref=None):
        self.permits.append((tool, arguments, read_only))
        self.refs.append(ref)
        return self.refusal

    def own(self, event):
        self.owned.append(event)


@pytest.fixture
def start(tmp_path):
    made = []

    def go(mode, channel=None, native=True, asked="run_shell_command", trace=()):
        log = tmp_path / "messages.jsonl"
        turn = Turn(prompt="", native=native, trace=trace)
        conversation = GeminiAcpConversation(GeminiProvider(), turn, cwd=tmp_path)
        conversation.argv = [sys.executable, "-c", FAKE, str(log), mode, asked]
        assert conversation.serve(channel or FakeChannel()) is native
        made.append(conversation)

        def messages():
            return [json.loads(line) for line in log.read_text().splitlines()]

        return conversation, messages

    yield go
    for conversation in made:
        conversation.close()


def reply(conversation, message="hi"):
    return list(conversation.send(message, None))


def text(events):
    return "".join(event.text for event in events if isinstance(event, Text))


def test_the_command_is_gemini_in_acp_mode_asking_before_its_own_writes_and_crews_tools_allowed(tmp_path):
    conversation = GeminiAcpConversation(GeminiProvider(), Turn(prompt="", model="gemini-2.5-flash"), cwd=tmp_path)
    argv = conversation.argv
    assert argv[:3] == ["gemini", "-m", "gemini-2.5-flash"] and "--acp" in argv
    assert argv[argv.index("--approval-mode") + 1] == "default"
    assert argv[argv.index("--allowed-tools") + 1] == "mcp_crewbridge_*"
    assert conversation.env["GEMINI_CLI_NO_RELAUNCH"] == "true"


@pytest.mark.slow
def test_a_message_is_a_session_prompt_and_its_answer_ends_the_reply_with_usage(start, tmp_path):
    conversation, messages = start("text")
    events = reply(conversation, "say hello")
    assert events[0] == Session("S1") and conversation.session_id == "S1"
    assert text(events) == "Hello there."
    assert events[-3:] == [MessageEnd(), Usage(12, 5), Done()]
    initialize, new, prompt = messages()
    assert initialize["method"] == "initialize" and initialize["params"]["protocolVersion"] == 1
    assert new["method"] == "session/new" and new["params"]["cwd"] == str(tmp_path)
    assert prompt["params"] == {"sessionId": "S1", "prompt": [{"type": "text", "text": "say hello"}]}
    assert text(reply(conversation)) == "Hello there."  # the same process and session
    assert [m["method"] for m in messages()].count("session/new") == 1


@pytest.mark.slow
def test_a_traced_runs_prompt_carries_its_agents_span_in_acps_meta(start):
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
    conversation, messages = start("text", trace=(("TRACEPARENT", traceparent), ("TRACESTATE", "crew=1")))
    assert conversation.env["TRACEPARENT"] == traceparent
    assert text(reply(conversation, "say hello")) == "Hello there."
    prompt = messages()[-1]
    assert prompt["method"] == "session/prompt"
    assert prompt["params"]["_meta"] == {"traceparent": traceparent, "tracestate": "crew=1"}


@pytest.mark.slow
def test_crews_tools_are_an_http_mcp_server_named_crewbridge_that_needs_its_token(start):
    channel = FakeChannel()
    conversation, messages = start("crew", channel)
    answer = json.loads(text(reply(conversation, "read a.txt")))
    [server] = messages()[1]["params"]["mcpServers"]
    # not "crew": gemini lets in the servers named in --allowed-mcp-server-names, a `crew mcp` you
    # registered as crew (crew mcp install) included
    assert server["type"] == "http" and server["name"] == "crewbridge" and server["url"].startswith("http://127.0.0.1:")
    [header] = server["headers"]
    assert header["name"] == "Authorization" and header["value"].startswith("Bearer ") and len(header["value"]) > 30
    assert answer["without"] == 401  # no token, no tools
    assert answer["listed"] == ["read_file"]
    assert answer["called"] == {"content": [{"type": "text", "text": "the secret is 42"}], "isError": False}
    assert channel.calls == [("read_file", {"path": "a.txt"})]
    assert channel.threads == [threading.current_thread()]  # the loop's thread, which reads gemini
    conversation.close()
    with pytest.raises(urllib.error.URLError):  # closed with the conversation
        urllib.request.urlopen(urllib.request.Request(server["url"], b"{}", method="POST"), timeout=5)


@pytest.mark.slow
def test_without_native_tools_no_mcp_server_is_given(start):
    conversation, messages = start("text", native=False)
    reply(conversation)
    assert messages()[1]["params"]["mcpServers"] == []


@pytest.mark.slow
def test_a_call_that_ends_the_run_ends_the_reply_at_once_and_gemini_gets_an_error(start):
    channel = FakeChannel(error=MaxTurnsReached("@gemini made more than 50 native tool calls"))
    conversation, _ = start("crew", channel)
    events = conversation.send("read a.txt", None)
    with pytest.raises(MaxTurnsReached, match="more than 50"):
        list(events)  # raised as the call ends, before gemini writes another line
    said = ""
    while not said:  # the tool_call update gemini wrote before the call may not have been read yet
        said = text(conversation.reading.decode_object(conversation.process.read(time.monotonic() + 10)))
    told = json.loads(said)
    assert told["called"] == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {"code": -32603, "message": "@gemini made more than 50 native tool calls"},
    }


@pytest.mark.parametrize(("refusal", "option"), [(None, "proceed_once"), ("crew does not allow it", "cancel")])
@pytest.mark.slow
def test_geminis_own_tools_are_decided_by_crews_policy(start, refusal, option):
    channel = FakeChannel(refusal=refusal)
    conversation, _ = start("ask", channel)
    events = reply(conversation, "make a file")
    assert json.loads(text(events)) == {"outcome": {"outcome": "selected", "optionId": option}}
    assert channel.permits == [("run_shell_command", {"command": "touch made.txt"}, False)]
    assert channel.refs == ["run_shell_command__run_shell_command_1_0"]  # the call's id: the record links them
    assert MessageEnd() in events[: events.index(next(e for e in events if isinstance(e, Text)))]


@pytest.mark.slow
def test_crews_own_tools_are_allowed_when_gemini_asks_about_them(start):
    channel = FakeChannel(refusal="crew does not allow it")
    conversation, _ = start("ask", channel, asked="mcp_crewbridge_read_file")
    assert json.loads(text(reply(conversation))) == {"outcome": {"outcome": "selected", "optionId": "proceed_once"}}
    assert channel.permits == []  # crew's policy decides in the call itself


@pytest.mark.slow
def test_a_failed_prompt_is_a_failure_with_its_status(start):
    conversation, _ = start("fail")
    events = reply(conversation)
    assert Failure("Rate limit exceeded.", 429) in events and events[-1] == Done()


@pytest.mark.slow
def test_a_stopped_reply_is_cancelled_and_stays_whole(start):
    conversation, messages = start("cancel")
    events = conversation.send("read", None)
    for event in events:
        if isinstance(event, Text):
            conversation.stop()
            break
    events.close()
    assert conversation.keep("Reading", stopped=True) == FULL
    assert messages()[-1] == {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "S1"}}
    assert conversation.late_usage() == [Usage(12, 5)]  # read while finishing the stopped reply


def test_a_conversation_cannot_be_resumed_by_gemini_itself(tmp_path):
    conversation = GeminiAcpConversation(GeminiProvider(), Turn(prompt="", native=True), cwd=tmp_path)
    assert conversation.resume(None) is False  # the first message replays the history


def test_the_decoder_reads_text_chunks_and_geminis_tool_calls():
    decoder = AcpDecoder()

    def update(**fields):
        params = {"sessionId": "S1", "update": fields}
        return json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": params})

    assert decoder.decode(update(sessionUpdate="agent_message_chunk", content={"type": "text", "text": "Hi"})) == [
        Text("Hi")
    ]
    started = dict(sessionUpdate="tool_call", toolCallId="read_file__1", title="notes.txt", status="in_progress")
    assert decoder.decode(update(**started, kind="read", content=[], locations=[{"path": "/w/notes.txt"}])) == [
        MessageEnd(),
        OwnCall("read_file__1", "read_file", {"title": "notes.txt", "paths": ["/w/notes.txt"]}),
    ]
    assert decoder.decode(update(sessionUpdate="tool_call_update", toolCallId="read_file__1", status="completed")) == [
        OwnResult("read_file__1", True)
    ]
    crews = dict(sessionUpdate="tool_call", toolCallId="mcp_crewbridge_read_file__2", status="in_progress")
    assert decoder.decode(update(**crews, title="read_file", kind="other")) == [MessageEnd()]  # crew's own
    assert decoder.decode(update(sessionUpdate="agent_thought_chunk", content={"type": "text", "text": "hm"})) == [
        Notice("agent_thought_chunk")
    ]
    assert isinstance(decoder.decode(update(sessionUpdate="agent_message_chunk"))[0], Notice)  # no text: a notice


def captured(name):
    """The OwnCall and OwnResult events of a captured gemini --acp stream (fixtures/own_*.jsonl)."""
    decoder = AcpDecoder()
    return [
        event
        for line in (FIXTURES / name).read_text().splitlines()
        for event in decoder.decode(line)
        if isinstance(event, (OwnCall, OwnResult))
    ]


def test_each_of_geminis_own_calls_is_one_call_whether_it_asked_first_or_not():
    # gemini 0.61 asked about write_file and run_shell_command (no tool_call before the question: the
    # first update is the call's last), ran read_file unasked, and refused a read outside the project
    events = captured("own_gemini_acp.jsonl")
    calls = [(e.name, e.input) for e in events if isinstance(e, OwnCall)]
    assert [name for name, _ in calls] == ["write_file", "run_shell_command", "read_file", "read_file"]
    assert calls[0][1] == {"file_path": "/tmp/cap-t_vs5pwf/work/w.txt", "content": "written\n"}
    assert calls[1][1] == {"command": "echo made > made.txt"}  # as its question showed it
    results = [(e.ok, e.output) for e in events if isinstance(e, OwnResult)]
    assert [ok for ok, _ in results] == [True, True, True, False]
    assert results[0][1] == "changed /tmp/cap-t_vs5pwf/work/w.txt" and "Path not in workspace" in results[3][1]
    assert [e.ref for e in events] == [ref for e in events if isinstance(e, OwnCall) for ref in (e.ref, e.ref)]


def test_an_mcp_servers_tool_is_an_own_call_with_its_output():
    ref = "mcp_vault_launch_code__mcp_vault_launch_code_1796609010467_0"
    assert captured("own_gemini_acp_mcp.jsonl") == [
        OwnCall(ref, "mcp_vault_launch_code", {"title": "launch_code (vault MCP Server)"}),
        OwnResult(ref, True, "the vault says 7-4-1"),
    ]


def test_a_prompt_that_ends_early_is_a_failure():
    events = prompt_end(Reply(3, {"stopReason": "max_tokens"}))
    assert events == [MessageEnd(), Usage(0, 0), Failure("gemini ended the reply early: max_tokens"), Done()]
    assert prompt_end(Reply(3, {}, {"code": -32603, "message": "boom"}))[1] == Failure("boom")


def test_the_input_of_geminis_own_tool_is_what_its_question_shows():
    assert native_input({"toolCallId": "x", "kind": "execute", "title": "rm -rf build"}) == {"command": "rm -rf build"}
    edit = {
        "kind": "edit",
        "title": "Writing to new.txt",
        "locations": [{"path": "/w/new.txt"}],
        "content": [{"type": "diff", "path": "/w/new.txt", "oldText": "", "newText": "hello"}],
    }
    assert native_input(edit) == {"file_path": "/w/new.txt", "content": "hello"}
    fetch = {"kind": "fetch", "title": "Fetching https://example.com", "locations": [{"path": "/w/a"}]}
    assert native_input(fetch) == {"title": "Fetching https://example.com", "paths": ["/w/a"]}
    assert native_input({"kind": "execute", "title": "ls", "rawInput": {"command": "ls -la"}}) == {"command": "ls -la"}


def test_an_option_is_chosen_by_its_kind():
    assert choose(OPTIONS, "allow_once") == {"outcome": {"outcome": "selected", "optionId": "proceed_once"}}
    assert choose(OPTIONS, "reject_once") == {"outcome": {"outcome": "selected", "optionId": "cancel"}}
    assert choose([], "reject_once") == {"outcome": {"outcome": "cancelled"}}


def test_gemini_names_a_native_conversation_and_its_tools_that_only_read():
    provider = GeminiProvider()
    assert provider.native == "crewbridge.conversations.gemini_acp:GeminiAcpConversation"
    assert {"read_file", "list_directory", "glob", "grep_search"} <= provider.read_only_tools
    assert not {"write_file", "replace", "run_shell_command", "web_fetch"} & provider.read_only_tools


def test_the_editors_servers_are_asked_about_before_every_tool_and_the_policy_goes_with_the_process(
    tmp_path, monkeypatch
):
    """--allowed-mcp-server-names (what keeps gemini to crew's servers) makes gemini allow every tool
    of a named server unasked; a policy file of crew's (user tier, priority 999) asks first, so crew's
    policy decides on the editor's tools too. No servers: no file."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert asking_policy(()) is None
    policy = asking_policy((McpServer("vault", "vault-mcp"), McpServer('a"b', "x")))
    assert policy is not None and policy.parent == tmp_path / "state" / "crewbridge" / "policies"
    assert policy.stat().st_mode & 0o777 == 0o600
    rules = tomllib.loads(policy.read_text())["rule"]
    assert rules == [
        {"mcpName": "vault", "toolName": "*", "decision": "ask_user", "priority": 999},
        {"mcpName": 'a"b', "toolName": "*", "decision": "ask_user", "priority": 999},
    ]
