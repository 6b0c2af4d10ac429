"""Built-in tools, one small module per family."""

from __future__ import annotations

from crewbridge.tools.files import edit_file, list_files, read_file, write_file
from crewbridge.tools.meta import crew_help
from crewbridge.tools.search import grep
from crewbridge.tools.shell import run_command
from crewbridge.tools.skills import skill

from crewbridge.toolkit.registry import DEFAULT_PREFIX, ToolRegistry

BUILTINS = [read_file, write_file, edit_file, list_files, grep, run_command, crew_help, skill]


def builtin_registry(prefix: str = DEFAULT_PREFIX) -> ToolRegistry:
    """A registry holding every built-in tool, exposed as `<prefix>:<name>`."""
    registry = ToolRegistry(prefix)
    registry.register_all(BUILTINS)
    return registry
