"""`crew acp` answers the client's `initialize` before the ACP SDK (pydantic's models: a second or
more to import on a loaded machine), click and the engine load, which then load while the editor
reads the answer. The answer needs none of them: the protocol version, crew's capabilities and
name. The SDK's agent answers it the same way (`hello`, validated there by the SDK's own model).

As for `crew mcp` (crewbridge.mcp.early), only when nothing that loads could refuse to start
(crewbridge.base.flags.unrefusable): no crew.yaml found, no sandbox mechanism named, and every argument
one whose value cannot be refused (`--sandbox required` can: it is read by click, and refused
before any answer). Nothing is imported here that the answer does not need: no typing, no pathlib,
none of crew's JSON-RPC (a Python start and ~3 ms of imports come before the answer)."""

from __future__ import annotations

import json
import os

from crewbridge.base import flags
from crewbridge.base.jsonio import loads
from crewbridge.version import __version__

TYPE_CHECKING = False  # typing itself is ~5 ms to import; type checkers read this name as True
if TYPE_CHECKING:
    from typing import Any

PROTOCOL_VERSION = 1  # the ACP version crew speaks (the SDK's)
# the CLIs a person logs in to through the editor (`crew acp login CLI` runs the CLI's own login in
# a terminal): the ACP registry launches an agent and requires a terminal or agent auth method
LOGINS = {"claude": "Claude Code", "gemini": "Gemini CLI", "codex": "Codex CLI"}


def hello() -> dict[str, Any]:
    """crew's answer to `initialize` (its `result`): ACP 1, whatever version the client asked for
    (the one crew speaks: the client decides whether it speaks it too)."""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": False, "sse": False},
            "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "additionalDirectories": {}},
        },
        "authMethods": [
            {
                "id": cli,
                "name": f"Log in to {name}",
                "description": f"crew runs {cli} with {cli}'s own login; this runs that login in a terminal",
                "type": "terminal",
                "args": ["login", cli],
            }
            for cli, name in LOGINS.items()
        ],
        "agentInfo": {"name": "crew", "title": "crew", "version": __version__},
    }


class Greeting:
    """What `crew acp` did before click loaded: the bytes read from stdin and not answered (the
    agent reads them first), and the `initialize` request's params if it answered it."""

    def __init__(self, leftover: bytes, initialize: dict[str, Any] | None) -> None:
        self.leftover, self.initialize = leftover, initialize


def greet(args: list[str]) -> Greeting | None:
    """The first message read from stdin and, when it is `initialize`, answered on stdout; None
    (nothing read) when the agent could still refuse to start."""
    found = flags.read(args, flags.ACP)
    if found is None or found[1] or not flags.unrefusable():
        return None
    data = b""
    try:
        while b"\n" not in data and (chunk := os.read(0, 1 << 16)):
            data += chunk
    except OSError:  # no stdin: crew acp reports it once loaded
        return None
    first, _, rest = data.partition(b"\n")
    try:
        message = loads(first)
    except ValueError:  # not JSON, or nested too deep: the agent answers it, once loaded
        return Greeting(data, None)
    if not isinstance(message, dict):
        return Greeting(data, None)
    params, rid = message.get("params"), message.get("id")
    if (
        message.get("jsonrpc") != "2.0"
        or message.get("method") != "initialize"
        or not isinstance(params, dict)
        or not isinstance(params.get("protocolVersion"), int)
        or isinstance(rid, bool)
        or not isinstance(rid, (int, str))
    ):
        return Greeting(data, None)  # the agent answers it, once loaded
    answer = {"jsonrpc": "2.0", "id": rid, "result": hello()}
    try:
        os.write(1, json.dumps(answer, separators=(",", ":")).encode() + b"\n")
    except OSError:  # no stdout: crew acp reports it once loaded
        return Greeting(data, None)
    return Greeting(rest, params)
