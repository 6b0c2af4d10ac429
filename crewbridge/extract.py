"""Tool calls out of streamed assistant text: fenced ```json blocks, found and checked as each one closes.

Fences follow CommonMark: a line of 3+ backticks or tildes indented at most 3 spaces opens a block,
and a line of the same character, at least as many of it, and nothing else but spaces closes it.
A block is a call candidate when its info string is `json` (any case) or empty; tildes are accepted
like backticks, because markdown treats them alike and a fence of either kind must be tracked anyway
to know that what it holds is an example. A fence of any other language (````markdown, ```python …)
holds examples: nothing inside it is a call, whatever it looks like. A backtick line whose info
string has a backtick is inline code, not a fence. Only `\\n` ends a line (`\\r\\n` too); a fence
line longer than MAX_FENCE_LINE characters is not a fence, nor is one behind a `>` quote marker or
indented 4 spaces or more (a list item's fence included). A message boundary (`end_message`) ends
every open fence and starts a new line.

A candidate block is a call attempt only when its text starts with `{` or `[` (so an example
nested in a bare ```` fence is not one). Inside such a block a fence line that falls inside a JSON
string (a string with raw newlines) is content; a string left open therefore runs to the end of
the message, where the block is reported as truncated. The work per character is constant: text
between fence-looking lines is skipped with `str.find`, and a block is parsed once when it closes.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from crewbridge.errors import ToolNotFound
from crewbridge.registry import DEFAULT_PREFIX, ToolRegistry

MAX_FENCE_LINE = 4096  # longer "fence lines" are text, so a partial line is never held without bound

_OUTSIDE, _BLOCK, _OTHER = 0, 1, 2
_NONSPACE = re.compile(r"\S")
_STRING_CHAR = re.compile(r'["\\]')
_NAME = re.compile(r'"name"\s*:\s*"([^"\\\n]{1,200})"')
_JSON_TYPES = {dict: "object", list: "array", str: "string", int: "number", float: "number",
               bool: "boolean", type(None): "null"}


@dataclass(frozen=True)
class ToolCall:
    """One tool-call attempt. `error` is None when it is valid and may run; otherwise it never runs."""

    name: str  # as the model wrote it ("" when it could not be read)
    input: Any
    error: str | None
    raw: str  # the block's text between its fence lines (the first characters, for a block too large)
    end: int  # offset just past the closing fence line in all text fed so far


class _Line:
    """The start of a line that may still turn out to be a fence line, kept until its newline."""

    __slots__ = ("pieces", "size", "indent", "char", "run", "settled")

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.size = 0
        self.indent = 0
        self.char = ""
        self.run = 0
        self.settled = False  # the marker run has ended

    def grow(self, piece: str, chars: str, min_run: int, closing: bool) -> bool:
        """Add `piece`; False once the line can no longer be a fence line of the kind wanted."""
        self.pieces.append(piece)
        self.size += len(piece)
        if self.size > MAX_FENCE_LINE:
            return False
        if self.settled:
            rest = piece
        else:
            j = 0
            if not self.char:
                j = len(piece) - len(piece.lstrip(" "))
                self.indent += j
                if self.indent > 3:
                    return False
                if j == len(piece):
                    return True
                if piece[j] not in chars:
                    return False
                self.char = piece[j]
            rest = piece[j:].lstrip(self.char)
            self.run += len(piece) - j - len(rest)
            if not rest:
                return True
            if self.run < min_run:
                return False
            self.settled = True
        if closing:
            return not rest.strip(" \t\r")
        return self.char == "~" or "`" not in rest


class _Block:
    """The text of an open candidate block, and whether its end so far is inside a JSON string."""

    def __init__(self, start: int, origin: int, limit: int) -> None:
        self.start = start  # offset of its opening fence line in all text fed
        self.origin = origin  # offset of the block's first character in all text fed
        self.limit = limit
        self.pieces: list[str] = []
        self.size = 0  # characters added, kept or not
        self.dropped = False  # past the size cap: only the head is kept, the rest only scanned
        self.first = ""  # first non-whitespace character
        self.tried = False  # a fence line was met and the text parsed once
        self.value: Any = None
        self.value_at = -1  # the length at which `value` parsed
        self.scanned = 0  # pieces scanned for string state
        self.in_string = False
        self.escaped = False

    def add(self, piece: str) -> None:
        if not self.first:
            stripped = piece.lstrip()
            self.first = stripped[:1]
        self.size += len(piece)
        if self.dropped:
            self._scan_piece(piece)
            return
        self.pieces.append(piece)
        if self.size > self.limit + MAX_FENCE_LINE + 1:  # past any fence line that may still close it
            self._scan()
            head = "".join(self.pieces)[: self.limit]
            self.pieces, self.scanned, self.dropped = [head], 1, True

    @property
    def jsonish(self) -> bool:
        return self.first in ("{", "[")

    def text(self, length: int) -> str:
        """The block's first `length` characters, at most `limit` of them."""
        return _whole_surrogates("".join(self.pieces)[:min(length, self.limit)])

    def continues_at(self, length: int) -> bool:
        """A fence line after the first `length` characters: is it inside a JSON string (content)?"""
        if not self.jsonish:
            return False
        if not self.tried and not self.dropped and length <= self.limit:
            self.tried = True
            try:
                self.value, self.value_at = json.loads(self.text(length), strict=False), length
                return False  # a whole JSON value: no string is open
            except (ValueError, RecursionError):
                pass
        self._scan()
        return self.in_string

    def _scan(self) -> None:
        for piece in self.pieces[self.scanned:]:
            self._scan_piece(piece)
        self.scanned = len(self.pieces)

    def _scan_piece(self, piece: str) -> None:
        pos = 0
        if self.escaped:
            self.escaped, pos = False, 1
        for match in _STRING_CHAR.finditer(piece, pos):
            if match.start() < pos:
                continue
            if match.group() == '"':
                self.in_string = not self.in_string
            elif self.in_string:  # a backslash escapes the next character
                pos = match.start() + 2
                if pos > len(piece):
                    self.escaped = True


