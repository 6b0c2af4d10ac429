"""Where crew looks for and keeps its files.

(pathlib is imported where a Path is made: `configured`, read before crew mcp and crew acp answer
initialize, needs none, and pathlib with what it loads, re and urllib among them, costs ~5 ms.)"""

from __future__ import annotations

import os

from crewbridge.errors import ConfigError

TYPE_CHECKING = False  # typing itself is ~5 ms to import; type checkers read this name as True
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

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
    from pathlib import Path

    return Path(_config_dir(env))


def _config_dir(env: Mapping[str, str] | None = None) -> str:
    return os.path.join(xdg("XDG_CONFIG_HOME", ".config", env), "crewbridge")


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """$XDG_STATE_HOME/crewbridge (default ~/.local/state/crewbridge): transcripts, trusted configs."""
    from pathlib import Path

    return Path(xdg("XDG_STATE_HOME", ".local/state", env), "crewbridge")


def find_project_config(cwd: Path) -> Path | None:
    """crew.yaml or .crew.yaml in `cwd` or its nearest parent that has one."""
    from pathlib import Path

    found = _project_config(str(cwd))
    return None if found is None else Path(found)


def _project_config(cwd: str) -> str | None:
    directory = os.path.abspath(cwd)
    while True:
        present = [path for name in CONFIG_NAMES if os.path.isfile(path := os.path.join(directory, name))]
        if len(present) > 1:
            raise ConfigError(f"both {present[0]} and {present[1]} exist; keep one of them")
        if present:
            return present[0]
        if (parent := os.path.dirname(directory)) == directory:
            return None
        directory = parent


def configured(cwd: str) -> bool:
    """Whether crew reads a configuration file in `cwd`: the user's crew.yaml, or a project's (also
    when there are two, which crew refuses)."""
    try:
        return os.path.isfile(os.path.join(_config_dir(), "crew.yaml")) or _project_config(cwd) is not None
    except ConfigError:
        return True


def expand(entry: str, env: Mapping[str, str]) -> Path | None:
    """A place as crew.yaml writes it (a provider's `state_dirs`, the sandbox's `hide`): `~` is
    HOME in `env`, `$VAR`/`${VAR}` its variables, `${VAR:-default}` with a default. None when a
    variable without a default is unset (nothing is there), or the result is not absolute."""
    import re
    from pathlib import Path

    missing = False

    def value(match: re.Match[str]) -> str:
        nonlocal missing
        name = match.group(1) or match.group(3)
        if env.get(name):
            return env[name]
        if match.group(2) is not None:
            return match.group(2)
        missing = True
        return ""

    text = re.sub(r"\$\{(\w+)(?::-([^}]*))?\}|\$(\w+)", value, entry)
    if text == "~" or text.startswith("~/"):
        text = (env.get("HOME") or str(Path.home())) + text[1:]
    path = Path(text)
    return None if missing or not path.is_absolute() else path
