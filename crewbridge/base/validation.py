"""JSON Schema checks: one compiled validator per schema, errors from best_match with their JSON path.

A schema made only of the keywords tools' inputs use (type, properties, required,
additionalProperties, items, enum, the bounds on lengths, sizes and numbers, and annotations) is
compiled into plain Python predicates that decide whether an input is valid: crew's own tools and
most function tools are checked without importing jsonschema (a tenth of a second of CPU, which
sat on a run's first tool call). jsonschema stays the authority: it checks every other schema, and
it words every error (its best_match, so the message and its JSON path are jsonschema's own), loaded
only when an input is invalid. The predicates accept what jsonschema's Draft 2020-12 accepts, no
more and no less (tests/test_base_validation.py holds them to it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from crewbridge.errors import CrewError

if TYPE_CHECKING:  # imported when first used: jsonschema takes a tenth of a second to import
    from jsonschema import Draft202012Validator

Predicate = Callable[[Any], bool]

TYPES: dict[str, Predicate] = {  # Draft 2020-12's types, as jsonschema tells them apart
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "string": lambda value: isinstance(value, str),
    "boolean": lambda value: isinstance(value, bool),
    "null": lambda value: value is None,
    "number": lambda value: isinstance(value, (int, float)) and not isinstance(value, bool),
    "integer": lambda value: (
        (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float) and value.is_integer())
    ),
}
ANNOTATIONS = {"description": str, "title": str, "$comment": str, "examples": list, "default": object}
LENGTHS = {"minLength": "string", "maxLength": "string", "minItems": "array", "maxItems": "array"}
BOUNDS: dict[str, Callable[[Any, Any], bool]] = {  # keyword → (value, bound) → past it, as jsonschema words it
    "minimum": lambda value, bound: value < bound,
    "maximum": lambda value, bound: value > bound,
    "exclusiveMinimum": lambda value, bound: value <= bound,
    "exclusiveMaximum": lambda value, bound: value >= bound,
}


class Validator:
    """A schema's compiled check: `valid` decides alone where the schema is made of the keywords
    above; jsonschema's validator (made when first needed) decides otherwise and words the errors."""

    def __init__(self, schema: dict[str, Any], valid: Predicate | None) -> None:
        self.schema = schema
        self.valid = valid
        self._full: Draft202012Validator | None = None

    def full(self) -> Draft202012Validator:
        if self._full is None:  # two threads may both make it: the same validator either way
            from jsonschema import Draft202012Validator

            self._full = Draft202012Validator(self.schema)
        return self._full


def compile_schema(schema: dict[str, Any], what: str, *, trusted: bool = False) -> Validator:
    """A validator for `schema`; `what` names it in the error when the schema itself is invalid.
    A schema the predicates take is valid by construction; any other is checked by jsonschema now,
    unless `trusted` (crew's own, held valid by its tests), then when first used."""
    valid = _compile(schema)
    if valid is None and not trusted:
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise CrewError(f"{what}: invalid JSON Schema at {_path(exc.absolute_path)}: {exc.message}") from None
    return Validator(schema, valid)


def first_error(validator: Validator, instance: Any) -> str | None:
    """The most relevant violation as `at $.a.b: message`, or None when `instance` is valid."""
    if validator.valid is not None and validator.valid(instance):
        return None
    from jsonschema.exceptions import best_match

    error = best_match(validator.full().iter_errors(instance))
    if error is None:
        return None
    return f"at {_path(error.absolute_path)}: {error.message}"


def _path(parts: Any) -> str:
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


# --- the predicates ----------------------------------------------------------------------------


def _compile(schema: Any) -> Predicate | None:
    """`schema` as one predicate, or None when it holds anything but the keywords above, or holds
    them in a shape Draft 2020-12's meta-schema refuses (so a schema compiled here is valid)."""
    if isinstance(schema, bool):
        return _anything if schema else _nothing
    if not isinstance(schema, dict):
        return None
    checks: list[Predicate] = []
    for key, arg in schema.items():
        check = _keyword(key, arg, schema)
        if check is None:
            return None
        if check is not _anything:
            checks.append(check)
    if not checks:
        return _anything
    if len(checks) == 1:
        return checks[0]
    return lambda value: all(check(value) for check in checks)


