"""`crew log`: the runs index as lines (`crew log`), and one run's record replayed through the
terminal renderer that showed it live (`crew log show RUN`; `--json` gives the events as written,
one JSON object a line)."""

from __future__ import annotations

import sys
from typing import IO

from crewbridge.record.events import Start
from crewbridge.record.index import Row
from crewbridge.record.transcript import read_run
from crewbridge.terminal.render import Renderer, one_line


def line(row: Row) -> str:
    """The run on one line of `crew log`: id, status, calls, usage, agents, where, task."""
    task = (row.task.splitlines() or [""])[0]
    cost = f"${row.cost:.4f}" if row.cost is not None else "-"
    calls = f"{row.calls:3} call{' ' if row.calls == 1 else 's'} {row.tokens:>9,} tokens {cost:>9}"
    agents = " ".join(f"@{agent}" for agent in row.usage or row.agents)
    return one_line(f"{row.run_id}  {row.status:10} {calls}  {agents}  {task[:50]}", 400)


def show(run_id: str, out: IO[str] | None = None) -> None:
    """Run `run_id`'s record (an id, its unique start, or `last`), as the terminal showed it."""
    events = read_run(run_id)
    agents = next((event.agents for event in events if isinstance(event, Start)), [])
    stream = out or sys.stdout
    Renderer(agents=agents, out=stream, err=stream, replay=True).replayed(events)
