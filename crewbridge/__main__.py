"""The `crew` command (and `python -m crewbridge`)."""
from __future__ import annotations

import os
import signal
import sys
from typing import Any


def run() -> None:
    """Load the CLI and run it. A Ctrl-C while crew is still loading (nothing started yet) ends it
    with 130 and one line, as a later one does, not with a traceback from the middle of an import."""
    if sys.argv[1:] in (["--version"], ["-V"]):  # answered without loading click: ~45 ms of imports
        from crewbridge import VERSION_MESSAGE, __version__

        print(VERSION_MESSAGE % {"version": __version__})
        return
    signal.signal(signal.SIGINT, _interrupted_while_loading)
    from crewbridge.cli import main

    signal.signal(signal.SIGINT, signal.default_int_handler)
    main()


def _interrupted_while_loading(signum: int, frame: Any) -> None:
    sys.stderr.write("crew: interrupted\n")
    os._exit(128 + signum)


if __name__ == "__main__":
    run()
