"""File tools: read_file, write_file, edit_file, list_files, inside the working directory.

read_file and edit_file take a file's text from the editor's buffers (unsaved changes too) when
the run has an editor (`ToolContext.files`, crew acp): the path is resolved beneath the working
directory as on the disk, and the editor is handed its real path only while crew watches every
folder on it (crewbridge.system.beneath.by_name: a name swapped for a link meanwhile fails the call, and
where crew cannot watch, the disk is read). Writes are crew's own, always: through the folder crew
resolved and holds, never by a name the editor would look up again (an agent's shell swapping a
folder for a symlink in a loop made the editor's writes land outside). The editor sees the new
text through the call's diff and its own watch of the disk. Each write or edit says what it
changed (`ToolContext.change`: a face's diff).
"""

from __future__ import annotations

import codecs
import errno
import io
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from crewbridge.system import beneath
from crewbridge.system.beneath import printable
from crewbridge.toolkit.functions import tool
from crewbridge.toolkit.paths import Place, place
from crewbridge.toolkit.registry import FileChange, ToolContext, ToolFailure

SNIFF_BYTES = 8192  # a NUL byte in this much of a file's start means binary (as git and grep say)
LINE_LIMIT = 1 << 16  # bytes of a line kept: a longer one is cut, with a marker saying so
CHUNK = 1 << 20  # bytes read (or copied) at a time
MAX_COUNTED = 1000  # occurrences of edit_file's old_string counted
SHOWN = 10  # of which the lines are named
SHOWN_CHANGE = 1 << 20  # bytes of a file up to which a write or edit says what it changed
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


@contextmanager
def opened(where: Place, flags: int = os.O_RDONLY) -> Iterator[int]:
    """A descriptor for the place's path, opened without blocking (a FIFO cannot hang the open),
    closed at the end."""
    fd = where.open(flags | os.O_NONBLOCK)
    try:
        yield fd
    finally:
        os.close(fd)


def text_file(fd: int, path: str) -> None:
    """Refuse all but a regular text file (a FIFO or device could block or never end); then
    reads from `fd` block again."""
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(path)
    if not stat.S_ISREG(info.st_mode):
        raise ToolFailure(f"'{path}' is not a regular file; only files can be read")
    os.set_blocking(fd, True)
    if looks_binary(fd):
        raise ToolFailure(f"'{path}' is a binary file ({info.st_size} bytes); only text files can be read or edited")


def looks_binary(fd: int) -> bool:
    return b"\0" in os.pread(fd, SNIFF_BYTES, 0)


def lines(handle: BinaryIO) -> Iterator[tuple[bytes, int]]:
    """Each line of a file (its \\n included) and its size in bytes. A line longer than LINE_LIMIT
    keeps only its first LINE_LIMIT bytes (and no \\n): memory stays bounded whatever the line."""
    while line := handle.readline(LINE_LIMIT + 1):
        size = len(line)
        if size > LINE_LIMIT and not line.endswith(b"\n"):
            while rest := handle.readline(CHUNK):
                size += len(rest)
                if rest.endswith(b"\n"):
                    break
            line = line[:LINE_LIMIT]
        yield line, size


def cut_marker(number: int, size: int, shown: str) -> str:
    """What stands for the rest of a line that was cut."""
    return f"[… line {number} cut: it is {size:,} bytes long; {shown} shown]"


def kept_text(raw: bytes) -> str:
    """The start of a cut line as text (a character cut in two at its end is left out)."""
    return codecs.getincrementaldecoder("utf-8")("replace").decode(raw, final=False)


def visible(entry: os.DirEntry[str]) -> bool:
    return entry.name not in LEFT_OUT


def expanded(entry: os.DirEntry[str]) -> bool:
    return entry.name not in NOT_EXPANDED


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
    last = offset + limit - 1 if limit else None
    with place(ctx.workdir, path, ctx.read_roots, ctx.roots) as where, fs_errors(path), opened(where) as fd:
        text_file(fd, path)
        shown = where.shown(fd)
        with _source(ctx, fd, path) as handle:
            window = _read_window(handle, offset, last, ctx.max_output)
    total = window.total
    if offset > max(total, 1):
        raise ToolFailure(f"offset {offset} is past the end of '{path}', which has {total} lines")
    end = offset + len(window.lines) - 1
    data: dict[str, Any] = {"path": shown, "start_line": offset, "end_line": end, "total_lines": total}
    if window.full:
        ctx.truncated = True
        data["note"] = (
            f"output limit reached: lines {end + 1}-{min(last or total, total)} "
            "were not shown; read on from next_offset"
        )
    if end < total:
        data["next_offset"] = end + 1
    data["content"] = _content(ctx, window, offset)
    return data


