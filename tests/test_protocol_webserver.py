"""crewbridge.protocol.webserver: the hardened HTTP server under `crew mcp --http` and `crew ui`, attacked
with real sockets: deadlines for a whole request, strangers' connections limited without ever
keeping a token holder out, the token and the cookies signed with it."""

from __future__ import annotations

import http.client
import os
import socket
import stat
import time
from pathlib import Path

import pytest

from crewbridge.errors import UsageError
from crewbridge.protocol import webserver
from crewbridge.protocol.webserver import (
    MAX_PENDING,
    EventStream,
    Handler,
    Keys,
    Server,
    check_listen,
    is_loopback,
    parse_address,
    server_token,
    write_secret,
)
from sockets import connected

TOKEN = "test-token-0123456789abcdef"


class Echo(Handler):
    """A face with one route: GET / answers "ok" to whoever passes the checks; POST echoes its body."""

    keys = Keys(TOKEN)

    def do_GET(self) -> None:
        if self.admitted():
            self.send_text(200, "ok")

    def do_POST(self) -> None:
        if self.admitted() and (length := self.body_length()) is not None:
            body = self.read_body(length)
            if body is not None:
                self.send(200, body, "application/octet-stream")


@pytest.fixture
def server():
    served = Server("127.0.0.1", 0, Echo, flag="--listen")
    served.start()
    yield served
    served.close()


def port(served: Server) -> int:
    return served.server_address[1]


def get(served: Server, token: str | None = TOKEN) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port(served), timeout=30)
    connection.request("GET", "/", headers={"Authorization": f"Bearer {token}"} if token else {})
    status = connection.getresponse().status
    connection.close()
    return status


def stranger(served: Server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port(served)), timeout=30)


def hung_up_while_trickling(sock: socket.socket, data: bytes, every: float = 0.1) -> bool:
    """Send `data` a byte at a time, `every` seconds apart: whether the server hung up before the
    last byte went (each byte comes well within any timeout per byte)."""
    for byte in data:
        try:
            sock.sendall(bytes([byte]))
        except OSError:
            return True
        if not connected(sock):
            return True
        time.sleep(every)
    return False


# -- deadlines -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_header_sent_a_byte_at_a_time_is_cut_off_at_its_deadline(server, monkeypatch):
    monkeypatch.setattr(webserver, "REQUEST_TIME", 0.5)
    sock = stranger(server)
    header = f"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nX-Pad: {'a' * 200}\r\n\r\n"
    assert hung_up_while_trickling(sock, header.encode())  # 300 bytes, 0.1 s apart: 30 s if never cut
    sock.close()
    assert get(server) == 200  # and it serves on


@pytest.mark.slow
def test_a_body_sent_a_byte_at_a_time_is_cut_off_at_the_same_deadline(server, monkeypatch):
    monkeypatch.setattr(webserver, "REQUEST_TIME", 0.5)
    sock = stranger(server)
    body = b"x" * 300
    head = f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {len(body)}\r\n\r\n"
    sock.sendall(head.encode())
    assert hung_up_while_trickling(sock, body)
    sock.close()


@pytest.mark.slow
def test_a_whole_request_in_time_is_answered_and_the_next_gets_a_deadline_of_its_own(server, monkeypatch):
    monkeypatch.setattr(webserver, "REQUEST_TIME", 2.0)
    connection = http.client.HTTPConnection("127.0.0.1", port(server), timeout=30)
    for _ in range(3):
        connection.request("POST", "/", body=b"hello", headers={"Authorization": f"Bearer {TOKEN}"})
        answer = connection.getresponse()
        assert (answer.status, answer.read()) == (200, b"hello")
        time.sleep(1.0)  # idle between requests is not request time: three of these pass 2 s
    connection.close()


@pytest.mark.slow
def test_a_connection_that_never_sends_is_closed_when_idle(server, monkeypatch):
    monkeypatch.setattr(webserver, "IDLE", 0.2)
    sock = stranger(server)
    assert sock.recv(100) == b""  # the server hung up
    sock.close()


# -- how many --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_slowloris_never_keeps_a_token_holder_out(server, monkeypatch):
    """Strangers fill every slot of theirs and trickle header bytes; with the deadlines an hour
    long, nothing times out, yet each token holder is served, dropping only the oldest stranger."""
    monkeypatch.setattr(webserver, "IDLE", 3600.0)
    monkeypatch.setattr(webserver, "REQUEST_TIME", 3600.0)
    strangers = [stranger(server) for _ in range(MAX_PENDING)]
    for sock in strangers:
        sock.sendall(b"G")
    for served_already in range(3):
        assert get(server) == 200
        dropped = served_already + 1
        assert [connected(sock) for sock in strangers] == [False] * dropped + [True] * (len(strangers) - dropped)
        strangers.append(stranger(server))  # the strangers fill their slots again
        strangers[-1].sendall(b"G")
    for sock in strangers:
        sock.close()


