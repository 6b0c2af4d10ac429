"""JSON that crew does not control (a CLI's stream, an MCP client, a model's call, a transcript read
back): decoded with a bound on nesting, encoded so that any text goes out.

json's C scanner recurses once per level: a 2 KB line nested a thousand deep raises RecursionError,
and what is merely deep (a few hundred levels) parses but then breaks whatever walks it later
(jsonschema, the pure-Python encoder behind `indent=`). `loads` refuses both with TooDeep, a
ValueError, so every reader that already answers bad JSON answers this too and goes on.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # typing itself is ~5 ms to import (crew acp reads its first message with loads)
if TYPE_CHECKING:
    from collections.abc import Callable
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


def decode(line: str | bytes, fields: Any = None) -> Any:
    """The JSON value a line that starts with it holds (one line of a CLI's stream), as fast as this
    machine can: msgspec when it is installed (about 2.5 times json.loads on a CLI's streamed deltas)
    once the process has read enough for its import to pay (_first_lines), json's C scanner before
    that or without it. Nesting is bounded by the decoders alone (RecursionError past their
    recursion limit): a stream's reader picks fields by name. ValueError for a line that starts with
    whitespace or that the fast decoder refuses (not JSON, NaN, a number past a double, a lone
    surrogate): read it with `loads`, which takes what json takes, names what is wrong, and holds it
    to MAX_DEPTH.

    `fields`: a TypedDict (total=False) of the only fields the reader looks at, a nested TypedDict
    for each object it looks into, `Any` for a value it takes whole. msgspec then builds those alone
    and skips the rest unbuilt (a CLI's tool results, the text it repeats); json's scanner gives the
    whole value, which has the same fields. A line whose shape differs (an object expected where it
    has something else) is a ValueError: read it with `loads`."""
    if line[:1].isspace():
        raise ValueError("whitespace before the value")
    fast = _decoders.get(fields)
    return _first_lines(line, fields) if fast is None else fast(line)


def _fast_decoder(fields: Any = None) -> Callable[[str | bytes], Any]:
    # msgspec, not orjson: orjson turns an integer past 64 bits into a float, silently.
    try:
        from msgspec.json import Decoder
    except ImportError:  # a platform without its wheel
        return _scanned
    from typing import Any  # loaded by msgspec already

    return Decoder(Any if fields is None else fields).decode


FAST_AFTER = 8192  # lines decoded by json's scanner before msgspec takes over,
FAST_AFTER_CHARS = 4_000_000  # or characters, whichever comes first


def _first_lines(line: str | bytes, fields: Any) -> Any:
    """The fast decoder for a process's first FAST_AFTER lines (or FAST_AFTER_CHARS characters):
    json's scanner. msgspec's import (~10 ms of CPU: typing_extensions, decimal, uuid) would cost a
    short run more than it saves (~1 µs a short line, ~2 ms a megabyte); past them each `fields`
    gets msgspec's decoder, for the rest of the process (crew parse on a big stream, a long live
    run). Either gives the same values of the fields asked for."""
    global _lines, _chars
    _lines += 1
    _chars += len(line)
    if _lines < FAST_AFTER and _chars < FAST_AFTER_CHARS:
        return _scanned(line)
    fast = _decoders[fields] = _fast_decoder(fields)
    return fast(line)


_lines = 0
_chars = 0
_decoders: dict[Any, Callable[[str | bytes], Any]] = {}  # fields → msgspec's decoder, once taken


_scan_once = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # the C scanner inside json.loads


def _scanned(line: str | bytes) -> Any:
    """json.loads without its ~1 µs of Python calls and regular expressions (a fifth of its time on
    a streamed delta) for a line that starts with its value; ValueError for anything else."""
    if not isinstance(line, str):
        line = line.decode("utf-8")
    try:
        value, end = _scan_once(line, 0)
    except (StopIteration, RecursionError):
        raise ValueError("not a JSON value at the start") from None
    if end != len(line) and line[end:].strip(" \t\n\r"):
        raise ValueError("something after the value")
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
