"""crewbridge's optional extras (setup.cfg's `extras_require`): what each gives, whether it is
installed, and the one line that says how to install one that is missing, from a clone and as a
package. A command that needs a missing extra says that line (MissingExtra), never Python's
ModuleNotFoundError; `crew doctor` lists them."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from importlib import metadata

from crewbridge.errors import UsageError


@dataclass(frozen=True)
class Extra:
    """One extra: its name in setup.cfg, the distribution it installs, the module crew imports of
    it, and the commands that need it."""

    name: str
    package: str
    module: str
    needed_by: str

    def installed(self) -> str | None:
        """The installed distribution's version; None when it is not installed."""
        if not _importable(self.module):
            return None
        try:
            return metadata.version(self.package)
        except metadata.PackageNotFoundError:  # importable, installed some other way
            return "unknown version"

    def install(self) -> str:
        """How to install it: in a clone of crewbridge, and where crewbridge is an installed package."""
        return f"pip install '.[{self.name}]' in a clone of crewbridge, pip install 'crewbridge[{self.name}]' otherwise"


EXTRAS = {
    "acp": Extra("acp", "agent-client-protocol", "acp", "crew acp, crew acp check"),
    "batch": Extra("batch", "dbos", "dbos", "crew batch, crew ui's batches page"),
    "otel": Extra("otel", "opentelemetry-sdk", "opentelemetry.sdk", "crew's traces (docs/observability.md)"),
}


class MissingExtra(UsageError):
    """A command needs an extra that is not installed."""


def missing(extra: Extra, what: str) -> MissingExtra:
    return MissingExtra(f"{what} needs the '{extra.name}' extra ({extra.package}), not installed: {extra.install()}")


def require(name: str, what: str) -> None:
    """Raise MissingExtra (naming `what`, the command) when extra `name` is not installed."""
    extra = EXTRAS[name]
    if not _importable(extra.module):
        raise missing(extra, what)


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: a module None in sys.modules, which imports none
        return False


def of_module(module: str | None) -> Extra | None:
    """The extra that installs `module` (a ModuleNotFoundError's name), if one does."""
    top = (module or "").partition(".")[0]
    return next((extra for extra in EXTRAS.values() if extra.module == top), None)
