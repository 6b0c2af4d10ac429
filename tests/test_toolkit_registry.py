"""The registry: declaration, prefixed names, validation with JSON paths, the result envelope."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from crewbridge.tools import builtin_registry
from jsonschema import Draft202012Validator

from crewbridge.base.validation import compile_schema, first_error
from crewbridge.errors import CrewError, ToolNotFound
from crewbridge.toolkit.functions import tool
from crewbridge.toolkit.registry import Tool, ToolContext, ToolFailure, ToolRegistry, as_tool

ITEMS_SCHEMA = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        },
        "count": {"type": "integer", "minimum": 0},
    },
    "required": ["items"],
    "additionalProperties": False,
}


@tool(schema=ITEMS_SCHEMA, read_only=True)
def count_items(ctx: ToolContext, items: list[dict[str, str]], count: int = 0) -> dict[str, int]:
    """Count the items.

    Longer description on later lines.
    """
    return {"count": len(items) + count}


@tool(schema={"type": "object", "properties": {"text": {"type": "string"}}})
def shout(ctx: ToolContext, text: str = "") -> str:
    """Say it louder."""
    return ctx.cut(text.upper(), limit=5)


def registry(prefix: str = "crew") -> ToolRegistry:
    out = ToolRegistry(prefix)
    out.register_all([count_items, shout])
    return out


def ctx(tmp_path: Path, **options: Any) -> ToolContext:
    return ToolContext(tmp_path, **options)


# --- declaring and registering ----------------------------------------------------------------


def test_decorator_declares_name_description_schema_and_read_only() -> None:
    spec = as_tool(count_items)
    assert (spec.name, spec.read_only, spec.input_schema) == ("count_items", True, ITEMS_SCHEMA)
    assert spec.summary == "Count the items."
    assert spec.description == "Count the items.\n\nLonger description on later lines."
    assert as_tool(shout).read_only is False


def test_registering_the_same_name_twice_is_refused_unless_replacing() -> None:
    tools = registry()
    with pytest.raises(CrewError, match="tool 'shout' is registered twice; rename one of them"):
        tools.register(shout)
    assert tools.register(shout, replace=True).name == "shout"


def test_an_undecorated_function_is_refused() -> None:
    with pytest.raises(CrewError, match=r"is not a tool; decorate it with @crewbridge\.tool"):
        ToolRegistry().register(lambda ctx: None)


def test_an_invalid_schema_is_refused_at_registration_with_its_path() -> None:
    where = r"tool 'bad' input_schema: invalid JSON Schema at \$\.properties\.n\.type"
    with pytest.raises(CrewError, match=where):
        Tool(
            name="bad",
            description="",
            func=print,
            input_schema={"type": "object", "properties": {"n": {"type": "integr"}}},
        )
    with pytest.raises(CrewError, match="tool 'bad' output_schema: invalid JSON Schema"):
        Tool(name="bad", description="", func=print, input_schema={}, output_schema={"type": 5})


def test_names_are_exposed_with_the_prefix() -> None:
    assert registry().qualified("shout") == "crew:shout"
    assert registry("kit").qualified("shout") == "kit:shout"
    assert registry().names() == ["count_items", "shout"]
    assert "shout" in registry() and len(registry()) == 2


def test_resolve_accepts_qualified_and_bare_names() -> None:
    tools = registry("kit")
    assert tools.resolve("kit:shout").name == "shout"
    assert tools.resolve("shout").name == "shout"


def test_resolve_suggests_the_nearest_name_or_lists_the_tools() -> None:
    messages = {}
    for name in ("crew:shuot", "other:shout", "crew:zzz"):
        with pytest.raises(ToolNotFound) as caught:
            registry().resolve(name)
        messages[name] = str(caught.value)
    assert messages == {
        "crew:shuot": "unknown tool 'crew:shuot'; did you mean 'crew:shout'?",
        "other:shout": "unknown tool 'other:shout'; did you mean 'crew:shout'?",
        "crew:zzz": "unknown tool 'crew:zzz'; available: crew:count_items, crew:shout",
    }


def test_subset_keeps_the_prefix_and_the_chosen_tools() -> None:
    only_read = registry("kit").subset(lambda spec: spec.read_only)
    assert only_read.names() == ["count_items"] and only_read.prefix == "kit"


# --- calling: always an envelope --------------------------------------------------------------


def test_success_envelope_shape(tmp_path: Path) -> None:
    data = {"items": [{"name": "a"}], "count": 2}
    envelope = registry().call("crew:count_items", data, ctx(tmp_path))
    out = envelope.to_dict()
    assert set(out) == {"success", "data", "error", "metadata"}
    assert (out["success"], out["data"], out["error"]) == (True, {"count": 3}, None)
    assert out["metadata"]["tool"] == "count_items" and out["metadata"]["truncated"] is False
    assert isinstance(out["metadata"]["duration_ms"], float) and out["metadata"]["duration_ms"] >= 0


def test_unknown_tool_is_an_error_envelope(tmp_path: Path) -> None:
    out = registry().call("crew:shuot", {}, ctx(tmp_path)).to_dict()
    assert out["success"] is False and out["data"] is None
    assert out["error"] == "unknown tool 'crew:shuot'; did you mean 'crew:shout'?"
    assert out["metadata"]["tool"] == "crew:shuot"


@pytest.mark.parametrize(
    "data, error",
    [
        ({"items": [{"name": "a"}, {"name": 5}]}, "at $.items[1].name: 5 is not of type 'string'"),
        ({"items": [{}]}, "at $.items[0]: 'name' is a required property"),
        ({"items": [], "count": -1}, "at $.count: -1 is less than the minimum of 0"),
        ({}, "at $: 'items' is a required property"),
        ({"items": [], "extra": 1}, "at $: Additional properties are not allowed ('extra' was unexpected)"),
        ([1, 2], "at $: input must be an object, got list"),
        ("text", "at $: input must be an object, got str"),
    ],
)
def test_invalid_input_is_an_error_naming_its_json_path(tmp_path: Path, data: Any, error: str) -> None:
    out = registry().call("crew:count_items", data, ctx(tmp_path)).to_dict()
    assert out["success"] is False
    assert out["error"] == f"invalid input for crew:count_items {error}"


def test_truncation_by_a_tool_shows_in_the_metadata(tmp_path: Path) -> None:
    out = registry().call("crew:shout", {"text": "hello world"}, ctx(tmp_path)).to_dict()
    assert out["data"] == "HELLO\n[… truncated: 6 more characters not shown]"
    assert out["metadata"]["truncated"] is True
    assert registry().call("crew:shout", {"text": "hi"}, ctx(tmp_path)).truncated is False


def make_tool(name: str, func: Any, timeout: float | None = None) -> ToolRegistry:
    tools = ToolRegistry()
    tools.register(Tool(name=name, description="", input_schema={"type": "object"}, func=func, timeout=timeout))
    return tools


def test_a_tool_failure_becomes_its_message(tmp_path: Path) -> None:
    def fail(ctx: ToolContext) -> None:
        raise ToolFailure("the thing is missing; create it first")

    out = make_tool("fail", fail).call("crew:fail", {}, ctx(tmp_path)).to_dict()
    assert (out["success"], out["error"]) == (False, "the thing is missing; create it first")


def test_a_crashing_tool_becomes_an_error_envelope(tmp_path: Path) -> None:
    def crash(ctx: ToolContext) -> None:
        raise KeyError("oops")

    out = make_tool("crash", crash).call("crew:crash", {}, ctx(tmp_path)).to_dict()
    assert (out["success"], out["error"]) == (False, "KeyError: 'oops'")


def test_a_tool_calling_sys_exit_does_not_end_crew_or_look_successful(tmp_path: Path) -> None:
    out = make_tool("quit", lambda ctx: sys.exit(3)).call("crew:quit", {}, ctx(tmp_path)).to_dict()
    assert (out["success"], out["error"]) == (False, "SystemExit: 3")


def test_data_that_is_not_json_is_an_error_envelope(tmp_path: Path) -> None:
    tools = make_tool("path", lambda ctx: {"where": tmp_path})
    out = tools.call("crew:path", {}, ctx(tmp_path)).to_dict()
    assert out["success"] is False
    assert out["error"] == "TypeError: Object of type PosixPath is not JSON serializable"


@pytest.mark.slow
def test_a_tool_that_overruns_its_timeout_is_reported_not_waited_for(tmp_path: Path) -> None:
    release = threading.Event()
    tools = make_tool("hang", lambda ctx: release.wait(30), timeout=0.05)
    try:
        out = tools.call("crew:hang", {}, ctx(tmp_path)).to_dict()
    finally:
        release.set()
    assert (out["success"], out["error"]) == (False, "tool 'hang' timed out after 0.05s")


@pytest.mark.slow
def test_the_context_timeout_applies_when_the_tool_sets_none(tmp_path: Path) -> None:
    release = threading.Event()
    tools = make_tool("hang", lambda ctx: release.wait(30))
    try:
        out = tools.call("crew:hang", {}, ctx(tmp_path, timeout=0.05)).to_dict()
    finally:
        release.set()
    assert out["error"] == "tool 'hang' timed out after 0.05s"


def test_the_tool_sees_the_registry_the_call_came_through(tmp_path: Path) -> None:
    seen: list[Any] = []
    tools = make_tool("peek", lambda ctx: seen.append(ctx.registry))
    tools.call("crew:peek", {}, ctx(tmp_path))
    offered = tools.subset(lambda spec: True)
    tools.call("crew:peek", {}, ctx(tmp_path, registry=offered))
    assert seen == [tools, offered]


# --- validation helpers -----------------------------------------------------------------------


def test_first_error_is_none_for_valid_input() -> None:
    assert first_error(compile_schema(ITEMS_SCHEMA, "x"), {"items": []}) is None


def test_first_error_picks_the_most_relevant_violation() -> None:
    schema = {"type": "object", "properties": {"mode": {"enum": ["a", "b"]}, "n": {"type": "integer"}}}
    assert first_error(compile_schema(schema, "x"), {"mode": "c"}) == "at $.mode: 'c' is not one of ['a', 'b']"


ANNOTATIONS = {
    "$schema",
    "$id",
    "$comment",
    "$defs",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
}
KEYWORDS = ANNOTATIONS | set(Draft202012Validator.VALIDATORS)
SUBSCHEMAS = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")


def schema_problems(schema: Any, where: str = "$") -> list[str]:
    """What check_schema lets through but is a mistake: a keyword JSON Schema does not have (a
    typo, silently ignored by validation), a required name that is no property."""
    if not isinstance(schema, dict):
        return []
    found = [f"{where}: unknown keyword {key!r}" for key in schema if key not in KEYWORDS]
    properties = schema.get("properties") or {}
    found += [
        f"{where}: required {name!r} is not a property"
        for name in schema.get("required", [])
        if properties and name not in properties
    ]
    for name, sub in properties.items():
        found += schema_problems(sub, f"{where}.{name}")
    for key in SUBSCHEMAS:
        found += schema_problems(schema.get(key), f"{where}/{key}")
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for n, sub in enumerate(schema.get(key) or []):
            found += schema_problems(sub, f"{where}/{key}[{n}]")
    for name, sub in (schema.get("$defs") or {}).items():
        found += schema_problems(sub, f"{where}/$defs/{name}")
    return found


def test_every_built_in_schema_is_a_json_schema_without_mistakes() -> None:
    # crew's own tools compile their schemas when first used (start-up cost): this checks them all.
    from crewbridge.config import Config
    from crewbridge.engine.asking import Asker

    specs = [*builtin_registry(), Asker(Config(), Path.cwd()).tool()]
    assert {"read_file", "write_file", "edit_file", "list_files", "grep", "run_command", "help", "ask"} <= {
        spec.name for spec in specs
    }
    for spec in specs:
        for schema in (spec.input_schema, spec.output_schema):
            if schema is not None:
                compile_schema(schema, spec.name)
                assert schema_problems(schema) == [], spec.name


def test_the_schema_check_finds_what_check_schema_lets_through() -> None:
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string", "minlength": 1}},
        "required": ["paht"],
        "additionalProperties": False,
    }
    compile_schema(schema, "x")  # a valid JSON Schema all the same
    assert schema_problems(schema) == ["$: required 'paht' is not a property", "$.path: unknown keyword 'minlength'"]


def test_a_built_in_tool_checks_its_input_with_the_schema_it_compiled() -> None:
    read_file = builtin_registry().resolve("crew:read_file")
    assert read_file.check({"path": 1}) == "at $.path: 1 is not of type 'string'"
    assert read_file.check({"path": "a.txt"}) is None


def test_prepare_readies_the_opening_of_paths_without_running_any_tool():
    from crewbridge.tools import builtin_registry

    from crewbridge.system import beneath

    beneath._syscall.cache_clear()
    registry = builtin_registry()
    registry.prepare()
    assert beneath._syscall.cache_info().currsize == 1  # ctypes and openat2 loaded: the first open waits for neither
