"""Tools from plain typed functions: schema from type hints, descriptions from the docstring,
input converted to the annotated types, results made JSON."""

from __future__ import annotations

import dataclasses
import enum
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Dict, List, Literal, Optional, Sequence, TypedDict, Union

import pytest

from crewbridge.errors import CrewError
from crewbridge.toolkit.functions import function_schema, function_tool, parse_docstring, schema_of, tool
from crewbridge.toolkit.registry import ToolContext, ToolRegistry, as_tool


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(TypedDict, total=False):
    x: int
    label: str


class Span(TypedDict):
    start: int
    end: int


def call(func: Any, tmp_path: Path, **data: Any) -> Any:
    """Run `func` as a registered tool with `data` as the model's input; the result envelope."""
    registry = ToolRegistry()
    registry.register(function_tool(func))
    return registry.call(f"crew:{function_tool(func).name}", data, ToolContext(tmp_path))


# --- types → JSON Schema -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "hint, schema",
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (type(None), {"type": "null"}),
        (Any, {}),
        (list, {"type": "array"}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (List[str], {"type": "array", "items": {"type": "string"}}),
        (Sequence[float], {"type": "array", "items": {"type": "number"}}),
        (set[str], {"type": "array", "uniqueItems": True, "items": {"type": "string"}}),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (
            tuple[int, str],
            {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False, "minItems": 2},
        ),
        (dict, {"type": "object"}),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (
            Dict[str, List[int]],
            {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "integer"}}},
        ),
        (Optional[str], {"type": ["string", "null"]}),
        (int | None, {"type": ["integer", "null"]}),
        (Union[int, str], {"type": ["integer", "string"]}),
        (Union[list[int], None], {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}]}),
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, "x"], {"type": ["integer", "string"], "enum": [1, "x"]}),
        (Color, {"type": "string", "enum": ["red", "blue"]}),
        (Path, {"type": "string"}),
        (Annotated[int, "how many"], {"type": "integer", "description": "how many"}),
        (
            Span,
            {
                "type": "object",
                "properties": {"start": {"type": "integer"}, "end": {"type": "integer"}},
                "required": ["start", "end"],
                "additionalProperties": False,
            },
        ),
        (
            Point,
            {
                "type": "object",
                "properties": {"x": {"type": "integer"}, "label": {"type": "string"}},
                "additionalProperties": False,
            },
        ),
    ],
)
def test_each_supported_type_has_its_json_schema(hint: Any, schema: dict[str, Any]) -> None:
    assert schema_of(hint) == schema


@pytest.mark.parametrize(
    "hint, complaint",
    [
        (complex, "type complex has no JSON Schema; use str, int"),
        (dict[int, str], "JSON object keys are text, so use dict[str, …]"),
        (Literal[b"x"], "choices must be text, numbers, true/false or None"),
        (list[bytes], "type bytes has no JSON Schema"),
    ],
)
def test_a_type_json_cannot_carry_is_refused_naming_it(hint: Any, complaint: str) -> None:
    with pytest.raises(CrewError, match=complaint.replace("[", r"\[").replace("…", ".")):
        schema_of(hint, "parameter 'x'")


