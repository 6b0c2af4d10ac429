"""MCP's streamable HTTP transport in-process (McpHttp): what `crew mcp --http` serves (tested with
the SDK's client in test_mcp_server.py) and what gemini reaches crew's tools through in a native run,
there behind a bearer token."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from crewbridge.mcp.http import McpHttp, parse_address

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def post(url: str, message, **headers: str):
    request = urllib.request.Request(url, json.dumps(message).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture
def served():
    servers = []

    def serve(token=None):
        seen = []
        server = McpHttp(lambda message, notify: seen.append(message) or {"jsonrpc": "2.0", "id": message.get("id"),
                                                                           "result": {}}, token=token)
        server.start()
        servers.append(server)
        return server, seen
    yield serve
    for server in servers:
        server.close()


def test_a_free_local_port_is_taken_and_each_message_answered_by_the_function_given(served):
    server, seen = served()
    assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/mcp")
    status, body = post(server.url, PING)
    assert (status, json.loads(body)) == (200, {"jsonrpc": "2.0", "id": 1, "result": {}})
    assert seen == [PING]


def test_with_a_token_only_a_request_bearing_it_is_answered(served):
    server, seen = served(token="s3cret-token")
    assert post(server.url, PING)[0] == 401
    assert post(server.url, PING, Authorization="Bearer wrong")[0] == 401
    assert post(server.url, PING, Authorization="Bearer s3cret-token")[0] == 200
    assert seen == [PING]  # the refused requests reached nothing


def test_closed_it_answers_no_more(served):
    server, _ = served()
    server.close()
    with pytest.raises(urllib.error.URLError):
        post(server.url, PING)


def test_an_address_is_host_and_port():
    assert parse_address("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_address("8765") == ("127.0.0.1", 8765)
