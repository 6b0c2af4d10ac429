"""Providers: one module per CLI. How to build its command, decode one output line, and resume.

Installed packages add providers under the entry point group `crewbridge.providers`: the entry
point's name is the provider's name, its value a Provider subclass (or a callable returning a
Provider). It is imported only when an agent uses it. A built-in name cannot be taken over.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from crewbridge.providers.base import Provider

from crewbridge.base.plugins import entry_points
from crewbridge.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

PLUGIN_GROUP = "crewbridge.providers"

# Imported lazily: a command that needs one provider loads only that one.
BUILTIN = {
    "claude": "crewbridge.providers.claude:ClaudeProvider",
    "gemini": "crewbridge.providers.gemini:GeminiProvider",
    "codex": "crewbridge.providers.codex:CodexProvider",
    "demo": "crewbridge.providers.demo:DemoProvider",
}


def plugins() -> dict[str, EntryPoint]:
    """Providers declared by installed packages, by name (not imported); built-in names left out."""
    return {point.name: point for point in entry_points(group=PLUGIN_GROUP) if point.name not in BUILTIN}


def names() -> list[str]:
    """Every provider name: the built-in ones, then those of installed plugins."""
    return [*BUILTIN, *sorted(plugins())]


def load(name: str) -> Provider:
    """A provider by name: a built-in one, else one from an installed plugin."""
    target = BUILTIN.get(name)
    if target is not None:
        module, _, attr = target.partition(":")
        return getattr(importlib.import_module(module), attr)()
    point = plugins().get(name)
    if point is None:
        raise UsageError(f"provider '{name}' not found; known providers: {', '.join(names())}")
    return load_plugin(point)


def load_plugin(point: EntryPoint) -> Provider:
    """Import a plugin provider; a broken one is named with its package, not shown as a traceback."""
    where = f"plugin provider '{point.name}' ({point.value}"
    where += f", from {point.dist.name})" if point.dist is not None else ")"
    try:
        made = point.load()
        provider = made()
    except Exception as exc:
        raise ConfigError(
            f"{where} cannot be loaded: {type(exc).__name__}: {exc}; fix or uninstall the package providing it"
        ) from None
    if not isinstance(provider, Provider):
        raise ConfigError(
            f"{where} gave {type(provider).__name__}, not a Provider; it must name a "
            "crewbridge.providers.base.Provider subclass"
        )
    return provider
