"""How a command that failed says so: crew's one line for its error, and its exit code (click's
errors aside: click shows its own); and a stream whose reader went away, silenced."""

from __future__ import annotations

import os
import sys
from typing import IO, Any

from crewbridge.errors import CrewError


def failure(exc: Exception) -> tuple[str, int]:
    """The line and exit code of a command that raised `exc`: a CrewError's message; an extra's
    module that is not installed, with the pip command; else a bug in crew, in one line (CREW_DEBUG=1
    re-raises it where it is caught)."""
    if isinstance(exc, CrewError):
        return f"crew: error: {exc}", exc.exit_code
    if isinstance(exc, ModuleNotFoundError):  # an extra's module, where no command required it
        # For start-up speed: crewbridge.base.extras imports importlib.metadata (~30 ms of CPU), which
        # crew parse, run before click loads, otherwise never needs.
        from crewbridge.base.extras import missing, of_module

        extra = of_module(exc.name)
        if extra is not None:
            error = missing(extra, f"crew {' '.join(sys.argv[1:2])}".strip())
            return f"crew: error: {error}", error.exit_code
    return f"crew: internal error: {type(exc).__name__}: {exc} (CREW_DEBUG=1 shows the traceback; please report it)", 1


def silence(stream: IO[Any]) -> None:
    """Point a stream whose reader left (`| head`) at /dev/null, so later writes and the exit's
    flush pass instead of failing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass
