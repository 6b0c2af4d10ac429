"""How `crew mcp --http` talks: MCP's streamable HTTP transport (POST /mcp; the answer to a tool
call is an event stream, its progress notifications first)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from crewbridge.errors import UsageError
from crewbridge.mcp_server import PARSE_ERROR, McpServer
from crewbridge.mcp_stdio import encode
from crewbridge.native import rpc_error

PATH = "/mcp"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


def parse_address(address: str) -> tuple[str, int]:
    """HOST:PORT (or just PORT, on 127.0.0.1) for --http."""
    host, _, port = address.rpartition(":")
    if not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--http '{address}' is not HOST:PORT; e.g. --http 127.0.0.1:8765 (port 0 picks a free one)")
    return host.strip("[]") or "127.0.0.1", int(port)


def serve_http(server: McpServer, host: str, port: int, ready: Callable[[str], None]) -> None:
    """Serve MCP's streamable HTTP transport at http://HOST:PORT/mcp until stopped (Ctrl-C, SIGTERM);
    `ready` gets the URL once it listens."""
    handler = type("Handler", (_Handler,), {"mcp": server})
    try:
        httpd = ThreadingHTTPServer((host, port), handler)
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --http port") from None
    httpd.daemon_threads = True
    shown = f"[{host}]" if ":" in host else host
    ready(f"http://{shown}:{httpd.server_address[1]}{PATH}")
    try:
        httpd.serve_forever(poll_interval=0.2)
    finally:
        httpd.server_close()
        server.close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    mcp: McpServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # stderr is the user's, and the protocol says all there is to say

    def do_GET(self) -> None:
        self._plain(405, "crew mcp offers no server-sent event stream; POST messages to " + PATH)

    def do_DELETE(self) -> None:
        self._plain(405, "crew mcp keeps no sessions to end")

    def do_POST(self) -> None:
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
                self.mcp.respond(one, lambda _: None)
            return self._plain(202, "")
        if not any(isinstance(m, dict) and m.get("method") == "tools/call" for m in messages):
            answers = [a for a in (self.mcp.respond(one, lambda _: None) for one in messages) if a is not None]
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
            answer = self.mcp.respond(one, event)
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
