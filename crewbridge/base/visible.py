"""Text a person must judge (an approval question: on the terminal, in an editor, in the browser),
drawn so that no part of it can hide or pass for something else. One function for every face.

- Control characters (C0, DEL, C1), line and paragraph separators, and in the one-line form line
  breaks and tabs, are shown as escapes: `\\n`, `\\t`, `\\x1b` (an ANSI sequence then shows whole).
- What draws nothing or reorders what is drawn — bidi controls and marks, zero-width characters,
  the byte order mark, variation selectors, tag characters, every space but the plain one, the
  blank letters (Hangul fillers, the braille blank), private-use and unassigned code points — is
  shown as its code point: `\\u202e`, `\\u200b`, `\\U000e0041`.
- A run of SPACES or more spaces is counted, not drawn: `⟨220 spaces⟩` (a run of spaces pushes the
  rest of a line out of sight: `ls -la` + 220 spaces + `; echo owned > pwned.txt`).
- Past `limit` characters the text is cut, and says so: `… (1,234 more characters)`.

A backslash the text holds is left as it is: an escape can make the text look like more than it is
(a literal `\\n` reads as a line break), never like less.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

SPACES = 4  # a run of this many spaces or more is counted, not drawn
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})  # Zs: every space but " " (below)
_BLANK = frozenset("\u034f\u115f\u1160\u2800\u3164\uffa0")  # letters and symbols that draw nothing
_SHORT = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
# what may need a second look: a run of spaces, or any character outside printable ASCII
_ONE_LINE = re.compile(rf"(?P<run> {{{SPACES},}})|(?P<char>[^\x20-\x7e])")
# the same, a line's leading indentation kept as it is (file text, shown line by line)
_LINES = re.compile(rf"(?P<indent>(?:^|(?<=\n))[ \t]+)|(?P<run> {{{SPACES},}})|(?P<char>[^\x20-\x7e\n])")


def visible(text: str, limit: int | None = None, *, lines: bool = False) -> str:
    """`text` with everything that could hide a part of it made visible (see the module); cut at
    `limit` characters of what is shown. With `lines`, line breaks and each line's indentation
    stay as they are (a file's text shown as its lines)."""
    shown: list[str] = []
    size = 0  # characters of `shown`
    taken = 0  # characters of `text` it stands for
    for match in (_LINES if lines else _ONE_LINE).finditer(text):
        start, end = match.span()
        piece = _piece(match)
        for part, length, plain in ((text[taken:start], start - taken, True), (piece, end - start, False)):
            if limit is not None and size + len(part) > limit:
                if plain:  # as much of it as fits (an escape or a count is never cut)
                    shown.append(part[: limit - size])
                    taken += limit - size
                return "".join(shown) + f"… ({len(text) - taken:,} more characters)"
            shown.append(part)
            size += len(part)
            taken += length
    rest = text[taken:]
    if limit is not None and size + len(rest) > limit:
        return "".join(shown) + rest[: limit - size] + f"… ({len(rest) - (limit - size):,} more characters)"
    return "".join(shown) + rest


def visible_strings(value: Any, *, lines: bool = True) -> Any:
    """`value` (JSON-like data) with each string in it, keys included, made visible (no limit)."""
    if isinstance(value, str):
        return visible(value, lines=lines)
    if isinstance(value, dict):
        return {visible(str(key), lines=False): visible_strings(item, lines=lines) for key, item in value.items()}
    if isinstance(value, list):
        return [visible_strings(item, lines=lines) for item in value]
    return value


def _piece(match: re.Match[str]) -> str:
    """What one match is shown as."""
    if match["run"] is not None:
        return f"⟨{len(match['run'])} spaces⟩"
    if match.lastgroup == "indent":
        return match[0]
    char = match["char"]
    return _escape(char) if _hidden(char) else char


def _hidden(char: str) -> bool:
    """Whether `char` (not printable ASCII) could hide or disguise text around it."""
    code = ord(char)
    if 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF:  # variation selectors (category Mn)
        return True
    return char in _BLANK or unicodedata.category(char) in _HIDDEN


def _escape(char: str) -> str:
    return _SHORT.get(char) or char.encode("unicode_escape").decode("ascii")
