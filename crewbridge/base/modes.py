"""crew's two modes: `query` offers read-only tools (crew's and the CLI's own), `execute` every tool
the policy allows."""

from __future__ import annotations

from typing import Literal, get_args

Mode = Literal["query", "execute"]
MODES: tuple[Mode, ...] = get_args(Mode)
