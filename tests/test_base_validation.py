"""JSON Schema checks: the predicates compiled for the usual schemas decide exactly as jsonschema's
Draft 2020-12 does, every error is jsonschema's own words, and a valid input of a built-in tool is
checked without importing jsonschema."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from crewbridge.base.validation import compile_schema, first_error
from crewbridge.errors import CrewError

TYPES = ["object", "array", "string", "boolean", "null", "number", "integer"]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(-5, 5, allow_nan=False)
    | st.sampled_from([0.0, 1.0, 2.0, -1.5, 2**70])
    | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), inner, max_size=3)
    ),
    max_leaves=8,
)


def schemas(depth: int = 2) -> st.SearchStrategy[Any]:
    """Schemas made of the keywords the predicates take."""
    sub = schemas(depth - 1) if depth else st.just({"type": "string"})
    keyword = st.one_of(
        st.tuples(
            st.just("type"),
            st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True),
        ),
        st.tuples(st.sampled_from(["minLength", "maxLength", "minItems", "maxItems"]), st.integers(0, 3)),
        st.tuples(
            st.sampled_from(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]),
            st.integers(-3, 3) | st.floats(-3, 3, allow_nan=False),
        ),
        st.tuples(
            st.just("enum"),
            st.lists(st.none() | st.booleans() | st.integers(-2, 2) | st.sampled_from([1.0, "a", ""]), max_size=4),
        ),
        st.tuples(st.just("required"), st.lists(st.sampled_from(["a", "b", "c"]), unique=True, max_size=3)),
        st.tuples(st.just("properties"), st.dictionaries(st.sampled_from(["a", "b", "c"]), sub, max_size=3)),
        st.tuples(st.just("additionalProperties"), st.booleans() | sub),
        st.tuples(st.just("items"), st.booleans() | sub),
        st.tuples(st.sampled_from(["description", "title"]), st.text(max_size=3)),
        st.tuples(st.just("default"), json_values),
    )
    return st.booleans() | st.lists(keyword, max_size=4).map(dict)


@settings(max_examples=300, deadline=None)
@given(schemas(), json_values)
def test_the_predicates_decide_as_jsonschema_does(schema: Any, instance: Any) -> None:
    if not isinstance(schema, dict):
        schema = {"items": schema}
    validator = compile_schema(schema, "x")
    assert validator.valid is not None, schema  # every schema drawn here is compiled to predicates
    assert validator.valid(instance) == Draft202012Validator(schema).is_valid(instance)


@settings(max_examples=100, deadline=None)
@given(schemas(), json_values)
def test_every_error_is_jsonschemas_best_match_with_its_json_path(schema: Any, instance: Any) -> None:
    if not isinstance(schema, dict):
        schema = {"items": schema}
    error = best_match(Draft202012Validator(schema).iter_errors(instance))
    got = first_error(compile_schema(schema, "x"), instance)
    if error is None:
        assert got is None
    else:
        path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        assert got == f"at {path}: {error.message}"


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": "^a"},  # a keyword the predicates do not take
        {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        {"type": "array", "uniqueItems": True},
        {"minLength": 1.0},  # a meta-schema integer, written as a float
        {"enum": [[1], {"a": 1}]},  # containers compared by jsonschema's own rules
    ],
)
def test_a_schema_of_other_keywords_is_checked_by_jsonschema(schema: dict[str, Any]) -> None:
    validator = compile_schema(schema, "x")
    assert validator.valid is None
    for instance in ("abc", 1, [1, 1], [[1]], ""):
        assert (first_error(validator, instance) is None) == Draft202012Validator(schema).is_valid(instance)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "text"},
        {"type": ["string", "string"]},
        {"required": ["a", "a"]},
        {"minLength": -1},
        {"minimum": "1"},
        {"properties": {"a": {"type": 3}}},
        {"additionalProperties": {"type": "nope"}},
    ],
)
def test_an_invalid_schema_is_refused_saying_where(schema: dict[str, Any]) -> None:
    with pytest.raises(CrewError, match=r"^tool 't' input_schema: invalid JSON Schema at \$"):
        compile_schema(schema, "tool 't' input_schema")


def test_a_trusted_schema_of_other_keywords_is_left_for_jsonschema_until_used() -> None:
    validator = compile_schema({"type": "string", "pattern": "^a"}, "x", trusted=True)
    assert first_error(validator, "b") == "at $: 'b' does not match '^a'"


def test_a_built_in_tools_valid_input_is_checked_without_jsonschema_and_an_invalid_one_with_its_words() -> None:
    inputs = [
        ("read_file", {"path": "a", "offset": 2}),
        ("run_command", {"command": "ls", "timeout": 1.5}),
        ("edit_file", {"path": "a", "old_string": "x", "new_string": ""}),
    ]
    script = (
        "import json, sys\n"
        "from crewbridge.tools import builtin_registry\n"
        "registry = builtin_registry()\n"
        f"ok = [registry.resolve(n).check(i) for n, i in {inputs!r}]\n"
        "before = 'jsonschema' in sys.modules\n"
        "bad = registry.resolve('run_command').check({'command': ''})\n"
        "print(json.dumps([ok, before, bad]))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    ok, imported, bad = json.loads(out.stdout)
    assert ok == [None, None, None]
    assert imported is False
    assert bad == "at $.command: '' should be non-empty"
