"""before_tool_call / after_tool_call hooks."""
from __future__ import annotations

from typing import Any

from crewbridge.registry import ToolResult


class Hooks:
    def __init__(self, specs: dict[str, list[Any]] | None = None) -> None:
        self.specs = specs or {}

    def before(self, name: str, data: dict[str, Any], agent: str) -> tuple[dict[str, Any], str | None]:
        """The (possibly changed) input, and a reason when a hook blocks the call."""
        return data, None

    def after(self, name: str, data: dict[str, Any], result: ToolResult, agent: str) -> ToolResult:
        return result
