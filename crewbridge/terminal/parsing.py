"""`crew parse`: a CLI's raw output on stdin, one JSON line per tool-call attempt on stdout.

Its arguments are few and its work is one loop over stdin, so when a quick reading is sure of them
(crewbridge.base.flags.PARSE, from which click's options are made) the whole command runs before
click loads (crewbridge.__main__): click is ~20 ms of a command whose every millisecond is the
user's wait on a pipe. Otherwise click reads the arguments and reports what is wrong, or runs the
same `run`."""

from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path

from crewbridge.base import flags
from crewbridge.errors import CrewError, UsageError
from crewbridge.terminal.failure import failure, silence

TYPE_CHECKING = False  # typing itself is ~5 ms to import; type checkers read this name as True
if TYPE_CHECKING:
    from collections.abc import Callable

    from crewbridge.config import Config

# stdin is read a megabyte at a time: a line of a CLI's output (a whole message, a file it read) can
# be megabytes, and with sys.stdin's 8 KB buffer reading such lines cost more than decoding them
# (~25 ms of 40 MB; bench/run.py --only parse).
BUFFER = 1 << 20


def run(fmt: str, prefix: str | None, config: Config, warn: Callable[[str], None]) -> None:
    """Print a JSON line for each tool-call attempt in the output of the CLI `fmt` on stdin, as soon
    as its block closes (validated against the tools of `config`; `prefix`: their names' prefix
    instead of the configured one); each warning (a corrupt line, the CLI's error) to `warn`."""
    from crewbridge.providers.parse import parse_stream  # the decoders and the tools: after the arguments

    registry = config.registry()
    if prefix:
        registry.prefix = prefix
    if sys.stdin is None:  # started with its stdin closed
        raise UsageError("stdin is closed; pipe a CLI's output in, e.g. claude -p … | crew parse --format claude")
    # Bytes: the JSON decoders make text only of the fields they read. Not closed here: it is stdin's.
    lines = open(sys.stdin.fileno(), "rb", buffering=BUFFER, closefd=False)
    out = sys.stdout
    try:
        for record in parse_stream(lines, fmt, registry, registry.prefix, warn=lambda m: warn(f"crew: {m}")):
            out.write(json.dumps(record) + "\n")  # ASCII: an input may hold a lone surrogate (a "\ud800" escape)
            out.flush()  # a record as soon as its block closes, for a reader at the pipe's other end
    except BrokenPipeError:  # the reader went away (`| head -1`): it has what it wanted
        silence(out)  # what is still buffered goes nowhere at exit, not to an error


def early(args: list[str]) -> int | None:
    """Run `crew parse ARGS` (the arguments after `parse`) before click loads, and give its exit
    code; None, having done nothing, when the quick reading is not sure of the arguments."""
    found = flags.read(args, flags.PARSE)
    if found is None or found[1]:  # a word the command takes none of: click says so
        return None
    values = found[0]
    # For start-up speed: the configuration once the arguments are known to be right.
    from crewbridge.config import load_config

    def warn(message: str) -> None:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()

    config_path = values.get("--config")
    try:
        config = load_config(Path(config_path) if config_path else None, Path.cwd())
        gc.enable()  # off while crew loaded (crewbridge.__main__); a stream may go on for hours
        run(values["--format"], values.get("--prefix"), config, warn)
    except Exception as exc:
        if os.environ.get("CREW_DEBUG") and not isinstance(exc, CrewError):
            raise
        line, code = failure(exc)
        warn(line)
        return code
    return 0
