"""Where crew looks for and keeps its files."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing itself is ~5 ms to import; type checkers read this name as True
if TYPE_CHECKING:
    from collections.abc import Mapping

CONFIG_NAMES = ("crew.yaml", ".crew.yaml")


def xdg(variable: str, default: str, env: Mapping[str, str] | None = None) -> str:
    """$variable, or ~/`default` when it is unset or relative (the XDG spec ignores such a value)."""
    env = os.environ if env is None else env
    base = env.get(variable, "")
    if not os.path.isabs(base):
        return os.path.join(env.get("HOME") or os.path.expanduser("~"), default)
    return base