class Extractor:
    """Feed assistant text chunk by chunk; get each tool call the moment its block closes."""

    def __init__(self, registry: ToolRegistry | None = None, prefix: str = DEFAULT_PREFIX, *,
                 max_block_chars: int = 1_000_000, max_depth: int = 200) -> None:
        if registry is not None and registry.prefix != prefix:
            raise ValueError(f"registry prefix '{registry.prefix}' differs from extractor prefix '{prefix}'")
        self._registry = registry
        self._prefix = prefix
        self._marker = prefix + ":"
        self._max_block = max_block_chars
        self._max_depth = max_depth
        self._offset = 0  # characters fed so far
        self._base = 0  # offset of the current chunk's first character
        self._mark = 0  # the current chunk up to here is in the open block
        self._state = _OUTSIDE
        self._fence = ""  # the open fence's character
        self._fence_len = 0
        self._line: _Line | None = _Line()  # None: the current line cannot be a fence line
        self._block: _Block | None = None
        self._called = False
        self._prose = False
        self._first_call: int | None = None  # where the first call's block starts

    @property
    def prose_after_calls(self) -> bool:
        """True when, after the last call, the model wrote something that is neither whitespace nor
        another call: text outside fences, a fence of another language, or a block that held no call.
        A line that may still become a fence, or a block still open, does not count yet."""
        return self._prose

    @property
    def shown_upto(self) -> int:
        """How much of the text fed a person may see by now: what precedes the first call's block
        (nothing from there on is shown) and can no longer turn out to be part of one: an open
        candidate block is held until it closes, a line that may become a fence line until its end."""
        upto = self._offset
        if self._state == _BLOCK and self._block is not None:
            upto = self._block.start
        elif self._line is not None:
            upto -= self._line.size
        return upto if self._first_call is None else min(upto, self._first_call)

    @property
    def first_call_at(self) -> int | None:
        """Where the first call's block starts in the text fed (None: no call yet)."""
        return self._first_call

    @property
    def in_block(self) -> bool:
        """True while a ```json (or unlabelled) block is open: a call may be on its way."""
        return self._state == _BLOCK

    def feed(self, chunk: str) -> list[ToolCall]:
        """The calls whose block closed in this chunk, in order."""
        line = self._line
        if self._state == _OUTSIDE and (line is None or not line.size) and "`" not in chunk \
                and "~" not in chunk:  # the common case: prose, with no fence character in it
            self._offset += len(chunk)
            if self._called and not self._prose and _NONSPACE.search(chunk):
                self._prose = True
            tail = chunk.rfind("\n") + 1
            if tail or line is not None:  # where the last line starts is all that matters
                rest = len(chunk) - tail
                if rest > 3 or chunk[tail:].strip(" "):
                    self._line = None
                elif rest:
                    self._line = _Line()
                    self._grow(self._line, chunk[tail:])
                elif line is None:
                    self._line = _Line()
            return []
        calls: list[ToolCall] = []
        self._base, self._mark = self._offset, 0
        self._offset += len(chunk)
        start = self._resume_line(chunk, calls)
        if start is not None:
            self._scan(chunk, start, calls)
        if self._state == _BLOCK:
            self._add_body(chunk, len(chunk))
        return calls

    def end_message(self) -> list[ToolCall]:
        """The message ended: its last line is complete, an open block is truncated, fences reset."""
        calls: list[ToolCall] = []
        self._base, self._mark = self._offset, 0
        line = self._line
        if line is not None and line.size:
            self._handle_line("".join(line.pieces), self._offset - line.size, "", 0, calls)
        if self._state == _BLOCK:
            assert self._block is not None
            self._emit(calls, self._truncated(), self._block)
        self._state, self._block, self._line = _OUTSIDE, None, _Line()
        return calls

    def finish(self) -> list[ToolCall]:
        """The stream ended: the same as the end of a message."""
        return self.end_message()

    # -- lines --------------------------------------------------------------------------------

    def _resume_line(self, chunk: str, calls: list[ToolCall]) -> int | None:
        """Finish the line the previous chunk left open; where the next line starts (None: not here)."""
        line = self._line
        if line is not None and not line.size:
            return 0
        nl = chunk.find("\n")
        if line is None:
            self._check_prose(chunk, 0, len(chunk) if nl < 0 else nl)
            if nl < 0:
                return None
        elif nl < 0:
            if not self._grow(line, chunk):
                self._line = None
                for piece in line.pieces:
                    self._check_prose(piece, 0, len(piece))
            return None
        else:
            self._handle_line("".join(line.pieces) + chunk[:nl + 1], self._base - line.size, chunk,
                              nl + 1, calls)
        self._line = _Line()
        return nl + 1

    def _grow(self, line: _Line, piece: str) -> bool:
        if self._state == _OUTSIDE:
            return line.grow(piece, "`~", 3, closing=False)
        return line.grow(piece, self._fence, self._fence_len, closing=True)

    def _scan(self, chunk: str, i: int, calls: list[ToolCall]) -> None:
        """Handle the lines of `chunk` from `i` (a line start): only those that may be fence lines."""
        n = len(chunk)
        ticks = tildes = -2  # next "```" / "~~~" at or after i (-1: none left, -2: not looked for yet)
        prose_from = i
        while i < n:
            if self._state == _OUTSIDE:
                if -1 < ticks < i or ticks == -2:
                    ticks = _find_run(chunk, "`", i)
                if -1 < tildes < i or tildes == -2:
                    tildes = _find_run(chunk, "~", i)
                k = tildes if ticks < 0 or -1 < tildes < ticks else ticks
            else:
                k = chunk.find(self._fence * self._fence_len, i)
            if k < 0:
                break
            line_start = chunk.rfind("\n", i, k) + 1 or i
            nl = chunk.find("\n", k)
            if k - line_start > 3 or chunk[line_start:k].strip(" "):  # the hit is inside a line
                if nl < 0:
                    self._check_prose(chunk, prose_from, n)
                    self._line = None
                    return
                i = nl + 1
                continue
            if nl < 0:
                break
            self._check_prose(chunk, prose_from, line_start)
            self._handle_line(chunk[line_start:nl + 1], self._base + line_start, chunk, nl + 1, calls)
            i = prose_from = nl + 1
        tail = chunk.rfind("\n", i) + 1 or i  # the last line, unfinished
        self._check_prose(chunk, prose_from, tail)
        if tail == n:
            return
        if chunk[tail] in " `~":
            line = _Line()
            if self._grow(line, chunk[tail:]):
                self._line = line
                return
        self._line = None
        self._check_prose(chunk, tail, n)

    def _handle_line(self, line: str, start: int, chunk: str, after: int, calls: list[ToolCall]) -> None:
        """A complete line that may be a fence line. `after`: where it ends in `chunk`."""
        text = line[:-1] if line.endswith("\n") else line
        fence = _fence_of(text)
        if self._state == _OUTSIDE:
            if fence is None or (fence[0] == "`" and "`" in fence[2]):
                self._check_prose(text, 0, len(text))
                return
            self._fence, self._fence_len = fence[0], fence[1]
            info = fence[2].strip()
            if not info or info.split(None, 1)[0].lower() == "json":
                self._state, self._mark = _BLOCK, after
                self._block = _Block(start, start + len(line), self._max_block)
            else:
                self._state = _OTHER
                self._prose = self._called
            return
        if fence is None or fence[0] != self._fence or fence[1] < self._fence_len or fence[2].strip(" \t"):
            return
        if self._state == _OTHER:
            self._state = _OUTSIDE
            return
        block = self._block
        assert block is not None
        self._add_body(chunk, max(0, start - self._base))
        if block.continues_at(start - block.origin):
            return  # the fence line is inside a JSON string
        self._state, self._block = _OUTSIDE, None
        self._emit(calls, self._closed(block, start - block.origin, start + len(line)), block)

    def _add_body(self, chunk: str, upto: int) -> None:
        if upto > self._mark and self._block is not None:
            self._block.add(chunk[self._mark:upto])
            self._mark = upto

    def _check_prose(self, text: str, a: int, b: int) -> None:
        if self._called and not self._prose and self._state == _OUTSIDE and _NONSPACE.search(text, a, b):
            self._prose = True

    def _emit(self, calls: list[ToolCall], new: list[ToolCall], block: _Block) -> None:
        if new:
            calls.extend(new)
            self._called, self._prose = True, False
            if self._first_call is None:
                self._first_call = block.start
        else:  # the block was not a call: it is content, like prose
            self._prose = self._called

    # -- blocks -------------------------------------------------------------------------------

    def _closed(self, block: _Block, length: int, end: int) -> list[ToolCall]:
        """The calls in a block that closed properly (none when it is ordinary content)."""
        if not block.jsonish:
            return []
        raw = block.text(length)
        if length > self._max_block:
            return self._broken(raw, f"the tool-call block is too large ({length} characters; "
                                     f"the limit is {self._max_block}); nothing was run", end)
        try:
            value = block.value if block.value_at == length else json.loads(raw, strict=False)
        except RecursionError:
            return self._broken(raw, f"the tool-call JSON is nested deeper than {self._max_depth} levels", end)
        except ValueError as exc:  # JSONDecodeError, or an integer too long to convert
            hint = "; put several calls in one array [ … ] or in separate blocks" \
                if getattr(exc, "msg", "") == "Extra data" else ""
            return self._broken(raw, f"invalid JSON in the tool-call block: {exc}{hint}", end)
        return self._calls_in(value, raw, end)

    def _truncated(self) -> list[ToolCall]:
        block = self._block
        assert block is not None
        length = self._offset - block.origin
        if not block.jsonish:
            return []
        raw = block.text(length)
        error = "truncated: the message ended before the block's closing fence; nothing was run"
        if length <= self._max_block:
            try:
                value = json.loads(raw, strict=False)
            except (ValueError, RecursionError):
                pass
            else:
                return [replace(c, error=error) for c in self._calls_in(value, raw, self._offset)]
        return self._broken(raw, error, self._offset)

    def _broken(self, raw: str, error: str, end: int) -> list[ToolCall]:
        """An error call, when text that is not a valid call still clearly meant one."""
        name = _NAME.search(raw)
        named = name is not None and name.group(1).startswith(self._marker)
        if not named and ("tool_use" not in raw or self._marker not in raw):
            return []
        return [ToolCall(name.group(1) if name else "", None, error, raw, end)]

    def _calls_in(self, value: Any, raw: str, end: int) -> list[ToolCall]:
        if isinstance(value, dict):
            items = [value]
        elif isinstance(value, list):
            items = value
        else:
            return []
        if not any(self._meant(item) for item in items):
            return []
        too_deep = _depth(value) > self._max_depth
        calls = []
        for index, item in enumerate(items):
            name = item.get("name") if isinstance(item, dict) else None
            name = name if isinstance(name, str) else ""
            data = item.get("input") if isinstance(item, dict) else None
            if too_deep:
                error: str | None = f"the tool-call JSON is nested deeper than {self._max_depth} levels"
            elif not self._meant(item):
                error = f"item [{index}] of the array is not a tool call; every item must be " \
                        f'{{"type": "tool_use", "name": "{self._marker}<tool>", "input": {{…}}}}'
            else:
                error = self._problem(item)
            calls.append(ToolCall(name, data, error, raw, end))
        return calls

    def _meant(self, item: Any) -> bool:
        """Does this object clearly mean a call (valid or not)?"""
        if not isinstance(item, dict):
            return False
        name = item.get("name")
        if not isinstance(name, str):
            return False
        if name.startswith(self._marker):
            return True
        return item.get("type") == "tool_use" and self._registry is not None and name in self._registry

    def _problem(self, item: dict[str, Any]) -> str | None:
        """Why a meant call will not run, or None."""
        name = item["name"]
        if not name.startswith(self._marker):
            return f"tool name '{name}' needs the prefix: write '{self._marker}{name}'"
        if "type" in item and item["type"] != "tool_use":  # without "type", the prefix says it all
            return f'a tool call has "type": "tool_use" (got {json.dumps(item["type"])[:40]})'
        if name == self._marker:
            return f"the tool name is empty; write '{self._marker}<tool>'"
        if "input" not in item:
            return 'missing "input": give the arguments as an object ({} when there are none)'
        data = item["input"]
        if not isinstance(data, dict):
            return f'"input" must be an object, got {_JSON_TYPES.get(type(data), type(data).__name__)}'
        if self._registry is None:
            return None
        try:
            tool = self._registry.resolve(name)
        except ToolNotFound as exc:
            return str(exc)
        problem = tool.check(data)
        return f"invalid input for {name} {problem}" if problem else None


