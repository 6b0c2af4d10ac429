"""`crew mcp` on stdio answers the client's `initialize` before the rest of crew loads (click, the
configuration, the engine), which then loads while the client reads the answer and sends its next
message. The answer needs none of it: the protocol, crew's name and version, its capabilities and
the working directory.

Only when nothing that loads could refuse to start the server. A server that cannot start (a
broken crew.yaml, --policy-of naming no agent, a sandbox required where none works) says so as
before: crew's one line on stderr and its exit, before any answer, because a client that got an
answer to initialize shows the server as connected (the real claude does), not failed. So this
answers early only when no configuration file is found, CREW_SANDBOX_MECHANISM is unset, and
every argument is one whose value cannot be refused (click's own test of it, repeated here; a test
holds the options equal); otherwise everything loads first, as before."""

from __future__ import annotations

import os
from pathlib import Path

from crewbridge.errors import ConfigError
from crewbridge.mcp.core import McpCore, RpcError, read_message
from crewbridge.mcp.stdio import Link
from crewbridge.places import config_dir, find_project_config
from crewbridge.readings import number

TYPE_CHECKING = False  # typing itself is ~5 ms to import; type checkers read this name as True
if TYPE_CHECKING:
    from collections.abc import Callable

    from crewbridge.sandbox import Sandboxing

FLAGS = frozenset({"--execute"})
# crew mcp's options (crewbridge.cli.mcp_group) read here, with what each one's value must be
VALUE_OPTIONS: dict[str, Callable[[str], bool]] = {
    "--ask-depth": number(int, 0),
    "--timeout": number(float, 0.1),
    "--max-turns": number(int, 1),
    "--sandbox": lambda text: text in ("auto", "off"),  # required: refused where no sandbox works
}
# the rest: a file to read (--config), an agent to find (--policy-of), the HTTP transport
NOT_HERE = frozenset({"--config", "--policy-of", "--http", "--token-file", "--allow-host", "--allow-remote", "--help"})


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


def read(
    args: list[str], options: dict[str, Callable[[str], bool]] = VALUE_OPTIONS, flags: frozenset[str] = FLAGS
) -> dict[str, str] | None:
    """The options of `crew mcp ARGS` (the arguments after `mcp`; crew acp's, given its `options`
    and `flags`), each with its value (a flag's: ""), when it surely serves stdio: click takes every
    argument and no value can be refused; else None."""
    values: dict[str, str] = {}
    rest = iter(args)
    for arg in rest:
        name, equals, value = arg.partition("=")
        if name in options:
            value = value if equals else next(rest, "")
            if not options[name](value):
                return None
            values[name] = value
        elif arg in flags:
            values[arg] = ""
        else:
            return None
    return values


def unrefusable() -> bool:
    """Whether nothing that loads can refuse to start the server: no crew.yaml to read (it is read,
    and reported when it is wrong, before any answer) and no sandbox mechanism named."""
    if "CREW_SANDBOX_MECHANISM" in os.environ:
        return False
    try:
        return not (config_dir() / "crew.yaml").is_file() and find_project_config(Path.cwd()) is None
    except ConfigError:
        return False


class Greeting:
    """What `crew mcp` did before click loaded: stdio set up as the transport (its initialize
    answered), and the sandbox probe started (None with --sandbox off), for McpServer to take."""

    def __init__(self, link: Link, sandboxing: Sandboxing | None) -> None:
        self.link, self.sandboxing = link, sandboxing


def greet(args: list[str]) -> Greeting | None:
    """stdio set up as MCP's transport, its first message read and, when it is `initialize`,
    answered; None (nothing read) when the server could still refuse to start."""
    values = read(args)
    if values is None or not unrefusable():
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
    if values.get("--sandbox") == "off":
        return Greeting(link, None)
    # Loaded after the answer: its probe (a process of its own) then runs while click and the engine load.
    from crewbridge.sandbox import Sandboxing

    sandboxing = Sandboxing()
    sandboxing.detect_ahead()
    return Greeting(link, sandboxing)
