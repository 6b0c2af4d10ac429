"""Tokens and dollars: what each CLI reports per reply, summed per turn, per agent, per run, and over
runs (`crew log`). Input tokens include cached ones (the part the provider read from its cache);
cost is what the CLI itself reports (Claude does; Gemini and Codex report tokens only), None when
none was reported."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from crewbridge.base.decoded import Usage
from crewbridge.errors import UsageError

_SPAN = re.compile(r"^(\d+)([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


@dataclass
class Tally:
    """Tokens and cost added up."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None
    context_window: int | None = None  # the model's, as the CLI last reported it (not added up, not recorded)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: Tally | Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cached_tokens += other.cached_tokens
        if other.cost_usd is not None:
            self.cost_usd = round((self.cost_usd or 0.0) + other.cost_usd, 8)
        if other.context_window is not None:
            self.context_window = other.context_window

    def __bool__(self) -> bool:
        return bool(self.tokens or self.cost_usd)

    def to_dict(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
            "cost_usd": self.cost_usd,
        }

    @classmethod
    def of(cls, data: Mapping[str, Any] | None) -> Tally:
        """A tally from its dict (a transcript event's); missing or malformed fields count nothing."""
        data = data or {}

        def number(key: str) -> int:
            value = data.get(key)
            return value if isinstance(value, int) else 0

        cost = data.get("cost_usd")
        return cls(
            number("input_tokens"),
            number("output_tokens"),
            number("cached_tokens"),
            float(cost) if isinstance(cost, (int, float)) else None,
        )

    def line(self) -> str:
        """`1,234 in (200 cached) / 56 out, $0.0123`, for a person."""
        cached = f" ({self.cached_tokens:,} cached)" if self.cached_tokens else ""
        cost = f", ${self.cost_usd:.4f}" if self.cost_usd is not None else ""
        return f"{self.input_tokens:,} in{cached} / {self.output_tokens:,} out{cost}"


class Budget:
    """Limits on usage, checked between turns: the command line's over a whole run (every agent's
    usage), crew.yaml's over one agent's. `names` are the settings' names, for the message."""

    def __init__(
        self, max_cost: float | None, max_tokens: int | None, names: tuple[str, str] = ("--max-cost", "--max-tokens")
    ) -> None:
        self.max_cost = max_cost
        self.max_tokens = max_tokens
        self.names = names
        self.spent = Tally()
        self._lock = threading.Lock()  # the agents of a run report at once

    def __bool__(self) -> bool:
        return self.max_cost is not None or self.max_tokens is not None

    def add(self, usage: Usage) -> None:
        with self._lock:
            self.spent.add(usage)

    def passed(self) -> str | None:
        """Which limit the usage passed, e.g. "1,234 tokens, past --max-tokens 1,000"; None if none."""
        with self._lock:
            if self.max_tokens is not None and self.spent.tokens > self.max_tokens:
                return f"{self.spent.tokens:,} tokens, past {self.names[1]} {self.max_tokens:,}"
            cost = self.spent.cost_usd or 0.0
            if self.max_cost is not None and cost > self.max_cost:
                return f"${cost:.4f}, past {self.names[0]} {self.max_cost:g}"
        return None


def since(text: str, now: datetime | None = None) -> datetime:
    """The moment `--since` names: a span back from now (30m, 12h, 7d, 2w) or a date (2025-01-31)."""
    now = now or datetime.now(timezone.utc)
    match = _SPAN.match(text.strip())
    if match:
        return now - timedelta(**{_UNITS[match[2]]: int(match[1])})
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"--since '{text}' is not a span or a date; give e.g. 7d, 12h, 30m, 2w or 2025-01-31"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


@dataclass
class Row:
    """One line of `crew log --by agent`: an agent's runs and usage summed."""

    agent: str
    runs: int = 0
    turns: int = 0
    usage: Tally = field(default_factory=Tally)

    def to_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "runs": self.runs, "turns": self.turns, **self.usage.to_dict()}


def by_agent(per_run: Iterable[Mapping[str, Mapping[str, Any]]]) -> list[Row]:
    """Rows per agent, most tokens first, from each run's usage by agent (a run's `end` event)."""
    rows: dict[str, Row] = {}
    for run in per_run:
        for agent, data in run.items():
            row = rows.setdefault(agent, Row(agent))
            row.runs += 1
            turns = data.get("turns")
            row.turns += turns if isinstance(turns, int) else 0
            row.usage.add(Tally.of(data))
    return sorted(rows.values(), key=lambda row: (-row.usage.tokens, row.agent))


def table(rows: list[Row]) -> list[str]:
    """`crew log --by agent` for a person: a header, a line per agent, a total line."""
    total = Row("total", sum(r.runs for r in rows), sum(r.turns for r in rows))
    for row in rows:
        total.usage.add(row.usage)
    lines: list[tuple[str, ...]] = [("AGENT", "RUNS", "TURNS", "INPUT", "CACHED", "OUTPUT", "COST")]
    for row in [*rows, total]:
        cost = f"${row.usage.cost_usd:.4f}" if row.usage.cost_usd is not None else "-"
        name = row.agent if row is total else f"@{row.agent}"
        numbers = (row.runs, row.turns, row.usage.input_tokens, row.usage.cached_tokens, row.usage.output_tokens)
        lines.append((name, *(f"{n:,}" for n in numbers), cost))
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(line, widths, strict=True))
        )
        for line in lines
    ]
