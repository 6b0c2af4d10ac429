"""The fence grammar of streamed model text: where fenced blocks open and close, as the text arrives.
It knows nothing of tools: crewbridge.toolkit.extract decides what a closed block means (FenceScanner's two
hooks) and so which text is a call, prose or an example.

Fences follow CommonMark: a line of 3+ backticks or tildes indented at most 3 spaces opens a block,
and a line of the same character, at least as many of it, and nothing else but spaces closes it.
A block is a candidate when its info string is `json` (any case) or empty; tildes are accepted
like backticks, because markdown treats them alike and a fence of either kind must be tracked anyway
to know that what it holds is an example. A fence of any other language (````markdown, ```python …)
holds examples: nothing inside it is a candidate, whatever it looks like. A backtick line whose info
string has a backtick is inline code, not a fence. Only `\\n` ends a line (`\\r\\n` too); a fence
line longer than MAX_FENCE_LINE characters is not a fence, nor is one behind a `>` quote marker or
indented 4 spaces or more (a list item's fence included). A message boundary (`end_message`) ends
every open fence and starts a new line.

A candidate whose text starts with `{` or `[` is JSON-ish: inside it a fence line that falls inside a
JSON string (a string with raw newlines) is content; a string left open therefore runs to the end of
the message, where the block is cut. The work per character is constant: text between fence-looking
lines is skipped with `str.find`, and a block is parsed once when it closes.
"""

from __future__ import annotations

import re
from typing import Any, Generic, TypeVar

from crewbridge.base import jsonio

MAX_FENCE_LINE = 4096  # longer "fence lines" are text, so a partial line is never held without bound

_OUTSIDE, _BLOCK, _OTHER = 0, 1, 2
_NONSPACE = re.compile(r"\S")
_STRING_CHAR = re.compile(r'["\\]')

T = TypeVar("T")


class _Line:
    """The start of a line that may still turn out to be a fence line, kept until its newline."""

    __slots__ = ("char", "indent", "pieces", "run", "settled", "size")

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


class Block:
    """The text of a candidate block, and whether its end so far is inside a JSON string."""

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
        return _whole_surrogates("".join(self.pieces)[: min(length, self.limit)])

    def continues_at(self, length: int) -> bool:
        """A fence line after the first `length` characters: is it inside a JSON string (content)?"""
        if not self.jsonish:
            return False
        if not self.tried and not self.dropped and length <= self.limit:
            self.tried = True
            try:
                self.value, self.value_at = jsonio.loads(self.text(length), strict=False), length
                return False  # a whole JSON value: no string is open
            except ValueError:  # not (yet) a whole value, or nested too deeply (jsonio.TooDeep)
                pass
        self._scan()
        return self.in_string

    def _scan(self) -> None:
        for piece in self.pieces[self.scanned :]:
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


class FenceScanner(Generic[T]):
    """Feed text chunk by chunk; a subclass says what each candidate block yields (`_closed` when its
    closing fence arrives, `_cut` when the message ends inside it), and gets those items the moment
    the block closes. Items are calls, for the Extractor: "called" below means a block yielded some."""

    def __init__(self, max_block_chars: int = 1_000_000) -> None:
        self._max_block = max_block_chars
        self._offset = 0  # characters fed so far
        self._base = 0  # offset of the current chunk's first character
        self._mark = 0  # the current chunk up to here is in the open block
        self._state = _OUTSIDE
        self._fence = ""  # the open fence's character
        self._fence_len = 0
        self._line: _Line | None = _Line()  # None: the current line cannot be a fence line
        self._block: Block | None = None
        self._called = False
        self._prose = False
        self._first_call: int | None = None  # where the first call's block starts

    def _closed(self, block: Block, length: int, end: int) -> list[T]:
        """The items of a block whose first `length` characters closed properly at offset `end`."""
        raise NotImplementedError

    def _cut(self, block: Block, length: int, end: int) -> list[T]:
        """The items of a block the message ended inside (it holds `length` characters)."""
        raise NotImplementedError

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

    def feed(self, chunk: str) -> list[T]:
        """The calls whose block closed in this chunk, in order."""
        line = self._line
        if (
            self._state == _OUTSIDE and (line is None or not line.size) and "`" not in chunk and "~" not in chunk
        ):  # the common case: prose, with no fence character in it
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
        calls: list[T] = []
        self._base, self._mark = self._offset, 0
        self._offset += len(chunk)
        start = self._resume_line(chunk, calls)
        if start is not None:
            self._scan(chunk, start, calls)
        if self._state == _BLOCK:
            self._add_body(chunk, len(chunk))
        return calls

    def end_message(self) -> list[T]:
        """The message ended: its last line is complete, an open block is truncated, fences reset."""
        calls: list[T] = []
        self._base, self._mark = self._offset, 0
        line = self._line
        if line is not None and line.size:
            self._handle_line("".join(line.pieces), self._offset - line.size, "", 0, calls)
        if self._state == _BLOCK:
            block = self._block
            assert block is not None
            self._emit(calls, self._cut(block, self._offset - block.origin, self._offset), block)
        self._state, self._block, self._line = _OUTSIDE, None, _Line()
        return calls

    def finish(self) -> list[T]:
        """The stream ended: the same as the end of a message."""
        return self.end_message()

    # -- lines --------------------------------------------------------------------------------

    def _resume_line(self, chunk: str, calls: list[T]) -> int | None:
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
            self._handle_line("".join(line.pieces) + chunk[: nl + 1], self._base - line.size, chunk, nl + 1, calls)
        self._line = _Line()
        return nl + 1

    def _grow(self, line: _Line, piece: str) -> bool:
        if self._state == _OUTSIDE:
            return line.grow(piece, "`~", 3, closing=False)
        return line.grow(piece, self._fence, self._fence_len, closing=True)

    def _scan(self, chunk: str, i: int, calls: list[T]) -> None:
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
            self._handle_line(chunk[line_start : nl + 1], self._base + line_start, chunk, nl + 1, calls)
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

    def _handle_line(self, line: str, start: int, chunk: str, after: int, calls: list[T]) -> None:
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
                self._block = Block(start, start + len(line), self._max_block)
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
            self._block.add(chunk[self._mark : upto])
            self._mark = upto

    def _check_prose(self, text: str, a: int, b: int) -> None:
        if self._called and not self._prose and self._state == _OUTSIDE and _NONSPACE.search(text, a, b):
            self._prose = True

    def _emit(self, calls: list[T], new: list[T], block: Block) -> None:
        if new:
            calls.extend(new)
            self._called, self._prose = True, False
            if self._first_call is None:
                self._first_call = block.start
        else:  # the block was not a call: it is content, like prose
            self._prose = self._called


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


def _whole_surrogates(text: str) -> str:
    """Join surrogate pairs that arrived as two halves (a character split between two events)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