def _source(ctx: ToolContext, fd: int, path: str) -> BinaryIO:
    """The file open as `fd`, to read: its text in the editor when the run has one, else the disk."""
    text = _in_editor(ctx, fd, path)
    return open(fd, "rb", closefd=False) if text is None else io.BytesIO(text)


def _in_editor(ctx: ToolContext, fd: int, path: str) -> bytes | None:
    """The text of the file open as `fd` in the editor's buffer, read by its name while crew watches
    that name (crewbridge.system.beneath.by_name); None when the run has no editor or crew cannot watch
    the name: then the disk, through `fd`."""
    files = ctx.files
    if files is None:
        return None
    try:
        text = beneath.by_name(fd, lambda name: files.read_text(os.fsdecode(name)))
    except beneath.Moved:
        raise ToolFailure(f"'{path}' was moved or replaced while the editor read it; try again") from None
    return None if text is None else text.encode("utf-8", "surrogateescape")


@dataclass
class Window:
    """The lines read_file shows, the file's line count, whether the output limit stopped the
    window early, and the size in bytes of each line shown that was cut (by its number)."""

    lines: list[str] = field(default_factory=list)
    total: int = 0
    full: bool = False
    cut: dict[int, int] = field(default_factory=dict)


def _read_window(handle: BinaryIO, offset: int, last: int | None, budget: int) -> Window:
    """Lines offset..last: whole lines (a line over LINE_LIMIT cut, with a marker), at most
    `budget` characters but at least one."""
    window = Window(total=_skip(handle, offset - 1))
    used = 0
    for number, (raw, size) in enumerate(lines(handle), offset):
        window.total = number
        line = raw.decode("utf-8", errors="replace")  # a UTF-8 character never spans a newline
        if size > len(raw):
            line = kept_text(raw) + cut_marker(number, size, f"its first {LINE_LIMIT:,} bytes") + "\n"
        beyond = last is not None and number > last
        if beyond or (window.lines and used + len(line) > budget):
            window.total += _count_lines(handle)
            window.full = not beyond
            return window
        window.lines.append(line)
        used += len(line)
        if size > len(raw):
            window.cut[number] = size
    return window


def _content(ctx: ToolContext, window: Window, offset: int) -> str:
    """The lines shown; a single line longer than the output limit is cut there, with a marker."""
    text = "".join(window.lines)
    size = window.cut.get(offset)
    if size is None or len(text) <= ctx.max_output:
        return ctx.cut(text)
    ctx.truncated = True
    return text[: ctx.max_output] + "\n" + cut_marker(offset, size, f"its first {ctx.max_output:,} characters")


def _skip(handle: BinaryIO, count: int) -> int:
    """Read past `count` lines, counted in bytes; the lines passed (fewer at the end of the file)."""
    passed, tail = 0, b""
    while passed < count and (chunk := handle.read(CHUNK)):
        found = chunk.count(b"\n")
        if passed + found >= count:
            at = -1
            for _ in range(count - passed):
                at = chunk.find(b"\n", at + 1)
            handle.seek(at + 1 - len(chunk), os.SEEK_CUR)
            return count
        passed, tail = passed + found, chunk[-1:]
    return passed + (tail not in (b"\n", b""))


def _count_lines(handle: BinaryIO) -> int:
    """Lines in the rest of `handle`, counted in bytes (fast on big files)."""
    count, tail = 0, b""
    while chunk := handle.read(CHUNK):
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
    encoded = _encode(content, "content")
    with place(ctx.workdir, path, roots=ctx.roots) as where, fs_errors(path):
        folder, name = where.parent(make_dirs=True)
        try:
            showable, old = _before(ctx, folder, name, path)
            created = replace(folder, name, path, lambda out: _write_all(out, encoded))
            ctx.change = _change(folder, name, old, encoded) if showable else None
            shown = where.shown(folder, name)
        finally:
            os.close(folder)
    return {"path": shown, "bytes": len(encoded), "created": created}


def _before(ctx: ToolContext, folder: int, name: bytes, path: str) -> tuple[bool, bytes | None]:
    """The contents of `name` before a write, as a diff shows them (the editor's when the run has
    one; None: not there), and whether a diff can show them (not too large, text)."""
    try:
        source = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
    except OSError:
        return True, None
    try:
        info = os.fstat(source)
        if not stat.S_ISREG(info.st_mode) or info.st_size > SHOWN_CHANGE or looks_binary(source):
            return False, None
        text = _in_editor(ctx, source, path)
        return True, text if text is not None else os.pread(source, SHOWN_CHANGE + 1, 0)
    finally:
        os.close(source)


