"""MCP's streamable HTTP transport at http://HOST:PORT/mcp: how `crew mcp --http` talks, and how
gemini reaches crew's tools inside crew's own process in a native run (providers/live_gemini_acp.py).

Nothing gets in without the bearer token: every request needs `Authorization: Bearer TOKEN`
(compared in constant time; 401 runs nothing), a Host that names this machine (or one allowed), an
Origin, when it has one, likewise (a web page's request, DNS rebinding: 403). A POST is JSON
(415), within MAX_BODY (413) with a valid Content-Length (400, 411), of a protocol version crew
speaks (400). A refused request's body is read and dropped, or the connection closed: it is never
read as the next request. Connections are capped (503) and time out when idle.

`initialize` opens a session (its id in `Mcp-Session-Id`; DELETE ends it); every later request
names it (400 without, 404 for one that is not open), so one client's cancellations and jobs never
reach another's. A tool call is answered as an event stream: a priming event (an id, empty data and
`retry`), its progress, its answer, each event with an id; other requests as JSON.
"""

from __future__ import annotations

import hmac
import ipaddress
import itertools
import os
import secrets
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from crewbridge.childenv import MCP_TOKEN
from crewbridge.errors import UsageError
from crewbridge.jsonio import dumps_bytes
from crewbridge.mcp.core import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PROTOCOL_VERSIONS,
    McpSession,
    RpcError,
    Send,
    invalid,
    nowhere,
    read_message,
    request_id,
    rpc_error,
)

if TYPE_CHECKING:
    from crewbridge.mcp.server import McpServer

PATH = "/mcp"
LOOPBACK = ("localhost", "127.0.0.1", "::1")
TOKEN_VARIABLE = MCP_TOKEN  # left out of everything crew starts (crewbridge.childenv)
MIN_TOKEN = 16  # characters of a token given in CREW_MCP_TOKEN
MAX_BODY = 8 << 20  # bytes of one POST
MAX_CONNECTIONS = 32  # served at once; more are answered 503
MAX_SESSIONS = 64  # open at once; past it the least recently used idle one ends
IDLE = 30.0  # seconds a connection may stay silent (between requests, or within one)
RETRY_MS = 3000  # the SSE `retry` a stream announces
DISCARD_CHUNK = 1 << 16

Respond = Callable[[Any, McpSession, Send], "dict[str, Any] | None"]


