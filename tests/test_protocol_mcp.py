"""crewbridge.protocol.mcp: MCP's protocol once, for `crew mcp` and for McpTools (the server claude's
SDK MCP server and gemini's ACP session answer), driven with messages a client could send, and
many it should not, over a small fake channel."""

from __future__ import annotations

import threading

import pytest

from crewbridge.errors import MaxTurnsReached
from crewbridge.protocol.mcp import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NOT_INITIALIZED,
    PROTOCOL_VERSIONS,
    Job,
    McpSession,
    McpTools,
    tool_content,
)
from crewbridge.toolkit.registry import ToolResult
from mcpfakes import FakeChannel, Held


def request(method, params=None, rid=1):
    message = {"jsonrpc": "2.0", "id": rid, "method": method}
    return message if params is None else {**message, "params": params}


def initialized(channel=None):
    server = McpTools(channel or FakeChannel())
    assert "result" in server.answer(request("initialize", {"protocolVersion": "2025-06-18"}, rid=0))
    return server


def code(answer):
    return answer["error"]["code"]


# -- the lifecycle ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("asked", "answered"), [("2025-03-26", "2025-03-26"), ("1999-01-01", PROTOCOL_VERSIONS[-1])])
def test_initialize_answers_the_clients_version_when_crew_speaks_it_else_the_newest(asked, answered):
    result = McpTools(FakeChannel()).answer(request("initialize", {"protocolVersion": asked}))["result"]
    assert result["protocolVersion"] == answered
    assert result["serverInfo"]["name"] == "crew" and result["capabilities"] == {"tools": {"listChanged": False}}


def test_initialize_without_a_version_is_bad_params():
    assert code(McpTools(FakeChannel()).answer(request("initialize", {}))) == INVALID_PARAMS


def test_requests_before_initialize_are_refused_but_ping():
    server = McpTools(FakeChannel())
    refused = server.answer(request("tools/list"))
    assert code(refused) == NOT_INITIALIZED and "send initialize first" in refused["error"]["message"]
    assert code(server.answer(request("tools/call", {"name": "read_file"}))) == NOT_INITIALIZED
    assert server.answer(request("ping"))["result"] == {}
    assert server.channel.calls == []


def test_each_session_is_initialized_on_its_own():
    server = initialized()
    other = McpSession()
    assert code(server.respond(request("tools/list"), other, print)) == NOT_INITIALIZED
    assert "result" in server.respond(request("tools/list"), server.session, print)


# -- tools -----------------------------------------------------------------------------------------


def test_it_lists_the_channels_tools():
    [listed] = initialized().answer(request("tools/list"))["result"]["tools"]
    assert listed["name"] == "read_file" and listed["annotations"] == {"readOnlyHint": True}
    assert listed["inputSchema"]["properties"] == {"path": {"type": "string"}}


def test_a_call_goes_to_the_channel_and_its_result_comes_back_as_text():
    channel = FakeChannel()
    server = initialized(channel)
    answer = server.answer(request("tools/call", {"name": "read_file", "arguments": {"path": "a"}}, rid=7))
    assert answer["id"] == 7 and answer["result"]["isError"] is False
    assert answer["result"]["content"] == [{"type": "text", "text": '{\n "content": "hi"\n}'}]
    failed = server.answer(request("tools/call", {"name": "nope"}))["result"]
    assert failed == {"content": [{"type": "text", "text": "no tool"}], "isError": True}
    assert channel.calls == [("read_file", {"path": "a"}), ("nope", {})]


def test_a_call_without_a_name_or_with_arguments_that_are_not_an_object_is_bad_params():
    server = initialized()
    assert code(server.answer(request("tools/call", {"arguments": {}}))) == INVALID_PARAMS
    assert code(server.answer(request("tools/call", {"name": "read_file", "arguments": [1]}))) == INVALID_PARAMS
    assert server.channel.calls == []


def test_an_error_that_ends_the_run_reaches_the_conversation():
    server = initialized(FakeChannel(error=MaxTurnsReached("@claude made more than 50 native tool calls")))
    with pytest.raises(MaxTurnsReached):
        server.answer(request("tools/call", {"name": "read_file"}))


def test_a_bug_is_an_internal_error_and_the_server_goes_on():
    server = initialized(FakeChannel(error=KeyError("oops")))
    answer = server.answer(request("tools/call", {"name": "read_file"}))
    assert code(answer) == INTERNAL_ERROR and "KeyError" in answer["error"]["message"]
    assert server.answer(request("ping"))["result"] == {}


def test_a_tool_result_is_its_text_or_its_error():
    assert tool_content(ToolResult(False, error="bad")) == {
        "content": [{"type": "text", "text": "bad"}],
        "isError": True,
    }


