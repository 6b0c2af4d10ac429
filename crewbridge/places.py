"""Where crew looks for and keeps its files."""

from __future__ import annotations

import os
from pathlib import Path

from crewbridge.errors import ConfigError

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


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    """$XDG_CONFIG_HOME/crewbridge (default ~/.config/crewbridge): the user's own crew.yaml."""
    return Path(xdg("XDG_CONFIG_HOME", ".config", env), "crewbridge")


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """$XDG_STATE_HOME/crewbridge (default ~/.local/state/crewbridge): transcripts, trusted configs."""
    return Path(xdg("XDG_STATE_HOME", ".local/state", env), "crewbridge")


def find_project_config(cwd: Path) -> Path | None:
    """crew.yaml or .crew.yaml in `cwd` or its nearest parent that has one."""
    for directory in (cwd, *cwd.parents):
        present = [directory / name for name in CONFIG_NAMES if (directory / name).is_file()]
        if len(present) > 1:
            raise ConfigError(f"both {present[0]} and {present[1]} exist; keep one of them")
        if present:
            return present[0]
    return None
