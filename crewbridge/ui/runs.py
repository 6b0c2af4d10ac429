"""What `crew ui` shows of the runs index (crewbridge.record.index): the list, filtered, and usage
over time, summed as `crew log --by agent` sums."""

from __future__ import annotations

from typing import Any

from crewbridge.base.usage import Tally, by_agent
from crewbridge.record.index import Runs


def listed(
    runs: Runs, agent: str | None = None, status: str | None = None, text: str | None = None
) -> list[dict[str, Any]]:
    """The rows of every run that matches, newest first."""
    return [row.to_dict() for row in runs.rows() if row.matches(agent, status, text)]


def usage(runs: Runs) -> dict[str, Any]:
    """Tokens and cost per day, agent and model (the runs' `end` events), and the totals per agent
    that `crew log --by agent` prints."""
    rows = [row for row in runs.rows() if row.usage]
    series: dict[tuple[str, str, str], Tally] = {}
    for row in rows:
        day = row.started[:10]
        for agent, data in row.usage.items():
            key = (day, agent, row.models.get(agent, "default"))
            series.setdefault(key, Tally()).add(Tally.of(data))
    return {
        "series": [
            {"day": day, "agent": agent, "model": model, "tokens": tally.tokens, **tally.to_dict()}
            for (day, agent, model), tally in sorted(series.items())
        ],
        "agents": [row.to_dict() for row in by_agent(row.usage for row in rows)],
    }
