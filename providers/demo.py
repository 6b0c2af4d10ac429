"""The offline demo agent: a small scripted local model (crewbridge.base.demo) run as a CLI, so the
whole loop — catalogue, real fenced tool calls, results, answer — works with no account or network."""

from __future__ import annotations

import sys

from crewbridge.providers.generic import GenericProvider, GenericSpec


class DemoProvider(GenericProvider):
    def __init__(self) -> None:
        super().__init__(
            GenericSpec(
                name="demo",
                command=[sys.executable, "-m", "crewbridge.base.demo"],
                format="text",
                install_hint="it ships with crewbridge",
                probe=False,  # a script of crew's own: there is nothing to check
            )
        )
