"""The mock model server the end-to-end tests run the real CLIs against."""

from __future__ import annotations

import http.client
import json
import socket

import pytest

from mockserver import MockServer, Request, error, reply

GEMINI_STREAM = "/v1beta/models/gemini-x:streamGenerateContent?alt=sse"


def post(mock: MockServer, path: str, body: object, **headers: str) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=10)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn.request("POST", path, data, {"Content-Type": "application/json", **headers})
    return conn.getresponse()


def sse(response: http.client.HTTPResponse) -> list[tuple[str | None, dict]]:
    """(event name, data) of each server-sent event."""
    events, name = [], None
    for line in response.read().decode().splitlines():
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            events.append((name, json.loads(line[6:])))
            name = None
    return events


def test_anthropic_messages_stream_each_chunk_as_a_text_delta(mock_server):
    mock_server.script(reply("Hel", "lo"))
    response = post(
        mock_server,
        "/v1/messages?beta=true",
        {"model": "claude-x", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
    )
    events = sse(response)
    assert response.status == 200
    assert [name for name, _ in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert all(name == data["type"] for name, data in events)
    assert [d["delta"]["text"] for n, d in events if n == "content_block_delta"] == ["Hel", "lo"]
    assert events[0][1]["message"]["model"] == "claude-x"
    assert events[5][1]["delta"]["stop_reason"] == "end_turn"
    [request] = mock_server.requests
    assert request.finished and request.streamed == 2
    assert request.messages() == [("user", "hi")]


def test_anthropic_without_stream_gets_one_message(mock_server):
    mock_server.script(reply("a", "b"))
    response = post(mock_server, "/v1/messages", {"model": "m", "messages": []})
    body = json.loads(response.read())
    assert body["content"] == [{"type": "text", "text": "ab"}]
    assert body["usage"] == {"input_tokens": 11, "cache_read_input_tokens": 0, "output_tokens": 7}


def test_each_vendor_reports_the_scripted_usage_in_its_own_fields(mock_server):
    usage = {"input_tokens": 100, "output_tokens": 9, "cached_tokens": 40}
    mock_server.script(reply("a", **usage), reply("b", **usage), reply("c", **usage))
    anthropic = sse(post(mock_server, "/v1/messages", {"model": "m", "stream": True}))
    assert anthropic[0][1]["message"]["usage"] == {
        "input_tokens": 60,
        "cache_read_input_tokens": 40,
        "output_tokens": 1,
    }
    assert anthropic[4][1]["usage"] == {"output_tokens": 9}
    gemini = sse(post(mock_server, GEMINI_STREAM, {"contents": []}))[-1][1]["usageMetadata"]
    assert (gemini["promptTokenCount"], gemini["cachedContentTokenCount"], gemini["candidatesTokenCount"]) == (
        100,
        40,
        9,
    )
    openai = sse(post(mock_server, "/v1/responses", {"model": "m", "input": "hi"}))[-1][1]["response"]["usage"]
    assert (openai["input_tokens"], openai["input_tokens_details"]["cached_tokens"], openai["output_tokens"]) == (
        100,
        40,
        9,
    )


def test_gemini_streams_candidates_and_ends_with_stop_and_usage(mock_server):
    mock_server.script(reply("one ", "two"))
    response = post(mock_server, GEMINI_STREAM, {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
    events = sse(response)
    assert [name for name, _ in events] == [None, None]
    texts = [d["candidates"][0]["content"]["parts"][0]["text"] for _, d in events]
    assert texts == ["one ", "two"]
    assert "finishReason" not in events[0][1]["candidates"][0]
    assert events[1][1]["candidates"][0]["finishReason"] == "STOP"
    assert events[1][1]["usageMetadata"]["candidatesTokenCount"] == 7
    assert mock_server.requests[0].model == "gemini-x"


def test_openai_responses_stream_deltas_then_the_completed_response(mock_server):
    mock_server.script(reply("x", "y"))
    events = sse(post(mock_server, "/v1/responses", {"model": "gpt-x", "input": "hi"}))
    names = [name for name, _ in events]
    assert names[0] == "response.created" and names[-1] == "response.completed"
    assert [d["delta"] for n, d in events if n == "response.output_text.delta"] == ["x", "y"]
    done = events[-1][1]["response"]
    assert done["output"][0]["content"][0]["text"] == "xy"
    assert done["usage"]["output_tokens"] == 7


def test_openai_chat_completions_stream_content_deltas_then_usage_and_done(mock_server):
    mock_server.script(reply("x", "y"))
    response = post(
        mock_server,
        "/v1/chat/completions",
        {
            "model": "m",
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
        },
    )
    lines = [line[6:] for line in response.read().decode().splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    chunks = [json.loads(line) for line in lines[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == "xy"
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"
    assert chunks[-1]["usage"]["completion_tokens"] == 7
    [request] = mock_server.requests
    assert request.vendor == "chat" and request.system == "be brief"
    assert request.messages() == [("system", "be brief"), ("user", "hi")]


def test_openai_chat_completions_without_stream_gets_one_completion(mock_server):
    mock_server.script(reply("a", "b"))
    body = json.loads(post(mock_server, "/v1/chat/completions", {"model": "m", "messages": []}).read())
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "ab"}


@pytest.mark.parametrize(
    "path, shape",
    [
        ("/v1/messages", lambda b: (b["type"], b["error"]["message"])),
        (GEMINI_STREAM, lambda b: ("error", b["error"]["message"])),
        ("/v1/responses", lambda b: ("error", b["error"]["message"])),
        ("/v1/chat/completions", lambda b: ("error", b["error"]["message"])),
    ],
)
@pytest.mark.parametrize("status", [500, 429, 401])
def test_a_scripted_error_has_its_status_and_the_vendors_error_shape(mock_server, path, shape, status):
    mock_server.script(error(status, "down"))
    response = post(mock_server, path, {"model": "m", "stream": True})
    assert response.status == status
    assert shape(json.loads(response.read())) == ("error", "down")


def test_replies_are_used_in_order_and_a_plain_string_is_one_chunk(mock_server):
    mock_server.script("first", reply("sec", "ond"))
    assert mock_server.pending == 2
    texts = []
    for _ in range(2):
        events = sse(post(mock_server, "/v1/responses", {"input": "hi"}))
        texts.append(events[-1][1]["response"]["output"][0]["content"][0]["text"])
    assert texts == ["first", "second"]
    assert mock_server.pending == 0


def test_asking_beyond_the_script_is_a_500_and_a_recorded_problem():
    with MockServer() as mock:
        response = post(mock, "/v1/messages", {"stream": True})
        assert response.status == 500
        assert "script exhausted" in json.loads(response.read())["error"]["message"]
    assert mock.problems == ["script exhausted at POST /v1/messages"]


def test_auxiliary_calls_are_answered_without_consuming_the_script(mock_server):
    mock_server.script("kept")
    routing = post(mock_server, "/v1beta/models/flash:generateContent", {"contents": []})
    answer = json.loads(json.loads(routing.read())["candidates"][0]["content"]["parts"][0]["text"])
    assert answer["complexity_score"] >= 1
    count = post(mock_server, "/v1/messages/count_tokens", {"messages": []})
    assert json.loads(count.read())["input_tokens"] >= 1
    assert mock_server.pending == 1 and mock_server.requests == []
    assert [r.path for r in mock_server.aux] == ["/v1beta/models/flash:generateContent", "/v1/messages/count_tokens"]


def test_a_codex_compaction_call_gets_the_conversation_as_summary_without_using_the_script(mock_server):
    mock_server.script("kept")
    metadata = json.dumps({"request_kind": "compaction"})
    events = sse(
        post(
            mock_server,
            "/v1/responses",
            {
                "input": [
                    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "s"}]},
                    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "task"}]},
                    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
                    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "sum up"}]},
                ]
            },
            **{"x-codex-turn-metadata": metadata},
        )
    )
    assert events[-1][1]["response"]["output"][0]["content"][0]["text"] == "task\n\na"
    assert mock_server.pending == 1 and mock_server.requests == []
    assert len(mock_server.aux) == 1


