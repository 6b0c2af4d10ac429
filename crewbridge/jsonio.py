"""JSON that crew does not control (a CLI's stream, an MCP client, a model's call, a transcript read
back): decoded with a bound on nesting, encoded so that any text goes out.

json's C scanner recurses once per level: a 2 KB line nested a thousand deep raises RecursionError,
and what is merely deep (a few hundred levels) parses but then breaks whatever walks it later
(jsonschema, the pure-Python encoder behind `indent=`). `loads` refuses both with TooDeep, a
ValueError, so every reader that already answers bad JSON answers this too and goes on.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 100  # levels of arrays and objects; the CLIs' own events nest about ten deep


class TooDeep(ValueError):
    """JSON nested past MAX_DEPTH."""

    def __init__(self) -> None:
        super().__init__(f"JSON nested more than {MAX_DEPTH} levels deep; send flatter data")


def loads(data: str | bytes | bytearray, *, strict: bool = True) -> Any:
    """json.loads, with TooDeep (a ValueError) for nesting past MAX_DEPTH. `strict=False` lets
    strings hold control characters (a model writes a raw newline inside a string)."""
    try:
        value = json.loads(data) if strict else json.loads(data, strict=False)
    except RecursionError:
        raise TooDeep() from None
    if _brackets(data) > MAX_DEPTH:  # a cheap bound first: fewer brackets cannot nest deeper
        check_depth(value)
    return value


def check_depth(value: Any) -> None:
    """Raise TooDeep when `value` (decoded JSON) nests past MAX_DEPTH; iterative, so any depth is safe."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > MAX_DEPTH:
            raise TooDeep()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))


def dumps_bytes(value: Any, **options: Any) -> bytes:
    """`value` as UTF-8 JSON; text that cannot be UTF-8 (a lone surrogate) goes out as \\u escapes."""
    try:
        return json.dumps(value, ensure_ascii=False, **options).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, **options).encode("ascii")


def _brackets(data: str | bytes | bytearray) -> int:
    if isinstance(data, str):
        return data.count("[") + data.count("{")
    return data.count(b"[") + data.count(b"{")
