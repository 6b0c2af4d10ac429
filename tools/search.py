"""Search tool: grep, an RE2 regular expression matched line by line. RE2 runs in time linear in
the text whatever the pattern, so no pattern a model writes can hang crew (Python's re takes
exponential time on `(a+)+$`, holding the GIL, so that not even Ctrl-C is acted on)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, BinaryIO

from crewbridge.tools.files import (
    CHUNK,
    LINE_LIMIT,
    expanded,
    fs_errors,
    joined,
    looks_binary,
    opened,
    take,
    text_file,
    visible,
)

from crewbridge.system import beneath
from crewbridge.toolkit.functions import tool
from crewbridge.toolkit.paths import Place, place
from crewbridge.toolkit.registry import ToolContext, ToolFailure

if TYPE_CHECKING:
    import re2

MAX_MATCHES = 200
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
    counts = {"files_searched": 0, "binary_files_skipped": 0, "lines_cut": 0}
    with place(ctx.workdir, path, ctx.read_roots, ctx.roots) as where, fs_errors(path), opened(where) as fd:
        matches = take(ctx, _hits(where, fd, path, regex, counts), MAX_MATCHES)
    data: dict[str, Any] = {"matches": matches, "files_searched": counts["files_searched"]}
    if counts["binary_files_skipped"]:
        data["binary_files_skipped"] = counts["binary_files_skipped"]
    notes = []
    if ctx.truncated:
        notes.append(f"stopped after {len(matches)} matches; narrow the pattern or the path to see the rest")
    if counts["lines_cut"]:
        notes.append(
            f"lines longer than {LINE_LIMIT:,} bytes ({counts['lines_cut']}) were searched in their first "
            f"{LINE_LIMIT:,} bytes only; their matches say so"
        )
    if notes:
        data["note"] = "; ".join(notes)
    return data


def _compile(pattern: str) -> re2._Regexp:
    """The pattern, multi-line (`^` and `$` match at each line's ends) so that a whole block of lines
    can be searched at once: a match within a line is then a match within the block."""
    import re2  # for start-up speed: every run builds this tool, only a grep needs RE2 (~2 ms)

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


def _hits(where: Place, fd: int, path: str, regex: re2._Regexp, counts: dict[str, int]) -> Iterator[str]:
    """The matches in the file `fd`, or in the regular files below the folder `fd` (symlinks are
    not followed; binary files are skipped and counted)."""
    if not stat.S_ISDIR(os.fstat(fd).st_mode):
        text_file(fd, path)
        counts["files_searched"] += 1
        yield from _search(fd, regex, where.shown(fd), counts)
        return
    top = where.shown(fd)
    for below, entry, folder in beneath.tree(fd, visible, expanded):
        if not entry.is_file(follow_symlinks=False):
            continue
        try:
            file = os.open(entry.name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
        except OSError:
            continue  # a file that cannot be read (or just vanished) is skipped, like grep -s
        try:
            if not stat.S_ISREG(os.fstat(file).st_mode):
                continue  # swapped for something else since it was listed
            os.set_blocking(file, True)
            binary = looks_binary(file)
            counts["binary_files_skipped" if binary else "files_searched"] += 1
            if not binary:
                yield from _search(file, regex, joined(top, below), counts)
        except OSError:
            continue
        finally:
            os.close(file)


def _search(fd: int, regex: re2._Regexp, shown: str, counts: dict[str, int]) -> Iterator[str]:
    by_line = _anchored_to_text(regex.pattern)
    with open(fd, "rb", closefd=False) as handle:
        before = 0  # lines in the blocks already searched
        for block, cut in _blocks(handle):
            counts["lines_cut"] += bool(cut)
            for number, line, at in (_by_line if by_line else _by_block)(regex, block):
                hit = _hit(shown, before + number, line, at)
                yield hit + _cut_note(cut) if number == 1 and cut else hit
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


def _blocks(handle: BinaryIO) -> Iterator[tuple[bytes, int]]:
    """A file's text in blocks of whole lines joined by \\n (no \\n after the last), as valid UTF-8
    (an invalid byte becomes U+FFFD), each with the size in bytes of its first line when that was
    cut (else 0). Lines end at \\n only, as in read_file, and a \\r before it is not part of the
    line. A line longer than LINE_LIMIT keeps its first LINE_LIMIT bytes: it is always a block's
    first line, since no read is longer than LINE_LIMIT (memory stays bounded)."""
    pending = b""  # the start of a line that has not ended yet (at most LINE_LIMIT bytes)
    size = 0  # that line's size so far
    while chunk := handle.read(min(CHUNK, LINE_LIMIT)):
        end = chunk.find(b"\n")
        if end < 0:
            pending, size = (pending + chunk)[:LINE_LIMIT], size + len(chunk)
            continue
        size += end
        last = chunk.rfind(b"\n")
        yield _clean((pending + chunk[:end])[:LINE_LIMIT] + chunk[end:last]), size if size > LINE_LIMIT else 0
        pending = chunk[last + 1 :]
        size = len(pending)
    if pending:
        yield _clean(pending), size if size > LINE_LIMIT else 0


def _cut_note(size: int) -> str:
    return f" [… line cut: it is {size:,} bytes long; only its first {LINE_LIMIT:,} bytes were searched]"


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
