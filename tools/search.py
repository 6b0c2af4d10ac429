"""Search tool: grep, an RE2 regular expression matched line by line. RE2 runs in time linear in
the text whatever the pattern, so no pattern a model writes can hang crew (Python's re takes
exponential time on `(a+)+$`, holding the GIL, so that not even Ctrl-C is acted on)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import re2
from crewbridge.tools.files import fs_errors, looks_binary, take, text_file, walk

from crewbridge.functions import tool
from crewbridge.paths import resolve_readable, shown_path
from crewbridge.registry import ToolContext, ToolFailure

MAX_MATCHES = 200
CHUNK = 1 << 20
LINE_WIDTH = 200  # a longer matching line is shown as a window around the match

GREP_SCHEMA = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string"},
        "path": {"type": "string", "description": "file or directory (default .)"},
    },
    "required": ["pattern"],
    "additionalProperties": False,
}


@tool(schema=GREP_SCHEMA, read_only=True)
def grep(ctx: ToolContext, pattern: str, path: str = ".") -> dict[str, Any]:
    """Search files line by line for an RE2 regex; matches come as 'path:line:text'.

    RE2 is Python's re syntax without backreferences and lookaround; (?i) makes it case-insensitive,
    \\w \\d \\s are ASCII (\\pL is any letter). Binary files and .git are skipped; node_modules and
    similar are searched only when named as the path.
    """
    regex = _compile(pattern)
    real = resolve_readable(ctx.workdir, path, ctx.read_roots)
    counts = {"files_searched": 0, "binary_files_skipped": 0}
    with fs_errors(path):
        matches = take(ctx, _hits(ctx.workdir, real, path, regex, counts), MAX_MATCHES)
    data: dict[str, Any] = {"matches": matches, "files_searched": counts["files_searched"]}
    if counts["binary_files_skipped"]:
        data["binary_files_skipped"] = counts["binary_files_skipped"]
    if ctx.truncated:
        data["note"] = f"stopped after {len(matches)} matches; narrow the pattern or the path to see the rest"
    return data


def _compile(pattern: str) -> re2._Regexp:
    """The pattern, multi-line (`^` and `$` match at each line's ends) so that a whole block of lines
    can be searched at once: a match within a line is then a match within the block."""
    options = re2.Options()
    options.log_errors = False  # else RE2 writes its own copy of the error on stderr
    try:
        return re2.compile(b"(?m)" + pattern.encode("utf-8", "surrogatepass"), options=options)
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        reason = reason.replace("(?m)", "", 1)  # the prefix is crew's, not the model's
        raise ToolFailure(
            f"invalid regular expression {pattern!r}: {reason}; fix it (RE2 syntax: no "
            "backreferences or lookaround; escape special characters with \\ for a "
            "literal search)"
        ) from None


def _hits(workdir: Path, real: Path, path: str, regex: re2._Regexp, counts: dict[str, int]) -> Iterator[str]:
    for file in _files(real, path):
        try:
            binary = looks_binary(file)
        except OSError:
            continue  # a file that cannot be read (or just vanished) is skipped, like grep -s
        counts["binary_files_skipped" if binary else "files_searched"] += 1
        if not binary:
            yield from _search(file, regex, shown_path(workdir, file))


def _files(real: Path, path: str) -> Iterator[Path]:
    """The file itself, or the regular files below a directory (symlinks are not followed)."""
    if not real.is_dir():
        text_file(real, path)
        yield real
        return
    for entry in walk(real):
        if entry.is_file(follow_symlinks=False):
            yield Path(entry.path)


def _search(file: Path, regex: re2._Regexp, shown: str) -> Iterator[str]:
    try:
        handle = open(file, "rb")
    except OSError:
        return  # vanished since it was sniffed
    by_line = _anchored_to_text(regex.pattern)
    with handle:
        before = 0  # lines in the blocks already searched
        for block in _blocks(handle):
            for number, line, at in (_by_line if by_line else _by_block)(regex, block):
                yield _hit(shown, before + number, line, at)
            before += block.count(b"\n") + 1


def _by_block(regex: re2._Regexp, block: bytes) -> Iterator[tuple[int, bytes, int]]:
    """(line number in the block, line, where the match starts) of each line that matches: the block
    is searched at once, and each line a match starts in is then searched on its own."""
    pos = counted = newlines = 0
    while pos <= len(block) and (found := regex.search(block, pos)):
        start = block.rfind(b"\n", 0, found.start()) + 1
        end = block.find(b"\n", start)
        end = len(block) if end < 0 else end
        newlines += block.count(b"\n", counted, start)
        counted = start
        line = block[start:end]
        if in_line := regex.search(line):
            yield newlines + 1, line, in_line.start()
        pos = end + 1


def _by_line(regex: re2._Regexp, block: bytes) -> Iterator[tuple[int, bytes, int]]:
    for number, line in enumerate(block.split(b"\n"), 1):
        if found := regex.search(line):
            yield number, line, found.start()


def _anchored_to_text(pattern: bytes) -> bool:
    """\\A and \\z match at a block's ends, not each line's: such a pattern is matched line by line."""
    return b"\\A" in pattern or b"\\z" in pattern


def _hit(shown: str, number: int, line: bytes, at: int) -> str:
    text = line.decode("utf-8")
    return f"{shown}:{number}:{_window(text, len(line[:at].decode('utf-8', 'ignore')))}"


def _blocks(handle: BinaryIO) -> Iterator[bytes]:
    """A file's text about a megabyte at a time, in whole lines joined by \\n (no \\n after the last),
    as valid UTF-8 (an invalid byte becomes U+FFFD). Lines end at \\n only, as in read_file, and a
    \\r before it is not part of the line."""
    pending: list[bytes] = []  # the start of a line that has not ended yet
    while chunk := handle.read(CHUNK):
        cut = chunk.rfind(b"\n") + 1
        if not cut:
            pending.append(chunk)
            continue
        block = b"".join([*pending, chunk[: cut - 1]])
        pending = [chunk[cut:]]
        yield _clean(block)
    if last := b"".join(pending):
        yield _clean(last)


def _clean(block: bytes) -> bytes:
    block = block.replace(b"\r\n", b"\n").removesuffix(b"\r")
    try:
        block.decode("utf-8")
    except UnicodeDecodeError:
        block = block.decode("utf-8", "replace").encode("utf-8")
    return block


def _window(line: str, at: int) -> str:
    if len(line) <= LINE_WIDTH:
        return line
    start = max(0, min(at - LINE_WIDTH // 4, len(line) - LINE_WIDTH))
    end = start + LINE_WIDTH
    return ("…" if start else "") + line[start:end] + ("…" if end < len(line) else "")
