"""How `crew mcp` talks on stdio: a JSON-RPC message a line (streamable HTTP: crewbridge.mcp.http)."""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any

from crewbridge.mcp.server import McpServer


def encode(message: dict[str, Any]) -> bytes:
    """One message as UTF-8 JSON; text that cannot be UTF-8 (a lone surrogate) as escapes."""
    try:
        return json.dumps(message, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(message).encode("ascii")


def serve_stdio(server: McpServer) -> None:
    """Answer the messages on stdin until it closes; then stop every ask and end what they started.
    The protocol owns stdout: anything else written to it (a tool's print) goes to stderr."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    lock = threading.Lock()

    def send(message: dict[str, Any]) -> None:
        data = encode(message) + b"\n"
        with lock:
            try:
                out.write(data)
                out.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass  # the client went away: stdin ends next

    try:
        for line in sys.stdin.buffer:
            if line.strip():
                server.handle_line(line, send)
    finally:
        server.close()
