"""Usage tallies, --since spans and the per-agent table of `crew log --by agent`."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest

from crewbridge.base.decoded import Usage
from crewbridge.base.usage import Budget, Tally, by_agent, since, table
from crewbridge.errors import UsageError


def test_a_tally_adds_tokens_and_only_the_costs_reported():
    tally = Tally()
    tally.add(Usage(100, 10, cached_tokens=60))
    assert tally.cost_usd is None and tally.tokens == 110
    tally.add(Usage(1, 2, 0.25))
    tally.add(Tally(1, 1, 0, 0.5))
    assert tally.to_dict() == {"input_tokens": 102, "output_tokens": 13, "cached_tokens": 60, "cost_usd": 0.75}
    assert tally.line() == "102 in (60 cached) / 13 out, $0.7500"


def test_a_tally_from_a_damaged_event_counts_nothing_it_cannot_read():
    assert Tally.of({"input_tokens": "many", "output_tokens": 3, "cost_usd": "x"}) == Tally(0, 3, 0, None)
    assert not Tally.of(None)


NOW = datetime(2025, 3, 10, 12, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "text, moment",
    [
        ("7d", datetime(2025, 3, 3, 12, 0, tzinfo=timezone.utc)),
        ("12h", datetime(2025, 3, 10, 0, 0, tzinfo=timezone.utc)),
        ("30m", datetime(2025, 3, 10, 11, 30, tzinfo=timezone.utc)),
        ("2w", datetime(2025, 2, 24, 12, 0, tzinfo=timezone.utc)),
        ("2025-01-31", datetime(2025, 1, 31, tzinfo=timezone.utc)),
    ],
)
def test_since_takes_a_span_back_from_now_or_a_date(text, moment):
    assert since(text, NOW) == moment


def test_since_names_what_it_takes_when_it_cannot_read_the_text():
    with pytest.raises(UsageError, match=re.escape("--since 'last week' is not a span or a date; give e.g. 7d")):
        since("last week", NOW)


def test_runs_are_summed_per_agent_most_tokens_first():
    runs = [
        {"claude": {"turns": 2, "input_tokens": 100, "output_tokens": 10, "cached_tokens": 50, "cost_usd": 0.5}},
        {
            "claude": {"turns": 1, "input_tokens": 10, "output_tokens": 1, "cached_tokens": 0, "cost_usd": 0.25},
            "gemini": {"turns": 3, "input_tokens": 500, "output_tokens": 30, "cached_tokens": 0, "cost_usd": None},
        },
    ]
    rows = by_agent(runs)
    assert [row.to_dict() for row in rows] == [
        {
            "agent": "gemini",
            "runs": 1,
            "turns": 3,
            "input_tokens": 500,
            "output_tokens": 30,
            "cached_tokens": 0,
            "cost_usd": None,
        },
        {
            "agent": "claude",
            "runs": 2,
            "turns": 3,
            "input_tokens": 110,
            "output_tokens": 11,
            "cached_tokens": 50,
            "cost_usd": 0.75,
        },
    ]
    assert table(rows) == [
        "AGENT    RUNS  TURNS  INPUT  CACHED  OUTPUT     COST",
        "@gemini     1      3    500       0      30        -",
        "@claude     2      3    110      50      11  $0.7500",
        "total       3      6    610      50      41  $0.7500",
    ]


def test_a_budget_says_which_limit_the_usage_passed():
    budget = Budget(0.5, 1000)
    budget.add(Usage(900, 100, 0.25))
    assert budget.passed() is None  # 1,000 tokens is not past 1,000
    budget.add(Usage(1, 0))
    assert budget.passed() == "1,001 tokens, past --max-tokens 1,000"
    costly = Budget(0.5, None, ("agents.claude.max_cost", "agents.claude.max_tokens"))
    costly.add(Usage(10, 10, 0.75))
    assert costly.passed() == "$0.7500, past agents.claude.max_cost 0.5"
    assert not Budget(None, None) and Budget(None, 5)
