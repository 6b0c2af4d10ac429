"""crew's egress proxy, spoken to as a sandboxed process (or an attacker in one) would: CONNECT
and plain HTTP to what its door allows, refusals with the process that asked, and hostile input —
huge and malformed heads, a slow client, too many connections, names that resolve into the
machine, address spellings that hide loopback — answered and closed, never served. The user's own
proxy stays the upstream. Sockets on 127.0.0.1 only; names are resolved by a small fake resolver."""

from __future__ import annotations

import base64
import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from crewbridge.sandbox import proxy
from crewbridge.sandbox.allowlist import AllowList, entry
from crewbridge.sandbox.proxy import Door, Proxy, Refused, Upstream
from sockets import stop_listening


@dataclass
class Echo:
    """A TCP server on 127.0.0.1 that records what each connection sends first and echoes it all back."""

    sock: socket.socket = field(default_factory=lambda: socket.create_server(("127.0.0.1", 0)))
    received: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def port(self) -> int:
        return self.sock.getsockname()[1]

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    def _echo(self, conn: socket.socket) -> None:
        with conn:
            first = True
            while chunk := conn.recv(65536):
                if first:
                    self.received.append(chunk)
                    first = False
                conn.sendall(chunk)


@dataclass
class Served:
    """crew's proxy serving one door on 127.0.0.1, and what it reported."""

    proxy: Proxy
    listener: socket.socket
    refused: list[Refused]

    @property
    def port(self) -> int:
        return self.listener.getsockname()[1]

    def connect(self) -> socket.socket:
        client = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        return client

    def ask(self, head: bytes, *, done: bool = False) -> bytes:
        """Send `head` on a new connection (`done`: then nothing more); what the proxy answers until
        it closes (or 5 s pass)."""
        with self.connect() as client:
            client.sendall(head)
            if done:
                client.shutdown(socket.SHUT_WR)
            return read_all(client)


def read_all(client: socket.socket) -> bytes:
    data = b""
    client.settimeout(5)
    try:
        while chunk := client.recv(65536):
            data += chunk
    except (TimeoutError, ConnectionResetError):  # closed with what it sent unread: closed all the same
        pass
    return data


def answer_to(client: socket.socket) -> bytes:
    """The proxy's answer head to a CONNECT (up to its blank line), read a byte at a time: what the
    tunnel relays next may already be there, and stays to be read (a loaded machine lets it come
    in the same segment)."""
    data = b""
    while not data.endswith(b"\r\n\r\n"):
        byte = client.recv(1)
        if not byte:
            break
        data += byte
    return data


@pytest.fixture
def echo() -> Iterator[Echo]:
    server = Echo()
    yield server
    stop_listening(server.sock)


@pytest.fixture
def door(echo: Echo) -> Iterator[callable]:
    """door(allowed…, upstream=…, to=…) → a Served proxy door on 127.0.0.1 allowing those entries."""
    made: list[Served] = []

    def make(*allowed: str, upstream: Upstream | None = None, to: tuple[str, int] | None = None, **kinds) -> Served:
        refused: list[Refused] = []
        listener = socket.create_server(("127.0.0.1", 0))
        entries = tuple(entry(text, private_ok=kinds.get("private_ok", True)) for text in allowed)
        served = Served(Proxy(), listener, refused)
        served.proxy.open(listener, Door(refused.append, AllowList(entries), upstream or Upstream(), to))
        made.append(served)
        return served

    yield make
    for served in made:
        served.proxy.shut(served.listener)


def test_connect_to_an_allowed_destination_tunnels_bytes_both_ways(door, echo):
    served = door(f"127.0.0.1:{echo.port}")
    with served.connect() as client:
        client.sendall(f"CONNECT 127.0.0.1:{echo.port} HTTP/1.1\r\nHost: 127.0.0.1:{echo.port}\r\n\r\nfirst".encode())
        assert answer_to(client).startswith(b"HTTP/1.1 200 ")
        client.settimeout(60)  # a bound for a broken proxy, not a timing: a loaded machine is slow
        payload = os.urandom(1 << 20)  # a megabyte of random bytes, both ways, intact
        sender = threading.Thread(target=client.sendall, args=(payload,))
        sender.start()
        got = b""
        while len(got) < len(payload) + len(b"first"):
            got += client.recv(1 << 16)
        sender.join()
    assert got == b"first" + payload
    assert served.refused == []


