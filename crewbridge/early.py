"""The agents' CLIs of `crew query|execute`, started before click is imported.

Importing click takes ~45 ms in an installed crew, all of it before crew could start node, which
then needs most of a second of its own. So `crew` first reads its arguments with the table below
and starts the mentioned agents' CLIs (Bridge.start); click then parses as always, and the run
takes those CLIs. Only arguments the table reads with certainty count: anything else (help, an
option it does not know, another command) waits for click, which then starts the CLIs itself."""
from __future__ import annotations

from pathlib import Path

COMMANDS = ("query", "execute")
# The options of `crew query` and `crew execute`: name → whether it takes a value. A test holds this
# to click's own definition of the commands.
OPTIONS = {"--timeout": True, "--max-turns": True, "--config": True, "--json": False, "--jsonl": False,
           "--yes": False, "-y": False, "--verbose": False, "-v": False}


def read_args(argv: list[str]) -> tuple[str, str, Path | None] | None:
    """(mode, task, --config) of `crew query|execute …`, or None when the table cannot tell."""
    if not argv or argv[0] not in COMMANDS:
        return None
    words: list[str] = []
    config: Path | None = None
    rest = iter(argv[1:])
    for arg in rest:
        if arg == "--":
            words.extend(rest)
            break
        if not arg.startswith("-") or arg == "-":
            words.append(arg)
            continue
        name, equals, value = arg.partition("=")
        takes_value = OPTIONS.get(name)
        if takes_value is None or (equals and not takes_value):
            return None
        if takes_value and not equals:
            value = next(rest, "")
        if name == "--config":
            config = Path(value)
    return (argv[0], " ".join(words), config) if words else None


def start(argv: list[str]) -> None:
    """Start the CLIs of the agents that `crew query|execute` arguments mention (else nothing)."""
    read = read_args(argv)
    if read is None:
        return
    mode, task, config = read
    from crewbridge.bridge import Bridge
    from crewbridge.config import load_config
    from crewbridge.errors import CrewError

    try:
        Bridge(load_config(config, Path.cwd())).start(task, mode)
    except CrewError:
        pass  # a configuration or a task crew cannot run: click's run reports it
