"""Meta tool: help, which describes crew and the tools the model is offered."""

from __future__ import annotations

from typing import Any

from crewbridge.base.templates import render
from crewbridge.errors import ToolNotFound
from crewbridge.toolkit.functions import tool
from crewbridge.toolkit.registry import ToolContext, ToolFailure

HELP_SCHEMA = {
    "type": "object",
    "properties": {
        "topic": {"type": "string", "description": "a tool name"},
    },
    "additionalProperties": False,
}


@tool(schema=HELP_SCHEMA, read_only=True, name="help")
def crew_help(ctx: ToolContext, topic: str = "") -> dict[str, Any]:
    """Describe crew and its tools; with a topic, a tool's description and schema."""
    registry = ctx.registry
    if registry is None:
        raise ToolFailure("help has no tool registry to describe; call it through a registry")
    if not topic.strip():
        return {
            "about": render("help.md", prefix=registry.prefix),
            "tools": {registry.qualified(spec.name): spec.summary for spec in registry},
        }
    try:
        spec = registry.resolve(topic.strip())
    except ToolNotFound as exc:
        raise ToolFailure(str(exc)) from None
    return {
        "name": registry.qualified(spec.name),
        "read_only": spec.read_only,
        "description": spec.description,
        "input_schema": spec.input_schema,
    }
