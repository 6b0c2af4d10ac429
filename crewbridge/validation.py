"""JSON Schema checks: one compiled validator per schema, errors from best_match with their JSON path."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from crewbridge.errors import CrewError

if TYPE_CHECKING:  # imported when first used: jsonschema takes a tenth of a second to import
    from jsonschema import Draft202012Validator


def compile_schema(schema: dict[str, Any], what: str) -> Draft202012Validator:
    """Check `schema` itself and return a validator for it; `what` names it in the error."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise CrewError(f"{what}: invalid JSON Schema at {_path(exc.absolute_path)}: {exc.message}") from None
    return Draft202012Validator(schema)


def first_error(validator: Draft202012Validator, instance: Any) -> str | None:
    """The most relevant violation as `at $.a.b: message`, or None when `instance` is valid."""
    from jsonschema.exceptions import best_match

    error = best_match(validator.iter_errors(instance))
    if error is None:
        return None
    return f"at {_path(error.absolute_path)}: {error.message}"


def _path(parts: Any) -> str:
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out