def test_the_function_schema_has_required_parameters_defaults_and_no_extra_keys() -> None:
    def search(pattern: str, limit: int = 10, *, regex: bool = False, colors: list[Color] = []) -> list[str]:
        """Search."""
        return []

    assert function_schema(search) == {
        "type": "object",
        "properties": {
            "pattern": {"type": "string"},
            "limit": {"type": "integer", "default": 10},
            "regex": {"type": "boolean", "default": False},
            "colors": {"type": "array", "items": {"type": "string", "enum": ["red", "blue"]}, "default": []},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }


def test_a_none_default_makes_the_parameter_accept_null() -> None:
    def greet(name: str = None) -> str:  # type: ignore[assignment]
        return name or "you"

    assert function_schema(greet)["properties"]["name"] == {"type": ["string", "null"], "default": None}


def test_a_default_that_is_not_json_is_left_out_but_the_parameter_stays_optional() -> None:
    sentinel = object()

    def pick(value: Any = sentinel) -> Any:
        return None

    schema = function_schema(pick)
    assert schema["properties"]["value"] == {} and "required" not in schema


def test_an_enum_default_is_shown_as_its_value() -> None:
    def paint(color: Color = Color.BLUE) -> None: ...

    assert function_schema(paint)["properties"]["color"]["default"] == "blue"


def test_keyword_arguments_open_the_object_to_extra_keys_of_their_type() -> None:
    def tag(name: str, **labels: str) -> None: ...

    assert function_schema(tag)["additionalProperties"] == {"type": "string"}

    def anything(**rest: Any) -> None: ...

    assert function_schema(anything)["additionalProperties"] is True


def test_an_unannotated_parameter_accepts_any_json() -> None:
    def echo(value, times: int = 1):  # type: ignore[no-untyped-def]
        return value

    assert function_schema(echo)["properties"]["value"] == {}


def test_the_context_parameter_is_not_part_of_the_schema() -> None:
    def by_name(ctx, path: str) -> str:  # type: ignore[no-untyped-def]
        return path

    def by_type(context: ToolContext, path: str) -> str:
        return path

    for func in (by_name, by_type):
        assert list(function_schema(func)["properties"]) == ["path"]


@pytest.mark.parametrize(
    "source, complaint",
    [
        ("def f(a: int, /, b: int): ...", "parameter 'a' cannot be passed by name"),
        ("def f(*items: str): ...", "parameter 'items' cannot be passed by name"),
        ("def f(a: 'Undefined'): ...", "the type of parameter 'a' cannot be resolved .NameError"),
        ("def f(a: complex): ...", r"tool function 'f': parameter 'a': type complex has no JSON Schema"),
    ],
)
def test_a_signature_that_cannot_take_a_json_object_is_refused(source: str, complaint: str) -> None:
    scope: dict[str, Any] = {}
    exec(source, scope)
    with pytest.raises(CrewError, match=complaint):
        function_schema(scope["f"])


# --- docstrings ----------------------------------------------------------------------------------


def test_google_docstring_gives_the_description_and_property_descriptions() -> None:
    def weather(city: str, unit: Literal["C", "F"] = "C", days: int = 1) -> dict[str, Any]:
        """Current weather for a city.

        Uses the nearest station.

        Args:
            city: The city's name,
                e.g. Paris.
            unit (str): Temperature unit.

        Returns:
            The reading.
        """
        return {}

    spec = function_tool(weather)
    assert spec.description == "Current weather for a city.\n\nUses the nearest station."
    properties = spec.input_schema["properties"]
    assert properties["city"]["description"] == "The city's name, e.g. Paris."
    assert properties["unit"] == {
        "type": "string",
        "enum": ["C", "F"],
        "description": "Temperature unit.",
        "default": "C",
    }
    assert "description" not in properties["days"]


def test_numpy_docstring_is_read() -> None:
    doc = parse_docstring("""Add numbers.

    Parameters
    ----------
    a : int
        The first,
        a whole number.
    b : int
        The second.

    Returns
    -------
    int
        The sum.
    """)
    assert doc.description == "Add numbers."
    assert doc.params == {"a": "The first, a whole number.", "b": "The second."}


def test_sphinx_docstring_is_read() -> None:
    doc = parse_docstring("""Move a file.

    :param str source: Where it is
        now.
    :param target: Where it goes.
    :returns: the new path
    :raises OSError: when it cannot
    """)
    assert doc == type(doc)("Move a file.", {"source": "Where it is now.", "target": "Where it goes."})


def test_sections_other_than_parameters_and_text_after_them_stay_out_of_the_description() -> None:
    doc = parse_docstring("""Summary.

    Example:
        f(1)
    Note: nothing here is a parameter.
    """)
    assert doc == type(doc)("Summary.", {})


def test_annotated_text_wins_over_the_docstring_and_no_docstring_means_no_description() -> None:
    def count(path: Annotated[str, "a file"]) -> int:
        """Count.

        Args:
            path: something else
        """
        return 0

    def bare(path: str) -> int:
        return 0

    assert function_schema(count)["properties"]["path"]["description"] == "a file"
    assert function_tool(bare).description == ""


# --- calling ---------------------------------------------------------------------------------------


def test_the_tool_receives_converted_input_and_returns_json(tmp_path: Path) -> None:
    @dataclasses.dataclass
    class Reading:
        where: Path
        color: Color
        pair: tuple[int, str]
        seen: set[int]

    def measure(
        where: PurePosixPath,
        color: Color,
        count: int,
        pair: tuple[int, str],
        seen: set[int],
        scale: Optional[float] = None,
    ) -> Reading:
        assert isinstance(where, PurePosixPath) and isinstance(color, Color)
        assert count == 3 and type(count) is int and scale is None
        return Reading(Path(where), color, pair, seen)

    result = call(measure, tmp_path, where="a/b", color="blue", count=3.0, pair=[1, "x"], seen=[3, 1])
    assert result.success, result.error
    assert result.data == {"where": "a/b", "color": "blue", "pair": [1, "x"], "seen": [1, 3]}


def test_invalid_input_is_refused_with_its_json_path_and_never_reaches_the_function(tmp_path: Path) -> None:
    calls = []

    def add(a: int, b: int = 0) -> int:
        calls.append((a, b))
        return a + b

    result = call(add, tmp_path, a="one")
    assert not result.success and "at $.a: 'one' is not of type 'integer'" in result.error
    assert not call(add, tmp_path, a=1, c=2).success  # no extra keys
    assert not call(add, tmp_path, b=2).success  # a is required
    assert calls == []
    assert call(add, tmp_path, a=1, b=2).data == 3


def test_the_context_is_passed_to_a_function_that_asks_for_it(tmp_path: Path) -> None:
    def where(ctx: ToolContext, name: str) -> str:
        return str(ctx.workdir / name)

    assert call(where, tmp_path, name="x").data == str(tmp_path / "x")


def test_an_async_function_is_awaited(tmp_path: Path) -> None:
    async def double(n: int) -> int:
        return n * 2

    assert call(double, tmp_path, n=21).data == 42


def test_an_exception_in_the_function_becomes_an_error_result(tmp_path: Path) -> None:
    def broken(n: int) -> int:
        raise ValueError("no such n")

    result = call(broken, tmp_path, n=1)
    assert (result.success, result.error) == (False, "ValueError: no such n")


# --- declaring ---------------------------------------------------------------------------------------


def test_the_tool_decorator_without_a_schema_derives_it(tmp_path: Path) -> None:
    @tool(read_only=True)
    def shout(text: str) -> str:
        """Say it louder."""
        return text.upper()

    spec = as_tool(shout)
    assert (spec.name, spec.read_only, spec.summary) == ("shout", True, "Say it louder.")
    assert spec.input_schema["required"] == ["text"]
    assert shout("a") == "A"  # the function itself is unchanged


def test_options_name_description_and_approval_are_kept() -> None:
    def f(x: int) -> int:
        """Doc."""
        return x

    spec = function_tool(f, name="times-two", description="Other.", needs_approval=True, timeout=5)
    assert (spec.name, spec.description, spec.needs_approval, spec.timeout) == ("times-two", "Other.", True, 5)


@pytest.mark.parametrize("name", [None, "crew:x", "1st", "two words"])
def test_a_name_the_model_could_not_write_is_refused(name: str | None) -> None:
    with pytest.raises(CrewError, match="must start with a letter and hold only letters, digits, _ and -"):
        function_tool(lambda: None, name=name)  # None: the lambda's own name, <lambda>
