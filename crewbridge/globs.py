"""Tool-name globs, as allow/deny/approval lists and hooks' `tools:` match tools."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

NATIVE = "native:"  # globs on the CLI's own tools: native:Bash, native:run_shell_command, native:*


def matches(name: str, patterns: Iterable[str]) -> bool:
    """Whether crew's tool `name` matches any glob; a pattern may carry a prefix (`crew:write_*`).
    Globs on the CLI's own tools (`native:…`) never match crew's tools."""
    return any(
        fnmatch.fnmatchcase(name, pattern.rsplit(":", 1)[-1]) for pattern in patterns if not pattern.startswith(NATIVE)
    )


def native_globs(patterns: Iterable[str]) -> list[str]:
    """The globs of `patterns` on the CLI's own tools, without their `native:`."""
    return [pattern[len(NATIVE) :] for pattern in patterns if pattern.startswith(NATIVE)]


def matches_native(tool: str, patterns: Iterable[str]) -> bool:
    """Whether the CLI's own tool `tool` matches a `native:` glob of `patterns`."""
    return any(fnmatch.fnmatchcase(tool, glob) for glob in native_globs(patterns))
