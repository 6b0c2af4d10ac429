"""Tools from plain typed functions: the input schema comes from the type hints, the description
from the docstring (summary and body; its Args/Parameters section describes each property).

    def weather(city: str, unit: Literal["C", "F"] = "C") -> dict:
        '''Current weather for a city.

        Args:
            city: The city's name, e.g. Paris.
            unit: Temperature unit.
        '''

gives {"type": "object", "properties": {"city": {"type": "string", "description": "The city's name,
e.g. Paris."}, "unit": {"type": "string", "enum": ["C", "F"], "default": "C", "description": …}},
"required": ["city"], "additionalProperties": false}. Google, NumPy and Sphinx docstrings are read.

A first parameter named `ctx` (or annotated ToolContext) receives the call's ToolContext and is not
part of the schema. Enum, Path, tuple and set parameters are built from their JSON values, and an
integral float sent for an int (3.0) arrives as 3. What the function returns is made JSON data
(dataclasses, enums, paths, tuples and sets included).
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import re
import types
import typing
from collections import abc
from collections.abc import Callable
from pathlib import PurePath
from typing import Any

from crewbridge.errors import CrewError
from crewbridge.toolkit.registry import Tool, ToolContext

SUPPORTED = (
    "str, int, float, bool, None, list[…], tuple[…], set[…], dict[str, …], Optional[…], "
    "Union[…], Literal[…], an Enum, a TypedDict, Path, Any, Annotated[…, 'description']"
)
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_PRIMITIVES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
_ARRAYS = (list, abc.Sequence, abc.MutableSequence, abc.Iterable, abc.Collection)
_SETS = (set, frozenset, abc.Set, abc.MutableSet)
_MAPPINGS = (dict, abc.Mapping, abc.MutableMapping)

# --- docstrings ----------------------------------------------------------------------------------

_SECTION = re.compile(
    r"(?i)^(args|arguments|parameters|params|keyword args|keyword arguments|"
    r"other parameters|returns?|yields?|raises|examples?|notes?|attributes|"
    r"see also|warnings?|references|todo):?$"
)
_PARAM_SECTIONS = {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments", "other parameters"}
_RULE = re.compile(r"^-{3,}$")  # NumPy underlines a section's title
_GOOGLE_ITEM = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:(?:\s+(.*))?$")  # name (type): text
_NUMPY_ITEM = re.compile(r"^\*{0,2}(\w+)\s*(?::.*)?$")  # name : type
_SPHINX_PARAM = re.compile(r"^:(?:param|parameter|arg|argument|key|keyword)\s+(?:[^:]*\s)?(\w+)\s*:(.*)$")


@dataclasses.dataclass
class Docstring:
    """A docstring taken apart: what the function does, and what each parameter is."""

    description: str
    params: dict[str, str]


def parse_docstring(doc: str | None) -> Docstring:
    """The description (the text before any section) and the parameter descriptions of a Google,
    NumPy or Sphinx style docstring."""
    lines = [line.rstrip() for line in inspect.cleandoc(doc or "").splitlines()]
    body: list[str] = []
    params: dict[str, str] = {}
    i = 0
    while i < len(lines):
        kind = _section_kind(lines, i)
        if kind is None:
            if i == len(body):  # still in the description: nothing but description lines so far
                body.append(lines[i])
            i += 1
            continue
        line = lines[i]
        first = i + 2 if kind == "numpy" else i + 1
        end = _section_end(lines, first, numpy=kind == "numpy")
        title = _SECTION.match(line.rstrip(":"))
        if kind == "sphinx" and (match := _SPHINX_PARAM.match(line)):
            params[match.group(1)] = _join([match.group(2), *lines[first:end]])
        elif kind != "sphinx" and title and title.group(1).lower() in _PARAM_SECTIONS:
            params.update(_items(lines[first:end], _NUMPY_ITEM if kind == "numpy" else _GOOGLE_ITEM))
        i = end
    return Docstring("\n".join(body).strip(), {name: text for name, text in params.items() if text})


def _section_kind(lines: list[str], i: int) -> str | None:
    """Whether line `i` starts a section: "google" (Args:), "numpy" (an underlined title),
    "sphinx" (a :field:), or None."""
    line = lines[i]
    if not line or line[0].isspace():
        return None
    if i + 1 < len(lines) and _RULE.match(lines[i + 1].strip()):
        return "numpy"
    if line.startswith(":"):
        return "sphinx"
    if line.endswith(":") and _SECTION.match(line):
        return "google"
    return None


def _section_end(lines: list[str], start: int, *, numpy: bool) -> int:
    """Where a section whose content starts at `start` ends: at the next unindented line, or for
    NumPy (whose items are unindented) at the next section."""
    for j in range(start, len(lines)):
        if numpy and _section_kind(lines, j) is not None:
            return j
        if not numpy and lines[j] and not lines[j][0].isspace():
            return j
    return len(lines)


def _items(lines: list[str], item: re.Pattern[str]) -> dict[str, str]:
    """name → description from one parameter section: items start at its least indented lines,
    more indented lines continue them."""
    base = min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=0)
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        at_base = line.strip() and len(line) - len(line.lstrip()) == base
        match = item.match(line.strip()) if at_base else None
        if match:
            current = out.setdefault(match.group(1), [])
            if item is _GOOGLE_ITEM and match.group(2):
                current.append(match.group(2))
        elif current is not None:
            current.append(line)
    return {name: _join(parts) for name, parts in out.items()}


def _join(parts: list[str]) -> str:
    return " ".join(part.strip() for part in parts if part.strip())


# --- schemas -------------------------------------------------------------------------------------


def function_schema(func: Callable[..., Any]) -> dict[str, Any]:
    """The JSON Schema of `func`'s keyword arguments (the ctx parameter left out)."""
    hints, parameters, _ = _signature(func)
    described = parse_docstring(func.__doc__).params
    properties: dict[str, Any] = {}
    required: list[str] = []
    extra: Any = False
    for param in parameters:
        where = f"{_name_of(func)}: parameter '{param.name}'"
        hint = hints.get(param.name, Any)
        if param.kind is param.VAR_KEYWORD:
            extra = schema_of(hint, where) or True
            continue
        if param.default is None and not _allows_none(hint):
            # `x: str = None` means an optional str; Optional, as `hint | None` fails on a string hint
            hint = typing.Optional[hint]  # noqa: UP045
        schema = schema_of(hint, where)
        if param.name in described and "description" not in schema:
            schema["description"] = described[param.name]
        if param.default is param.empty:
            required.append(param.name)
        elif _is_json(param.default):
            schema["default"] = _plain(param.default)
        properties[param.name] = schema
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = extra
    return out


