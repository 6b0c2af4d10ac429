"""The tool catalogue the model reads before its task, rendered from templates in prompts/."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from crewbridge.base.modes import Mode
from crewbridge.base.skills import SKILL_TOOL, Skill
from crewbridge.base.templates import render
from crewbridge.errors import CrewError
from crewbridge.toolkit.registry import Tool, ToolRegistry

AUTO_COMPACT_TOKENS = 4000  # with compact=None, a full catalogue larger than this is made compact
COMPACT_TOKENS = 2000  # a compact catalogue cuts summaries (never names) to stay within this
SUMMARY_CHARS = (24, 80)  # the shortest and longest a compact summary is cut to
SKILLS_TOKENS = 1500  # the skills section cuts descriptions (never names) to stay within this
SKILL_CHARS = (24, 300)  # the shortest and longest a skill's description is cut to
PLACEHOLDERS = {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}, "null": None}


def offered_tools(registry: ToolRegistry, skills: Mapping[str, Skill]) -> ToolRegistry:
    """The tools an agent is told of, of those its policy allows: the skill tool only with skills."""
    return registry if skills else registry.subset(lambda tool: tool.name != SKILL_TOOL)


def render_catalogue(
    registry: ToolRegistry, mode: Mode, *, compact: bool | None = False, skills: Sequence[Skill] = ()
) -> str:
    """The catalogue of the tools in `registry` (already filtered for `mode`), then the skills
    section when the skill tool is among them; "" when there is no tool.

    compact=True lists names and one-line summaries only and points to the help tool for schemas;
    compact=None picks compact when the full catalogue would exceed AUTO_COMPACT_TOKENS.
    """
    if not len(registry):
        return ""
    section = skills_section(registry, skills) if SKILL_TOOL in registry else ""
    return _tools(registry, mode, compact) + (f"\n\n{section}" if section else "")


def skills_section(registry: ToolRegistry, skills: Sequence[Skill]) -> str:
    """Names and descriptions of the skills, and when to read one; descriptions are cut to keep the
    section within SKILLS_TOKENS. "" without skills."""
    if not skills:
        return ""
    call = f'{registry.qualified(SKILL_TOOL)} {{"name": "<skill>"}}'
    names = [f"- {skill.name}: " for skill in skills]
    room = SKILLS_TOKENS * 4 - len(render("skills.md", call=call, skills="\n".join(names)).strip())
    cap = _summary_cap([len(skill.description) for skill in skills], room, SKILL_CHARS)
    lines = [name + _cut(skill.description, cap) for name, skill in zip(names, skills, strict=True)]
    return render("skills.md", call=call, skills="\n".join(lines)).strip()


def _tools(registry: ToolRegistry, mode: Mode, compact: bool | None) -> str:
    if compact is None:
        full = _render(registry, mode, compact=False)
        if tokens(full) <= AUTO_COMPACT_TOKENS or "help" not in registry:
            return full
        compact = True
    if compact and "help" not in registry:
        raise CrewError(
            f"the compact catalogue sends the model to {registry.qualified('help')} "
            "for schemas, but help is not offered; allow it or use the full catalogue"
        )
    return _render(registry, mode, compact=compact)


def build_prompt(catalogue: str, task: str) -> str:
    """The first message to the model: the catalogue, then the task (without tools, the task)."""
    return render("prompt.md", catalogue=catalogue, task=task) if catalogue else task


def tokens(text: str) -> int:
    """A model-independent token estimate: one token per four characters."""
    return -(-len(text) // 4)


def _render(registry: ToolRegistry, mode: Mode, *, compact: bool) -> str:
    first = next(iter(registry))
    example = {"type": "tool_use", "name": registry.qualified(first.name), "input": _example_input(first)}

    def page(lines: list[str]) -> str:
        template = "catalogue_tools_compact.md" if compact else "catalogue_tools.md"
        listing = render(template, prefix=registry.prefix, tools="\n".join(lines))
        return render("catalogue.md", mode=mode, example=json.dumps(example, ensure_ascii=False), tools=listing).strip()

    if not compact:
        return page([f"- {registry.qualified(t.name)}: {t.summary}\n  {_json(t.input_schema)}" for t in registry])
    names = [f"- {registry.qualified(t.name)}: " for t in registry]
    room = COMPACT_TOKENS * 4 - len(page(names))
    cap = _summary_cap([len(t.summary) for t in registry], room)
    return page([name + _cut(t.summary, cap) for name, t in zip(names, registry, strict=True)])


def _summary_cap(lengths: list[int], room: int, bounds: tuple[int, int] = SUMMARY_CHARS) -> int:
    """The longest cut that keeps all summaries within `room` characters, within `bounds`."""
    shortest, longest = bounds
    spent = 0
    for index, length in enumerate(sorted(lengths)):
        left = len(lengths) - index
        if spent + length * left > room:
            return min(max((room - spent) // left, shortest), longest)
        spent += length
    return longest


def _example_input(spec: Tool) -> dict[str, Any]:
    """An input with the tool's required properties: each one's schema example, or a placeholder."""
    props = spec.input_schema.get("properties", {})
    return {name: _placeholder(name, props.get(name)) for name in spec.input_schema.get("required", [])}


def _placeholder(name: str, prop: Any) -> Any:
    prop = prop if isinstance(prop, dict) else {}  # a property schema may be a bare true/false
    if prop.get("examples"):
        return prop["examples"][0]
    kind = prop.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    return PLACEHOLDERS.get(kind, f"<{name}>") if isinstance(kind, str) else f"<{name}>"


def _cut(summary: str, cap: int) -> str:
    return summary if len(summary) <= cap else summary[: cap - 1].rstrip() + "…"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
