"""Figure 4: what the tool catalogue costs the model, in tokens (characters / 4), for the built-in
tools and for 100 more registered tools, full and compact; the skills section for 50 skills; and a
compact-mode round trip through
the real claude CLI and the mock model: the model asks crew:help for a tool's schema, then calls
the tool."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from crewbridge.tools import builtin_registry

from bench.common import Row, Settings
from bench.harness import claude_conversation, claude_env, run_loop
from crewbridge.base.modes import Mode
from crewbridge.base.skills import Skill
from crewbridge.config import AgentSpec
from crewbridge.toolkit.catalogue import (
    COMPACT_TOKENS,
    SKILLS_TOKENS,
    offered_tools,
    render_catalogue,
    skills_section,
    tokens,
)
from crewbridge.toolkit.registry import Tool, ToolContext, ToolRegistry
from crewbridge.work.policy import Policy

SYSTEMS = ("jira", "github", "slack", "sentry", "grafana", "postgres", "s3", "stripe", "notion", "k8s")
ACTIONS = ("search", "get", "list", "create", "update", "comment", "archive", "export", "count", "watch")
OBJECTS = (
    "issues",
    "pull requests",
    "messages",
    "errors",
    "dashboards",
    "rows",
    "objects",
    "payments",
    "pages",
    "pods",
)
PROPERTIES = {
    "project": {"type": "string", "description": "the project key"},
    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "at most this many"},
    "state": {"type": "string", "enum": ["open", "closed", "all"]},
    "labels": {"type": "array", "items": {"type": "string"}},
    "since": {"type": "string", "description": "ISO 8601 date"},
    "owner": {"type": "string", "description": "a user name or e-mail address"},
}


def generated_tools(count: int, seed: int = 4) -> list[Tool]:
    """`count` tools shaped like real integrations: a sentence or two of description and 2–5
    described properties (strings, enums, bounded integers, arrays)."""
    rng = random.Random(seed)
    tools = []
    for index in range(count):
        system, action = SYSTEMS[index % 10], ACTIONS[index // 10 % 10]
        thing = OBJECTS[index % 10]
        properties: dict[str, Any] = {"query": {"type": "string", "description": f"what to {action} in {system}"}}
        for extra in rng.sample(sorted(PROPERTIES), rng.randint(1, 4)):
            properties[extra] = PROPERTIES[extra]
        description = (
            f"{action.capitalize()} {thing} in {system} matching a query, newest "
            f"first.\n\nReturns each of the {thing} with its id, title, author and URL. "
            f"Needs the {system.upper()}_TOKEN environment variable."
        )
        schema = {"type": "object", "properties": properties, "required": ["query"], "additionalProperties": False}
        tools.append(
            Tool(
                name=f"{system}_{action}_{index:03}",
                description=description,
                input_schema=schema,
                func=lambda ctx, **data: {"found": 0},
                read_only=True,
            )
        )
    return tools


def registry_with(extra: list[Tool]) -> ToolRegistry:
    registry = builtin_registry()
    for spec in extra:
        registry.register(spec)
    return registry


def offered(registry: ToolRegistry, mode: Mode) -> ToolRegistry:
    """What an agent without skills is offered."""
    return offered_tools(Policy(AgentSpec(id="bench", provider="bench"), mode).offered(registry), {})


def generated_skills(count: int) -> list[Skill]:
    """`count` skills with descriptions as long as Claude Code's own (one or two sentences)."""
    return [
        Skill(
            f"{system}-{action}-{index:02}",
            f"{action.capitalize()} {OBJECTS[index % 10]} in {system} the way this team does: "
            f"naming, review checklist and the commands to run. Use when asked to {action} "
            f"{OBJECTS[index % 10]}.",
            Path("/skills") / str(index),
            "project",
        )
        for index, (system, action) in enumerate((SYSTEMS[i % 10], ACTIONS[i // 10 % 10]) for i in range(count))
    ]


def size(registry: ToolRegistry, mode: Mode, compact: bool) -> int:
    return tokens(render_catalogue(offered(registry, mode), mode, compact=compact))


def run(settings: Settings) -> list[Row]:
    rows = []
    many = registry_with(generated_tools(100))
    for label, registry in (("built-in tools", builtin_registry()), ("built-ins + 100 registered tools", many)):
        count = len(offered(registry, "execute"))
        rows.append(
            Row(
                "4 catalogue",
                f"{label} ({count}), full catalogue",
                size(registry, "execute", False),
                "tokens",
                note=f"query mode {size(registry, 'query', False)}; compact: "
                f"execute {size(registry, 'execute', True)}, "
                f"query {size(registry, 'query', True)}",
            )
        )
    full, compact = size(many, "execute", False), size(many, "execute", True)
    rows.append(
        Row(
            "4 catalogue",
            "built-ins + 100 registered tools, compact catalogue",
            compact,
            "tokens",
            target=float(COMPACT_TOKENS),
            note=f"{compact / full:.2f}× the full one",
        )
    )
    skills = generated_skills(50)
    section = skills_section(builtin_registry(), skills)
    rows.append(
        Row(
            "4 catalogue",
            "the skills section for 50 skills",
            tokens(section),
            "tokens",
            target=float(SKILLS_TOKENS),
            note=f"{len(section):,} characters; descriptions of "
            f"{min(len(s.description) for s in skills)}-{max(len(s.description) for s in skills)} "
            "characters, cut to fit",
        )
    )
    return rows + ([round_trip()] if settings.cli else [])


def round_trip() -> Row:
    """crew:help for a tool's schema, then a call to it, compact, through the real claude."""
    tools = generated_tools(100)
    target = tools[42]
    ran: list[dict[str, Any]] = []

    def search(ctx: ToolContext, **data: Any) -> dict[str, Any]:
        ran.append(data)
        return {"found": 1}

    target.func = search
    wanted = {"query": "login bug"}
    unique = target.input_schema["properties"]["query"]["description"]  # only in this schema

    def call(name: str, data: dict[str, Any]) -> str:
        return f"```json\n{json.dumps({'type': 'tool_use', 'name': name, 'input': data})}\n```\n"

    with claude_env() as (mock, env, work):
        mock.script(call("crew:help", {"topic": target.name}), call(f"crew:{target.name}", wanted), "Found one.")
        result = run_loop(
            claude_conversation(env, work),
            registry_with(tools),
            f"use {target.name} to find the login bug",
            work,
            compact=True,
        )
        first, after_help = mock.requests[0].text(), mock.requests[1].text()
    checks = {
        "the first prompt names the tool, not its schema": target.name in first and unique not in first,
        "crew:help answered with the schema": unique in after_help,
        "the tool ran with the model's input": ran == [wanted],
        "the answer came back": result.answer == "Found one.",
    }
    failed = [what for what, ok in checks.items() if not ok]
    if failed:
        raise RuntimeError(f"compact round trip: {'; '.join(failed)}")
    return Row(
        "4 catalogue",
        "compact round trip, real claude: crew:help, then the call",
        float(result.turns),
        "turns",
        target=3,
        note="; ".join(checks),
    )