def schema_of(hint: Any, where: str = "type") -> dict[str, Any]:
    """The JSON Schema of one type hint; CrewError naming `where` for a type JSON cannot carry."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any or hint is object or hint is inspect.Parameter.empty:
        return {}
    if origin is typing.Annotated:
        schema = schema_of(args[0], where)
        note = next((meta for meta in args[1:] if isinstance(meta, str)), None)
        return {**schema, "description": note} if note else schema
    if hint in _PRIMITIVES:
        return {"type": _PRIMITIVES[hint]}
    if origin in (typing.Union, types.UnionType):
        return _union([schema_of(arg, where) for arg in args])
    if origin is typing.Literal:
        return _enum(list(args), where)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum([member.value for member in hint], where)
    if isinstance(hint, type) and issubclass(hint, PurePath):
        return {"type": "string"}
    if typing.is_typeddict(hint):
        return _typed_dict(hint, where)
    container = origin or hint
    if container is tuple:
        return _tuple(args, where)
    if container in _SETS:
        return {"type": "array", "uniqueItems": True, **({"items": schema_of(args[0], where)} if args else {})}
    if container in _ARRAYS:
        return {"type": "array", **({"items": schema_of(args[0], where)} if args else {})}
    if container in _MAPPINGS:
        if args and args[0] not in (str, Any):
            raise CrewError(f"{where}: JSON object keys are text, so use dict[str, …], not {_shown(hint)}")
        return {"type": "object", **({"additionalProperties": schema_of(args[1], where)} if args else {})}
    raise CrewError(f"{where}: type {_shown(hint)} has no JSON Schema; use {SUPPORTED}")


def _union(parts: list[dict[str, Any]]) -> dict[str, Any]:
    if any(part == {} for part in parts):
        return {}
    if all(set(part) == {"type"} for part in parts):  # str | None → {"type": ["string", "null"]}
        names: list[str] = []
        for part in parts:
            for name in part["type"] if isinstance(part["type"], list) else [part["type"]]:
                if name not in names:
                    names.append(name)
        return {"type": names[0] if len(names) == 1 else names}
    return {"anyOf": parts}


def _enum(values: list[Any], where: str) -> dict[str, Any]:
    if not values or not all(type(value) in _PRIMITIVES for value in values):
        raise CrewError(f"{where}: choices must be text, numbers, true/false or None, not {values!r}")
    kinds = list(dict.fromkeys(_PRIMITIVES[type(value)] for value in values))
    return {"type": kinds[0] if len(kinds) == 1 else kinds, "enum": values}


def _tuple(args: tuple[Any, ...], where: str) -> dict[str, Any]:
    if not args:
        return {"type": "array"}
    if len(args) == 2 and args[1] is Ellipsis:
        return {"type": "array", "items": schema_of(args[0], where)}
    if args == ((),):  # tuple[()]: the empty tuple
        return {"type": "array", "maxItems": 0}
    return {
        "type": "array",
        "prefixItems": [schema_of(arg, where) for arg in args],
        "items": False,
        "minItems": len(args),
    }


def _typed_dict(hint: Any, where: str) -> dict[str, Any]:
    fields = typing.get_type_hints(hint, include_extras=True)
    properties = {name: schema_of(field, f"{where}, key '{name}'") for name, field in fields.items()}
    out: dict[str, Any] = {"type": "object", "properties": properties}
    needed = [name for name in fields if name in hint.__required_keys__]
    if needed:
        out["required"] = needed
    out["additionalProperties"] = False
    return out


def _allows_none(hint: Any) -> bool:
    if hint is Any or hint is type(None) or hint is None:
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return _allows_none(args[0])
    if origin in (typing.Union, types.UnionType):
        return any(_allows_none(arg) for arg in args)
    return origin is typing.Literal and None in args


def _is_json(value: Any) -> bool:
    try:
        json.dumps(_plain(value))
    except (TypeError, ValueError):
        return False
    return True


def _shown(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


# --- tools ---------------------------------------------------------------------------------------


def tool(
    *,
    schema: dict[str, Any] | None = None,
    read_only: bool = False,
    name: str | None = None,
    output_schema: dict[str, Any] | None = None,
    timeout: float | None = None,
    needs_approval: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a plain function as a tool; its docstring is the description. Without `schema`, the
    input schema comes from the type hints and the docstring."""

    def wrap(func: Callable[..., Any]) -> Callable[..., Any]:
        if schema is None:
            func.__crew_tool__ = function_tool(  # type: ignore[attr-defined]
                func,
                name=name,
                read_only=read_only,
                output_schema=output_schema,
                timeout=timeout,
                needs_approval=needs_approval,
            )
            return func
        func.__crew_tool__ = Tool(  # type: ignore[attr-defined]
            name=name or func.__name__,
            description=inspect.cleandoc(func.__doc__ or ""),
            input_schema=schema,
            func=func,
            read_only=read_only,
            output_schema=output_schema,
            timeout=timeout,
            needs_approval=needs_approval,
        )
        return func

    return wrap


