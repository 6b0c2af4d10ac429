"""An MCP server a user installed for a CLI (`claude mcp add`, `gemini mcp add`, `codex mcp add`), as
lived-in test homes have one (tests/clienv.py): stdio, one tool. Each start is reported first to
the witness address given as its argument (GET /user-mcp-started?cwd=…), so that a test can tell
whether a run started it. The protocol by hand, not the SDK: importing that costs ~1 s of CPU, and
every plain run of a CLI in those homes starts this server."""

from __future__ import annotations

import json
import os
import sys
import urllib.parse
import urllib.request

TOOL = {
    "name": "weather",
    "description": "Today's weather where the user is.",
    "inputSchema": {"type": "object", "properties": {}},
}


def report(witness: str) -> None:
    query = urllib.parse.urlencode({"cwd": os.getcwd(), "pid": os.getpid()})
    try:
        with urllib.request.urlopen(f"{witness}/user-mcp-started?{query}", timeout=5) as answer:
            answer.read()
    except OSError:
        pass  # no network (crew's commands), or the witness is gone: the start shows nowhere


def answer(request: dict) -> dict | None:
    method, params = request.get("method"), request.get("params") or {}
    if "id" not in request:
        return None  # a notification
    if method == "initialize":
        result: dict = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "usertools", "version": "1.0"},
        }
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "sunny"}]}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": f"no method {method}"}}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def main() -> None:
    if len(sys.argv) > 1:
        report(sys.argv[1])
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        reply = answer(request) if isinstance(request, dict) else None
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
