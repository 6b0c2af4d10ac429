"""MCP's streamable HTTP transport (POST /mcp; the answer to a tool call is an event stream, its
progress notifications first): how `crew mcp --http` talks, and how gemini reaches crew's tools
inside crew's own process in a native run (providers/live_gemini_acp.py)."""

from __future__ import annotations

import hmac
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from crewbridge.errors import UsageError
from crewbridge.mcp.server import PARSE_ERROR, McpServer, Send
from crewbridge.mcp.stdio import encode
from crewbridge.native import rpc_error

PATH = "/mcp"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
Respond = Callable[[Any, Send], "dict[str, Any] | None"]


def parse_address(address: str) -> tuple[str, int]:
    """HOST:PORT (or just PORT, on 127.0.0.1) for --http."""
    host, _, port = address.rpartition(":")
    if not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--http '{address}' is not HOST:PORT; e.g. --http 127.0.0.1:8765 (port 0 picks a free one)")
    return host.strip("[]") or "127.0.0.1", int(port)


def serve_http(server: McpServer, host: str, port: int, ready: Callable[[str], None]) -> None:
    """Serve MCP's streamable HTTP transport at http://HOST:PORT/mcp until stopped (Ctrl-C, SIGTERM);
    `ready` gets the URL once it listens."""
    http = McpHttp(server.respond, host, port)
    ready(http.url)
    try:
        http.serve()
    finally:
        http.close()
        server.close()


class McpHttp:
    """MCP's streamable HTTP transport at http://HOST:PORT/mcp, each message answered by `respond`
    (the message, and where its notifications go meanwhile → its answer, None for none). With
    `token`, a request must carry `Authorization: Bearer TOKEN`."""

    def __init__(self, respond: Respond, host: str = "127.0.0.1", port: int = 0, token: str | None = None) -> None:
        handler = type("Handler", (_Handler,), {"respond": staticmethod(respond), "token": token})
        try:
            self.httpd = ThreadingHTTPServer((host, port), handler)
        except OSError as exc:
            raise UsageError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --http port"
            ) from None
        self.httpd.daemon_threads = True
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
        if self._thread is not None:
            self.httpd.shutdown()  # returns once the serving loop has ended
            self._thread = None
        self.httpd.server_close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    respond: Respond
    token: str | None

    def log_message(self, format: str, *args: Any) -> None:
        pass  # stderr is the user's, and the protocol says all there is to say

    def do_GET(self) -> None:
        self._plain(405, "crew mcp offers no server-sent event stream; POST messages to " + PATH)

    def do_DELETE(self) -> None:
        self._plain(405, "crew mcp keeps no sessions to end")

    def do_POST(self) -> None:
        if self.token is not None and not hmac.compare_digest(
            self.headers.get("Authorization", "").encode(), f"Bearer {self.token}".encode()
        ):
            return self._plain(401, "this MCP server needs its bearer token (Authorization: Bearer …)")
        if urlsplit(self.path).path != PATH:
            return self._plain(404, f"crew mcp serves {PATH}")
        origin = self.headers.get("Origin")
        if origin and urlsplit(origin).hostname not in LOCAL_HOSTS:  # a web page's request (DNS rebinding)
            return self._plain(403, f"requests from origin {origin} are refused")
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            message = json.loads(body)
        except ValueError as exc:
            return self._json(400, rpc_error(None, PARSE_ERROR, f"the body is not JSON ({exc})"))
        messages = message if isinstance(message, list) else [message]
        if not any(isinstance(m, dict) and "id" in m and "method" in m for m in messages):
            for one in messages:  # notifications and responses: nothing to answer
                self.respond(one, lambda _: None)
            return self._plain(202, "")
        if not any(isinstance(m, dict) and m.get("method") == "tools/call" for m in messages):
            answers = [a for a in (self.respond(one, lambda _: None) for one in messages) if a is not None]
            return self._json(200, answers if isinstance(message, list) else answers[0])
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        lock = threading.Lock()

        def event(data: dict[str, Any]) -> None:
            with lock:
                try:
                    self.wfile.write(b"event: message\ndata: " + encode(data) + b"\n\n")
                    self.wfile.flush()
                except OSError:
                    pass  # the client hung up

        for one in messages:
            answer = self.respond(one, event)
            if answer is not None:
                event(answer)

    def _plain(self, status: int, text: str) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _json(self, status: int, obj: Any) -> None:
        data = encode(obj)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