def function_tool(
    func: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    output_schema: dict[str, Any] | None = None,
    timeout: float | None = None,
    needs_approval: bool = False,
) -> Tool:
    """A Tool that calls `func` with the model's (validated, converted) input."""
    tool_name = name or str(getattr(func, "__name__", ""))
    if not NAME.match(tool_name):
        raise CrewError(
            f"tool name '{tool_name}' must start with a letter and hold only letters, digits, _ and -; pass name="
        )
    return Tool(
        name=tool_name,
        description=parse_docstring(func.__doc__).description if description is None else description,
        input_schema=function_schema(func),
        func=_caller(func),
        read_only=read_only,
        output_schema=output_schema,
        timeout=timeout,
        needs_approval=needs_approval,
    )


def _caller(func: Callable[..., Any]) -> Callable[..., Any]:
    """`call(ctx, **input)` as the registry calls tools: input converted, ctx passed if wanted."""
    hints, parameters, wants_ctx = _signature(func)
    converters = {
        param.name: convert for param in parameters if (convert := _converter(hints.get(param.name, Any))) is not None
    }

    def call(ctx: ToolContext, **data: Any) -> Any:
        args = {key: converters[key](value) if key in converters else value for key, value in data.items()}
        out = func(ctx, **args) if wants_ctx else func(**args)
        if inspect.isawaitable(out):
            import asyncio  # for start-up speed: slow to import, and only async tools need it

            out = asyncio.run(_awaited(out))  # the registry runs tools in a thread of their own
        return _plain(out)

    return call


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _signature(func: Callable[..., Any]) -> tuple[dict[str, Any], list[inspect.Parameter], bool]:
    """The resolved type hints, the parameters that make up the input, and whether the first
    parameter takes the ToolContext."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise CrewError(f"{_name_of(func)}: cannot read its signature ({exc}); wrap it in a plain function") from None
    parameters = list(signature.parameters.values())
    first = parameters[0] if parameters else None
    wants_ctx = first is not None and (first.name == "ctx" or _hint(func, first) is ToolContext)
    if wants_ctx:
        parameters = parameters[1:]
    for param in parameters:
        if param.kind in (param.POSITIONAL_ONLY, param.VAR_POSITIONAL):
            raise CrewError(
                f"{_name_of(func)}: parameter '{param.name}' cannot be passed by name; tool "
                "input is an object, so every parameter needs a name"
            )
    hints = {param.name: _hint(func, param) for param in parameters}
    return hints, parameters, wants_ctx


def _hint(func: Callable[..., Any], param: inspect.Parameter) -> Any:
    """The resolved type hint of one parameter (a string annotation evaluated where `func` was
    defined); the return annotation is never needed, so a type it names may be local."""
    if param.annotation is param.empty:
        return Any
    home = inspect.unwrap(func if inspect.isroutine(func) else type(func).__call__)
    holder = types.SimpleNamespace(__annotations__={param.name: param.annotation})
    try:
        return typing.get_type_hints(holder, getattr(home, "__globals__", {}), include_extras=True)[param.name]
    except Exception as exc:  # a hint naming something undefined, or not a type at all
        raise CrewError(
            f"{_name_of(func)}: the type of parameter '{param.name}' cannot be resolved "
            f"({type(exc).__name__}: {exc}); define or import it at module level"
        ) from None


def _name_of(func: Callable[..., Any]) -> str:
    return f"tool function '{getattr(func, '__qualname__', None) or repr(func)}'"


def _converter(hint: Any) -> Callable[[Any], Any] | None:
    """How to turn the JSON value for `hint` into what the function expects (None: as it is)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return _converter(args[0])
    if origin in (typing.Union, types.UnionType):
        real = [arg for arg in args if arg is not type(None)]
        inner = _converter(real[0]) if len(real) == 1 else None
        return None if inner is None else lambda value: None if value is None else inner(value)
    if hint is int:
        return lambda value: int(value) if isinstance(value, float) else value
    if isinstance(hint, type) and issubclass(hint, (enum.Enum, PurePath)):
        return hint
    container = origin or hint
    if container is tuple:
        repeat = len(args) == 2 and args[1] is Ellipsis
        each = [_converter(arg) for arg in args if arg is not Ellipsis and arg != ()]

        def to_tuple(value: list[Any]) -> tuple[Any, ...]:
            converters = each * len(value) if repeat else each
            return (
                tuple(convert(v) if convert else v for convert, v in zip(converters, value, strict=False))
                if any(each)
                else tuple(value)
            )

        return to_tuple
    item = _converter(args[0]) if args else None
    if container in _SETS:
        built = frozenset if container is frozenset else set
        return lambda value: built(map(item, value) if item else value)
    if container in _ARRAYS and item is not None:
        return lambda value: [item(v) for v in value]
    if container in _MAPPINGS and len(args) == 2 and (convert := _converter(args[1])) is not None:
        return lambda value: {key: convert(v) for key, v in value.items()}
    return None


def _plain(value: Any) -> Any:
    """`value` as JSON data: dataclasses, enums, paths, tuples and sets become what JSON holds."""
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if isinstance(value, PurePath):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {key if isinstance(key, str) else str(_plain(key)): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_plain(item) for item in value]
        if isinstance(value, (set, frozenset)):
            try:
                items.sort()  # a set has no order of its own: give a stable one where there is one
            except TypeError:
                pass
        return items
    return value