def planned(ctx: ToolContext, path: str, make: Callable[[str | None], str | None]) -> FileChange | None:
    """The change a write or edit of `path` asks for, before it runs (what a person approving it
    sees): the file's text as write_file and edit_file read it (the editor's, where the run has
    one; None: no file), and `make` of that text (None: the edit could not be made). None too where
    the tools would refuse the path, or the file is too large or not text."""
    try:
        with place(ctx.workdir, path, roots=ctx.roots) as where:
            try:
                folder, name = where.parent()
            except FileNotFoundError:  # its folder is made by the write
                new = make(None)
                joined = os.path.join(os.fsdecode(where.top), os.fsdecode(where.rel))
                return None if new is None else FileChange(os.path.normpath(joined), None, new)
            try:
                showable, old = _before(ctx, folder, name, path)
                text = None if old is None else old.decode("utf-8", "replace")
                new = make(text) if showable else None
                return None if new is None else _change(folder, name, old, new.encode("utf-8", "surrogatepass"))
            finally:
                os.close(folder)
    except (ToolFailure, OSError, UnicodeError):
        return None


def _change(folder: int, name: bytes, old: bytes | None, new: bytes) -> FileChange | None:
    """What a write did, for a diff (None when the new text is too large to show one)."""
    real = beneath.fd_path(folder)
    if real is None or len(new) > SHOWN_CHANGE:
        return None
    decode = lambda data: data.decode("utf-8", "replace")  # noqa: E731
    return FileChange(os.fsdecode(os.path.join(real, name)), None if old is None else decode(old), decode(new))


def _existing(folder: int, name: bytes, path: str) -> os.stat_result | None:
    """What `name` in `folder` is now (None: nothing); anything but a regular file this user may
    write is refused, before it is opened: nothing can block."""
    try:
        info: os.stat_result | None = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    assert info is not None
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(path)
    if not stat.S_ISREG(info.st_mode):
        raise ToolFailure(f"'{path}' is not a regular file; only regular files can be written")
    if not os.access(name, os.W_OK, dir_fd=folder):  # the rename would get round its mode
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
    return info


def replace(folder: int, name: bytes, path: str, write: Callable[[int], None]) -> bool:
    """Give `name` in the directory `folder` new contents: `write` fills a temporary file beside it
    (with the file's mode), which is then renamed over it, so that a reader sees the old file or
    the new one, never half of it. True when the file was created. Anything but a regular file
    (a FIFO, device or socket) is refused before it is opened: nothing can block."""
    info = _existing(folder, name, path)
    temp = b".%s.%s.crew-tmp" % (name[:200], os.urandom(4).hex().encode())
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    out = os.open(temp, flags, 0o666, dir_fd=folder)
    try:
        try:
            if info is not None:
                os.fchmod(out, stat.S_IMODE(info.st_mode))
            write(out)
        finally:
            os.close(out)
        os.rename(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with suppress(OSError):
            os.unlink(temp, dir_fd=folder)
        raise
    return info is None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view[:CHUNK]) :]


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
    # surrogateescape: bytes that are not UTF-8 (as read_file cannot show them) match as they are
    old = _encode(old_string, "old_string", errors="surrogateescape")
    new = _encode(new_string, "new_string", errors="surrogateescape")
    with place(ctx.workdir, path, roots=ctx.roots) as where, fs_errors(path):
        folder, name = where.parent()
        try:
            source = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
            try:
                text_file(source, path)
                line = _edit(ctx, folder, name, source, path, old, new)
            finally:
                os.close(source)
            shown = where.shown(folder, name)
        finally:
            os.close(folder)
    return {"path": shown, "line": line + 1}


def _edit(ctx: ToolContext, folder: int, name: bytes, source: int, path: str, old: bytes, new: bytes) -> int:
    """Replace the one `old` in the file open as `source` (`name` in `folder`) with `new`: in the
    editor's text when the run has one, else in the disk's; → the line it was on (from 0). The
    result is written by crew, in `folder`, either way."""
    buffer = _in_editor(ctx, source, path)
    if buffer is not None:
        text = buffer
        found = _scan(lambda pos: buffer[pos : pos + CHUNK], old)
    else:
        text = os.pread(source, SHOWN_CHANGE + 1, 0) if os.fstat(source).st_size <= SHOWN_CHANGE else b""
        found = _scan(lambda pos: os.pread(source, CHUNK, pos), old)
    if found.count != 1:
        raise ToolFailure(_not_once(path, old, found))
    at, line = found.first[0]
    edited = text[:at] + new + text[at + len(old) :] if text else b""
    if buffer is not None:
        replace(folder, name, path, lambda out: _write_all(out, edited))
    else:
        replace(folder, name, path, lambda out: _splice(source, out, at, len(old), new))
    ctx.change = _change(folder, name, text, edited) if text else None
    return line


