"""File tools: read_file, write_file, edit_file, list_files, inside the working directory."""

from __future__ import annotations

import os
import stat
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from crewbridge.functions import tool
from crewbridge.paths import resolve_inside, resolve_readable, shown_path
from crewbridge.registry import ToolContext, ToolFailure

SNIFF_BYTES = 8192  # a NUL byte in this much of a file's start means binary (as git and grep say)
MAX_ENTRIES = 1000
LEFT_OUT = frozenset({".git", ".hg", ".svn"})  # version-control internals: never listed or searched
NOT_EXPANDED = frozenset(
    {"node_modules", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
)


@contextmanager
def fs_errors(path: str) -> Iterator[None]:
    """Turn an OSError about `path` (as the model wrote it) into a ToolFailure saying what to do."""
    try:
        yield
    except FileNotFoundError:
        message = f"'{path}' does not exist; list its directory to see what is there"
    except (NotADirectoryError, FileExistsError):  # FileExistsError: mkdir met a file
        message = f"a parent of '{path}' is a file, not a directory; check the path"
    except IsADirectoryError:
        message = f"'{path}' is a directory, not a file; list it to see its files"
    except PermissionError:
        message = f"permission denied for '{path}'; crew runs with your user's rights"
    except OSError as exc:
        message = f"cannot use '{path}': {exc.strerror or exc}"
    else:
        return
    raise ToolFailure(message)


def text_file(real: Path, path: str) -> None:
    """Refuse all but an existing regular text file (a FIFO or device could block or never end)."""
    mode = real.stat().st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(path)
    if not stat.S_ISREG(mode):
        raise ToolFailure(f"'{path}' is not a regular file; only files can be read")
    if looks_binary(real):
        raise ToolFailure(
            f"'{path}' is a binary file ({real.stat().st_size} bytes); only text files can be read or edited"
        )


def looks_binary(real: Path) -> bool:
    with open(real, "rb") as handle:
        return b"\0" in handle.read(SNIFF_BYTES)


def walk(top: Path) -> Iterator[os.DirEntry[str]]:
    """Entries below `top`, breadth first and sorted by name, so a capped walk shows the top levels.

    Version-control internals are left out; symlinked folders and NOT_EXPANDED ones are listed but
    not entered (no loops, no escapes, no dependency trees).
    """
    queue = deque([top])
    while queue:
        folder = queue.popleft()
        try:
            with os.scandir(folder) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
        except OSError:
            if folder is top:
                raise
            continue  # an unreadable subfolder is skipped, not fatal
        for entry in entries:
            if entry.name in LEFT_OUT:
                continue
            yield entry
            if entry.is_dir(follow_symlinks=False) and entry.name not in NOT_EXPANDED:
                queue.append(Path(entry.path))


READ_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "offset": {"type": "integer", "minimum": 1, "description": "first line, 1-based"},
        "limit": {"type": "integer", "minimum": 1, "description": "number of lines"},
    },
    "required": ["path"],
    "additionalProperties": False,
}


@tool(schema=READ_SCHEMA, read_only=True)
def read_file(ctx: ToolContext, path: str, offset: int = 1, limit: int | None = None) -> dict[str, Any]:
    """Read a text file as stored (no line numbers added); offset/limit select lines.

    A long file comes back in parts: when next_offset is present, call again with that offset.
    """
    real = resolve_readable(ctx.workdir, path, ctx.read_roots)
    last = offset + limit - 1 if limit else None
    with fs_errors(path):
        text_file(real, path)
        lines, total, full = _read_window(real, offset, last, ctx.max_output)
    if offset > max(total, 1):
        raise ToolFailure(f"offset {offset} is past the end of '{path}', which has {total} lines")
    end = offset + len(lines) - 1
    data: dict[str, Any] = {
        "path": shown_path(ctx.workdir, real),
        "start_line": offset,
        "end_line": end,
        "total_lines": total,
    }
    if full:
        ctx.truncated = True
        data["note"] = (
            f"output limit reached: lines {end + 1}-{min(last or total, total)} "
            "were not shown; read on from next_offset"
        )
    if end < total:
        data["next_offset"] = end + 1
    data["content"] = ctx.cut("".join(lines))  # cuts only a single line longer than the limit
    return data


def _read_window(real: Path, offset: int, last: int | None, budget: int) -> tuple[list[str], int, bool]:
    """Lines offset..last (whole lines, at most `budget` characters but at least one), the file's
    line count, and whether the budget stopped the window early."""
    lines: list[str] = []
    used = total = 0
    with open(real, "rb") as handle:
        for total, raw in enumerate(handle, 1):
            if total < offset:
                continue
            line = raw.decode("utf-8", errors="replace")  # a UTF-8 character never spans a newline
            beyond = last is not None and total > last
            if beyond or (lines and used + len(line) > budget):
                return lines, total - 1 + _count_lines(raw, handle), not beyond
            lines.append(line)
            used += len(line)
    return lines, total, False


def _count_lines(first: bytes, handle: BinaryIO) -> int:
    """Lines in `first` plus the rest of `handle`, counted in bytes (fast on big files)."""
    count, tail = first.count(b"\n"), first[-1:]
    while chunk := handle.read(1 << 20):
        count, tail = count + chunk.count(b"\n"), chunk[-1:]
    return count + (tail not in (b"\n", b""))


WRITE_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "content": {"type": "string"},
    },
    "required": ["path", "content"],
    "additionalProperties": False,
}


