"""The `crew` command (and `python -m crewbridge`)."""
from __future__ import annotations

import os
import signal
import sys

TYPE_CHECKING = False  # typing itself is ~5 ms to import; type checkers read this name as True
if TYPE_CHECKING:
    from typing import Any


def run() -> None:
    """Start the agents' CLIs of `crew query|execute` (crewbridge.early), load the CLI, run it. A
    Ctrl-C (or SIGTERM, SIGHUP) while crew is still loading ends what it started and exits with
    128 + the signal and one line, as a later one does, not with a traceback from an import."""
    if sys.argv[1:] in (["--version"], ["-V"]):  # answered without loading click: ~45 ms of imports
        from crewbridge import VERSION_MESSAGE, __version__

        print(VERSION_MESSAGE % {"version": __version__})
        return
    try:
        os.getcwd()
    except FileNotFoundError:  # every command reads or works in it
        sys.stderr.write("crew: error: the current directory no longer exists (deleted or moved); "
                         "cd into one that does and run crew again\n")
        sys.exit(1)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # cli.main() takes them over
        signal.signal(signum, _stopped_while_loading)
    from crewbridge import early

    try:
        early.start(sys.argv[1:])  # the agents' CLIs boot while click loads
        from crewbridge.cli import main

        signal.signal(signal.SIGINT, signal.default_int_handler)
        main()
    finally:
        _close_waiting()


def _close_waiting() -> None:
    bridge = sys.modules.get("crewbridge.bridge")
    if bridge is not None:
        bridge.close_waiting()
    spawn = sys.modules.get("crewbridge.spawn")
    if spawn is not None:
        spawn.end_ahead()


def _stopped_while_loading(signum: int, frame: Any) -> None:
    for name, end in (("crewbridge.spawn", "end_ahead"), ("crewbridge.process", "end_all")):
        module = sys.modules.get(name)
        if module is not None:
            getattr(module, end)()  # a CLI started early must not outlive crew
    sys.stderr.write("crew: interrupted\n" if signum == signal.SIGINT else
                     f"crew: stopped by {signal.Signals(signum).name}\n")
    os._exit(128 + signum)


if __name__ == "__main__":
    run()
