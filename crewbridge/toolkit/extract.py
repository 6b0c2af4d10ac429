"""Tool calls out of streamed assistant text: the call rules over the fence grammar of
crewbridge.base.fences. A candidate block (```json or unlabelled) is a call attempt only when its text
starts with `{` or `[` (so an example nested in a bare ```` fence is not one) and holds an object
that means a call: a `name` with the prefix (`crew:…`; `"type": "tool_use"` may be left out, but
another type is an error), or `"type": "tool_use"` with the bare name of a registered tool (an
error: the prefix is missing). Each attempt is checked (JSON, shape, the tool's input schema) as its
block closes; one that fails is reported with an error and never runs. A block the message ended
inside is reported as truncated when it meant a call. Anything else is content.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from crewbridge.base import jsonio
from crewbridge.base.fences import Block, FenceScanner
from crewbridge.errors import ToolNotFound
from crewbridge.toolkit.registry import DEFAULT_PREFIX, ToolRegistry

_NAME = re.compile(r'"name"\s*:\s*"([^"\\\n]{1,200})"')
_JSON_TYPES = {
    dict: "object",
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


@dataclass(frozen=True)
class ToolCall:
    """One tool-call attempt. `error` is None when it is valid and may run; otherwise it never runs."""

    name: str  # as the model wrote it ("" when it could not be read)
    input: Any
    error: str | None
    raw: str  # the block's text between its fence lines (the first characters, for a block too large)
    end: int  # offset just past the closing fence line in all text fed so far


class Extractor(FenceScanner[ToolCall]):
    """Feed assistant text chunk by chunk; get each tool call the moment its block closes."""

    def __init__(
        self,
        registry: ToolRegistry | None = None,
        prefix: str = DEFAULT_PREFIX,
        *,
        max_block_chars: int = 1_000_000,
    ) -> None:
        if registry is not None and registry.prefix != prefix:
            raise ValueError(f"registry prefix '{registry.prefix}' differs from extractor prefix '{prefix}'")
        super().__init__(max_block_chars)
        self._registry = registry
        self._marker = prefix + ":"

    def _closed(self, block: Block, length: int, end: int) -> list[ToolCall]:
        """The calls in a block that closed properly (none when it is ordinary content)."""
        if not block.jsonish:
            return []
        raw = block.text(length)
        if length > self._max_block:
            return self._broken(
                raw,
                f"the tool-call block is too large ({length} characters; "
                f"the limit is {self._max_block}); nothing was run",
                end,
            )
        try:
            value = block.value if block.value_at == length else jsonio.loads(raw, strict=False)
        except ValueError as exc:  # JSONDecodeError, TooDeep, or an integer too long to convert
            hint = (
                "; put several calls in one array [ … ] or in separate blocks"
                if getattr(exc, "msg", "") == "Extra data"
                else ""
            )
            return self._broken(raw, f"invalid JSON in the tool-call block: {exc}{hint}", end)
        return self._calls_in(value, raw, end)

    def _cut(self, block: Block, length: int, end: int) -> list[ToolCall]:
        if not block.jsonish:
            return []
        raw = block.text(length)
        error = "truncated: the message ended before the block's closing fence; nothing was run"
        if length <= self._max_block:
            try:
                value = jsonio.loads(raw, strict=False)
            except ValueError:
                pass
            else:
                return [replace(c, error=error) for c in self._calls_in(value, raw, end)]
        return self._broken(raw, error, end)

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
        calls = []
        for index, item in enumerate(items):
            name = item.get("name") if isinstance(item, dict) else None
            name = name if isinstance(name, str) else ""
            data = item.get("input") if isinstance(item, dict) else None
            error: str | None
            if not self._meant(item):
                error = (
                    f"item [{index}] of the array is not a tool call; every item must be "
                    f'{{"type": "tool_use", "name": "{self._marker}<tool>", "input": {{…}}}}'
                )
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