@tool(schema=WRITE_SCHEMA, read_only=False)
def write_file(ctx: ToolContext, path: str, content: str) -> dict[str, Any]:
    """Create or overwrite a UTF-8 text file, creating missing parent directories."""
    if not path or path.endswith("/"):
        raise ToolFailure(f"'{path}' names a directory; give the path of a file to write")
    real = resolve_inside(ctx.workdir, path)
    encoded = _encode(content, "content")
    with fs_errors(path):
        if real.is_dir():
            raise IsADirectoryError(path)
        created = not real.exists()
        real.parent.mkdir(parents=True, exist_ok=True)
        real.write_bytes(encoded)
    return {"path": shown_path(ctx.workdir, real), "bytes": len(encoded), "created": created}


EDIT_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "old_string": {"type": "string", "minLength": 1},
        "new_string": {"type": "string"},
    },
    "required": ["path", "old_string", "new_string"],
    "additionalProperties": False,
}


@tool(schema=EDIT_SCHEMA, read_only=False)
def edit_file(ctx: ToolContext, path: str, old_string: str, new_string: str) -> dict[str, Any]:
    """Replace old_string, which must occur exactly once in the file, with new_string.

    Copy old_string exactly from the file; include surrounding lines to make it unique.
    """
    if old_string == new_string:
        raise ToolFailure("old_string and new_string are the same; there is nothing to change")
    real = resolve_inside(ctx.workdir, path)
    with fs_errors(path):
        text_file(real, path)
        # surrogateescape keeps bytes that are not UTF-8 exactly as they were
        text = real.read_bytes().decode("utf-8", errors="surrogateescape")
        found = occurrences(text, old_string)
        if len(found) != 1:
            raise ToolFailure(_not_once(path, text, old_string, found))
        at = found[0]
        updated = text[:at] + new_string + text[at + len(old_string) :]
        real.write_bytes(_encode(updated, "new_string", errors="surrogateescape"))
    return {"path": shown_path(ctx.workdir, real), "line": text.count("\n", 0, at) + 1}


def occurrences(text: str, sub: str) -> list[int]:
    """Every start index of `sub` in `text`, overlapping ones included ('aa' is twice in 'aaa')."""
    found = []
    at = text.find(sub)
    while at != -1:
        found.append(at)
        at = text.find(sub, at + 1)
    return found


def _not_once(path: str, text: str, old: str, found: list[int]) -> str:
    if not found:
        hint = " (the file has CRLF line endings)" if "\r\n" in text and "\r" not in old else ""
        return (
            f"old_string was not found in '{path}'{hint}; read the file and copy the text "
            "exactly, indentation and line breaks included"
        )
    lines = ", ".join(str(text.count("\n", 0, at) + 1) for at in found[:10])
    more = ", …" if len(found) > 10 else ""
    return (
        f"old_string occurs {len(found)} times in '{path}' (starting on lines {lines}{more}); "
        "include more surrounding text so it matches exactly once"
    )


def _encode(text: str, field: str, errors: str = "strict") -> bytes:
    try:
        return text.encode("utf-8", errors=errors)
    except UnicodeEncodeError as exc:
        raise ToolFailure(
            f"{field} holds a character that cannot be written as UTF-8 "
            f"(a lone surrogate at index {exc.start}); remove it"
        ) from None


LIST_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "directory (default .)"},
    },
    "additionalProperties": False,
}


@tool(schema=LIST_SCHEMA, read_only=True)
def list_files(ctx: ToolContext, path: str = ".") -> dict[str, Any]:
    """List a directory recursively (folders end in '/'; .git is left out).

    Paths are relative to the working directory. Dependency and cache folders (node_modules,
    .venv, …) are listed but not entered; list one by name to see inside.
    """
    real = resolve_readable(ctx.workdir, path, ctx.read_roots)
    closed: list[str] = []
    with fs_errors(path):
        if not stat.S_ISDIR(real.stat().st_mode):  # stat: a missing path is reported as missing
            raise ToolFailure(f"'{path}' is not a directory; read it as a file instead")
        entries = take(ctx, _names(ctx.workdir, real, closed), MAX_ENTRIES)
    data: dict[str, Any] = {"path": shown_path(ctx.workdir, real), "entries": sorted(entries)}
    if closed:
        data["not_expanded"] = closed
    if ctx.truncated:
        data["note"] = (
            f"listing stopped after {len(entries)} entries (top levels first); list a subdirectory to see the rest"
        )
    return data


def _names(workdir: Path, top: Path, closed: list[str]) -> Iterator[str]:
    """Entry names as shown; the folders not expanded among those taken go to `closed`."""
    for entry in walk(top):
        name = shown_path(workdir, Path(entry.path)) + ("/" if entry.is_dir() else "")
        yield name
        if entry.name in NOT_EXPANDED and entry.is_dir(follow_symlinks=False):
            closed.append(name)  # runs only once the name was taken (the next one is asked for)


def take(ctx: ToolContext, items: Iterable[str], most: int) -> list[str]:
    """Items while there are at most `most` and they fit ctx.max_output as a JSON list.

    Sets ctx.truncated when items were left over.
    """
    out: list[str] = []
    size = 0
    for item in items:
        size += len(item) + 4  # with its quotes, comma and space in JSON
        if len(out) >= most or size > ctx.max_output:
            ctx.truncated = True
            break
        out.append(item)
    return out
