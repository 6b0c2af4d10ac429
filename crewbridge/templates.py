"""Prompt templates from the `crewbridge.prompts` package data."""
from __future__ import annotations

from functools import lru_cache
from string import Template


@lru_cache(maxsize=None)
def template(name: str) -> Template:
    from importlib import resources  # ~10 ms to import: only once a prompt is written

    return Template(resources.files("crewbridge.prompts").joinpath(name).read_text(encoding="utf-8"))


def render(name: str, /, **values: object) -> str:
    """Fill `prompts/<name>` ($-placeholders) with `values`."""
    return template(name).substitute({k: str(v) for k, v in values.items()})
