"""Tool-name globs, as allow/deny/approval lists and hooks' `tools:` match tools."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable


def matches(name: str, patterns: Iterable[str]) -> bool:
    """Whether tool `name` matches any glob; a pattern may carry a prefix (`crew:write_*`)."""
    return any(fnmatch.fnmatchcase(name, pattern.rsplit(":", 1)[-1]) for pattern in patterns)
