"""Skill tool: a skill's instructions, read by the model once it has chosen the skill (crewbridge.base.skills)."""

from __future__ import annotations

from typing import Any

from crewbridge.base.skills import SKILL_TOOL, body, files, unknown
from crewbridge.toolkit.functions import tool
from crewbridge.toolkit.registry import ToolContext, ToolFailure

SKILL_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "description": "a skill's name, as the catalogue lists it"}},
    "required": ["name"],
    "additionalProperties": False,
}


@tool(schema=SKILL_SCHEMA, read_only=True, name=SKILL_TOOL)
def skill(ctx: ToolContext, name: str) -> dict[str, Any]:
    """Read a skill's instructions, then follow them.

    The files beside it come as paths for read_file.
    """
    chosen = ctx.skills.get(name.strip())
    if chosen is None:
        raise ToolFailure(str(unknown(name, ctx.skills)))
    try:
        return {"name": chosen.name, "instructions": ctx.cut(body(chosen)), "files": files(chosen)}
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolFailure(f"skill '{name}' cannot be read now ({exc}); tell the user") from None