def test_a_destination_not_in_the_allow_list_is_refused_and_the_process_that_asked_is_named(door, echo):
    served = door("example.com")
    answer = served.ask(f"CONNECT 127.0.0.1:{echo.port} HTTP/1.1\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 403 Forbidden\r\n")
    assert answer.endswith(f"crew refused 127.0.0.1:{echo.port}: not in the allow-list\n".encode())
    [refused] = served.refused
    assert (refused.host, refused.port, refused.why) == ("127.0.0.1", echo.port, "not in the allow-list")
    assert refused.process is not None and refused.process.startswith(f"pid {os.getpid()}: ")  # this test's
    assert refused.text().startswith(f"network: refused 127.0.0.1:{echo.port} (by pid {os.getpid()}: ")
    assert echo.received == []


def test_a_plain_request_goes_on_in_origin_form_without_the_clients_proxy_headers(door, echo):
    served = door(f"127.0.0.1:{echo.port}")
    head = (
        f"POST http://127.0.0.1:{echo.port}/v1/messages?beta=true HTTP/1.1\r\nHost: another.example\r\n"
        "Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive\r\n"
        "Content-Length: 4\r\n\r\nbody"
    ).encode()
    answer = served.ask(head, done=True)
    sent = echo.received[0]
    assert sent.startswith(f"POST /v1/messages?beta=true HTTP/1.1\r\nHost: 127.0.0.1:{echo.port}\r\n".encode())
    assert b"another.example" not in sent  # the Host is the destination crew checked
    assert b"Proxy-" not in sent and b"keep-alive" not in sent
    assert b"Connection: close\r\n" in sent and sent.endswith(b"\r\n\r\nbody")
    # The echo's answer came back, its "head" (the request's, echoed) told to close the connection.
    assert answer.split(b"\r\n\r\n")[1] == b"body"
    assert answer.count(b"Connection: close") == 1 and b"keep-alive" not in answer


@pytest.mark.parametrize(
    ("head", "status"),
    [
        (b"CONNECT\r\n\r\n", b"400"),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"400"),  # origin-form: not a proxy request
        (b"GET https://example.com/ HTTP/1.1\r\n\r\n", b"400"),  # https goes through CONNECT
        (b"GET http://user:pw@example.com/ HTTP/1.1\r\n\r\n", b"400"),
        (b"GET http:///path HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT example.com HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT example.com:99999 HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT example.com:+443 HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT [::1 HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT example.com:443 HTTP/2.0\r\n\r\n", b"400"),
        (b"CONNECT  example.com:443 HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT example.com:443 HTTP/1.1\r\nBad Header: x\r\n\r\n", b"400"),
        (b"CONNECT example.com:443 HTTP/1.1\r\nNo-colon\r\n\r\n", b"400"),
        (b"CONNECT example.com:443 HTTP/1.1\r\nX: \x00\r\n\r\n", b"400"),
        ("CONNECT ëxample.com:443 HTTP/1.1\r\n\r\n".encode(), b"400"),
        (b"\xff\xfe\r\n\r\n", b"400"),
        (b"CONNECT 2130706433:443 HTTP/1.1\r\n\r\n", b"400"),  # 127.0.0.1 as one number
        (b"CONNECT 0177.0.0.1:443 HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT 0x7f.0.0.1:443 HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT 127.1:443 HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT " + b"a" * 20000 + b":443 HTTP/1.1\r\n\r\n", b"431"),
        (b"CONNECT example.com:443 HTTP/1.1\r\n" + b"X-Pad: y\r\n" * 2000 + b"\r\n", b"431"),
        (b"CONNECT example.com:443 HTTP/1.1\r\n" + b"x" * 20000, b"431"),  # no end of head in sight
    ],
)
def test_a_malformed_or_oversized_request_is_answered_with_an_error_and_reaches_nothing(door, echo, head, status):
    served = door("*.example.com", "example.com", f"127.0.0.1:{echo.port}")
    answer = served.ask(head)
    assert answer.startswith(b"HTTP/1.1 " + status + b" "), answer[:200]
    assert b"Connection: close" in answer
    assert echo.received == []
    [refused] = served.refused
    assert refused.why


