"""The `crew` command (and `python -m crewbridge`)."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing itself is ~5 ms to import; type checkers read this name as True
if TYPE_CHECKING:
    from types import FrameType

    from crewbridge.acp.early import Greeting as AcpGreeting
    from crewbridge.mcp.early import Greeting
    from crewbridge.terminal.early import Early


def run() -> None:
    """Load the CLI and run it. A Ctrl-C (or SIGTERM, SIGHUP) while crew is still loading exits with
    128 + the signal and one line, as a later one does, not with a traceback from an import; the
    CLIs crewbridge.terminal.early started are ended first."""
    if sys.argv[1:] in (["--version"], ["-V"]):  # answered without loading click: ~45 ms of imports
        from crewbridge.version import VERSION_MESSAGE, __version__

        print(VERSION_MESSAGE % {"version": __version__})
        return
    try:
        os.getcwd()
    except FileNotFoundError:  # every command reads or works in it
        sys.stderr.write(
            "crew: error: the current directory no longer exists (deleted or moved); "
            "cd into one that does and run crew again\n"
        )
        sys.exit(1)
    import gc
    import signal  # not for --version: signal imports enum

    # For start-up speed: the imports before the first CLI starts make objects by the thousand
    # (classes, functions, dataclasses' generated code) that no cycle collection frees; collecting
    # while they load took ~5 ms of the launch. Collection resumes once the run itself begins.
    gc.disable()

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # cli.main() takes them over
        signal.signal(signum, _stopped_while_loading)
    early: Early | None = None
    greeting: Greeting | AcpGreeting | None = None
    if sys.argv[1:2] in (["query"], ["execute"]):  # their CLIs start before click and the engine load
        from crewbridge.terminal.early import start

        early = start(sys.argv[1:])
    elif sys.argv[1:2] == ["parse"]:  # the whole command runs before click loads
        from crewbridge.terminal.parsing import early as parse

        code = parse(sys.argv[2:])
        if code is not None:
            sys.exit(code)
    elif sys.argv[1:2] == ["mcp"]:  # initialize is answered before click and the engine load
        from crewbridge.mcp.early import greet

        greeting = greet(sys.argv[2:])
    elif sys.argv[1:2] == ["acp"]:  # the same, before the ACP SDK loads too
        from crewbridge.acp.early import greet as greet_acp

        greeting = greet_acp(sys.argv[2:])
    from crewbridge.cli import main

    gc.enable()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    main(early, greeting)


def _stopped_while_loading(signum: int, frame: FrameType | None) -> None:
    import signal

    process = sys.modules.get("crewbridge.system.process")
    if process is not None:  # crewbridge.terminal.early may have started CLIs: none outlives crew
        process.end_all()
    sys.stderr.write(
        "crew: interrupted\n" if signum == signal.SIGINT else f"crew: stopped by {signal.Signals(signum).name}\n"
    )
    os._exit(128 + signum)


if __name__ == "__main__":
    run()