def _anything(value: Any) -> bool:
    return True


def _nothing(value: Any) -> bool:
    return False


def _keyword(key: str, arg: Any, schema: dict[str, Any]) -> Predicate | None:
    """One keyword's predicate (_anything for one that checks nothing), or None."""
    if key in ANNOTATIONS:
        return _anything if isinstance(arg, ANNOTATIONS[key]) else None
    if key == "type":
        return _type(arg)
    if key in LENGTHS:
        return _length(key, arg)
    if key in BOUNDS:
        return _bound(BOUNDS[key], arg)
    if key == "enum":
        return _enum(arg) if isinstance(arg, list) else None
    if key == "required":
        return _required(arg)
    if key == "properties":
        return _properties(arg)
    if key == "additionalProperties":
        return _additional(arg, schema.get("properties", {}))
    if key == "items":
        return _items(arg)
    return None


def _type(arg: Any) -> Predicate | None:
    names = arg if isinstance(arg, list) else [arg]
    if not names or not all(isinstance(name, str) and name in TYPES for name in names) or len(set(names)) < len(names):
        return None
    tests = [TYPES[name] for name in names]
    if len(tests) == 1:
        return tests[0]
    return lambda value: any(test(value) for test in tests)


def _length(key: str, arg: Any) -> Predicate | None:
    if not _counting(arg):
        return None
    applies = TYPES[LENGTHS[key]]
    if key.startswith("min"):
        return lambda value: not applies(value) or not len(value) < arg
    return lambda value: not applies(value) or not len(value) > arg


def _bound(past: Callable[[Any, Any], bool], arg: Any) -> Predicate | None:
    if not TYPES["number"](arg):
        return None
    number = TYPES["number"]
    return lambda value: not number(value) or not past(value, arg)


def _enum(choices: list[Any]) -> Predicate | None:
    if not all(value is None or isinstance(value, (str, int, float)) for value in choices):
        return None  # jsonschema compares containers by its own rules: left to it
    return lambda value: any(_same(value, choice) for choice in choices)


def _same(value: Any, choice: Any) -> bool:
    """JSON equality of `value` and a text, number, boolean or null (true is not 1, 1 is 1.0)."""
    if isinstance(value, str) or isinstance(choice, str):
        return bool(value == choice)
    if isinstance(value, bool) or isinstance(choice, bool):
        return value is choice
    if isinstance(value, (dict, list)):
        return False
    return bool(value == choice)


def _required(arg: Any) -> Predicate | None:
    if not isinstance(arg, list) or not all(isinstance(name, str) for name in arg) or len(set(arg)) < len(arg):
        return None
    names = tuple(arg)
    return lambda value: not isinstance(value, dict) or all(name in value for name in names)


def _properties(arg: Any) -> Predicate | None:
    if not isinstance(arg, dict):
        return None
    checks = {}
    for name, sub in arg.items():
        check = _compile(sub)
        if check is None:
            return None
        checks[name] = check
    return lambda value: (
        not isinstance(value, dict) or all(check(value[name]) for name, check in checks.items() if name in value)
    )


def _additional(arg: Any, properties: Any) -> Predicate | None:
    check = _compile(arg)
    if check is None or not isinstance(properties, dict):
        return None
    known = frozenset(properties)
    return lambda value: (
        not isinstance(value, dict) or all(check(item) for name, item in value.items() if name not in known)
    )


def _items(arg: Any) -> Predicate | None:
    check = _compile(arg)
    if check is None:
        return None
    return lambda value: not isinstance(value, list) or all(check(item) for item in value)


def _counting(arg: Any) -> bool:
    """A meta-schema's non-negative integer, as crew writes one (an int, not 2.0)."""
    return isinstance(arg, int) and not isinstance(arg, bool) and arg >= 0