def test_a_client_too_slow_to_send_its_head_is_closed_unanswered(door, monkeypatch):
    monkeypatch.setattr(proxy, "HEAD_TIMEOUT", 0.5)
    served = door("example.com")
    with served.connect() as client:
        client.sendall(b"CONNECT example.com:443 HTTP/1.1\r\n")  # and never the blank line (slowloris)
        assert read_all(client) == b""  # closed by the proxy, not by this test's 5 s wait
    assert served.refused == []


def test_more_connections_than_a_door_keeps_open_are_closed_at_once(door, monkeypatch):
    monkeypatch.setattr(proxy, "MAX_OPEN", 2)
    monkeypatch.setattr(proxy, "HEAD_TIMEOUT", 30.0)
    served = door("example.com")
    held = [served.connect() for _ in range(2)]
    for client in held:
        client.sendall(b"CONNECT ")  # each holds a slot, its head unfinished
    try:
        extra = served.connect()
        extra.sendall(b"CONNECT example.com:443 HTTP/1.1\r\n\r\n")
        assert read_all(extra) == b""
        extra.close()
    finally:
        for client in held:
            client.close()


@pytest.fixture
def resolver(monkeypatch, echo):
    """Names that resolve into the machine (the fake resolver's table), each to the echo server's
    port where that is its address, so that a connection that should be refused would succeed."""
    table = {
        "evil.example.com": "127.0.0.1",
        "meta.example.com": "169.254.169.254",
        "ten.example.com": "10.1.2.3",
        "mapped.example.com": "::ffff:127.0.0.1",
        "six.example.com": "::1",
        "db.example.com": "127.0.0.1",
        "api.example.com": "127.0.0.1",
    }

    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host not in table:
            return real(host, port, *args, **kwargs)
        address = table[host]
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        target = (address, port) if family == socket.AF_INET else (address, port, 0, 0)
        return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", target)]

    monkeypatch.setattr(proxy.socket, "getaddrinfo", getaddrinfo)
    return table


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("evil.example.com", "a loopback address"),
        ("meta.example.com", "a link-local address"),
        ("ten.example.com", "a private address"),
        ("mapped.example.com", "a loopback address"),
        ("six.example.com", "a loopback address"),
    ],
)
def test_a_name_a_wildcard_allows_may_not_lead_into_the_machine_or_its_network(door, echo, resolver, name, kind):
    served = door("*.example.com:" + str(echo.port))
    answer = served.ask(f"CONNECT {name}:{echo.port} HTTP/1.1\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 403 "), answer
    [refused] = served.refused
    assert refused.host == name and f"it resolves to {resolver[name]}, {kind}" in refused.why
    assert echo.received == []


def test_a_host_the_user_named_exactly_may_be_private_a_providers_may_not(door, echo, resolver):
    user = door(f"db.example.com:{echo.port}")  # crew.yaml's network: allow, a base URL
    with user.connect() as client:
        client.sendall(f"CONNECT db.example.com:{echo.port} HTTP/1.1\r\n\r\nhello".encode())
        assert answer_to(client).startswith(b"HTTP/1.1 200 ")
        assert client.recv(5) == b"hello"
    provider = door(f"api.example.com:{echo.port}", private_ok=False)  # a provider's built-in host
    assert provider.ask(f"CONNECT api.example.com:{echo.port} HTTP/1.1\r\n\r\n".encode()).startswith(b"HTTP/1.1 403 ")


def test_an_ipv4_mapped_address_is_the_address_it_maps(door, echo):
    allowed = door(f"127.0.0.1:{echo.port}")
    with allowed.connect() as client:
        client.sendall(f"CONNECT [::ffff:127.0.0.1]:{echo.port} HTTP/1.1\r\n\r\n".encode())
        assert answer_to(client).startswith(b"HTTP/1.1 200 ")
    other = door("example.com")
    assert other.ask(f"CONNECT [::ffff:127.0.0.1]:{echo.port} HTTP/1.1\r\n\r\n".encode()).startswith(b"HTTP/1.1 403")
    assert [(r.host, r.port) for r in other.refused] == [("127.0.0.1", echo.port)]
    assert other.ask(f"CONNECT [::1]:{echo.port} HTTP/1.1\r\n\r\n".encode()).startswith(b"HTTP/1.1 403")


