"""Prompt templates from the `crewbridge.prompts` package data."""

from __future__ import annotations

import importlib
import os
from functools import cache
from string import Template


def package_text(package: str, name: str) -> str:
    """The data file `name` of `package`, read through the package's loader (also from a zip), as
    pkgutil.get_data does; importlib.resources and pkgutil cost 6-10 ms to import."""
    spec = importlib.import_module(package).__spec__
    assert spec is not None and spec.loader is not None and spec.origin is not None
    path = os.path.join(os.path.dirname(spec.origin), name)
    return spec.loader.get_data(path).decode("utf-8")  # type: ignore[attr-defined]  # every file loader has it


@cache
def template(name: str) -> Template:
    return Template(package_text("crewbridge.prompts", name))


def render(name: str, /, **values: object) -> str:
    """Fill `prompts/<name>` ($-placeholders) with `values`."""
    return template(name).substitute({k: str(v) for k, v in values.items()})
