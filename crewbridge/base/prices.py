"""What a reply cost by the price table crew ships (crewbridge/prices.json, dated), for the CLIs
that report tokens but no cost (gemini, codex): the cost a CLI reports always comes first, and a
model the table does not list has no cost — never a guess.

A model is found by its exact name, else by the longest listed name it starts with followed by a
dash (`gpt-5-codex-2026-01-15` is `gpt-5-codex`; `gemini-2.5-flash-preview-05` is
`gemini-2.5-flash`, never `gemini-2.5-flash-lite`'s price for it)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any

from crewbridge.base.templates import package_text


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens."""

    input: float
    cached: float
    output: float


@dataclass(frozen=True)
class Table:
    date: str
    models: dict[str, Price]

    def of(self, model: str | None) -> Price | None:
        if not model:
            return None
        name = model.strip().lower().removeprefix("models/")  # gemini's API names it models/NAME
        if name in self.models:
            return self.models[name]
        listed = [known for known in self.models if name.startswith(known + "-")]
        return self.models[max(listed, key=len)] if listed else None


@cache
def table() -> Table:
    data: dict[str, Any] = json.loads(package_text("crewbridge", "prices.json"))
    return Table(data["date"], {name: Price(**rates) for name, rates in data["models"].items()})


def cost(model: str | None, input_tokens: int, output_tokens: int, cached_tokens: int) -> float | None:
    """The dollars these tokens cost on `model` by the table (input tokens include the cached
    ones), rounded as crew's sums are; None when the table does not list the model."""
    price = table().of(model)
    if price is None:
        return None
    fresh = max(input_tokens - cached_tokens, 0)
    dollars = fresh * price.input + min(cached_tokens, input_tokens) * price.cached + output_tokens * price.output
    return round(dollars / 1_000_000, 8)
