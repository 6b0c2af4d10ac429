"""The hardened HTTP server under crew's faces on the network (`crew mcp --http`, `crew ui`): where
it may listen, its token, the checks every request passes, and bounds on everything a client sends.

- **Where**: loopback, unless the face's `--allow-remote` says otherwise (then with a warning).
- **Who**: a request names this machine in Host (or a host allowed by name), and in Origin when it
  has one (a web page elsewhere, DNS rebinding: 403); it carries the token (`Authorization: Bearer`:
  `Keys`, compared in constant time), or what else the face takes (crew ui's session cookie) (401).
- **How much**: a body within the face's bound, with one valid Content-Length (400, 411, 413); a
  refused request's body is read and dropped, or the connection closed: never read as the next one.
- **How long**: a request's whole header and body must arrive within REQUEST_TIME of its first
  byte (a deadline, not a timeout per byte); a kept-alive connection waits IDLE for the next.
- **How many**: at most MAX_PENDING connections that have not authenticated; one more drops the
  oldest of them, so idle or slow strangers (slowloris) can never hold the slots a token holder
  needs. Authenticated connections have slots of their own (MAX_TRUSTED; past it, 503).

A face subclasses `Handler` (its routes) and makes a `Server` with it.
"""

from __future__ import annotations

import hmac
import io
import ipaddress
import os
import secrets
import select
import socket
import stat
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

from crewbridge.base.jsonio import dumps_bytes
from crewbridge.errors import UsageError

LOOPBACK = ("localhost", "127.0.0.1", "::1")
MIN_TOKEN = 16  # characters of a token given in the environment
MAX_PENDING = 32  # connections not yet authenticated; one more drops the oldest
MAX_TRUSTED = 64  # authenticated connections served at once; more are answered 503
IDLE = 30.0  # seconds a connection may wait for its next request (or a response may wait for the client)
REQUEST_TIME = 10.0  # seconds for a request's whole header and body, from its first byte
DISCARD_CHUNK = 1 << 16


def parse_address(address: str, flag: str) -> tuple[str, int]:
    """HOST:PORT (or just PORT, on 127.0.0.1), as given to `flag`."""
    host, _, port = address.rpartition(":")
    if not port.isdigit() or not port.isascii() or int(port) > 65535:
        raise UsageError(f"{flag} '{address}' is not HOST:PORT; e.g. {flag} 127.0.0.1:8765 (port 0 picks a free one)")
    return host.strip("[]") or "127.0.0.1", int(port)


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, without brackets) is this machine's loopback."""
    if host.lower() in LOOPBACK:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_listen(
    host: str, address: str, *, flag: str, allow_remote: bool, face: str, say: Callable[[str], None]
) -> None:
    """Refuse to listen beyond this machine without --allow-remote; warn when allowed to."""
    if is_loopback(host):
        return
    if not allow_remote:
        raise UsageError(
            f"{flag} {address} would listen beyond this machine; serve on 127.0.0.1, or add --allow-remote "
            "(requests still need the token)"
        )
    say(
        f"{face}: warning: listening on {host}, reachable from other machines: anyone with the token may use "
        "crew here; name this server's host name with --allow-host"
    )