@pytest.mark.slow
def test_one_stranger_too_many_drops_the_oldest_not_the_newest(server, monkeypatch):
    monkeypatch.setattr(webserver, "IDLE", 3600.0)
    strangers = [stranger(server) for _ in range(MAX_PENDING + 1)]
    strangers[-1].sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # refused (no token), but answered
    assert strangers[-1].recv(12) == b"HTTP/1.1 401"
    assert not connected(strangers[0]) and all(connected(sock) for sock in strangers[1:])
    for sock in strangers:
        sock.close()


def test_token_holders_have_slots_of_their_own_and_past_them_get_503(server, monkeypatch):
    monkeypatch.setattr(webserver, "MAX_TRUSTED", 2)
    held = []
    for _ in range(2):
        connection = http.client.HTTPConnection("127.0.0.1", port(server), timeout=30)
        connection.request("GET", "/", headers={"Authorization": f"Bearer {TOKEN}"})
        assert connection.getresponse().read() == b"ok\n"
        held.append(connection)  # kept alive: each holds a slot
    assert get(server) == 503
    held[0].close()
    deadline = time.monotonic() + 30
    status = get(server)
    while status == 503 and time.monotonic() < deadline:  # its thread notices the close
        time.sleep(0.05)
        status = get(server)
    # That answer's own slot is freed only once its thread notices the close, as held[0]'s was:
    # a further request at once could be the third of two slots again.
    assert status == 200
    held[1].close()


# -- who -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("token", [None, "wrong-token-0123456789", TOKEN + "x", ""])
def test_without_the_token_a_request_is_refused(server, token):
    assert get(server, token) == 401


def test_the_token_is_compared_whole():
    keys = Keys(TOKEN)
    assert keys.matches(TOKEN) and not keys.matches(TOKEN[:-1]) and not keys.matches("\udcff")


# -- where, and the token --------------------------------------------------------------------------


def test_an_address_is_host_and_port():
    assert parse_address("127.0.0.1:0", "--listen") == ("127.0.0.1", 0)
    assert parse_address("8765", "--listen") == ("127.0.0.1", 8765)
    assert parse_address("[::1]:80", "--listen") == ("::1", 80)
    for wrong in ("host", "1:99999", "1:٣"):
        with pytest.raises(UsageError, match=r"--listen '.*' is not HOST:PORT"):
            parse_address(wrong, "--listen")


def test_only_loopback_is_listened_on_without_allow_remote():
    said: list[str] = []
    assert is_loopback("localhost") and is_loopback("127.3.4.5") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.com")
    check_listen("127.0.0.1", "127.0.0.1:1", flag="--listen", allow_remote=False, face="crew ui", say=said.append)
    with pytest.raises(UsageError, match="add --allow-remote"):
        check_listen("0.0.0.0", "0.0.0.0:1", flag="--listen", allow_remote=False, face="crew ui", say=said.append)
    check_listen("0.0.0.0", "0.0.0.0:1", flag="--listen", allow_remote=True, face="crew ui", say=said.append)
    assert said == [said[0]] and said[0].startswith("crew ui: warning: listening on 0.0.0.0")


def test_a_token_from_the_environment_must_be_long_and_visible(tmp_path):
    assert server_token({"V": "x" * 16}, "V", None) == ("x" * 16, "$V")
    made, shown = server_token({}, "V", None)
    assert len(made) >= 32 and shown == made
    with pytest.raises(UsageError, match="V must be at least 16"):
        server_token({"V": "short"}, "V", None)
    with pytest.raises(UsageError, match="visible ASCII"):
        server_token({"V": "x" * 16 + " "}, "V", None)
    assert server_token({"V": "y" * 16}, "V", tmp_path / "t") == ("y" * 16, f"the token in {tmp_path / 't'}")
    assert (tmp_path / "t").read_text() == "y" * 16 + "\n" and stat.S_IMODE((tmp_path / "t").stat().st_mode) == 0o600


def test_a_secret_is_never_written_through_a_symlink_nor_waits_on_a_fifo(tmp_path: Path):
    (tmp_path / "elsewhere").write_text("keep\n")
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UsageError, match="cannot write the token"):
        write_secret(tmp_path / "link", "s")
    assert (tmp_path / "elsewhere").read_text() == "keep\n"
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UsageError, match="cannot write the token"):  # not opened to wait for a reader
        write_secret(tmp_path / "fifo", "s")


# -- server-sent events ----------------------------------------------------------------------------


def test_events_are_written_whole_and_end_quietly_when_the_client_is_gone():
    class Out:
        def __init__(self) -> None:
            self.data = b""
            self.broken = False

        def write(self, raw: bytes) -> None:
            if self.broken:
                raise BrokenPipeError
            self.data += raw

        def flush(self) -> None:
            pass

    out = Out()
    stream = EventStream(out)
    assert stream.send(b"", id="1", retry=3000)
    assert stream.send(b"two\nlines", event="message")
    assert out.data == b"id: 1\nretry: 3000\ndata: \n\nevent: message\ndata: two\ndata: lines\n\n"
    out.broken = True
    assert not stream.comment() and not stream.send(b"late")