class Shown:
    """One reply's text as a person sees it, as the extractor decides (Extractor.shown_upto): the
    text before the first call, each part released once it can no longer turn out to be in a call."""

    def __init__(self, extractor: Extractor) -> None:
        self._extractor = extractor
        self._held: list[str] = []  # text fed, not shown yet
        self._at = 0  # offset of the first character held

    def take(self, text: str = "") -> str:
        """Hold `text`, just fed to the extractor (none after end_message or finish); → what to show now."""
        upto = self._extractor.shown_upto
        first_call = self._extractor.first_call_at
        if first_call is not None and self._at >= first_call:
            self._held = []  # never shown: the reply is past its first call
            return ""
        if text:
            self._held.append(text)
        if upto <= self._at:
            return ""
        held = "".join(self._held)
        cut = upto - self._at
        self._held = [held[cut:]] if cut < len(held) else []
        self._at = upto
        return held[:cut]


def _find_run(text: str, char: str, start: int) -> int:
    """text.find(char * 3, start). A single character is found with memchr, many times faster than
    a three-character string: text without the character (most text has no `~`) costs almost nothing."""
    first = text.find(char, start)
    return first if first < 0 else text.find(char * 3, first)


def _fence_of(text: str) -> tuple[str, int, str] | None:
    """(marker character, run length, the rest) when `text` starts like a fence line."""
    if len(text) > MAX_FENCE_LINE:
        return None
    body = text.lstrip(" ")
    if len(text) - len(body) > 3 or body[:1] not in ("`", "~"):
        return None
    rest = body.lstrip(body[0])
    run = len(body) - len(rest)
    if run < 3:
        return None
    return body[0], run, rest[:-1] if rest.endswith("\r") else rest


def _depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        elif not isinstance(item, list):
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in item if isinstance(child, (dict, list)))
    return deepest


def _whole_surrogates(text: str) -> str:
    """Join surrogate pairs that arrived as two halves (a character split between two events)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
