"""The price table crew ships (crewbridge/prices.json): dated, per model, never a guess."""

from __future__ import annotations

import re

from crewbridge.base import prices


def test_the_table_is_dated_and_every_price_is_per_million_tokens():
    table = prices.table()
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", table.date)
    assert table.models and all(p.cached <= p.input < p.output for p in table.models.values())


def test_a_model_is_priced_by_its_name_or_a_dated_variant_of_it():
    assert prices.cost("gemini-2.5-flash", 1_000_000, 0, 0) == 0.30
    assert prices.cost("models/gemini-2.5-flash", 1_000_000, 0, 0) == 0.30
    assert prices.cost("gpt-5-codex-2026-01-15", 0, 1_000_000, 0) == 10.0
    assert prices.cost("gemini-2.5-flash-preview-05", 1_000_000, 0, 0) == 0.30  # never flash-lite's


def test_cached_input_costs_the_cached_price():
    # 100 input tokens of which 40 cached, 10 output, on gpt-5: 60 × 1.25 + 40 × 0.125 + 10 × 10 per million
    assert prices.cost("gpt-5", 100, 10, 40) == round((60 * 1.25 + 40 * 0.125 + 10 * 10) / 1e6, 8)


def test_a_model_the_table_does_not_list_has_no_cost():
    for model in (None, "", "claude-mock", "gpt-6.1-sol", "gemini-2.5", "gpt-5x"):
        assert prices.cost(model, 100, 10, 0) is None
