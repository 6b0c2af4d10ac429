"""MCP's streamable HTTP transport at http://HOST:PORT/mcp: how `crew mcp --http` talks, and how
gemini reaches crew's tools inside crew's own process in a native run (crewbridge/conversations/gemini_acp.py).

The server is crewbridge.protocol.webserver's: nothing gets in without the bearer token (`Authorization:
Bearer TOKEN`; 401 runs nothing), a Host that names this machine (or one allowed) and an Origin, when
it has one, likewise (403); bodies bounded, requests under a deadline, strangers' connections
limited (a slowloris never keeps a token holder out). Here, a POST is JSON (415), within MAX_BODY
(413), of a protocol version crew speaks (400).

`initialize` opens a session (its id in `Mcp-Session-Id`; DELETE ends it); every later request
names it (400 without, 404 for one that is not open), so one client's cancellations and jobs never
reach another's. A tool call is answered as an event stream: a priming event (an id, empty data and
`retry`), its progress, its answer, each event with an id; other requests as JSON.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from crewbridge.base.jsonio import dumps_bytes
from crewbridge.protocol.mcp import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PROTOCOL_VERSIONS,
    McpSession,
    RpcError,
    Send,
    Served,
    invalid,
    nowhere,
    read_message,
    refusal,
    request_id,
)
from crewbridge.protocol.webserver import Handler, Keys, Listening, Server
from crewbridge.system.childenv import MCP_TOKEN

PATH = "/mcp"
TOKEN_VARIABLE = MCP_TOKEN  # left out of everything crew starts (crewbridge.system.childenv)
FLAG = "--http"
MAX_BODY = 8 << 20  # bytes of one POST
MAX_SESSIONS = 64  # open at once; past it the least recently used idle one ends
RETRY_MS = 3000  # the SSE `retry` a stream announces

Respond = Callable[[Any, McpSession, Send], "dict[str, Any] | None"]


def serve_http(server: Served, listening: Listening, say: Callable[[str], None]) -> None:
    """Serve `server` over streamable HTTP at http://ADDRESS/mcp until stopped (Ctrl-C, SIGTERM);
    `say` gets each line for the person who started it (the URL and how to send the token)."""
    host, port, token, shown = listening.settle(flag=FLAG, variable=TOKEN_VARIABLE, face="crew mcp", say=say)
    http = McpHttp(server.respond, host, port, token=token, allowed_hosts=listening.allowed_hosts)
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
        self._sessions: dict[str, McpSession] = {}
        self._lock = threading.Lock()
        self._events = itertools.count(1)
        handler = type("Handler", (_Handler,), {"owner": self, "keys": Keys(token)})
        self.httpd = Server(host, port, handler, flag=FLAG, allowed_hosts=allowed_hosts)
        self.httpd.face = "crew mcp"
        self.url = self.httpd.url + PATH

    def serve(self) -> None:
        """Answer requests until close()."""
        self.httpd.serve()

    def start(self) -> None:
        """Answer requests from a thread of its own until close()."""
        self.httpd.start("crew-mcp-http")

    def close(self) -> None:
        """Stop answering, and end every session (what their requests and jobs run stops)."""
        self.httpd.close()
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


class _Handler(Handler):
    owner: McpHttp
    max_body = MAX_BODY

    # -- methods --------------------------------------------------------------------------------

    def do_GET(self) -> None:
        if self._admitted():
            self.refuse(405, "crew mcp offers no stream of its own; POST messages to " + PATH, Allow="POST, DELETE")

    def do_DELETE(self) -> None:
        if not self._admitted():
            return
        session_id = self.headers.get("Mcp-Session-Id")
        if not session_id:
            self.refuse(400, "DELETE ends a session: name it in Mcp-Session-Id")
        elif not self.owner.end(session_id):
            self.refuse(404, "no such session (it has ended); initialize a new one")
        else:
            self.discard_body()
            self.send(204, b"")

    def do_POST(self) -> None:
        if not self._admitted() or (length := self._length()) is None:
            return
        body = self.read_body(length)
        if body is None:
            return
        try:
            message = read_message(body)
        except RpcError as exc:
            return self.send_json(400, refusal(None, exc.code, str(exc)))
        problem = invalid(message)
        if problem is not None:
            return self.send_json(400, refusal(request_id(message), INVALID_REQUEST, problem))
        starts = message.get("method") == "initialize" and "id" in message
        session = McpSession() if starts else self._session()
        if session is None:
            return
        if starts and "Mcp-Session-Id" in self.headers:
            return self.send_text(400, "initialize opens a new session: send it without Mcp-Session-Id")
        if starts and not self.owner.open(session):
            return self.send_text(503, f"{MAX_SESSIONS} sessions are open and busy; end one (DELETE) or wait")
        if "method" not in message or "id" not in message:  # a notification, or a client's response
            self._answer(message, session, nowhere)
            return self.send(202, b"")
        if message["method"] == "tools/call" and self.accepts("text/event-stream"):
            return self._stream(message, session)
        answer = self._answer(message, session, nowhere)
        if starts and (answer is None or "error" in answer):
            self.owner.end(session.id)
        if answer is None:
            return self.send(202, b"")  # cancelled
        extra = {"Mcp-Session-Id": session.id} if starts else {}
        self.send_json(200, answer, **extra)

    # -- what every request passes --------------------------------------------------------------

    def _admitted(self) -> bool:
        """Host, Origin, token (webserver's checks) and path; False (and the refusal sent) when one fails."""
        if not self.admitted():
            return False
        if not self.path.startswith("/") or urlsplit(self.path).path != PATH:  # origin-form only
            self.refuse(404, f"crew mcp serves {PATH}")
            return False
        return True

    def unauthorized(self) -> None:
        self.refuse(
            401, "this MCP server needs its token: Authorization: Bearer TOKEN", **{"WWW-Authenticate": "Bearer"}
        )

    def _length(self) -> int | None:
        """The POST's body length, once its headers pass; None (and the refusal sent) else."""
        kind = self.headers.get("Content-Type", "").partition(";")[0].strip().lower()
        if kind != "application/json":
            self.refuse(415, "POST a JSON-RPC message as Content-Type: application/json")
            return None
        version = self.headers.get("MCP-Protocol-Version")
        if version is not None and version not in PROTOCOL_VERSIONS:
            self.refuse(
                400, f"MCP-Protocol-Version {version} is not spoken here; crew speaks {', '.join(PROTOCOL_VERSIONS)}"
            )
            return None
        if not (self.accepts("application/json") or self.accepts("text/event-stream")):
            self.refuse(406, "accept application/json and text/event-stream")
            return None
        return self.body_length()

    def _session(self) -> McpSession | None:
        session_id = self.headers.get("Mcp-Session-Id")
        if not session_id:
            self.send_text(400, "name the session in Mcp-Session-Id (initialize opens one)")
            return None
        session = self.owner.session(session_id)
        if session is None:
            self.send_text(404, "no such session (it has ended); initialize a new one")
        return session

    # -- answers --------------------------------------------------------------------------------

    def _answer(self, message: Any, session: McpSession, notify: Send) -> dict[str, Any] | None:
        try:
            return self.owner.respond(message, session, notify)
        except Exception as exc:  # a bug, or a respond that let an error through: answered all the same
            return refusal(request_id(message), INTERNAL_ERROR, f"internal error: {type(exc).__name__}: {exc}")

    def _stream(self, message: dict[str, Any], session: McpSession) -> None:
        """Answer a tool call as an event stream: priming event, progress, answer; then close.
        A client that hung up stops the events; the call runs on (only a cancellation stops it)."""
        stream = self.event_stream()
        stream.send(b"", id=self.owner.event_id(), retry=RETRY_MS)

        def event(data: dict[str, Any]) -> None:
            stream.send(dumps_bytes(data), event="message", id=self.owner.event_id())

        answer = self._answer(message, session, event)
        if answer is not None:
            event(answer)
        stream.close()
