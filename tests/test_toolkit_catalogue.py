"""The catalogue: the mode's tools and schemas, the reply format, the stop rule, the guide."""

from __future__ import annotations

import json
import re

import pytest
from crewbridge.tools import builtin_registry

from crewbridge.errors import CrewError
from crewbridge.toolkit.catalogue import AUTO_COMPACT_TOKENS, COMPACT_TOKENS, build_prompt, render_catalogue, tokens
from crewbridge.toolkit.registry import Tool, ToolRegistry

FULL = builtin_registry()
QUERY = FULL.subset(lambda spec: spec.read_only)  # what policy offers in query mode


def plugin(name: str, summary: str, **properties: dict) -> Tool:
    schema = {"type": "object", "properties": properties, "required": list(properties)[:1]}
    return Tool(
        name=name,
        description=summary + "\n\nMore detail the catalogue never shows.",
        input_schema=schema,
        func=lambda ctx, **data: data,
    )


def with_plugins(count: int, summary: str) -> ToolRegistry:
    registry = builtin_registry()
    for n in range(count - len(registry)):
        registry.register(plugin(f"service_lookup_{n:02d}", summary, key={"type": "string"}, page={"type": "integer"}))
    return registry


def blocks(text: str) -> list[str]:
    return re.findall(r"^```json\n(.*?)\n```$", text, re.M | re.S)


def test_lists_exactly_the_tools_offered_with_their_compact_schemas() -> None:
    text = render_catalogue(QUERY, "query")
    for spec in QUERY:
        assert f"- crew:{spec.name}: {spec.summary}\n  " in text
        assert json.dumps(spec.input_schema, separators=(",", ":")) in text
    for hidden in ("write_file", "edit_file", "run_command"):
        assert hidden not in text
    assert "mode: query" in text


def test_execute_mode_lists_the_writing_tools_too() -> None:
    text = render_catalogue(FULL, "execute")
    assert all(f"crew:{name}:" in text for name in FULL.names())
    assert "mode: execute" in text


def test_shows_the_exact_reply_format_with_a_valid_example() -> None:
    (example,) = blocks(render_catalogue(FULL, "execute"))
    assert json.loads(example) == {"type": "tool_use", "name": "crew:read_file", "input": {"path": "<path>"}}


def test_says_how_to_make_several_calls_then_stop_and_wait() -> None:
    text = render_catalogue(FULL, "execute")
    assert "in one block as a JSON array, or write one block after another" in text
    assert "After your tool block(s), STOP and write nothing more" in text
    assert "The results come back in the next message; never guess or invent a result" in text


def test_has_the_decision_guide_preferring_native_tools() -> None:
    text = render_catalogue(FULL, "execute")
    guide = text.index("Decision guide:")
    assert text.index("1. If your own native tools can do the job, use them.") > guide
    assert "2. If not, use a crew tool." in text and "3. If no tool is needed, just answer." in text


def test_the_prefix_is_used_everywhere() -> None:
    text = render_catalogue(builtin_registry("kit"), "execute")
    assert '"name": "kit:read_file"' in text and "- kit:grep:" in text
    assert "crew:" not in text


def test_no_placeholder_is_left_unfilled() -> None:
    for compact in (False, True):
        assert "${" not in render_catalogue(FULL, "execute", compact=compact)


def test_example_input_uses_schema_examples_and_typed_placeholders() -> None:
    registry = ToolRegistry()
    properties = {
        "url": {"type": "string", "examples": ["https://example.org"]},
        "retries": {"type": "integer"},
        "verbose": {"type": ["boolean", "null"]},
        "tags": {"type": "array"},
        "opaque": True,
    }
    schema = {"type": "object", "properties": properties, "required": list(properties)}
    registry.register(
        Tool(name="fetch", description="Fetch a page.", input_schema=schema, func=lambda ctx, **data: data)
    )
    (example,) = blocks(render_catalogue(registry, "query"))
    assert json.loads(example)["input"] == {
        "url": "https://example.org",
        "retries": 1,
        "verbose": True,
        "tags": [],
        "opaque": "<opaque>",
    }


def test_no_tools_no_catalogue() -> None:
    assert render_catalogue(ToolRegistry(), "query") == ""


def test_builtin_catalogue_stays_small() -> None:
    assert tokens(render_catalogue(QUERY, "query")) < 600
    assert tokens(render_catalogue(FULL, "execute")) < 800


def test_compact_lists_names_and_summaries_and_points_to_help() -> None:
    text = render_catalogue(FULL, "execute", compact=True)
    assert all(f"- crew:{spec.name}: {spec.summary}" in text for spec in FULL)
    assert '"properties"' not in text.split("```", 2)[2]  # no schema after the example
    assert 'Call crew:help with {"topic": "<tool>"} for its schema' in text
    assert "STOP" in text and "Decision guide:" in text


@pytest.mark.slow
def test_compact_for_100_tools_fits_the_token_budget() -> None:
    registry = with_plugins(
        99,
        "Look up the records of an external service by key, "
        "with paging, sorting and filtering applied on the server side.",
    )
    registry.register(plugin("ping", "Check that a host answers."))
    text = render_catalogue(registry, "execute", compact=True)
    assert len(registry) == 100 and text.count("\n- crew:") == 100
    assert tokens(text) <= COMPACT_TOKENS
    assert "- crew:service_lookup_90: Look up the records" in text  # names are never cut
    assert text.endswith("\n- crew:ping: Check that a host answers.")  # short summaries stay whole


def test_compact_cuts_long_summaries_with_an_ellipsis_only_when_needed() -> None:
    registry = with_plugins(10, "x" * 300)
    lines = [
        line
        for line in render_catalogue(registry, "execute", compact=True).splitlines()
        if line.startswith("- crew:service_lookup")
    ]
    assert lines and all(line.endswith("…") and len(line.split(": ", 1)[1]) <= 80 for line in lines)


def test_compact_needs_the_help_tool() -> None:
    without_help = FULL.subset(lambda spec: spec.name != "help")
    with pytest.raises(CrewError, match=r"sends the model to crew:help .* but help is not offered"):
        render_catalogue(without_help, "execute", compact=True)


@pytest.mark.slow
def test_automatic_choice_is_full_for_the_builtins_and_compact_for_many_tools() -> None:
    assert render_catalogue(FULL, "execute", compact=None) == render_catalogue(FULL, "execute")
    many = with_plugins(100, "Look up the records of an external service by key.")
    assert tokens(render_catalogue(many, "execute")) > AUTO_COMPACT_TOKENS
    assert render_catalogue(many, "execute", compact=None) == render_catalogue(many, "execute", compact=True)
    many_without_help = many.subset(lambda spec: spec.name != "help")
    assert render_catalogue(many_without_help, "execute", compact=None) == render_catalogue(
        many_without_help, "execute"
    )


def test_build_prompt_puts_the_task_after_the_catalogue() -> None:
    catalogue = render_catalogue(QUERY, "query")
    prompt = build_prompt(catalogue, "what is in $HOME/notes.txt?")
    assert prompt.startswith(catalogue)
    assert prompt.endswith("\n\n[task]\nwhat is in $HOME/notes.txt?\n")


def test_build_prompt_without_tools_is_the_task_alone() -> None:
    assert build_prompt("", "hello") == "hello"
