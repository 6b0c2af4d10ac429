"""The streaming tool-call extractor, rule by rule (DESIGN.md "Tool-call format").

Every case in CASES is also run through the property tests: any split of its text into chunks gives
the same calls, at the same offsets, as the text in one piece, each call from the chunk holding the
end of its closing fence line.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crewbridge.base.fences import MAX_FENCE_LINE
from crewbridge.base.jsonio import MAX_DEPTH
from crewbridge.toolkit.extract import Extractor, Shown, ToolCall
from crewbridge.toolkit.functions import tool
from crewbridge.toolkit.registry import ToolRegistry


@tool(
    schema={
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
        "additionalProperties": False,
    },
    read_only=True,
)
def read_file(ctx, path: str) -> str:
    """Read a file."""
    return path


@tool(
    schema={
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
    }
)
def write_file(ctx, path: str, content: str) -> int:
    """Write a file."""
    return len(content)


@tool(schema={"type": "object", "properties": {"path": {"type": "string"}}}, read_only=True)
def list_files(ctx, path: str = ".") -> list:
    """List files."""
    return []


@tool(schema={"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}, read_only=True)
def grep(ctx, pattern: str) -> list:
    """Search files."""
    return []


def make_registry(prefix: str = "crew") -> ToolRegistry:
    """A small registry of our own (the built-in tools are not what is tested here)."""
    registry = ToolRegistry(prefix)
    registry.register_all([read_file, write_file, list_files, grep])
    return registry


REGISTRY = make_registry()


def call(name: str, data: Any = None, **kw: Any) -> str:
    """A tool-call object as a model writes it."""
    return json.dumps({"type": "tool_use", "name": name, "input": kw if data is None else data})


def block(body: str, info: str = "json", fence: str = "```", close: str | None = None) -> str:
    return f"{fence}{info}\n{body}\n{fence if close is None else close}\n"


def run(
    messages: str | tuple[str, ...], registry: ToolRegistry | None = REGISTRY, split: int = 0, **kw: Any
) -> tuple[list[ToolCall], Extractor]:
    """Feed each message (in chunks of `split` characters when given), ending each one."""
    extractor = Extractor(registry, **kw)
    out: list[ToolCall] = []
    for message in (messages,) if isinstance(messages, str) else messages:
        step = split or max(len(message), 1)
        for i in range(0, len(message), step):
            out += extractor.feed(message[i : i + step])
        out += extractor.end_message()
    out += extractor.finish()
    return out, extractor


@dataclass
class Case:
    id: str
    text: str | tuple[str, ...]
    expect: list[tuple[str, Any, str | None]] = field(default_factory=list)  # name, input, error fragment
    registry: bool = True


READ = ("crew:read_file", {"path": "a.txt"}, None)
ANY = object()  # any input

CASES = [
    # the format: a fenced json block holding a tool_use object
    Case("plain call", "Let me look.\n" + block(call("crew:read_file", path="a.txt")), [READ]),
    Case("info string in capitals", block(call("crew:read_file", path="a.txt"), info="JSON"), [READ]),
    Case("info string in mixed case", block(call("crew:read_file", path="a.txt"), info="Json"), [READ]),
    Case("info string after spaces", block(call("crew:read_file", path="a.txt"), info="  json  "), [READ]),
    Case("info string with more words", block(call("crew:read_file", path="a.txt"), info="json tool"), [READ]),
    Case("empty info string", block(call("crew:read_file", path="a.txt"), info=""), [READ]),
    Case("four backticks", block(call("crew:read_file", path="a.txt"), fence="````"), [READ]),
    Case("closed by a longer fence", block(call("crew:read_file", path="a.txt"), close="`````"), [READ]),
    Case("tildes", block(call("crew:read_file", path="a.txt"), fence="~~~"), [READ]),
    Case(
        "opener and closer indented 3 spaces",
        "   ```json\n" + call("crew:read_file", path="a.txt") + "\n   ```\n",
        [READ],
    ),
    Case("closer with trailing spaces and tabs", block(call("crew:read_file", path="a.txt"), close="``` \t "), [READ]),
    Case("CRLF line endings", "Hi\r\n```json\r\n" + call("crew:read_file", path="a.txt") + "\r\n```\r\n", [READ]),
    Case(
        "pretty-printed JSON",
        block(json.dumps({"type": "tool_use", "name": "crew:read_file", "input": {"path": "a.txt"}}, indent=2)),
        [READ],
    ),
    Case(
        "closing fence at the very end, no newline",
        "```json\n" + call("crew:read_file", path="a.txt") + "\n```",
        [READ],
    ),
    Case(
        "unicode input",
        block(call("crew:read_file", path="ünïcødé 😀.txt")),
        [("crew:read_file", {"path": "ünïcødé 😀.txt"}, None)],
    ),
    # several calls
    Case(
        "several blocks, in order",
        block(call("crew:read_file", path="a.txt")) + "and\n" + block(call("crew:list_files", path="src")),
        [READ, ("crew:list_files", {"path": "src"}, None)],
    ),
    Case(
        "an array holds several calls",
        block("[" + call("crew:read_file", path="a.txt") + ", " + call("crew:list_files") + "]"),
        [READ, ("crew:list_files", {}, None)],
    ),
    Case(
        "an array item that is not a call is an error",
        block("[" + call("crew:read_file", path="a.txt") + ', {"note": 1}]'),
        [READ, ("", None, "item [1] of the array is not a tool call")],
    ),
    Case("an empty array is content", block("[]")),
    # fence markers inside JSON strings
    Case(
        "fences inside an escaped string",
        block(call("crew:write_file", path="r.md", content="```json\n{}\n```\n")),
        [("crew:write_file", {"path": "r.md", "content": "```json\n{}\n```\n"}, None)],
    ),
    Case(
        "fence lines inside a string with raw newlines",
        '```json\n{"type": "tool_use", "name": "crew:write_file", "input": {"path": "r.md", "content": "a\n```\nb\n'
        '~~~\n"}}\n```\nafter\n',
        [("crew:write_file", {"path": "r.md", "content": "a\n```\nb\n~~~\n"}, None)],
    ),
    Case(
        "an escaped quote does not end the string",
        '```json\n{"type": "tool_use", "name": "crew:write_file", "input": {"path": "q", "content": "say \\"\n```\n'
        '\\\\"}}\n```\n',
        [("crew:write_file", {"path": "q", "content": 'say "\n```\n\\'}, None)],
    ),
    Case(
        "a fence line inside a string in a block that is not JSON-like closes it",
        '```\nsay "hi\n```\n' + block(call("crew:read_file", path="a.txt")),
        [READ],
    ),
    # what is not a call
    Case("other JSON is content", block('{"name": "Ada", "age": 36}')),
    Case("the captures' shape is content", block('{"tool_use": {"name": "search", "input": {"query": "hello"}}}')),
    Case(
        "an API example with a name of no prefix is content",
        block('{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}'),
    ),
    Case("another prefix is content", block(call("other:read_file", path="a.txt"))),
    Case("a number, a string, null are content", block("42") + block('"crew:read_file tool_use"') + block("null")),
    Case("a block that is not JSON is content", block("just some words about crew:read_file and tool_use")),
    Case(
        "other languages are examples",
        block(call("crew:read_file", path="a.txt"), info="python")
        + block(call("crew:read_file", path="a.txt"), info="jsonc")
        + block(call("crew:read_file", path="a.txt"), info="javascript"),
    ),
    Case(
        "a json block inside a four-backtick markdown fence is an example",
        "````markdown\n"
        + block(call("crew:read_file", path="x"))
        + "````\n"
        + block(call("crew:read_file", path="a.txt")),
        [READ],
    ),
    Case(
        "a json block inside a tilde fence is an example", "~~~md\n" + block(call("crew:read_file", path="x")) + "~~~\n"
    ),
    Case(
        "a json block inside a python fence is an example (CommonMark pairs the fences)",
        "```python\nEXAMPLE = '''\n" + block(call("crew:read_file", path="x")) + "'''\n```\n",
    ),
    Case(
        "inline code is an example",
        "Write `"
        + call("crew:read_file", path="x")
        + "` or ```json "
        + call("crew:read_file", path="x")
        + "``` inline.\n",
    ),
    Case(
        "a backtick info string with a backtick is inline code, not a fence",
        "```json`\n" + call("crew:read_file", path="x") + "\n```\n",
    ),
    Case(
        "four spaces of indentation is not a fence", "    ```json\n" + call("crew:read_file", path="x") + "\n    ```\n"
    ),
    Case("a tab is not indentation for a fence", "\t```json\n" + call("crew:read_file", path="x") + "\n\t```\n"),
    Case(
        "a fence in the middle of a line is not a fence", "see ```json\n" + call("crew:read_file", path="x") + "\n```\n"
    ),
    Case("two backticks are not a fence", "``json\n" + call("crew:read_file", path="x") + "\n``\n"),
    Case(
        "a shorter fence does not close a longer one",
        "````json\n" + call("crew:read_file", path="a.txt") + "\n```\n````\n",
        [("crew:read_file", None, "invalid JSON")],
    ),
    Case(
        "a tilde line does not close a backtick block",
        "```json\n" + call("crew:read_file", path="a.txt") + "\n~~~\n```\n",
        [("crew:read_file", None, "invalid JSON")],
    ),
    Case(
        "a fence line with an info string does not close a block",
        "```json\n" + call("crew:read_file", path="a.txt") + "\n```json\n```\n",
        [("crew:read_file", None, "invalid JSON")],
    ),
    Case(
        "a fence line over the length limit is text",
        "```" + "j" * MAX_FENCE_LINE + "\n" + call("crew:read_file", path="x") + "\n```\n",
    ),
    # broken attempts: reported, never run
    Case(
        "invalid JSON that clearly meant a call",
        '```json\n{"type": "tool_use", "name": "crew:read_file", "input": {"path": "a.txt"}\n```\n',
        [("crew:read_file", None, "invalid JSON in the tool-call block")],
    ),
    Case(
        "single quotes are invalid JSON",
        "```json\n{'type': 'tool_use', 'name': 'crew:read_file', 'input': {}}\n```\n",
        [("", None, "invalid JSON")],
    ),
    Case(
        "two objects in one block: invalid, with a hint",
        block(call("crew:read_file", path="a.txt") + "\n" + call("crew:list_files")),
        [("crew:read_file", None, "put several calls in one array")],
    ),
    Case("invalid JSON that is not a call is content", block('{"a": 1,}')),
    Case(
        "a number too long to convert is invalid JSON",
        block('{"type": "tool_use", "name": "crew:list_files", "input": {"n": ' + "1" * 5000 + "}}"),
        [("crew:list_files", None, "Exceeds the limit")],
    ),
    Case(
        "unknown tool, nearest suggested",
        block(call("crew:read_fil", path="a.txt")),
        [("crew:read_fil", {"path": "a.txt"}, "unknown tool 'crew:read_fil'; did you mean 'crew:read_file'?")],
    ),
    Case(
        "unknown tool, the list given when nothing is near",
        block(call("crew:zzz")),
        [("crew:zzz", {}, "available: crew:read_file")],
    ),
    Case(
        "a registered name without the prefix",
        block(call("read_file", path="a.txt")),
        [("read_file", {"path": "a.txt"}, "write 'crew:read_file'")],
    ),
    Case(
        "a prefixed name without the type is a call: the prefix is the intent",
        block('{"name": "crew:read_file", "input": {"path": "a.txt"}}'),
        [READ],
    ),
    Case(
        "a prefixed name without the type, cut mid-JSON",
        '```json\n{"name": "crew:read_file", "inp',
        [("crew:read_file", None, "truncated")],
    ),
    Case(
        "a prefixed name with another type",
        block('{"type": "function", "name": "crew:read_file", "input": {"path": "a.txt"}}'),
        [("crew:read_file", {"path": "a.txt"}, '(got "function")')],
    ),
    Case("an empty tool name", block(call("crew:")), [("crew:", {}, "the tool name is empty")]),
    Case(
        "missing input",
        block('{"type": "tool_use", "name": "crew:list_files"}'),
        [("crew:list_files", None, 'missing "input"')],
    ),
    Case(
        "input that is not an object",
        block(call("crew:read_file", ["a.txt"])),
        [("crew:read_file", ["a.txt"], '"input" must be an object, got array')],
    ),
    Case(
        "a schema violation names its JSON path",
        block(call("crew:read_file", path=7)),
        [("crew:read_file", {"path": 7}, "invalid input for crew:read_file at $.path: 7 is not of type 'string'")],
    ),
    Case(
        "a missing required property",
        block(call("crew:write_file", path="a")),
        [("crew:write_file", {"path": "a"}, "'content' is a required property")],
    ),
    Case(
        "an extra property",
        block(call("crew:read_file", path="a", mode="r")),
        [("crew:read_file", ANY, "Additional properties are not allowed")],
    ),
    Case(
        "without a registry only the format is checked",
        block(call("crew:anything", x=1)) + block(call("read_file", path="a")),
        [("crew:anything", {"x": 1}, None)],
        registry=False,
    ),
    # truncation and message boundaries
    Case(
        "a block cut by the end of the stream is never run",
        "Reading:\n```json\n" + call("crew:read_file", path="a.txt") + "\n",
        [("crew:read_file", {"path": "a.txt"}, "truncated")],
    ),
    Case(
        "a block cut mid-JSON",
        '```json\n{"type": "tool_use", "name": "crew:read_file", "inp',
        [("crew:read_file", None, "truncated")],
    ),
    Case("a cut block that meant no call is content", '```json\n{"a": 1\n'),
    Case(
        "a cut block of whole JSON that is no call is content",
        "```json\n" + '{"note": "tool_use is how crew:read_file is called"}\n',
    ),
    Case(
        "a block never spans two messages",
        ("```json\n" + call("crew:read_file", path="a.txt") + "\n", block(call("crew:list_files"))),
        [("crew:read_file", {"path": "a.txt"}, "truncated"), ("crew:list_files", {}, None)],
    ),
    Case(
        "a message that ends inside a fence line's opener",
        ("text\n```js", "on\n" + call("crew:read_file", path="x") + "\n```\n"),
    ),
    Case(
        "a new message starts a new line",
        ("no newline at the end", "```json\n" + call("crew:read_file", path="a.txt") + "\n```\n"),
        [READ],
    ),
    Case(
        "a closing fence that ends a message without a newline",
        ("```json\n" + call("crew:read_file", path="a.txt") + "\n```", "more\n"),
        [READ],
    ),
    Case(
        "an example fence ends with its message",
        ("```python\nprint(1)\n", block(call("crew:read_file", path="a.txt"))),
        [READ],
    ),
    Case(
        "surrogate halves from two events are one character",
        '```json\n{"type": "tool_use", "name": "crew:read_file", "input": {"path": "\ud83d\ude00"}}\n```\n',
        [("crew:read_file", {"path": "😀"}, None)],
    ),
]


def check(calls: list[ToolCall], expect: list[tuple[str, Any, str | None]]) -> None:
    assert len(calls) == len(expect), [(c.name, c.error) for c in calls]
    for got, (name, data, error) in zip(calls, expect, strict=True):
        assert got.name == name
        if data is not ANY:
            assert got.input == data
        if error is None:
            assert got.error is None
        else:
            assert got.error is not None and error in got.error, got.error


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Case) -> None:
    calls, _ = run(case.text, REGISTRY if case.registry else None)
    check(calls, case.expect)


def test_a_call_carries_its_block_text_and_where_it_ends() -> None:
    first, second = call("crew:read_file", path="a.txt"), call("crew:list_files")
    text = "Intro.\n```json\n" + first + "\n```\nMiddle.\n~~~\n" + second + "\n~~~\nOutro."
    calls, _ = run(text)
    assert [c.raw for c in calls] == [first + "\n", second + "\n"]
    assert text[: calls[0].end] == "Intro.\n```json\n" + first + "\n```\n"
    assert text[: calls[1].end].endswith(second + "\n~~~\n")


def test_offsets_count_all_text_fed_across_messages() -> None:
    messages = ("First message.", "```json\n" + call("crew:list_files") + "\n```\n")
    calls, _ = run(messages)
    assert calls[0].end == len("".join(messages))


def test_a_call_is_emitted_the_moment_its_closing_line_is_complete() -> None:
    extractor = Extractor(REGISTRY)
    assert extractor.feed("```json\n" + call("crew:read_file", path="a.txt") + "\n") == []
    assert extractor.feed("```") == []  # "```json" could still follow
    [got] = extractor.feed("\nThe CLI is still talking")
    assert got.input == {"path": "a.txt"} and got.error is None


def test_in_block_is_true_from_a_json_fence_line_to_its_closing_line() -> None:
    extractor = Extractor(REGISTRY)
    seen = []
    for chunk in [
        "Reading.\n",
        "```js",
        "on\n",
        call("crew:read_file", path="a.txt"),
        "\n```\n",
        "```python\n",
        "x = 1\n",
    ]:
        extractor.feed(chunk)
        seen.append(extractor.in_block)
    assert seen == [False, False, True, True, False, False, False]


def test_a_batch_shares_its_block() -> None:
    body = "[" + call("crew:read_file", path="a.txt") + "," + call("crew:list_files") + "]"
    calls, _ = run(block(body))
    assert {c.raw for c in calls} == {body + "\n"} and len({c.end for c in calls}) == 1


def test_a_block_over_the_size_limit_is_an_error_and_keeps_only_its_head() -> None:
    big = call("crew:write_file", path="a", content="x" * 5000)
    calls, _ = run(block(big) + block(call("crew:read_file", path="a.txt")), max_block_chars=1000)
    check(calls, [("crew:write_file", None, f"too large ({len(big) + 1} characters; the limit is 1000)"), READ])
    assert calls[0].raw == big[:1000]


def test_a_block_over_the_size_limit_still_honours_strings() -> None:
    body = '{"type": "tool_use", "name": "crew:write_file", "input": {"content": "' + "y" * 3000 + '\n```\n"}}'
    calls, _ = run(block(body) + block(call("crew:read_file", path="a.txt")), max_block_chars=1000, split=7)
    check(calls, [("crew:write_file", None, "too large"), READ])


def test_nesting_deeper_than_the_limit_is_an_error_for_the_model() -> None:
    deep: dict = {"path": "a"}
    for _ in range(MAX_DEPTH):
        deep = {"d": deep}
    calls, _ = run(block(call("crew:write_file", deep)) + block(call("crew:read_file", path="a.txt")))
    check(
        calls,
        [
            (
                "crew:write_file",
                None,
                f"invalid JSON in the tool-call block: JSON nested more than {MAX_DEPTH} levels deep",
            ),
            READ,
        ],
    )


def test_nesting_up_to_the_limit_is_a_call() -> None:
    deep: dict = {"path": "a"}
    for _ in range(MAX_DEPTH - 3):  # the call's object and its input are two levels more
        deep = {"d": deep}
    calls, _ = run(block(call("crew:write_file", deep)), registry=None)
    check(calls, [("crew:write_file", ANY, None)])


@pytest.mark.parametrize("split", [0, 7])
def test_nesting_past_the_interpreter_recursion_limit_is_an_error_too(split: int) -> None:
    body = '{"type": "tool_use", "name": "crew:x", "input": ' + "[" * 100_000 + "]" * 100_000 + "}"
    calls, _ = run(block(body), split=split)
    check(calls, [("crew:x", None, f"nested more than {MAX_DEPTH} levels deep")])


def test_a_custom_prefix() -> None:
    registry = make_registry("ops")
    text = block(call("ops:read_file", path="a.txt")) + block(call("crew:read_file", path="b"))
    calls, _ = run(text, registry, prefix="ops")
    check(calls, [("ops:read_file", {"path": "a.txt"}, None)])


def test_the_registry_and_the_extractor_must_agree_on_the_prefix() -> None:
    with pytest.raises(ValueError, match="registry prefix 'crew' differs from extractor prefix 'ops'"):
        Extractor(REGISTRY, "ops")


class TestProseAfterCalls:
    """Did the model go on talking after its calls (instead of stopping)?"""

    def after(self, *chunks: str) -> bool:
        extractor = Extractor(REGISTRY)
        for chunk in chunks:
            extractor.feed(chunk)
        return extractor.prose_after_calls

    CALL = "Reading.\n" + block(call("crew:read_file", path="a.txt"))

    def test_text_before_any_call_does_not_count(self) -> None:
        assert not self.after("Just talking.\n", "```python\nx\n```\n")

    def test_text_after_a_call_counts(self) -> None:
        assert self.after(self.CALL, "The file says 7.")

    def test_text_on_the_closing_line_chunk_counts(self) -> None:
        assert self.after(self.CALL + "So")

    def test_whitespace_does_not_count(self) -> None:
        assert not self.after(self.CALL, "\n  \n\t")

    def test_the_start_of_another_block_does_not_count(self) -> None:
        assert not self.after(self.CALL, "\n``")
        assert not self.after(self.CALL, '\n```json\n{"type": ')

    def test_another_call_keeps_it_one_batch(self) -> None:
        assert not self.after(self.CALL, "\n", block(call("crew:list_files")))

    def test_a_fence_of_another_language_counts(self) -> None:
        assert self.after(self.CALL, "```python\n")

    def test_a_block_that_held_no_call_counts(self) -> None:
        assert self.after(self.CALL, block('{"a": 1}'))

    def test_a_partial_line_that_cannot_be_a_fence_counts_at_once(self) -> None:
        assert self.after(self.CALL, "``x")
        assert self.after(self.CALL, "    ```")  # four spaces: indented code, not a fence

    def test_it_is_about_the_text_after_the_last_call(self) -> None:
        assert not self.after(self.CALL, "Then:\n", block(call("crew:list_files")))


# -- properties -------------------------------------------------------------------------------


def feed_in_chunks(messages: tuple[str, ...], cuts: list[int]) -> tuple[list[ToolCall], bool, list[int]]:
    """Calls, prose flag, and for each call the index of the piece of text whose feeding returned it
    (end_message and finish count as the end of their message)."""
    extractor = Extractor(REGISTRY)
    calls: list[ToolCall] = []
    where: list[int] = []
    offset = 0
    for message in messages:
        points = sorted({c % (len(message) + 1) for c in cuts} | {0, len(message)})
        for a, b in itertools.pairwise(points):
            new = extractor.feed(message[a:b])
            calls += new
            where += [offset + b - 1] * len(new)  # the last character of the chunk that returned them
        new = extractor.end_message()
        offset += len(message)
        calls += new
        where += [offset] * len(new)
    return calls, extractor.prose_after_calls, where


def whole(messages: tuple[str, ...]) -> tuple[list[ToolCall], bool]:
    calls, prose, _ = feed_in_chunks(messages, [])
    return calls, prose


def as_messages(text: str | tuple[str, ...]) -> tuple[str, ...]:
    return (text,) if isinstance(text, str) else text


def assert_split_invariant(messages: tuple[str, ...], cuts: list[int]) -> None:
    expected = whole(messages)
    calls, prose, where = feed_in_chunks(messages, cuts)
    assert (calls, prose) == expected
    everything = "".join(messages)
    for got, returned_at in zip(calls, where, strict=True):
        if everything[got.end - 1 : got.end] == "\n":  # emitted by the chunk that completed the line
            assert got.end - 1 <= returned_at
            chunk_start = max([0] + [c for c in _chunk_starts(messages, cuts) if c <= got.end - 1])
            assert returned_at < max(chunk_start, got.end - 1) + _chunk_len(messages, cuts, chunk_start) + 1


def _chunk_starts(messages: tuple[str, ...], cuts: list[int]) -> list[int]:
    starts, offset = [], 0
    for message in messages:
        starts += [offset + p for p in sorted({c % (len(message) + 1) for c in cuts} | {0})]
        offset += len(message)
    return starts


def _chunk_len(messages: tuple[str, ...], cuts: list[int], start: int) -> int:
    later = [s for s in _chunk_starts(messages, cuts) if s > start] + [len("".join(messages))]
    return min(later) - start


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(CASES), cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
@pytest.mark.slow
def test_any_split_of_any_case_gives_the_unsplit_result(case: Case, cuts: list[int]) -> None:
    assert_split_invariant(as_messages(case.text), cuts)


@pytest.mark.slow
def test_every_single_split_point_of_every_case() -> None:
    for case in CASES:
        messages = as_messages(case.text)
        if sum(map(len, messages)) > 2000:
            continue
        for cut in range(1, max(map(len, messages))):
            assert_split_invariant(messages, [cut])


def test_one_character_at_a_time() -> None:
    for case in CASES:
        messages = as_messages(case.text)
        if sum(map(len, messages)) <= 20_000:
            assert_split_invariant(messages, list(range(max(map(len, messages)) + 1)))


FRAGMENTS = [
    "```",
    "``",
    "`",
    "~~~",
    "~",
    "````",
    "json",
    "JSON",
    "python",
    "\n",
    "\r\n",
    " ",
    "   ",
    "    ",
    "\t",
    "{",
    "}",
    "[",
    "]",
    '"',
    "\\",
    '\\"',
    ":",
    ",",
    "tool_use",
    '"type": "tool_use"',
    '"name": "crew:read_file"',
    '"input": {"path": "a"}',
    "crew:",
    "é",
    "😀",
    "\ud83d",
    "\ude00",
    "x",
    "\n```json\n" + call("crew:read_file", path="a.txt") + "\n```\n",
    "\n```\n[" + call("crew:list_files") + "]\n```\n",
    "\n````md\n",
    "\n````\n",
]

fragment_text = st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join)


@settings(max_examples=250, deadline=None)
@given(
    messages=st.lists(fragment_text, min_size=1, max_size=3).map(tuple),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=10),
)
@pytest.mark.slow
def test_any_split_of_fence_heavy_text_gives_the_unsplit_result(messages: tuple[str, ...], cuts: list[int]) -> None:
    assert_split_invariant(messages, cuts)


@settings(max_examples=300, deadline=None)
@given(text=st.text(), cuts=st.lists(st.integers(min_value=0, max_value=500), max_size=8))
@pytest.mark.slow
def test_random_text_never_crashes(text: str, cuts: list[int]) -> None:
    assert_split_invariant((text,), cuts)
    calls, _ = run(text, None)
    assert all(isinstance(c, ToolCall) for c in calls)


# -- linear time ------------------------------------------------------------------------------


def busiest_text(n: int) -> list[str]:
    """Chunks that exercise every path: prose, inline backticks, calls, examples, string-held fence
    lines, long partial lines, one character at a time."""
    unit = (
        "Some prose with `inline` code and ``two`` ticks.\n"
        + block(call("crew:read_file", path="a.txt"))
        + "````markdown\n"
        + block(call("crew:read_file", path="x"))
        + "````\n"
    )
    chunks = [unit[i : i + 7] for i in range(0, len(unit), 7)] * n
    held = (
        '```json\n{"type": "tool_use", "name": "crew:write_file", "input": {"path": "p", "content": "'
        + "```\n" * n
        + '"}}\n```\n'
    )
    chunks += [held[i : i + 3] for i in range(0, len(held), 3)]
    chunks += list("```" + "j" * 50 * n + "\n")  # a long opener line, one character at a time
    chunks += ["`" * 10 * n, "\n"]
    return chunks


def steps(chunks: list[str]) -> int:
    """The Python bytecode instructions the extractor runs over `chunks`: its work, counted the same
    on any machine. (Copies inside C string methods are not counted: bench/throughput.py times the
    whole of it.)"""
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        if event == "call":
            frame.f_trace_opcodes = True
        elif event == "opcode":
            count += 1
        return trace

    extractor = Extractor(REGISTRY, max_block_chars=10_000_000)
    sys.settrace(trace)
    try:
        for chunk in chunks:
            extractor.feed(chunk)
        extractor.finish()
    finally:
        sys.settrace(None)
    return count


@pytest.mark.slow
def test_work_grows_linearly_with_the_input() -> None:
    ratio = steps(busiest_text(400)) / steps(busiest_text(100))
    assert ratio < 8, f"4x the input took {ratio:.1f}x the steps (linear: about 4, quadratic: 16)"


class View:
    """One reply fed to an Extractor, and what a person sees of it (Shown)."""

    def __init__(self, prefix: str = "crew") -> None:
        self.extractor = Extractor(REGISTRY if prefix == REGISTRY.prefix else None, prefix)
        self.shown = Shown(self.extractor)

    def feed(self, text: str) -> str:
        self.extractor.feed(text)
        return self.shown.take(text)

    def end(self) -> str:
        self.extractor.finish()
        return self.shown.take()


def filtered(*chunks: str, prefix: str = "crew") -> str:
    view = View(prefix)
    return "".join(view.feed(c) for c in chunks) + view.end()


def call_block(name: str = "crew:read_file", **data: Any) -> str:
    return "```json\n" + json.dumps({"type": "tool_use", "name": name, "input": data}) + "\n```\n"


def char_by_char(text: str) -> str:
    return filtered(*text)


# -- what a person sees: the text before the first call (Shown) -----------------------------------


def test_plain_text_passes_whole_however_it_is_chunked():
    text = "Hello.\n\nA list:\n- one\n  `code` and ``two`` ticks\n~ tilde\n"
    assert filtered(text) == text
    assert char_by_char(text) == text


def test_a_line_shows_before_its_newline_once_it_cannot_be_a_fence():
    f = View()
    assert f.feed("Hel") == "Hel"
    assert f.feed("lo\n") == "lo\n"
    assert f.feed("``") == ""  # may still become a fence line
    assert f.feed("x y\n") == "``x y\n"


def test_a_call_block_is_left_out_and_so_is_everything_after_it():
    text = "Let me read it.\n" + call_block(path="notes.txt") + "The file says 7.\n"
    assert filtered(text) == "Let me read it.\n"
    assert char_by_char(text) == "Let me read it.\n"


def test_several_calls_and_an_array_of_calls_are_left_out():
    calls = (
        "```json\n"
        + json.dumps(
            [
                {"type": "tool_use", "name": "crew:read_file", "input": {"path": "a"}},
                {"type": "tool_use", "name": "crew:grep", "input": {"pattern": "x"}},
            ]
        )
        + "\n```\n"
    )
    assert filtered("Reading.\n", call_block(path="a"), "\n", call_block(path="b")) == "Reading.\n"
    assert filtered("Both.\n" + calls) == "Both.\n"


def test_a_broken_call_is_left_out_too():
    broken = '```json\n{"type": "tool_use", "name": "crew:read_file", "input": {"path": }\n```\n'
    assert filtered("Reading.\n" + broken) == "Reading.\n"


def test_a_json_block_that_is_not_a_call_is_shown_whole_once_it_closes():
    text = 'The config:\n```json\n{"port": 8080}\n```\nDone.\n'
    f = View()
    assert f.feed('The config:\n```json\n{"port"') == "The config:\n"
    assert f.feed(": 8080}\n```\nDone.\n") == '```json\n{"port": 8080}\n```\nDone.\n'
    assert char_by_char(text) == text


def test_examples_in_another_language_fence_or_inline_or_indented_are_shown():
    example = "````markdown\nCall a tool like this:\n" + call_block(path="x") + "````\nThat was an example.\n"
    inline = 'Write ```json {"type":"tool_use"}``` inline.\n'
    indented = "    ```json\n    " + json.dumps({"type": "tool_use", "name": "crew:read_file"}) + "\n    ```\n"
    for text in (example, inline, indented):
        assert filtered(text) == text
        assert char_by_char(text) == text


def test_a_fence_line_inside_a_json_string_does_not_end_the_call():
    raw = (
        '```json\n{"type": "tool_use", "name": "crew:write_file", "input": {"path": "a.md", '
        '"content": "# Title\n```\nprint(1)\n```\n"}}\n```\n'
    )
    assert filtered("Writing.\n" + raw + "Done, I guess.\n") == "Writing.\n"
    assert char_by_char("Writing.\n" + raw) == "Writing.\n"


def test_a_call_with_tildes_or_no_info_string_is_left_out():
    call = json.dumps({"type": "tool_use", "name": "crew:list_files", "input": {}})
    assert filtered(f"A.\n~~~\n{call}\n~~~\n") == "A.\n"
    assert filtered(f"B.\n```\n{call}\n```\n") == "B.\n"


def test_the_prefix_decides_what_is_a_call():
    call = json.dumps({"name": "tools:read_file", "input": {}})
    assert filtered(f"```json\n{call}\n```\n", prefix="tools") == ""
    assert filtered(f"```json\n{call}\n```\n", prefix="crew") == f"```json\n{call}\n```\n"


def test_a_registered_tool_without_the_prefix_is_a_call_another_tool_use_is_content():
    bare = json.dumps({"type": "tool_use", "name": "read_file", "input": {"path": "a"}})
    other = json.dumps({"type": "tool_use", "name": "Bash", "input": {"command": "ls"}})
    assert filtered(f"Reading.\n```json\n{bare}\n```\n") == "Reading.\n"  # a call, with an error
    assert (
        filtered(f"Claude's own look like:\n```json\n{other}\n```\n")
        == f"Claude's own look like:\n```json\n{other}\n```\n"
    )


def test_a_block_the_reply_left_open_is_shown_unless_it_is_a_call():
    assert filtered('See:\n```json\n{"a": 1}\n') == 'See:\n```json\n{"a": 1}\n'
    assert filtered('Reading.\n```json\n{"type": "tool_use", "name": "crew:read_file", "input": {}}') == "Reading.\n"


FRAGMENTS = [
    "```",
    "``",
    "~~~",
    "````",
    "json",
    "python",
    "\n",
    "\r\n",
    " ",
    "    ",
    "{",
    "}",
    "[",
    '"',
    "\\",
    '"type": "tool_use"',
    '"name": "crew:read_file"',
    '"name": "read_file"',
    '"name": "Bash"',
    '"input": {"path": "a"}',
    "crew:",
    "é",
    "x",
    "\n" + call_block(path="a.txt"),
    "\n```\n[" + json.dumps({"type": "tool_use", "name": "crew:list_files", "input": {}}) + "]\n```\n",
    "\n````md\n",
    "\n````\n",
]


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=8),
)
@pytest.mark.slow
def test_a_person_sees_the_text_before_the_first_call_or_all_of_it(text, cuts):
    """Whatever the text and however it is split: without a call (as the extractor finds them) all
    of it shows; with one, what shows is the text before the block that holds it."""
    bounds = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    shown = filtered(*(text[a:b] for a, b in itertools.pairwise(bounds)))
    assert shown == filtered(text)
    extractor = Extractor(REGISTRY, "crew")
    calls = extractor.feed(text) + extractor.finish()
    if not calls:
        assert shown == text
    else:
        assert text.startswith(shown) and calls[0].raw in text[len(shown) :]
        assert re.match(r" {0,3}(`{3,}|~{3,})", text[len(shown) :])
