"""`crew query` and `crew execute` start the agents' CLIs before the rest of crew loads (click, the
engine), so that each boots while crew does. Only what names the command is read first: the
arguments, the configuration files, the providers. The CLIs started belong to the one Bridge made
here, which the command then runs with (crewbridge.cli); nothing is written to disk or kept for
another Bridge. The options are the command's own (crewbridge.base.flags, from which click's are made):
arguments click would refuse start nothing (each value is checked as click's type checks it), nor
does anything this quick reading is not sure of (help, an option it does not know, --continue,
--verbose, --worktree, --review, `--`): click reads the arguments and reports them, or the run
starts its CLIs itself. A wrong guess costs time, never a
wrong run: click reads the arguments again, and Bridge.run takes a started CLI only for the very
agent, settings, mode and tools it would start itself (Bridge.start)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from crewbridge.base import flags
from crewbridge.base.modes import MODES, Mode
from crewbridge.errors import CrewError

TYPE_CHECKING = False  # typing itself is ~5 ms to import; type checkers read this name as True
if TYPE_CHECKING:
    from collections.abc import Sequence

    from crewbridge.bridge import Bridge
    from crewbridge.config import Config
    from crewbridge.record.stream import Record
    from crewbridge.system.approval import Channel


@dataclass(frozen=True)
class Reading:
    """What `crew MODE ARGS…` names: the mode, the task's words, --config, --tools-via, --sandbox and
    --network."""

    mode: Mode
    text: str
    config_path: Path | None = None
    tools_via: str | None = None
    sandbox: str | None = None
    network: str | None = None


@dataclass
class Early:
    """The Bridge made from a Reading, with its agents' CLIs started."""

    bridge: Bridge
    reading: Reading


def read(args: list[str]) -> Reading | None:
    """`args` (crew's arguments, the command first) read as click would read them, or None when
    this reading is not sure."""
    if not args or args[0] not in MODES:
        return None
    found = flags.read(args[1:], (*flags.LOOP, *flags.TASK))
    if found is None:
        return None
    values, words = found
    if not words or ("--json" in values and "--jsonl" in values):  # the command refuses both
        return None
    config = values.get("--config")
    mode: Mode = "query" if args[0] == "query" else "execute"
    return Reading(
        mode,
        " ".join(words),
        Path(config) if config else None,
        values.get("--tools-via"),
        values.get("--sandbox"),
        values.get("--network"),
    )


def start(args: list[str]) -> Early | None:
    """The Bridge for `crew ARGS`, its agents' CLIs started, or None (nothing started) when the
    arguments are not sure or the configuration cannot be read (the command reports it)."""
    reading = read(args)
    if reading is None:
        return None
    # For start-up speed: imported once the arguments are known to start CLIs.
    from crewbridge.base.options import RunOptions
    from crewbridge.config import load_config

    try:
        # No sandbox probe first: the first CLI starts in bwrap at once, and says whether it came up.
        bridge = terminal_bridge(load_config(reading.config_path, Path.cwd()))
        options = RunOptions(tools_via=reading.tools_via, sandbox=reading.sandbox, network=reading.network)
        bridge.start(reading.text, reading.mode, options)
    except CrewError:
        return None
    return Early(bridge, reading)


def terminal_bridge(config: Config) -> Bridge:
    """The Bridge of a terminal's command: its runs joined to a `crew ui` serving for this user, and
    traced when telemetry is on (crewbridge.telemetry)."""
    from crewbridge.bridge import Bridge
    from crewbridge.telemetry import wanted

    if not wanted(config.telemetry):
        return Bridge(config, observers=[attend_ui])
    from crewbridge.telemetry.exporter import exporter  # for start-up speed: only with telemetry on

    traced = exporter(config)
    assert traced is not None
    return Bridge(config, observers=[attend_ui, traced.observe], tracing=traced.tracing)


def attend_ui(record: Record) -> Sequence[Channel]:
    """Join a run to a `crew ui` serving for this user (crewbridge.ui.link.attend), loading the UI's
    link only once a run is recorded (for start-up speed)."""
    from crewbridge.ui.link import attend

    return attend(record)
