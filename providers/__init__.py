"""Providers: one module per CLI. How to build its command, decode one output line, and resume."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from crewbridge.errors import UsageError

if TYPE_CHECKING:
    from providers.base import Provider

# Imported lazily: a command that needs one provider loads only that one.
BUILTIN = {
    "claude": "crewbridge.providers.claude:ClaudeProvider",
    "gemini": "crewbridge.providers.gemini:GeminiProvider",
    "codex": "crewbridge.providers.codex:CodexProvider",
    "demo": "crewbridge.providers.demo:DemoProvider",
}


def load(name: str) -> "Provider":
    """A built-in provider by name."""
    target = BUILTIN.get(name)
    if target is None:
        raise UsageError(f"provider '{name}' not found; built-in providers: {', '.join(BUILTIN)}")
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)()