def test_a_chunked_request_body_is_read():
    with MockServer() as mock:
        mock.script("ok")
        conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=10)
        conn.request("POST", "/v1/responses", iter([b'{"input": ', b'"hi"}']), encode_chunked=True)
        assert conn.getresponse().status == 200
    assert mock.requests[0].body == {"input": "hi"}


def test_a_body_that_is_not_a_json_object_is_refused_and_recorded():
    with MockServer() as mock:
        assert post(mock, "/v1/responses", b"not json").status == 400
    assert mock.problems == ["not a JSON object: POST /v1/responses"]


def test_requests_for_other_hosts_are_refused_and_recorded():
    with MockServer() as mock:
        conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=10)
        conn.request("CONNECT", "example.com:443")
        assert conn.getresponse().status == 403
        conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=10)
        conn.request("GET", "http://example.com/x")
        assert conn.getresponse().status == 403
    assert mock.problems == [
        "tried to leave 127.0.0.1: CONNECT example.com:443",
        "tried to leave 127.0.0.1: GET http://example.com/x",
    ]


def test_probes_are_answered_404_and_are_not_problems(mock_server):
    conn = http.client.HTTPConnection("127.0.0.1", mock_server.port, timeout=10)
    conn.request("HEAD", "/")
    assert conn.getresponse().status == 404
    assert [(r.method, r.path) for r in mock_server.aux] == [("HEAD", "/")]


