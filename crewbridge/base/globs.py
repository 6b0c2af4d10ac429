"""Globs: on tool names, as allow/deny/approval lists and hooks' `tools:` match tools; and on the words
of a shell command, as deny_commands and allow_commands match them."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crewbridge.base.shellwords import Word

DEFAULT_PREFIX = "crew"  # crew's tools are named `crew:read_file` (crew.yaml's `prefix:` changes it)
NATIVE = "native:"  # globs on the CLI's own tools: native:Bash, native:run_shell_command, native:*


def matches(name: str, patterns: Iterable[str]) -> bool:
    """Whether crew's tool `name` matches any glob; a pattern may carry a prefix (`crew:write_*`).
    Globs on the CLI's own tools (`native:…`) never match crew's tools."""
    return any(
        fnmatch.fnmatchcase(name, pattern.rsplit(":", 1)[-1]) for pattern in patterns if not pattern.startswith(NATIVE)
    )


def native_globs(patterns: Iterable[str]) -> list[str]:
    """The globs of `patterns` on the CLI's own tools, without their `native:`."""
    return [pattern[len(NATIVE) :] for pattern in patterns if pattern.startswith(NATIVE)]


def matches_native(tool: str, patterns: Iterable[str]) -> bool:
    """Whether the CLI's own tool `tool` matches a `native:` glob of `patterns`."""
    return any(fnmatch.fnmatchcase(tool, glob) for glob in native_globs(patterns))


# --- command globs (deny_commands, allow_commands) on the words of one simple command

_GLOB_TOKEN = re.compile(r"\[!?\]?[^\]]*\]|.", re.S)  # one character of a glob: `[…]` counts as one


def command_denied(glob: str, words: Sequence[Word]) -> bool:
    """Whether a deny glob matches a command's words (program without its directory first), joined
    by spaces: `*` spans words (`git push*` denies `git push origin`), and `rm *` also denies a bare
    `rm`. From a word only the shell knows on (`git $SUB`), the glob denies when it could match
    whatever follows."""
    text, complete = _joined(words)
    if complete:
        return fnmatch.fnmatchcase(text, glob) or fnmatch.fnmatchcase(text + " ", glob)
    tokens = _GLOB_TOKEN.findall(glob)
    return any(fnmatch.fnmatchcase(text, "".join(tokens[:n])) for n in range(len(tokens) + 1))


def command_allowed(glob: str, words: Sequence[Word]) -> bool:
    """Whether an allow glob admits a command's words, word by word: each word of the glob matches
    one word (`*` stays inside it), and a last word `*` stands for any further words. `make test`
    admits only `make test`; `pytest *` admits `pytest -q tests`. A word only the shell knows is
    admitted where the glob's word ends in `*` after what is known of it, and only a last `*`
    admits a word that may split into several (`$FILES`, `*.py`)."""
    pattern = glob.split()
    rest = pattern[-1:] == ["*"]
    if rest:
        pattern.pop()
    if len(words) < len(pattern) or (len(words) > len(pattern) and not rest):
        return False
    return all(_word_admitted(p, w) for p, w in zip(pattern, words, strict=False))


def _word_admitted(pattern: str, word: Word) -> bool:
    if word.known:
        return fnmatch.fnmatchcase(word.text, pattern)
    head = pattern.rstrip("*")
    return word.single and head != pattern and fnmatch.fnmatchcase(word.prefix, head)


def _joined(words: Sequence[Word]) -> tuple[str, bool]:
    """The words joined by spaces, up to what is known of the first unknown one; and whether all are known."""
    known: list[str] = []
    for word in words:
        if not word.known:
            return " ".join([*known, word.prefix]), False
        known.append(word.text)
    return " ".join(known), True