# -- messages that are not requests ----------------------------------------------------------------


def test_notifications_and_a_clients_responses_get_no_answer():
    server = initialized()
    assert server.answer({"jsonrpc": "2.0", "method": "notifications/initialized"}) is None
    for rid in ([1], {"a": 1}, None, 1.5):  # not ids: nothing to cancel, and no answer
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}}
        assert server.answer(cancel) is None
    assert server.answer({"jsonrpc": "2.0", "id": 5, "result": {}}) is None
    assert server.answer({"jsonrpc": "2.0", "id": 6, "error": {"code": -1, "message": "no"}}) is None


@pytest.mark.parametrize(
    "message",
    [
        [request("ping")],  # a batch
        [],  # an empty batch
        {"id": 1, "method": "ping"},  # no jsonrpc
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1},  # neither a request nor a response
        {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {}},
        {"jsonrpc": "2.0", "id": 1, "method": 7},
        {"jsonrpc": "2.0", "id": None, "method": "ping"},  # MCP ids are strings or integers
        {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
        {"jsonrpc": "2.0", "id": True, "method": "ping"},
        "ping",
        None,
    ],
)
def test_anything_else_is_an_invalid_request(message):
    answer = initialized().answer(message)
    assert code(answer) == INVALID_REQUEST and answer["id"] in (None, 1)


def test_a_batch_is_refused_whole_and_nothing_in_it_runs():
    channel = FakeChannel()
    answer = initialized(channel).answer([request("tools/call", {"name": "read_file"})])
    assert answer["id"] is None and "batch" in answer["error"]["message"]
    assert channel.calls == []


def test_error_codes_say_what_happened():
    server = initialized()
    assert code(server.answer(request("resources/read", {"uri": "x"}))) == METHOD_NOT_FOUND
    assert code(server.answer(request("tools/list", [1, 2]))) == INVALID_PARAMS
    assert code(server.answer(request("logging/setLevel", {"level": "loud"}))) == INVALID_PARAMS
    assert server.answer(request("logging/setLevel", {"level": "info"}))["result"] == {}
    assert server.answer(request("prompts/list"))["result"] == {"prompts": []}
    assert server.answer(request("resources/templates/list"))["result"] == {"resourceTemplates": []}


# -- cancellation and sessions ---------------------------------------------------------------------


def running(server, session, rid=1, notes=None):
    """Start tools/call `rid` in `session` on a thread; its answer lands in the returned list."""
    answers = []
    server.entered.clear()
    thread = threading.Thread(
        target=lambda: answers.append(
            server.respond(
                request("tools/call", {"name": "wait", "_meta": {"progressToken": "p"}}, rid),
                session,
                (notes if notes is not None else []).append,
            )
        )
    )
    thread.start()
    assert server.entered.wait(30)
    return thread, answers


def opened(server):
    session = McpSession()
    server.respond(request("initialize", {"protocolVersion": "2025-06-18"}), session, print)
    return session


def test_any_call_can_be_cancelled_and_then_gets_no_answer():
    server = Held()
    session = opened(server)
    notes = []
    thread, answers = running(server, session, notes=notes)
    server.respond({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}, session, print)
    thread.join(30)
    assert answers == [None] and server.stopped == [True]
    assert notes == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "p", "progress": 1, "message": "started"},
        }
    ]


def test_one_sessions_cancellation_never_stops_another_sessions_call():
    server = Held()
    mine, theirs = opened(server), opened(server)
    thread, answers = running(server, mine)
    server.respond({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}, theirs, print)
    server.release.set()
    thread.join(30)
    assert answers[0]["result"]["content"][0]["text"] == "done" and server.stopped == [False]


def test_a_running_requests_id_cannot_be_used_again_in_its_session():
    server = Held()
    session = opened(server)
    thread, answers = running(server, session)
    again = server.respond(request("tools/call", {"name": "wait"}), session, print)
    assert code(again) == INVALID_REQUEST and "already running" in again["error"]["message"]
    server.release.set()
    thread.join(30)
    assert "result" in answers[0]


def test_a_closed_session_stops_its_calls_and_starts_no_job():
    server = Held()
    session = opened(server)
    thread, answers = running(server, session)
    session.close()
    thread.join(30)
    assert answers == [None]
    assert "ended" in session.add_job(Job("j1", "task"))


def test_a_session_runs_a_bounded_number_of_jobs():
    session = McpSession()
    for number in range(McpSession.MAX_JOBS):
        assert session.add_job(Job(f"j{number}", "task")) is None
    assert "jobs are running already" in session.add_job(Job("more", "task"))
    session.job("j0").status = "done"
    assert session.add_job(Job("more", "task")) is None
    assert session.busy()