def test_each_chunk_is_sent_before_the_delay_of_the_next():
    """The first delta can be read while the second waits out a delay far longer than the read
    timeout: chunks are flushed one by one. Stopping the server ends the wait."""
    mock = MockServer().start()
    mock.script(reply("first", "never", delay=600))
    sock = socket.create_connection(("127.0.0.1", mock.port), timeout=10)
    body = json.dumps({"stream": True}).encode()
    sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    received = b""
    while b'"text": "first"' not in received.split(b"content_block_delta", 1)[-1]:
        received += sock.recv(65536)  # raises socket.timeout if the chunk was held back
    mock.stop()
    sock.close()
    [request] = mock.requests
    assert request.streamed == 1 and not request.finished


def test_messages_normalise_roles_and_render_tool_traffic():
    anthropic = Request(
        "POST",
        "/v1/messages",
        "",
        {},
        {
            "messages": [
                {"role": "system", "content": "skills"},
                {"role": "user", "content": [{"type": "text", "text": "task"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "name": "Read", "input": {"p": 1}}]},
                {"role": "user", "content": [{"type": "tool_result", "content": "file text"}]},
            ]
        },
        "anthropic",
    )
    assert anthropic.messages() == [
        ("system", "skills"),
        ("user", "task"),
        ("assistant", '{"tool_use": "Read", "input": {"p": 1}}'),
        ("user", "file text"),
    ]
    assert anthropic.text() == 'task\n\n{"tool_use": "Read", "input": {"p": 1}}\n\nfile text'
    gemini = Request(
        "POST",
        "/v1beta/models/g:streamGenerateContent",
        "",
        {},
        {
            "contents": [
                {"role": "user", "parts": [{"text": "a"}, {"text": "b"}]},
                {"role": "model", "parts": [{"functionCall": {"name": "ls"}}]},
            ]
        },
        "gemini",
    )
    assert gemini.messages() == [("user", "a\nb"), ("assistant", '{"name": "ls"}')]
    openai = Request(
        "POST",
        "/v1/responses",
        "",
        {},
        {
            "input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "sys"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]},
                {"type": "function_call", "name": "shell", "arguments": "{}"},
                {"type": "function_call_output", "output": "out"},
            ]
        },
        "openai",
    )
    assert openai.messages() == [("system", "sys"), ("user", "q"), ("assistant", "shell({})"), ("tool", "out")]
    assert openai.text() == "q\n\nshell({})\n\nout"


def test_system_prompt_and_offered_tools_per_vendor():
    anthropic = Request(
        "POST",
        "/v1/messages",
        "",
        {},
        {"system": [{"type": "text", "text": "be brief"}], "tools": [{"name": "Read"}]},
        "anthropic",
    )
    gemini = Request(
        "POST",
        "/v1beta/models/g:streamGenerateContent",
        "",
        {},
        {
            "systemInstruction": {"parts": [{"text": "be brief"}]},
            "tools": [{"functionDeclarations": [{"name": "read_file"}, {"name": "glob"}]}],
        },
        "gemini",
    )
    openai = Request(
        "POST",
        "/v1/responses",
        "",
        {},
        {"instructions": "be brief", "tools": [{"type": "function", "name": "shell"}, {"type": "web_search"}]},
        "openai",
    )
    assert anthropic.system == gemini.system == openai.system == "be brief"
    assert anthropic.tool_names() == ["Read"]
    assert gemini.tool_names() == ["read_file", "glob"]
    assert openai.tool_names() == ["shell", "web_search"]
    chat = Request(
        "POST",
        "/v1/chat/completions",
        "",
        {},
        {
            "tools": [{"type": "function", "function": {"name": "read_file"}}],
            "messages": [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"function": {"name": "glob", "arguments": "{}"}}],
                },
                {"role": "tool", "content": [{"type": "text", "text": "a.txt"}]},
            ],
        },
        "chat",
    )
    assert chat.tool_names() == ["read_file"]
    assert chat.messages() == [("assistant", "glob({})"), ("tool", "a.txt")]
