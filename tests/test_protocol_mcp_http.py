"""crewbridge.protocol.mcp_http: MCP's streamable HTTP transport, attacked in-process (McpHttp over McpTools
and a configuration whose call waits), then `crew mcp --http` as a person starts it, and the
official MCP conformance suite against it through a proxy that adds the token."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import socket
import stat
import subprocess
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from clienv import require_cli
from crewbridge.protocol import mcp_http
from crewbridge.protocol.mcp import INVALID_REQUEST, PARSE_ERROR, McpTools
from crewbridge.protocol.mcp_http import MAX_BODY, McpHttp
from crewbridge.protocol.webserver import MAX_PENDING
from crewcli import crew_env, end_group, error_line, run_crew, start_crew
from mcpfakes import FakeChannel, Held
from sockets import connected, stop_listening

TOKEN = "test-token-0123456789abcdef"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": "a"}}}


@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def json(self):
        return json.loads(self.body)

    def events(self) -> list[dict[str, str]]:
        """The server-sent events of the body, each as its fields."""
        events = []
        for block in self.body.decode().split("\n\n"):
            if block.strip():
                fields: dict[str, str] = {}
                for line in block.split("\n"):
                    name, _, value = line.partition(":")
                    fields[name] = fields.get(name, "") + value.removeprefix(" ")
                events.append(fields)
        return events


class Client:
    """One keep-alive connection to an MCP HTTP server; every header can be set, or left out (None)."""

    def __init__(self, url: str, token: str | None = TOKEN) -> None:
        self.port = urlsplit(url).port
        self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        self.token = token
        self.session: str | None = None

    def request(self, method: str = "POST", body: bytes = b"", headers: dict[str, str | None] | None = None) -> Answer:
        sent = {
            "Host": f"127.0.0.1:{self.port}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Content-Length": str(len(body)),
            "Authorization": f"Bearer {self.token}" if self.token else None,
            "Mcp-Session-Id": self.session,
            **(headers or {}),
        }
        self.connection.putrequest(method, "/mcp", skip_host=True, skip_accept_encoding=True)
        for name, value in sent.items():
            if value is not None:
                self.connection.putheader(name, value)
        self.connection.endheaders(body)
        response = self.connection.getresponse()
        return Answer(response.status, response.headers, response.read())

    def send(self, message, headers: dict[str, str | None] | None = None) -> Answer:
        return self.request("POST", json.dumps(message).encode(), headers)

    def initialize(self) -> Client:
        answer = self.send(INITIALIZE)
        assert answer.status == 200, answer.body
        self.session = answer.headers["Mcp-Session-Id"]
        return self


@pytest.fixture
def served():
    """`served(core=None, **options)`: an McpHttp on a free port answering with `core` (by default
    McpTools over a FakeChannel), and the channel."""
    servers = []

    def serve(core=None, **options):
        channel = FakeChannel()
        core = core or McpTools(channel)
        server = McpHttp(core.respond, token=TOKEN, **options)
        server.start()
        servers.append(server)
        return server, channel

    yield serve
    for server in servers:
        server.close()


@dataclass
class Raw:
    status: int
    headers: dict[str, str]
    body: bytes


def raw(url: str, data: bytes, responses: int = 1) -> list[Raw]:
    """Send `data` as is on one connection and read `responses` responses off it."""
    sock = socket.create_connection(("127.0.0.1", urlsplit(url).port), timeout=30)
    sock.sendall(data)
    reader = sock.makefile("rb")
    read = []
    for _ in range(responses):
        status = int(reader.readline().split()[1])
        headers = {}
        while (line := reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        length = headers.get("content-length")
        read.append(Raw(status, headers, reader.read(int(length)) if length is not None else reader.read()))
    sock.close()
    return read


def post_bytes(url: str, body: bytes, *headers: str, token: str = TOKEN, kind: str = "application/json") -> bytes:
    lines = [
        "POST /mcp HTTP/1.1",
        f"Host: 127.0.0.1:{urlsplit(url).port}",
        f"Authorization: Bearer {token}",
        f"Content-Type: {kind}",
        *headers,
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


# -- what gets in ----------------------------------------------------------------------------------


def test_a_free_local_port_is_taken_and_a_session_is_served(served):
    server, channel = served()
    assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/mcp")
    client = Client(server.url).initialize()
    assert client.send(PING).json() == {"jsonrpc": "2.0", "id": 1, "result": {}}
    [event] = [e for e in client.send(CALL).events() if e.get("data")]
    assert json.loads(event["data"])["result"]["isError"] is False
    assert channel.calls == [("read_file", {"path": "a"})]


@pytest.mark.parametrize(
    "authorization", [None, "Bearer wrong-token-0123456789", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer", ""]
)
@pytest.mark.slow
def test_without_the_token_nothing_runs(served, authorization):
    server, channel = served()
    session = Client(server.url).initialize().session
    client = Client(server.url, token=None)
    client.session = session
    answer = client.send(CALL, {"Authorization": authorization})
    assert answer.status == 401 and answer.headers["WWW-Authenticate"] == "Bearer"
    assert client.send(INITIALIZE, {"Authorization": authorization}).status == 401
    assert channel.calls == []


def test_two_authorization_headers_are_refused(served):
    server, _ = served()
    ping = json.dumps(PING).encode()
    request = post_bytes(server.url, ping, "Authorization: Bearer other", f"Content-Length: {len(ping)}")
    assert [r.status for r in raw(server.url, request)] == [401]


@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "evil.example.com"},
        {"Host": "evil.example.com:8080"},
        {"Host": "127.0.0.1.evil.example.com"},
        {"Origin": "http://evil.example.com"},
        {"Origin": "http://localhost.evil.example.com:3000"},
        {"Origin": "null"},
    ],
)
def test_a_foreign_host_or_origin_is_refused(served, headers):
    server, _ = served()
    answer = Client(server.url).send(INITIALIZE, headers)
    assert answer.status == 403 and "Mcp-Session-Id" not in answer.headers


@pytest.mark.parametrize("target", ["http://evil.example.com/mcp", "/other", "/mcp/x", "*"])
def test_only_the_mcp_path_is_served(served, target):
    server, _ = served()
    ping = json.dumps(PING).encode()
    request = post_bytes(server.url, ping, f"Content-Length: {len(ping)}").replace(
        b"POST /mcp ", f"POST {target} ".encode()
    )
    assert [answer.status for answer in raw(server.url, request)] == [404]


@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "localhost:1234"},
        {"Host": "[::1]:1234"},
        {"Host": "LOCALHOST"},
        {"Origin": "http://localhost:3000"},
        {"Origin": "http://127.0.0.1:9"},
        {"Origin": "https://[::1]"},
    ],
)
def test_this_machine_is_accepted_under_any_name_and_port(served, headers):
    server, _ = served()
    assert Client(server.url).send(INITIALIZE, headers).status == 200


def test_allow_host_admits_the_host_it_names(served):
    server, _ = served(allowed_hosts=["crew.internal"])
    client = Client(server.url)
    assert client.send(INITIALIZE, {"Host": "crew.internal:80", "Origin": "http://crew.internal"}).status == 200
    assert client.send(INITIALIZE, {"Host": "other.internal"}).status == 403


@pytest.mark.parametrize(
    ("kind", "status"),
    [
        ("text/plain", 415),
        ("application/x-www-form-urlencoded", 415),
        ("multipart/form-data; boundary=x", 415),
        (None, 415),
        ("application/json; charset=utf-8", 200),
        ("Application/JSON", 200),
    ],
)
def test_a_post_must_be_json(served, kind, status):
    server, _ = served()
    assert Client(server.url).send(INITIALIZE, {"Content-Type": kind}).status == status


@pytest.mark.parametrize(
    ("length", "status"),
    [
        (str(MAX_BODY + 1), 413),
        (str(10**12), 413),
        ("abc", 400),
        ("-1", 400),
        ("+5", 400),
        ("1e3", 400),
        ("٣", 400),  # an Arabic-Indic digit: str.isdigit says yes
    ],
)
def test_bodies_are_bounded_and_their_length_checked(served, length, status):
    server, _ = served()
    [answer] = raw(server.url, post_bytes(server.url, b"", f"Content-Length: {length}".encode().decode("latin-1")))
    assert answer.status == status
    assert Client(server.url).send(INITIALIZE).status == 200  # and it goes on


@pytest.mark.parametrize("headers", [(), ("Transfer-Encoding: chunked",), ("Content-Length: 5", "Content-Length: 6")])
def test_a_body_needs_one_content_length(served, headers):
    server, _ = served()
    [answer] = raw(server.url, post_bytes(server.url, b"", *headers))
    assert answer.status in (400, 411)


@pytest.mark.parametrize(
    "refusal",
    [
        {"token": "wrong-token-0123456789"},  # 401
        {"headers": ["Origin: http://evil.example.com"]},  # 403
        {"kind": "text/plain"},  # 415
        {"headers": ["MCP-Protocol-Version: 1999-01-01"]},  # 400
    ],
)
def test_a_refused_requests_body_is_never_read_as_the_next_request(served, refusal):
    server, channel = served()
    session = Client(server.url).initialize().session
    call = json.dumps(CALL).encode()
    smuggled = post_bytes(server.url, call, f"Mcp-Session-Id: {session}", f"Content-Length: {len(call)}")
    refused = post_bytes(
        server.url,
        smuggled,
        *refusal.get("headers", []),
        f"Content-Length: {len(smuggled)}",
        token=refusal.get("token", TOKEN),
        kind=refusal.get("kind", "application/json"),
    )
    ping = json.dumps(PING).encode()
    valid = post_bytes(server.url, ping, f"Mcp-Session-Id: {session}", f"Content-Length: {len(ping)}")
    first, second = raw(server.url, refused + valid, responses=2)
    assert first.status in (400, 401, 403, 415) and second.status == 200
    assert json.loads(second.body) == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert channel.calls == []  # the tools/call in the refused body never ran


def test_the_protocol_version_must_be_one_crew_speaks(served):
    server, _ = served()
    client = Client(server.url)
    assert client.send(INITIALIZE, {"MCP-Protocol-Version": "1999-01-01"}).status == 400
    assert client.send(INITIALIZE, {"MCP-Protocol-Version": "2025-06-18"}).status == 200


# -- messages --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (json.dumps([PING]), INVALID_REQUEST),  # a batch
        ("[]", INVALID_REQUEST),
        ('{"id": 1, "method": "ping"}', INVALID_REQUEST),
        ("not json", PARSE_ERROR),
        ("[" * 1000 + "]" * 1000, PARSE_ERROR),  # 2 KB nested 1,000 deep
        ('{"jsonrpc": "2.0", "id": 1, "method": "ping", "x": "\\ud800"}', None),  # a lone surrogate: answered
    ],
)
def test_what_is_not_one_message_is_answered_with_an_error_and_the_server_goes_on(served, body, code):
    server, _ = served()
    client = Client(server.url).initialize()
    answer = client.request("POST", body.encode())
    if code is None:
        assert answer.status == 200 and answer.json()["result"] == {}
    else:
        assert answer.status == 400 and answer.json()["error"]["code"] == code
    assert client.send(PING).status == 200


def test_a_clients_response_and_a_notification_are_accepted_silently(served):
    server, _ = served()
    client = Client(server.url).initialize()
    for message in (
        {"jsonrpc": "2.0", "id": 9, "result": {}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ):
        answer = client.send(message)
        assert (answer.status, answer.body) == (202, b"")


@pytest.mark.slow
def test_a_session_comes_from_initialize_and_ends_with_delete(served):
    server, _ = served()
    client = Client(server.url)
    assert client.send(PING).status == 400  # no session named
    client.session = "no-such-session"
    assert client.send(PING).status == 404
    client.session = None
    client.initialize()
    assert client.send(INITIALIZE).status == 400  # initialize opens a new one
    assert client.request("DELETE").status == 204
    assert client.send(PING).status == 404
    assert client.request("DELETE").status == 404


def test_past_the_cap_the_least_recently_used_idle_session_ends(served, monkeypatch):
    monkeypatch.setattr(mcp_http, "MAX_SESSIONS", 2)
    core = Held()
    server, _ = served(core)
    oldest, busy = Client(server.url).initialize(), Client(server.url).initialize()
    thread, _ = call_on_thread(server, busy.session, 1)
    newest = Client(server.url).initialize()  # the oldest idle one makes room
    assert oldest.send(PING).status == 404 and newest.send(PING).status == 200
    assert Client(server.url).send(INITIALIZE).status == 200  # newest was idle: it goes
    assert newest.send(PING).status == 404
    core.release.set()
    thread.join(30)
    assert core.stopped == [False]  # the busy session was never ended


def test_a_tool_call_streams_events_with_ids_after_a_priming_event(served):
    server, _ = served(Held())
    client = Client(server.url).initialize()
    server_core_release(server)
    call = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "wait", "_meta": {"progressToken": 7}},
    }
    answer = client.send(call)
    assert answer.status == 200 and answer.headers["Content-Type"] == "text/event-stream"
    priming, progress, result = answer.events()
    assert priming["id"] and priming["data"] == "" and int(priming["retry"]) > 0
    assert json.loads(progress["data"])["params"] == {"progressToken": 7, "progress": 1, "message": "started"}
    assert json.loads(result["data"])["result"]["content"][0]["text"] == "done"
    assert len({priming["id"], progress["id"], result["id"]}) == 3


def server_core_release(server):
    server.respond.__self__.release.set()


def call_on_thread(server, session, rid):
    """POST tools/call `rid` in `session` from a thread; its answer lands in the returned list."""
    core = server.respond.__self__
    core.entered.clear()
    answers: list[Answer] = []
    client = Client(server.url)
    client.session = session
    thread = threading.Thread(
        target=lambda: answers.append(
            client.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "wait"}})
        )
    )
    thread.start()
    assert core.entered.wait(30)
    return thread, answers


def test_one_clients_cancellation_never_stops_anothers_call(served):
    core = Held()
    server, _ = served(core)
    mine, theirs = Client(server.url).initialize(), Client(server.url).initialize()
    thread, answers = call_on_thread(server, mine.session, 1)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    assert theirs.send(cancel).status == 202
    core.release.set()
    thread.join(30)
    assert json.loads(answers[0].events()[-1]["data"])["result"]["content"][0]["text"] == "done"
    core.release.clear()
    thread, answers = call_on_thread(server, mine.session, 2)
    assert mine.send({**cancel, "params": {"requestId": 2}}).status == 202
    thread.join(30)
    assert [event["data"] for event in answers[0].events()] == [""]  # the priming event, and no answer
    assert core.stopped == [False, True]


def test_ending_a_session_stops_its_running_call(served):
    core = Held()
    server, _ = served(core)
    client = Client(server.url).initialize()
    thread, answers = call_on_thread(server, client.session, 1)
    assert client.request("DELETE").status == 204
    thread.join(30)
    assert core.stopped == [True] and [event["data"] for event in answers[0].events()] == [""]


def test_a_client_that_takes_only_json_gets_a_calls_answer_as_json(served):
    server, _ = served()
    client = Client(server.url).initialize()
    answer = client.send(CALL, {"Accept": "application/json"})
    assert answer.headers["Content-Type"] == "application/json" and answer.json()["result"]["isError"] is False
    assert client.send(CALL, {"Accept": "text/html"}).status == 406


def test_a_get_opens_no_stream(served):
    server, _ = served()
    client = Client(server.url).initialize()
    answer = client.request("GET", headers={"Content-Type": None, "Content-Length": None})
    assert answer.status == 405 and "POST" in answer.headers["Allow"]


def test_closed_it_answers_no_more(served):
    server, _ = served()
    server.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(urllib.request.Request(server.url, b"{}", method="POST"), timeout=5)


# -- crew mcp --http -------------------------------------------------------------------------------


def start_http(tmp_path: Path, *args: str, **env: str):
    """`crew mcp --http 127.0.0.1:0 ARGS`: the process and its first line on stderr (crew's own
    lines: the URL and how the token is given)."""
    proc = start_crew(["mcp", "--http", "127.0.0.1:0", *args], env=crew_env(tmp_path / "home", **env), cwd=tmp_path)
    return proc, proc.stderr.readline()


@pytest.mark.slow
def test_crew_mcp_http_makes_a_token_and_prints_it_once_with_the_url(tmp_path):
    proc, line = start_http(tmp_path)
    try:
        url, token = re.fullmatch(
            r"crew mcp: serving MCP at (\S+); every request needs Authorization: Bearer (\S+)\n", line
        ).groups()
        assert len(token) >= 32
        assert Client(url, token=None).send(INITIALIZE).status == 401
        client = Client(url, token=token).initialize()
        assert [tool["name"] for tool in client.send({**PING, "method": "tools/list"}).json()["result"]["tools"]][
            -3:
        ] == ["ask", "job", "cancel"]
    finally:
        proc.terminate()
        proc.wait(30)
        rest = proc.stderr.read()
        end_group(proc)
    assert token not in rest


@pytest.mark.slow
def test_the_token_can_come_from_the_environment_and_go_to_a_file(tmp_path):
    given = "from-the-environment-0123456789"
    proc, line = start_http(tmp_path, "--token-file", str(tmp_path / "token"), CREW_MCP_TOKEN=given)
    try:
        assert given not in line and f"the token in {tmp_path / 'token'}" in line
        assert (tmp_path / "token").read_text() == given + "\n"
        assert stat.S_IMODE((tmp_path / "token").stat().st_mode) == 0o600
        url = re.search(r"serving MCP at (\S+);", line).group(1)
        assert Client(url, token=given).send(INITIALIZE).status == 200
    finally:
        end_group(proc)


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (["--http", "127.0.0.1:0"], {"CREW_MCP_TOKEN": "short"}, "CREW_MCP_TOKEN must be at least 16"),
        (["--http", "0.0.0.0:0"], {}, "would listen beyond this machine"),
        (["--http", "192.0.2.1:0"], {}, "add --allow-remote"),
        (["--token-file", "t"], {}, "go with --http"),
        (["--allow-remote"], {}, "go with --http"),
    ],
)
@pytest.mark.slow
def test_what_would_open_it_up_is_a_usage_error(tmp_path, args, env, said):
    done = run_crew(["mcp", *args], env=crew_env(tmp_path / "home", **env), cwd=tmp_path)
    assert done.returncode == 2 and said in error_line(done.stderr)


@pytest.mark.slow
def test_allow_remote_listens_everywhere_with_a_warning_and_still_wants_the_token(tmp_path):
    proc = start_crew(["mcp", "--http", "0.0.0.0:0", "--allow-remote"], env=crew_env(tmp_path / "home"), cwd=tmp_path)
    try:
        warning, line = proc.stderr.readline(), proc.stderr.readline()
        assert warning.startswith("crew mcp: warning: listening on 0.0.0.0, reachable from other machines")
        port = urlsplit(re.search(r"serving MCP at (\S+);", line).group(1)).port
        assert Client(f"http://127.0.0.1:{port}/mcp", token=None).send(INITIALIZE).status == 401
    finally:
        end_group(proc)


@pytest.mark.slow
def test_a_slowloris_never_keeps_a_token_holder_out(tmp_path):
    """Issue 31's attack on a real `crew mcp --http`: as many strangers as it takes strangers'
    slots send a header byte now and then and never finish; a client with the token is served
    while they are still connected (not after their deadline ends them)."""
    proc, line = start_http(tmp_path, CREW_MCP_TOKEN=TOKEN)
    url = re.search(r"serving MCP at (\S+);", line).group(1)
    strangers = [socket.create_connection(("127.0.0.1", urlsplit(url).port), timeout=30) for _ in range(MAX_PENDING)]
    try:
        for sock in strangers:
            sock.sendall(b"P")
        assert Client(url).send(INITIALIZE).status == 200
        still = [sock for sock in strangers if connected(sock)]
        assert len(still) >= MAX_PENDING - 1  # the token holder's connection dropped at most the oldest
    finally:
        for sock in strangers:
            sock.close()
        end_group(proc)


@pytest.mark.slow
def test_a_symlink_is_never_followed_to_write_the_token(tmp_path):
    (tmp_path / "elsewhere").write_text("keep\n")
    (tmp_path / "token").symlink_to(tmp_path / "elsewhere")
    done = run_crew(
        ["mcp", "--http", "127.0.0.1:0", "--token-file", str(tmp_path / "token")],
        env=crew_env(tmp_path / "home"),
        cwd=tmp_path,
    )
    assert done.returncode == 2 and "cannot write the token" in error_line(done.stderr)
    assert (tmp_path / "elsewhere").read_text() == "keep\n"


# -- the official conformance suite ----------------------------------------------------------------

SCENARIOS = [
    "server-initialize",
    "ping",
    "tools-list",
    "logging-set-level",
    "resources-list",
    "prompts-list",
    "dns-rebinding-protection",
    "server-sse-polling",
]


class TokenProxy:
    """Forwards each connection to 127.0.0.1:`port`, adding `Authorization: Bearer TOKEN` to every
    request on it (the conformance suite cannot send one). Requests are read whole (a Content-Length
    body) and passed on unchanged otherwise, on one upstream connection per client connection, so
    keep-alive behaves as without the proxy; responses go back byte for byte."""

    def __init__(self, port: int, token: str) -> None:
        self.port, self.token = port, token
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/mcp"
        self.problems: list[str] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        stop_listening(self.listener)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._forward, args=(client,), daemon=True).start()

    def _forward(self, client: socket.socket) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.port))
        threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()
        reader = client.makefile("rb")
        try:
            while line := reader.readline():
                headers = []
                while (header := reader.readline()) not in (b"\r\n", b"\n", b""):
                    headers.append(header)
                names = {
                    header.partition(b":")[0].strip().lower(): header.partition(b":")[2].strip() for header in headers
                }
                if b"transfer-encoding" in names:
                    self.problems.append("a chunked request: the proxy passes Content-Length bodies only")
                    return
                body = reader.read(int(names.get(b"content-length", b"0")))
                upstream.sendall(
                    line + b"".join(headers) + f"Authorization: Bearer {self.token}\r\n\r\n".encode() + body
                )
        except OSError:
            pass
        finally:
            upstream.close()

    @staticmethod
    def _pipe(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(1 << 16):
                target.sendall(data)
        except OSError:
            pass
        finally:  # shutdown, not just close: the other direction's reader holds the socket open
            with contextlib.suppress(OSError):
                target.shutdown(socket.SHUT_RDWR)
            target.close()


@pytest.mark.needs("clis")
@pytest.mark.slow
def test_the_official_conformance_suite_passes_every_scenario_that_applies(tmp_path):
    conformance = require_cli("conformance")
    given = "conformance-token-0123456789"
    proc, line = start_http(tmp_path, CREW_MCP_TOKEN=given)
    proxy = TokenProxy(urlsplit(re.search(r"serving MCP at (\S+);", line).group(1)).port, given)
    try:
        for scenario in SCENARIOS:
            done = subprocess.run(
                [conformance, "server", "--url", proxy.url, "--scenario", scenario],
                capture_output=True,
                text=True,
                timeout=120,
                cwd=tmp_path,
                env={**os.environ, "NO_COLOR": "1"},
            )
            said = done.stdout + done.stderr
            counts = re.search(r"Passed: (\d+)/(\d+), (\d+) failed, (\d+) warnings", said)
            assert counts, f"{scenario}: no result line in\n{said}"
            passed, total, failed, warnings = map(int, counts.groups())
            assert (failed, warnings) == (0, 0) and passed == total > 0 and done.returncode == 0, f"{scenario}:\n{said}"
        assert proxy.problems == []
    finally:
        proxy.close()
        end_group(proc)