def test_a_carried_door_leads_every_connection_to_its_one_destination(door, echo):
    served = door(to=("127.0.0.1", echo.port))
    with served.connect() as client:
        client.sendall(b"not HTTP at all\x00\x01")
        assert client.recv(100) == b"not HTTP at all\x00\x01"


class Upstream_:
    """The user's own proxy: answers a CONNECT with `status`, records each head, then echoes."""

    def __init__(self, status: bytes = b"200 Connection established") -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.heads: list[bytes] = []
        self.status = status
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                head = answer_to(conn)
                self.heads.append(head)
                conn.sendall(b"HTTP/1.1 " + self.status + b"\r\n\r\n")
                while chunk := conn.recv(65536):
                    conn.sendall(chunk)


def test_the_users_own_proxy_stays_the_upstream_of_an_allowed_destination(door):
    upstream = Upstream_()
    env = {"HTTPS_PROXY": f"http://me:p%40ss@127.0.0.1:{upstream.sock.getsockname()[1]}", "NO_PROXY": "internal.org"}
    served = door("api.example.com", upstream=Upstream.of(env))
    with served.connect() as client:
        client.sendall(b"CONNECT api.example.com:443 HTTP/1.1\r\n\r\n")
        assert answer_to(client).startswith(b"HTTP/1.1 200 ")
        client.sendall(b"through")
        assert client.recv(7) == b"through"
    [head] = upstream.heads
    assert head.startswith(b"CONNECT api.example.com:443 HTTP/1.1\r\n")
    assert b"Proxy-Authorization: Basic " + base64.b64encode(b"me:p@ss") in head
    upstream.sock.close()


def test_an_upstream_that_refuses_is_a_refusal_naming_it(door):
    upstream = Upstream_(b"403 Forbidden")
    port = upstream.sock.getsockname()[1]
    served = door("api.example.com", upstream=Upstream.of({"https_proxy": f"127.0.0.1:{port}"}))
    assert served.ask(b"CONNECT api.example.com:443 HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 502 ")
    [refused] = served.refused
    assert f"the upstream proxy 127.0.0.1:{port} said 'HTTP/1.1 403 Forbidden'" in refused.why
    upstream.sock.close()


def test_no_proxy_and_the_kind_of_request_choose_the_upstream():
    env = {
        "HTTP_PROXY": "http://plain:3128",
        "HTTPS_PROXY": "http://tunnel:3129",
        "NO_PROXY": ".corp.example,10.0.0.1,",
    }
    upstream = Upstream.of(env)
    assert upstream.for_("api.example.com", plain=False) == ("tunnel", 3129, "")
    assert upstream.for_("api.example.com", plain=True) == ("plain", 3128, "")
    assert upstream.for_("db.corp.example", plain=False) is None
    assert upstream.for_("corp.example", plain=False) is None
    assert upstream.for_("10.0.0.1", plain=False) is None
    assert Upstream.of({"NO_PROXY": "*", "HTTPS_PROXY": "http://p:1"}).for_("x.org", plain=False) is None
    socks = Upstream.of({"HTTPS_PROXY": "socks5://me:secret@p:1080"})
    assert socks.https is None and socks.unusable == "HTTPS_PROXY (socks5://…)"  # never its password


def test_shutting_a_door_ends_the_connections_through_it(door, echo):
    served = door(f"127.0.0.1:{echo.port}")
    client = served.connect()
    client.sendall(f"CONNECT 127.0.0.1:{echo.port} HTTP/1.1\r\n\r\n".encode())
    assert answer_to(client).startswith(b"HTTP/1.1 200 ")
    served.proxy.shut(served.listener)
    assert read_all(client) == b""
    client.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", served.port), timeout=2).close()


def test_a_loop_of_refused_connections_cannot_fill_the_record(door, monkeypatch):
    monkeypatch.setattr(proxy, "TOLD", 5)
    monkeypatch.setattr(proxy, "NAMED", 2)
    served = door("example.com")
    for _ in range(8):
        assert served.ask(b"CONNECT evil.example:443 HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 403 ")  # each answered
    assert len(served.refused) == 5
    assert [r.process is not None for r in served.refused] == [True, True, False, False, False]
    assert served.refused[-1].why == "not in the allow-list; crew records no more refusals of this sandbox"