@dataclass
class Found:
    """Where old_string is in a file: how often (counted up to MAX_COUNTED), (byte offset, lines
    before it) of the first SHOWN, and whether the file has CRLF line endings."""

    count: int = 0
    first: list[tuple[int, int]] = field(default_factory=list)
    crlf: bool = False


def _scan(read: Callable[[int], bytes], old: bytes) -> Found:
    """Every occurrence of `old` in a file, overlapping ones included ('aa' is twice in 'aaa'),
    read CHUNK bytes at a time (`read(offset)`); the last len(old) - 1 bytes of each read are
    searched again with the next, so a match across two reads is found once."""
    found = Found()
    keep = len(old) - 1
    tail = last = b""  # the end of what was read before (where a match may start); its last byte
    pos = lines = 0  # the file offset of the next read; the newlines before `tail`
    while chunk := read(pos):
        block, start = tail + chunk, pos - len(tail)
        at = block.find(old)
        while at != -1 and found.count < MAX_COUNTED:
            found.count += 1
            if len(found.first) < SHOWN:
                found.first.append((start + at, lines + block.count(b"\n", 0, at)))
            at = block.find(old, at + 1)
        found.crlf = found.crlf or b"\r\n" in last + chunk
        last, pos = chunk[-1:], pos + len(chunk)
        tail = block[max(0, len(block) - keep) :] if keep else b""
        lines += block.count(b"\n", 0, len(block) - len(tail))
    return found


def _splice(source: int, out: int, at: int, length: int, new: bytes) -> None:
    """The file with `new` instead of its `length` bytes at `at`: copied around them by the kernel."""
    _copy(source, out, 0, at)
    _write_all(out, new)
    _copy(source, out, at + length, None)


def _copy(source: int, out: int, start: int, end: int | None) -> None:
    """Bytes start..end of `source` (None: to its end) written to `out`."""
    while end is None or start < end:
        sent = os.sendfile(out, source, start, CHUNK if end is None else min(CHUNK, end - start))
        if not sent:
            return
        start += sent


def _not_once(path: str, old: bytes, found: Found) -> str:
    if not found.count:
        hint = " (the file has CRLF line endings)" if found.crlf and b"\r" not in old else ""
        return (
            f"old_string was not found in '{path}'{hint}; read the file and copy the text "
            "exactly, indentation and line breaks included"
        )
    lines = ", ".join(str(line + 1) for _, line in found.first)
    more = ", …" if found.count > len(found.first) else ""
    times = f"at least {found.count}" if found.count >= MAX_COUNTED else str(found.count)
    return (
        f"old_string occurs {times} times in '{path}' (starting on lines {lines}{more}); "
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
    closed: list[str] = []
    with place(ctx.workdir, path, ctx.read_roots, ctx.roots) as where, fs_errors(path), opened(where) as fd:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            raise ToolFailure(f"'{path}' is not a directory; read it as a file instead")
        top = where.shown(fd)
        entries = take(ctx, _names(top, fd, closed), MAX_ENTRIES)
    data: dict[str, Any] = {"path": top, "entries": sorted(entries)}
    if closed:
        data["not_expanded"] = closed
    if ctx.truncated:
        data["note"] = (
            f"listing stopped after {len(entries)} entries (top levels first); list a subdirectory to see the rest"
        )
    return data


def _names(top: str, fd: int, closed: list[str]) -> Iterator[str]:
    """Entry names as shown; the folders not expanded among those taken go to `closed`."""
    for below, entry, _ in beneath.tree(fd, visible, expanded):
        name = joined(top, below) + ("/" if entry.is_dir() else "")
        yield name
        if entry.name in NOT_EXPANDED and entry.is_dir(follow_symlinks=False):
            closed.append(name)  # runs only once the name was taken (the next one is asked for)


def joined(top: str, below: str) -> str:
    """A path found below the folder shown as `top`, as the model sees it."""
    return printable(below) if top == "." else f"{top}/{printable(below)}"


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
