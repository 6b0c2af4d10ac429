"""Which tools an agent is offered and may run, in which mode."""
from __future__ import annotations

from typing import Any

from crewbridge.config import AgentSpec
from crewbridge.registry import Tool, ToolRegistry


class Policy:
    def __init__(self, agent: AgentSpec, mode: str, *, approve_all: bool = False) -> None:
        self.agent = agent
        self.mode = mode
        self.approve_all = approve_all

    def allowed(self, spec: Tool) -> bool:
        return spec.read_only or self.mode == "execute"

    def offered(self, registry: ToolRegistry) -> ToolRegistry:
        """The tools the model is told about."""
        return registry.subset(self.allowed)

    def check(self, spec: Tool, data: dict[str, Any]) -> str | None:
        """Why this call may not run, or None."""
        if not self.allowed(spec):
            return (f"tool '{spec.name}' is not available in {self.mode} mode "
                    "(query mode offers read-only tools only; the user can run `crew execute`)")
        return None
