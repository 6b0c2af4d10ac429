"""`crew mcp` on stdio answers the client's `initialize` before the rest of crew loads (click, the
configuration, the engine), which then loads while the client reads the answer and sends its next
message. The answer needs none of it: the protocol, crew's name and version, its capabilities and
the working directory.

Only when nothing that loads could refuse to start the server. A server that cannot start (a
broken crew.yaml, --policy-of naming no agent, a sandbox required where none works) says so as
before: crew's one line on stderr and its exit, before any answer, because a client that got an
answer to initialize shows the server as connected (the real claude does), not failed. So this
answers early only when no configuration file is found, CREW_SANDBOX_MECHANISM is unset, and
every argument is one whose value cannot be refused (crewbridge.base.flags.MCP, from which click's
options are made, says which, and checks each value as click's type does); otherwise everything
loads first, as before."""

from __future__ import annotations

import os

from crewbridge.base import flags
from crewbridge.mcp.stdio import Link
from crewbridge.protocol.mcp import McpCore, RpcError, read_message

TYPE_CHECKING = False  # typing itself is ~5 ms to import; type checkers read this name as True
if TYPE_CHECKING:
    from pathlib import Path


def instructions(workdir: Path | str) -> str:
    """What `crew mcp` tells the client about itself at initialize."""
    return f"crew's tools work inside {workdir}; `ask` runs other CLI agents (@claude, @gemini, @codex, …) on a task."


class Greeter(McpCore):
    """`initialize` answered as crewbridge.mcp.server.McpServer answers it, before that loads."""

    def __init__(self, workdir: str) -> None:
        super().__init__()
        self.workdir = workdir

    def instructions(self) -> str:
        return instructions(self.workdir)


def read(args: list[str]) -> dict[str, str] | None:
    """The options of `crew mcp ARGS` (the arguments after `mcp`), each with its value (a flag's:
    ""), when it surely serves stdio: click takes every argument and no value can be refused; else None."""
    found = flags.read(args, flags.MCP)
    return None if found is None or found[1] else found[0]


class Greeting:
    """What `crew mcp` did before click loaded: stdio set up as the transport (its initialize
    answered), for the server to take."""

    def __init__(self, link: Link) -> None:
        self.link = link


def greet(args: list[str]) -> Greeting | None:
    """stdio set up as MCP's transport, its first message read and, when it is `initialize`,
    answered; None (nothing read) when the server could still refuse to start."""
    values = read(args)
    if values is None or not flags.unrefusable():
        return None
    try:
        link = Link()
    except (OSError, AttributeError):  # no stdout or stdin (closed): crew mcp reports it once loaded
        return None
    line = next(link.lines, None)
    if line is not None:
        try:
            message = read_message(line)
        except RpcError:
            message = None
        if isinstance(message, dict) and message.get("method") == "initialize":
            answer = Greeter(os.getcwd()).respond(message, link.session, link.send)
            if answer is not None:
                link.send(answer)
        else:
            link.first.append(line)  # the server answers it once loaded
    return Greeting(link)