def parse_address(address: str) -> tuple[str, int]:
    """HOST:PORT (or just PORT, on 127.0.0.1) for --http."""
    host, _, port = address.rpartition(":")
    if not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--http '{address}' is not HOST:PORT; e.g. --http 127.0.0.1:8765 (port 0 picks a free one)")
    return host.strip("[]") or "127.0.0.1", int(port)


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, without brackets) is this machine's loopback."""
    if host.lower() in LOOPBACK:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def server_token(environ: Mapping[str, str], token_file: Path | None) -> tuple[str, str]:
    """The token every request must bear (CREW_MCP_TOKEN, else a new random one; written to
    `token_file`, created 0600, when given), and how the ready line names it."""
    given = environ.get(TOKEN_VARIABLE)
    if given is None:
        token, shown = secrets.token_urlsafe(32), ""
    elif len(given) < MIN_TOKEN or not all("!" <= char <= "~" for char in given):
        raise UsageError(
            f"{TOKEN_VARIABLE} must be at least {MIN_TOKEN} visible ASCII characters; make one with: "
            "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    else:
        token, shown = given, f"${TOKEN_VARIABLE}"
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


def serve_http(
    server: McpServer,
    address: str,
    *,
    token_file: Path | None = None,
    allowed_hosts: Iterable[str] = (),
    allow_remote: bool = False,
    say: Callable[[str], None],
) -> None:
    """Serve `server` over streamable HTTP at http://ADDRESS/mcp until stopped (Ctrl-C, SIGTERM);
    `say` gets each line for the person who started it (the URL and how to send the token)."""
    host, port = parse_address(address)
    if not is_loopback(host):
        if not allow_remote:
            raise UsageError(
                f"--http {address} would listen beyond this machine; serve on 127.0.0.1, or add --allow-remote "
                "(requests still need the token)"
            )
        say(
            f"crew mcp: warning: listening on {host}, reachable from other machines: anyone with the token may use "
            "crew's tools here; name this server's host name with --allow-host"
        )
    token, shown = server_token(os.environ, token_file)
    http = McpHttp(server.respond, host, port, token=token, allowed_hosts=allowed_hosts)
    say(f"crew mcp: serving MCP at {http.url}; every request needs Authorization: Bearer {shown}")
    try:
        http.serve()
    finally:
        http.close()
        server.close()


class McpHttp:
    """MCP's streamable HTTP transport at http://HOST:PORT/mcp, each message of a session answered
    by `respond` (the message, its session, where its notifications go meanwhile → its answer, None
    for none). Every request must carry `Authorization: Bearer TOKEN`."""

    def __init__(
        self,
        respond: Respond,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        token: str,
        allowed_hosts: Iterable[str] = (),
    ) -> None:
        self.respond = respond
        self.token = token.encode()
        self.hosts = {*LOOPBACK, *(name.strip("[]").lower() for name in allowed_hosts)}
        self._sessions: dict[str, McpSession] = {}
        self._lock = threading.Lock()
        self._events = itertools.count(1)
        handler = type("Handler", (_Handler,), {"owner": self})
        try:
            self.httpd = _Server((host, port), handler)
        except OSError as exc:
            raise UsageError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --http port"
            ) from None
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{self.httpd.server_address[1]}{PATH}"
        self._thread: threading.Thread | None = None

    def serve(self) -> None:
        """Answer requests until close()."""
        self.httpd.serve_forever(poll_interval=0.2)

    def start(self) -> None:
        """Answer requests from a thread of its own until close()."""
        self._thread = threading.Thread(target=self.serve, name="crew-mcp-http", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop answering, and end every session (what their requests and jobs run stops)."""
        if self._thread is not None:
            self.httpd.shutdown()  # returns once the serving loop has ended
            self._thread = None
        self.httpd.server_close()
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            session.close()

    def event_id(self) -> str:
        return str(next(self._events))

    def session(self, session_id: str) -> McpSession | None:
        with self._lock:
            found = self._sessions.get(session_id)
        if found is not None:
            found.used = time.monotonic()
        return found

    def open(self, session: McpSession) -> bool:
        """Keep `session` open; False when MAX_SESSIONS are open and all of them busy."""
        with self._lock:
            if len(self._sessions) >= MAX_SESSIONS:
                idle = [kept for kept in self._sessions.values() if not kept.busy()]
                if not idle:
                    return False
                oldest = min(idle, key=lambda kept: kept.used)
                del self._sessions[oldest.id]
                oldest.close()
            self._sessions[session.id] = session
        return True

    def end(self, session_id: str) -> bool:
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is not None:
            session.close()
        return session is not None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            body = f"crew mcp serves {MAX_CONNECTIONS} connections at once; try again shortly".encode()
            head = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
            head += f"Content-Length: {len(body)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
            try:
                request.sendall(head.encode() + body)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if not isinstance(error, OSError):  # a client that went away is no news
            sys.stderr.write(f"crew mcp: internal error serving a request: {type(error).__name__}: {error}\n")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = IDLE
    owner: McpHttp

    def log_message(self, format: str, *args: Any) -> None:
        pass  # stderr is the user's, and the protocol says all there is to say

    # -- methods --------------------------------------------------------------------------------

    def do_GET(self) -> None:
        if self._admitted():
            self._refuse(405, "crew mcp offers no stream of its own; POST messages to " + PATH, Allow="POST, DELETE")

    def do_DELETE(self) -> None:
        if not self._admitted():
            return
        session_id = self.headers.get("Mcp-Session-Id")
        if not session_id:
            self._refuse(400, "DELETE ends a session: name it in Mcp-Session-Id")
        elif not self.owner.end(session_id):
            self._refuse(404, "no such session (it has ended); initialize a new one")
        else:
            self._discard_body()
            self._send(204, b"")

    def do_POST(self) -> None:
        if not self._admitted() or (length := self._length()) is None:
            return
        body = self.rfile.read(length)
        if len(body) < length:  # the client went away mid-body
            self.close_connection = True
            return
        try:
            message = read_message(body)
        except RpcError as exc:
            return self._json(400, rpc_error(None, exc.code, str(exc)))
        problem = invalid(message)
        if problem is not None:
            return self._json(400, rpc_error(request_id(message), INVALID_REQUEST, problem))
        starts = message.get("method") == "initialize" and "id" in message
        session = McpSession() if starts else self._session()
        if session is None:
            return
        if starts and "Mcp-Session-Id" in self.headers:
            return self._send_text(400, "initialize opens a new session: send it without Mcp-Session-Id")
        if starts and not self.owner.open(session):
            return self._send_text(503, f"{MAX_SESSIONS} sessions are open and busy; end one (DELETE) or wait")
        if "method" not in message or "id" not in message:  # a notification, or a client's response
            self._answer(message, session, nowhere)
            return self._send(202, b"")
        if message["method"] == "tools/call" and self._accepts("text/event-stream"):
            return self._stream(message, session)
        answer = self._answer(message, session, nowhere)
        if starts and (answer is None or "error" in answer):
            self.owner.end(session.id)
        if answer is None:
            return self._send(202, b"")  # cancelled
        extra = {"Mcp-Session-Id": session.id} if starts else {}
        self._json(200, answer, **extra)

    # -- what every request passes --------------------------------------------------------------

    def _admitted(self) -> bool:
        """Host, Origin, token and path; False (and the refusal sent) when one fails."""
        hosts = self.headers.get_all("Host") or []
        if len(hosts) != 1 or _hostname(hosts[0]) not in self.owner.hosts:
            self._refuse(
                403, f"Host {', '.join(hosts) or '(none)'} is not this server; use localhost (or --allow-host NAME)"
            )
            return False
        origin = self.headers.get("Origin")
        if origin is not None and _hostname(origin, url=True) not in self.owner.hosts:
            self._refuse(403, f"requests from origin {origin} are refused")
            return False
        if not self._authorized():
            self._refuse(
                401, "this MCP server needs its token: Authorization: Bearer TOKEN", **{"WWW-Authenticate": "Bearer"}
            )
            return False
        if not self.path.startswith("/") or urlsplit(self.path).path != PATH:  # origin-form only
            self._refuse(404, f"crew mcp serves {PATH}")
            return False
        return True

    def _authorized(self) -> bool:
        given = self.headers.get_all("Authorization") or []
        if len(given) != 1:
            return False
        scheme, _, token = given[0].strip().partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode("latin-1"), self.owner.token)

    def _length(self) -> int | None:
        """The POST's body length, once its headers pass; None (and the refusal sent) else."""
        kind = self.headers.get("Content-Type", "").partition(";")[0].strip().lower()
        if kind != "application/json":
            self._refuse(415, "POST a JSON-RPC message as Content-Type: application/json")
            return None
        version = self.headers.get("MCP-Protocol-Version")
        if version is not None and version not in PROTOCOL_VERSIONS:
            self._refuse(
                400, f"MCP-Protocol-Version {version} is not spoken here; crew speaks {', '.join(PROTOCOL_VERSIONS)}"
            )
            return None
        if not (self._accepts("application/json") or self._accepts("text/event-stream")):
            self._refuse(406, "accept application/json and text/event-stream")
            return None
        if "Transfer-Encoding" in self.headers:
            self._refuse(411, "send the body with a Content-Length, not chunked")
            return None
        lengths = self.headers.get_all("Content-Length") or []
        if not lengths:
            self._refuse(411, "a POST needs a Content-Length")
            return None
        if len(set(lengths)) != 1 or not lengths[0].strip().isdigit() or not lengths[0].strip().isascii():
            self._refuse(400, f"Content-Length {', '.join(lengths)} is not a length in bytes")
            return None
        length = int(lengths[0])
        if length > MAX_BODY:
            self._refuse(413, f"a message may have {MAX_BODY} bytes, not {length}")
            return None
        return length

    def _session(self) -> McpSession | None:
        session_id = self.headers.get("Mcp-Session-Id")
        if not session_id:
            self._send_text(400, "name the session in Mcp-Session-Id (initialize opens one)")
            return None
        session = self.owner.session(session_id)
        if session is None:
            self._send_text(404, "no such session (it has ended); initialize a new one")
        return session

    def _accepts(self, kind: str) -> bool:
        accepted = [part.partition(";")[0].strip().lower() for part in self.headers.get("Accept", "*/*").split(",")]
        return any(item in (kind, "*/*", kind.partition("/")[0] + "/*") for item in accepted)

    # -- answers --------------------------------------------------------------------------------

    def _answer(self, message: Any, session: McpSession, notify: Send) -> dict[str, Any] | None:
        try:
            return self.owner.respond(message, session, notify)
        except Exception as exc:  # a bug, or a respond that let an error through: answered all the same
            return rpc_error(request_id(message), INTERNAL_ERROR, f"internal error: {type(exc).__name__}: {exc}")

    def _stream(self, message: dict[str, Any], session: McpSession) -> None:
        """Answer a tool call as an event stream: priming event, progress, answer; then close."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        lock = threading.Lock()
        open_ = True

        def event(data: bytes) -> None:
            nonlocal open_
            with lock:
                if not open_:
                    return
                try:
                    self.wfile.write(b"id: " + self.owner.event_id().encode() + b"\n" + data + b"\n\n")
                    self.wfile.flush()
                except OSError:
                    open_ = False  # the client hung up; the call runs on (only a cancellation stops it)

        event(f"retry: {RETRY_MS}\ndata: ".encode())
        answer = self._answer(message, session, lambda note: event(b"event: message\ndata: " + dumps_bytes(note)))
        if answer is not None:
            event(b"event: message\ndata: " + dumps_bytes(answer))
        with lock:
            open_ = False

    def _refuse(self, status: int, text: str, **headers: str) -> None:
        """Refuse the request: its body, if any, is read and dropped or the connection closes."""
        self._discard_body()
        self._send_text(status, text, **headers)

    def _discard_body(self) -> None:
        lengths = self.headers.get_all("Content-Length") or []
        chunked = "Transfer-Encoding" in self.headers
        if not lengths and not chunked:
            return
        length = lengths[0].strip() if len(set(lengths)) == 1 and not chunked else ""
        if not (length.isdigit() and length.isascii() and int(length) <= MAX_BODY):
            self.close_connection = True
            return
        left = int(length)
        while left > 0:
            chunk = self.rfile.read(min(left, DISCARD_CHUNK))
            if not chunk:
                self.close_connection = True
                return
            left -= len(chunk)

    def _send_text(self, status: int, text: str, **headers: str) -> None:
        self._send(status, text.encode() + b"\n", "text/plain; charset=utf-8", **headers)

    def _json(self, status: int, obj: Any, **headers: str) -> None:
        self._send(status, dumps_bytes(obj), "application/json", **headers)

    def _send(self, status: int, data: bytes, kind: str | None = None, **headers: str) -> None:
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


def _hostname(value: str, url: bool = False) -> str | None:
    """The host a Host header (or, with `url`, an Origin) names, lowercased, without port or brackets."""
    try:
        return urlsplit(value if url else "//" + value).hostname
    except ValueError:
        return None