def server_token(environ: Mapping[str, str], variable: str, token_file: Path | None) -> tuple[str, str]:
    """The token every request must bear ($`variable`, else a new random one; written to
    `token_file`, created 0600, when given), and how the ready line names it."""
    given = environ.get(variable)
    if given is None:
        token, shown = secrets.token_urlsafe(32), ""
    elif len(given) < MIN_TOKEN or not all("!" <= char <= "~" for char in given):
        raise UsageError(
            f"{variable} must be at least {MIN_TOKEN} visible ASCII characters; make one with: "
            "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    else:
        token, shown = given, f"${variable}"
    if token_file is not None:
        write_secret(token_file, token)
        shown = f"the token in {token_file}"
    return token, shown or token


def write_secret(path: Path, secret: str) -> None:
    """Write `secret` to `path`, a regular file readable by its owner only (created, or replaced)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise UsageError(f"--token-file {path} is not a regular file; name a new file")
            os.fchmod(fd, 0o600)
            os.write(fd, secret.encode() + b"\n")
        finally:
            os.close(fd)
    except OSError as exc:
        raise UsageError(
            f"cannot write the token to {path}: {exc.strerror or exc}; name another --token-file"
        ) from None


@dataclass(frozen=True)
class Listening:
    """Where and how a face serves, as its command line said (--listen/--http, --token-file,
    --allow-host, --allow-remote)."""

    address: str
    token_file: Path | None = None
    allowed_hosts: tuple[str, ...] = ()
    allow_remote: bool = False

    def settle(self, *, flag: str, variable: str, face: str, say: Callable[[str], None]) -> tuple[str, int, str, str]:
        """The host, port, token ($`variable`, else a new one) and how to name the token; refused
        (UsageError) beyond this machine without --allow-remote."""
        host, port = parse_address(self.address, flag)
        check_listen(host, self.address, flag=flag, allow_remote=self.allow_remote, face=face, say=say)
        token, shown = server_token(os.environ, variable, self.token_file)
        return host, port, token, shown


class Keys:
    """The token a program bears (`Authorization: Bearer TOKEN`), compared in constant time."""

    def __init__(self, token: str) -> None:
        self.token = token.encode()

    def matches(self, given: str) -> bool:
        """Whether `given` is the token (in constant time)."""
        return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), self.token)

    def bearer(self, headers: Any) -> bool:
        """Whether the request carries exactly one `Authorization: Bearer TOKEN`."""
        given = headers.get_all("Authorization") or []
        if len(given) != 1:
            return False
        scheme, _, token = given[0].strip().partition(" ")
        return scheme.lower() == "bearer" and self.matches(token.strip())


class _Clock:
    """One connection's read deadline: IDLE until a request's first byte, then REQUEST_TIME for
    the rest of its header and body."""

    def __init__(self) -> None:
        self.deadline: float | None = None

    def next_request(self) -> None:
        self.deadline = None

    def left(self) -> float:
        if self.deadline is None:
            return IDLE
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request did not arrive in time")
        return left

    def started(self) -> None:
        if self.deadline is None:
            self.deadline = time.monotonic() + REQUEST_TIME


class _Reader(io.RawIOBase):
    """The socket as the handler reads it: every read waits only for what is left of the deadline."""

    def __init__(self, sock: socket.socket, clock: _Clock) -> None:
        self.sock, self.clock = sock, clock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self.sock.settimeout(self.clock.left())
        read = self.sock.recv_into(buffer)
        if read:
            self.clock.started()
        return read


class Server(ThreadingHTTPServer):
    """Serves `handler` at HOST:PORT from a thread per connection, connections limited as the
    module says; `url` names it."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 128  # a burst of connections waits to be accepted (past the backlog, a SYN waits 1 s)
    face = "crew"  # how its lines on stderr start

    def __init__(self, host: str, port: int, handler: type[Handler], *, flag: str, allowed_hosts: Iterable[str] = ()):
        self.hosts = {*LOOPBACK, *(name.strip("[]").lower() for name in allowed_hosts)}
        self._lock = threading.Lock()
        self._pending: OrderedDict[socket.socket, None] = OrderedDict()
        self._trusted: set[socket.socket] = set()
        self._thread: threading.Thread | None = None
        try:
            super().__init__((host, port), handler)
        except OSError as exc:
            raise UsageError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another {flag} port"
            ) from None
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{self.server_address[1]}"

    def serve(self) -> None:
        """Answer requests until close()."""
        self.serve_forever(poll_interval=0.2)

    def start(self, name: str = "crew-http") -> None:
        """Answer requests from a thread of its own until close()."""
        self._thread = threading.Thread(target=self.serve, name=name, daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop answering (the connections being served end as their clients go)."""
        if self._thread is not None:
            self.shutdown()  # returns once the serving loop has ended
            self._thread = None
        self.server_close()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            if len(self._pending) >= MAX_PENDING:  # the oldest stranger makes room
                oldest, _ = self._pending.popitem(last=False)
                _hang_up(oldest)
            self._pending[request] = None
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._forget(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._forget(request)

    def trust(self, request: socket.socket) -> bool:
        """The connection authenticated: it leaves the strangers' slots for one of MAX_TRUSTED
        (False when all are taken)."""
        with self._lock:
            if request in self._trusted:
                return True
            if len(self._trusted) >= MAX_TRUSTED:
                return False
            self._pending.pop(request, None)
            self._trusted.add(request)
            return True

    def _forget(self, request: socket.socket) -> None:
        with self._lock:
            self._pending.pop(request, None)
            self._trusted.discard(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if not isinstance(error, OSError):  # a client that went away is no news
            sys.stderr.write(f"{self.face}: internal error serving a request: {type(error).__name__}: {error}\n")


def _hang_up(sock: socket.socket) -> None:
    """End a connection another thread serves: its blocked read returns at once."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class Handler(BaseHTTPRequestHandler):
    """What every request of a face passes, and the ways to answer it. A face sets `keys` (through
    its server) and routes in do_GET/do_POST/…, calling `admitted()` first."""

    protocol_version = "HTTP/1.1"
    server: Server
    keys: ClassVar[Keys]
    max_body: ClassVar[int] = 1 << 20

    def setup(self) -> None:
        super().setup()
        self._clock = _Clock()
        self.rfile.close()  # the socket stays open: it is read through the deadline instead
        self.rfile = io.BufferedReader(_Reader(self.connection, self._clock))

    def handle_one_request(self) -> None:
        self._clock.next_request()
        super().handle_one_request()

    def send_response(self, code: int, message: str | None = None) -> None:
        self.connection.settimeout(IDLE)  # the request is read; a client that stops reading is dropped
        super().send_response(code, message)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # stderr is the user's

    # -- what every request passes --------------------------------------------------------------

    def addressed(self) -> bool:
        """Host and Origin name this server; False (and the refusal sent) when one does not."""
        hosts = self.headers.get_all("Host") or []
        if len(hosts) != 1 or hostname(hosts[0]) not in self.server.hosts:
            self.refuse(
                403, f"Host {', '.join(hosts) or '(none)'} is not this server; use localhost (or --allow-host NAME)"
            )
            return False
        origin = self.headers.get("Origin")
        if origin is not None and hostname(origin, url=True) not in self.server.hosts:
            self.refuse(403, f"requests from origin {origin} are refused")
            return False
        return True

    def admitted(self) -> bool:
        """Host, Origin and the token; False (and the refusal sent) when one fails."""
        if not self.addressed():
            return False
        if not self.authorized():
            self.unauthorized()
            return False
        if not self.server.trust(self.connection):
            self.refuse(503, f"{MAX_TRUSTED} connections are being served; try again shortly", **{"Retry-After": "1"})
            return False
        return True

    def authorized(self) -> bool:
        """Whether the request bears the token (a face may take other proof too)."""
        return self.keys.bearer(self.headers)

    def unauthorized(self) -> None:
        self.refuse(401, "this server needs its token: Authorization: Bearer TOKEN", **{"WWW-Authenticate": "Bearer"})

    def body_length(self) -> int | None:
        """The body's length from its one Content-Length, within `max_body`; None (and the refusal
        sent) else."""
        if "Transfer-Encoding" in self.headers:
            self.refuse(411, "send the body with a Content-Length, not chunked")
            return None
        lengths = self.headers.get_all("Content-Length") or []
        if not lengths:
            self.refuse(411, "a POST needs a Content-Length")
            return None
        if len(set(lengths)) != 1 or not lengths[0].strip().isdigit() or not lengths[0].strip().isascii():
            self.refuse(400, f"Content-Length {', '.join(lengths)} is not a length in bytes")
            return None
        length = int(lengths[0])
        if length > self.max_body:
            self.refuse(413, f"a body may have {self.max_body} bytes, not {length}")
            return None
        return length

    def read_body(self, length: int) -> bytes | None:
        """The body, once whole (None when the client went away mid-body, or took too long)."""
        try:
            body = self.rfile.read(length)
        except TimeoutError:
            body = b""
        if len(body) < length:
            self.close_connection = True
            return None
        return body

    def accepts(self, kind: str) -> bool:
        accepted = [part.partition(";")[0].strip().lower() for part in self.headers.get("Accept", "*/*").split(",")]
        return any(item in (kind, "*/*", kind.partition("/")[0] + "/*") for item in accepted)

    # -- answers --------------------------------------------------------------------------------

    def refuse(self, status: int, text: str, **headers: str) -> None:
        """Refuse the request: its body, if any, is read and dropped or the connection closes."""
        self.discard_body()
        self.send_text(status, text, **headers)

    def discard_body(self) -> None:
        lengths = self.headers.get_all("Content-Length") or []
        chunked = "Transfer-Encoding" in self.headers
        if not lengths and not chunked:
            return
        length = lengths[0].strip() if len(set(lengths)) == 1 and not chunked else ""
        if not (length.isdigit() and length.isascii() and int(length) <= self.max_body):
            self.close_connection = True
            return
        left = int(length)
        while left > 0:
            try:
                chunk = self.rfile.read(min(left, DISCARD_CHUNK))
            except TimeoutError:
                chunk = b""
            if not chunk:
                self.close_connection = True
                return
            left -= len(chunk)

    def send_text(self, status: int, text: str, **headers: str) -> None:
        self.send(status, text.encode() + b"\n", "text/plain; charset=utf-8", **headers)

    def send_json(self, status: int, obj: Any, **headers: str) -> None:
        self.send(status, dumps_bytes(obj), "application/json", **headers)

    def send(self, status: int, data: bytes, kind: str | None = None, **headers: str) -> None:
        self.send_response(status)
        if kind is not None:
            self.send_header("Content-Type", kind)
        for name, value in headers.items():
            self.send_header(name, value)
        if status != 204:
            self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def hung_up(self) -> bool:
        """Whether the client closed its end (a client of server-sent events sends nothing more:
        what it closed reads as the end at once), known without waiting for a write to fail."""
        try:
            if not select.select([self.connection], [], [], 0)[0]:
                return False
            return not self.connection.recv(1, socket.MSG_PEEK)
        except OSError:
            return True

    def event_stream(self, **headers: str) -> EventStream:
        """Answer with server-sent events (the connection closes after them)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.close_connection = True
        return EventStream(self.wfile)


class EventStream:
    """Server-sent events on a response, from any thread; a client that hung up ends it quietly."""

    def __init__(self, out: Any) -> None:
        self._out = out
        self._lock = threading.Lock()
        self.open = True

    def send(self, data: bytes, *, event: str | None = None, id: str | None = None, retry: int | None = None) -> bool:
        """Write one event (`data` one line, or several); False once the client is gone."""
        head = b""
        if id is not None:
            head += b"id: " + id.encode() + b"\n"
        if retry is not None:
            head += f"retry: {retry}\n".encode()
        if event is not None:
            head += b"event: " + event.encode() + b"\n"
        lines = b"".join(b"data: " + line + b"\n" for line in data.split(b"\n"))
        return self.write(head + lines + b"\n")

    def comment(self) -> bool:
        """A keep-alive line nobody reads; False once the client is gone."""
        return self.write(b":\n\n")

    def write(self, raw: bytes) -> bool:
        with self._lock:
            if not self.open:
                return False
            try:
                self._out.write(raw)
                self._out.flush()
            except OSError:
                self.open = False
            return self.open

    def close(self) -> None:
        with self._lock:
            self.open = False


def hostname(value: str, url: bool = False) -> str | None:
    """The host a Host header (or, with `url`, an Origin) names, lowercased, without port or brackets."""
    try:
        return urlsplit(value if url else "//" + value).hostname
    except ValueError:
        return None
