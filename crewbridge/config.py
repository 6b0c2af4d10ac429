"""Configuration: agents, custom providers, tools, hooks, prefix. (Loading crew.yaml comes next.)"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crewbridge.errors import AgentNotFound
from crewbridge.registry import DEFAULT_PREFIX


@dataclass
class AgentSpec:
    """One agent a mention can name: which provider runs it and what it may do."""

    id: str
    provider: str
    model: str | None = None
    system_prompt: str | None = None
    options: dict[str, list[str]] = field(default_factory=dict)  # per mode: "query"/"execute" → argv
    allow: list[str] = field(default_factory=list)  # tool-name globs; empty = the profile decides
    deny: list[str] = field(default_factory=list)
    profile: str = "coding"  # read-only | coding | full
    approval: list[str] = field(default_factory=list)  # tool-name globs that need approval
    workdir: str | None = None
    timeout: float | None = None


@dataclass
class Config:
    path: Path | None = None
    prefix: str = DEFAULT_PREFIX
    agents: dict[str, AgentSpec] = field(default_factory=dict)
    providers: dict[str, Any] = field(default_factory=dict)  # id → GenericSpec
    hooks: dict[str, list[Any]] = field(default_factory=dict)  # before_tool_call/after_tool_call
    compact_catalogue: bool | None = None  # None: compact when many tools

    def provider(self, name: str):  # -> Provider
        from crewbridge import providers

        if name in self.providers:
            from crewbridge.providers.generic import GenericProvider

            return GenericProvider(self.providers[name])
        return providers.load(name)

    def agent(self, agent_id: str) -> AgentSpec:
        if agent_id in self.agents:
            return self.agents[agent_id]
        raise AgentNotFound(f"agent '{agent_id}' not found; configured agents: {', '.join(self.agents)}")


def default_agents() -> dict[str, AgentSpec]:
    return {name: AgentSpec(id=name, provider=name) for name in ("claude", "gemini", "codex", "demo")}


def load_config(explicit: Path | None = None, cwd: Path | None = None) -> Config:
    """The configuration in force (built-in defaults until crew.yaml support lands)."""
    return Config(path=explicit, agents=default_agents())
