"""Output decoders (providers/*.py): real CLI output → assistant text and metadata.

Only assistant-authored text becomes `Text`: never the echoed prompt, tool results, the CLI's own
native tool events, a subagent's words, claude's final `result`, or the same text twice. The CLI's
own tools' uses and results are OwnCall and OwnResult events, named and read as crew's policy names
and reads them (fixtures/own/: real output of the pinned CLIs whose own tools the mock made them use).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import msgspec
import pytest
from crewbridge.providers.base import parse_object
from crewbridge.providers.claude import ClaudeDecoder
from crewbridge.providers.codex import CodexDecoder
from crewbridge.providers.gemini import GeminiDecoder
from crewbridge.providers.parse import decoder_for, formats
from hypothesis import given, settings
from hypothesis import strategies as st

from crewbridge.base import jsonio
from crewbridge.base.decoded import (
    OUTPUT_CHARS,
    Done,
    Event,
    Failure,
    MessageEnd,
    Notice,
    OwnCall,
    OwnResult,
    Session,
    Text,
    Usage,
)
from crewbridge.base.jsonio import MAX_DEPTH
from crewbridge.toolkit.extract import Extractor
from crewcli import tool_block

FIXTURES = Path(__file__).parent / "fixtures"
MOCK_REPLY = (
    "Mock model reply. I will call a tool:\n```json\n"
    '{"tool_use": {"name": "search", "input": {"query": "hello world"}}}\n```\n'
)


def decode(fmt: str, name: str) -> list[Event]:
    decoder = decoder_for(fmt)
    return [event for line in (FIXTURES / name).read_text().splitlines(keepends=True) for event in decoder.decode(line)]


def text_of(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, Text))


def only(kind: type, events: list[Event]) -> list[Event]:
    return [e for e in events if isinstance(e, kind)]


def notices(events: list[Event]) -> list[str]:
    return [e.kind for e in events if isinstance(e, Notice)]


def own(events: list[Event]) -> list[tuple]:
    """The CLI's own calls and results: (name, input) and (ok, output), each with its ref."""
    return [
        ("call", e.ref, e.name, e.input) if isinstance(e, OwnCall) else ("result", e.ref, e.ok, e.output)
        for e in events
        if isinstance(e, (OwnCall, OwnResult))
    ]


class TestClaude:
    def test_a_plain_reply(self) -> None:
        events = decode("claude", "claude_stream_simple.jsonl")
        assert text_of(events) == MOCK_REPLY  # once: the final `result` repeats it and is not text
        assert events[0] == Session("1957e5e0-485c-42b5-8ba0-b9aade957c0a", "claude-opus-4-8[1m]")
        assert only(Usage, events) == [Usage(100, 20, 0.001, context_window=1_000_000)]
        assert events[-1] == Done() and not only(Failure, events)

    def test_the_context_window_is_that_of_the_model_that_did_the_work(self) -> None:
        models = {
            "claude-haiku-4-5": {"inputTokens": 50, "outputTokens": 5, "contextWindow": 200_000},
            "claude-opus-4-8[1m]": {"inputTokens": 10, "cacheReadInputTokens": 900, "contextWindow": 1_000_000},
            "broken": {"inputTokens": 10**6, "contextWindow": "big"},
        }
        line = json.dumps({"type": "result", "usage": {}, "modelUsage": models})
        assert only(Usage, ClaudeDecoder().decode(line))[0].context_window == 1_000_000
        bare = json.dumps({"type": "result", "usage": {}})
        assert only(Usage, ClaudeDecoder().decode(bare))[0].context_window is None

    def test_cache_reads_and_writes_count_as_input_and_reads_as_cached(self) -> None:
        line = json.dumps(
            {
                "type": "result",
                "is_error": False,
                "total_cost_usd": 0.5,
                "usage": {
                    "input_tokens": 10,
                    "cache_read_input_tokens": 200,
                    "cache_creation_input_tokens": 30,
                    "output_tokens": 7,
                },
            }
        )
        assert only(Usage, ClaudeDecoder().decode(line)) == [Usage(240, 7, 0.5, cached_tokens=200)]

    def test_each_text_block_is_a_message(self) -> None:
        events = decode("claude", "claude_stream.jsonl")
        assert [e for e in events if isinstance(e, (Text, MessageEnd))] == [
            Text("Running a tool."),
            MessageEnd(),
            Text("Tool said hello. " + MOCK_REPLY),
            MessageEnd(),
        ]

    def test_native_tool_calls_and_results_are_own_calls_not_text(self) -> None:
        events = decode("claude", "claude_stream.jsonl")
        assert own(events) == [
            ("call", "toolu_mock0002928da633", "Bash", {"command": "echo hello-from-tool", "description": "Echo test"}),
            ("result", "toolu_mock0002928da633", True, "hello-from-tool"),
        ]
        assert "hello-from-tool" not in text_of(events)

    def test_a_streamed_messages_tool_use_is_an_own_call_though_its_text_came_as_deltas(self) -> None:
        # the model wrote "Running." then used Bash; the `assistant` event of each block follows the deltas
        events = decode("claude", "own_claude_stream.jsonl")
        assert text_of(events) == "Running.Made it."
        bash, read = "toolu_mock140609108813648", "toolu_mock140609108871568"
        assert own(events)[:3] == [
            ("call", bash, "Bash", {"command": "false"}),
            ("result", bash, False, "Exit code 1"),  # claude ran it unasked; it failed
            ("call", read, "Read", {"file_path": "/etc/hostname"}),
        ]
        (_, ref, ok, output) = own(events)[3]
        assert (ref, ok) == (read, False) and "outside the working directory" in output  # crew's refusal
        end = events.index(OwnCall(bash, "Bash", {"command": "false"}))
        assert isinstance(events[end - 1], MessageEnd)  # the text before the call is a message of its own

    def test_each_own_tool_use_is_one_call_with_its_result_whatever_claude_asked(self) -> None:
        events = decode("claude", "own_claude_asked.jsonl")
        names = [(kind, name) for kind, _, name, _ in own(events)]
        calls = [("call", "Bash"), ("result", True), ("call", "Write"), ("result", True), ("call", "Read")]
        assert names == [*calls, ("result", True)]  # Bash and Write asked about, Read not
        assert own(events)[2][3] == {"file_path": "w.txt", "content": "written\n"}
        assert own(events)[1][3] == "secret 7-4-1" and own(events)[5][3] == "1\tsecret 7-4-1\n2\t"

    def test_a_subagents_tool_uses_are_own_calls_and_its_words_are_not_text(self) -> None:
        events = decode("claude", "own_claude_subagent.jsonl")
        task, read = "toolu_mock139923324020944", "toolu_mock139923323870672"
        assert [(kind, ref, name) for kind, ref, name, _ in own(events)] == [
            ("call", task, "Task"),
            ("call", read, "Read"),  # the subagent's
            ("result", read, True),
            ("result", task, True),
        ]
        assert own(events)[3][3].startswith("It says 7-4-1.\nagentId:")  # the result's text blocks
        assert text_of(events) == "Done." and "read notes.txt" not in text_of(events)

    def test_an_mcp_servers_tool_is_an_own_call_by_its_mcp_name(self) -> None:
        events = decode("claude", "own_claude_mcp.jsonl")
        assert own(events) == [
            ("call", "toolu_mock139752090074704", "mcp__vault__launch_code", {}),
            ("result", "toolu_mock139752090074704", True, '{"result":"the vault says 7-4-1"}'),
        ]

    def test_crews_own_tools_natively_are_not_the_clis(self) -> None:
        use = {"type": "tool_use", "id": "toolu_1", "name": "mcp__crew__read_file", "input": {"path": "a"}}
        done = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "A TEXT"}
        decoder = ClaudeDecoder()
        events = decoder.decode(json.dumps({"type": "assistant", "message": {"id": "m", "content": [use]}}))
        events += decoder.decode(json.dumps({"type": "user", "message": {"role": "user", "content": [done]}}))
        assert own(events) == []

    def test_an_own_tools_output_is_bounded(self) -> None:
        done = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x" * (OUTPUT_CHARS + 5)}
        [result] = ClaudeDecoder().decode(json.dumps({"type": "user", "message": {"content": [done]}}))
        assert isinstance(result, OwnResult)
        assert (len(result.output), result.truncated) == (OUTPUT_CHARS, True)

    def test_partial_messages_give_the_text_once(self) -> None:
        events = decode("claude", "claude_stream_partial.jsonl")
        assert text_of(events) == MOCK_REPLY
        assert len(only(Text, events)) == 5  # the deltas, not the full `assistant` event after them
        assert only(MessageEnd, events) == [MessageEnd()]  # message_stop

    def test_max_turns_is_a_failure(self) -> None:
        events = decode("claude", "claude_stream_maxturns.jsonl")
        assert only(Failure, events) == [Failure("Reached maximum number of turns (1)")]
        assert events[-1] == Done()

    def test_an_api_error_is_a_failure_and_its_synthetic_message_is_not_text(self) -> None:
        events = decode("claude", "claude_stream_error500.jsonl")
        assert text_of(events) == ""
        assert "synthetic" in notices(events)
        [failure] = only(Failure, events)
        assert failure.status == 500 and failure.message.startswith("API Error: 500 mock failure 500")
        assert events[-1] == Done()

    def test_a_subagents_words_are_not_text(self) -> None:
        events = decode("claude", "claude_crew.jsonl")
        assert "subagent" in notices(events)
        assert "Subagent says" not in text_of(events)

    def test_each_streamed_message_is_given_once_and_a_message_without_deltas_in_full(self) -> None:
        def line(obj: dict) -> str:
            return json.dumps(obj) + "\n"

        def streamed(msg_id: str, text: str) -> list[str]:
            return [
                line({"type": "stream_event", "event": {"type": "message_start", "message": {"id": msg_id}}}),
                *(
                    line(
                        {
                            "type": "stream_event",
                            "event": {
                                "type": "content_block_delta",
                                "index": 0,
                                "delta": {"type": "text_delta", "text": part},
                            },
                        }
                    )
                    for part in (text[:3], text[3:])
                ),
                line(
                    {
                        "type": "stream_event",
                        "event": {
                            "type": "content_block_delta",
                            "index": 1,
                            "delta": {"type": "input_json_delta", "partial_json": "{"},
                        },
                    }
                ),
                line({"type": "stream_event", "event": {"type": "content_block_stop", "index": 0}}),
            ]

        def whole(msg_id: str, text: str) -> str:
            return line({"type": "assistant", "message": {"id": msg_id, "content": [{"type": "text", "text": text}]}})

        decoder = decoder_for("claude")
        lines = [
            *streamed("m1", "first"),
            whole("m1", "first"),
            *streamed("m2", "second"),
            whole("m2", "second"),
            whole("m3", "third"),
            line({"type": "result", "subtype": "success"}),
        ]
        events = [e for text in lines for e in decoder.decode(text)]
        assert [e for e in events if isinstance(e, (Text, MessageEnd))] == [
            Text("fir"),
            Text("st"),
            MessageEnd(),
            Text("sec"),
            Text("ond"),
            MessageEnd(),
            Text("third"),
            MessageEnd(),
        ]

    def test_the_text_blocks_of_one_message_are_one_text_and_a_call_split_across_them_is_whole(self) -> None:
        # Without partial messages, claude gives one `assistant` event per content block.
        call = tool_block("crew:read_file", path="notes.txt")
        parts = ["Let me look.\n``", "`json\n" + call[8:20], call[20:40], call[40:60], call[60:], "\nDone?"]

        def block(msg_id: str, content: dict) -> str:
            return json.dumps({"type": "assistant", "message": {"id": msg_id, "content": [content]}}) + "\n"

        lines = [block("m1", {"type": "text", "text": part}) for part in parts]
        lines += [
            block("m1", {"type": "tool_use", "name": "Read"}),
            json.dumps({"type": "user"}) + "\n",
            block("m2", {"type": "text", "text": "After the native tool."}),
            json.dumps({"type": "result", "subtype": "success"}) + "\n",
        ]
        decoder = decoder_for("claude")
        events = [e for text in lines for e in decoder.decode(text)]
        kept = [e for e in events if isinstance(e, (Text, MessageEnd))]
        assert kept == [*map(Text, parts), MessageEnd(), Text("After the native tool."), MessageEnd()]
        extractor = Extractor(prefix="crew")
        calls = [c for e in kept for c in (extractor.feed(e.text) if isinstance(e, Text) else extractor.end_message())]
        assert [(c.name, c.input, c.error) for c in calls] == [("crew:read_file", {"path": "notes.txt"}, None)]

    def test_a_corrupt_line_is_reported_and_the_rest_still_read(self) -> None:
        events = decode("claude", "claude_crew.jsonl")
        [corrupt] = [e for e in events if isinstance(e, Notice) and e.kind == "corrupt"]
        assert corrupt.detail.startswith("not JSON (Unterminated string")
        assert text_of(events).endswith("I expect three hits.")


class TestGemini:
    def test_the_echoed_prompt_is_not_text(self) -> None:
        events = decode("gemini", "gemini_stream.jsonl")
        assert "MOCK_TOOL_USE" not in text_of(events) and "echo" in notices(events)

    def test_deltas_make_the_reply_and_native_tools_end_a_message(self) -> None:
        events = decode("gemini", "gemini_stream.jsonl")
        assert text_of(events) == "Running a tool.Tool said hello. " + MOCK_REPLY
        assert events[0] == Session("8f9b0b9a-7e54-4ddc-9aed-173675d437f5", "gemini-2.5-pro")
        first_end = next(i for i, e in enumerate(events) if isinstance(e, MessageEnd))
        assert text_of(events[:first_end]) == "Running a tool."
        ref = "run_shell_command__run_shell_command_1795320380738_0"
        assert own(events) == [
            ("call", ref, "run_shell_command", {"command": "echo hello-from-tool", "description": "Echo test"}),
            ("result", ref, True, "hello-from-tool"),
        ]
        assert "hello-from-tool" not in text_of(events)
        assert only(Usage, events) == [Usage(200, 40)] and events[-1] == Done()

    def test_its_own_tools_succeed_or_fail_as_it_reports(self) -> None:
        events = decode("gemini", "own_gemini_stream.jsonl")
        assert [(kind, name) for kind, _, name, _ in own(events)] == [
            ("call", "write_file"),
            ("result", True),
            ("call", "run_shell_command"),
            ("result", False),  # not registered in headless auto_edit mode: gemini says so
            ("call", "read_file"),
            ("result", True),
        ]
        assert own(events)[0][3] == {"file_path": "w.txt", "content": "written\n"}
        assert own(events)[3][3].startswith('Tool "run_shell_command" not found')

    def test_cached_tokens_come_from_the_stats(self) -> None:
        line = json.dumps(
            {
                "type": "result",
                "status": "success",
                "stats": {"input_tokens": 90, "output_tokens": 4, "cached": 60, "input": 30},
            }
        )
        assert only(Usage, GeminiDecoder().decode(line)) == [Usage(90, 4, cached_tokens=60)]

    def test_an_api_error_is_a_failure(self) -> None:
        events = decode("gemini", "gemini_stream_error500.jsonl")
        [failure] = only(Failure, events)
        assert failure.message == "API Error 500 INTERNAL: mock failure 500" and events[-1] == Done()
        assert text_of(events) == ""


class TestCodex:
    def test_a_plain_reply(self) -> None:
        events = decode("codex", "codex_simple.jsonl")
        assert events[0] == Session("01a20175-1aab-7550-9fa4-376652806941")
        assert [e for e in events if isinstance(e, (Text, MessageEnd))] == [Text(MOCK_REPLY), MessageEnd()]
        # codex exec reports the thread's totals (on a resumed thread, the earlier turns' too)
        assert only(Usage, events) == [Usage(100, 20, cumulative=True)] and events[-1] == Done()

    def test_cached_input_tokens_are_counted(self) -> None:
        line = json.dumps(
            {"type": "turn.completed", "usage": {"input_tokens": 50, "cached_input_tokens": 30, "output_tokens": 5}}
        )
        assert CodexDecoder().decode(line)[0] == Usage(50, 5, cached_tokens=30, cumulative=True)

    def test_a_native_command_is_an_own_call_not_text(self) -> None:
        events = decode("codex", "codex.jsonl")
        assert text_of(events) == "Tool said hello. " + MOCK_REPLY
        assert own(events) == [
            ("call", "item_0", "exec_command", {"command": "/bin/bash -lc 'echo hello-from-tool'"}),
            ("result", "item_0", True, "hello-from-tool\n"),
        ]
        assert only(OwnResult, events)[0].exit_code == 0

    @pytest.mark.parametrize(
        "name, call, output",
        [
            (
                "codex_command",
                ("exec_command", {"command": "/bin/bash -lc 'echo made > made.txt; cat notes.txt'"}),
                "secret 7-4-1\n",
            ),
            (
                "codex_patch",
                ("apply_patch", {"changes": [{"path": "/tmp/cap-_dpuufjv/work/made.txt", "kind": "add"}]}),
                "add /tmp/cap-_dpuufjv/work/made.txt",
            ),
            ("codex_mcp", ("mcp__vault__launch_code", {}), "the vault says 7-4-1"),
        ],
    )
    def test_its_commands_patches_and_mcp_calls_are_own_calls(self, name, call, output) -> None:
        events = decode("codex", f"own_{name}.jsonl")
        assert own(events) == [("call", "item_0", *call), ("result", "item_0", True, output)]
        assert text_of(events) == "Made it." if name != "codex_mcp" else "The vault says 7-4-1."

    def test_a_failed_turn(self) -> None:
        decoder = decoder_for("codex")
        events = decoder.decode('{"type":"error","message":"stream disconnected"}') + decoder.decode(
            '{"type":"turn.failed","error":{"message":"stream disconnected"}}'
        )
        assert events == [Failure("stream disconnected"), Failure("stream disconnected"), Done()]


class TestText:
    def test_every_line_is_assistant_text(self) -> None:
        decoder = decoder_for("text")
        assert decoder.decode("a line\n") + decoder.decode("last") == [Text("a line\n"), Text("last\n")]


@pytest.mark.parametrize("fmt", ["claude", "gemini", "codex"])
@pytest.mark.parametrize(
    "line",
    [
        "{not json",
        "[1, 2]",
        '"text"',
        "[" * 50_000,
        '{"type": ' + "1" * 5000 + "}",
        '{"type": "message", "role": "assistant", "content": 5}',
    ],
)
def test_a_corrupt_or_odd_line_is_reported_not_fatal(fmt: str, line: str) -> None:
    events = decoder_for(fmt).decode(line)
    assert all(isinstance(e, Notice) for e in events) and not only(Text, events)


DEEP = '{"type": "assistant", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
TEXT_LINES = {
    "claude": '{"type": "stream_event", "event": {"type": "content_block_delta", "index": 0, '
    '"delta": {"type": "text_delta", "text": "still here"}}}',
    "gemini": '{"type": "message", "role": "assistant", "content": "still here", "delta": true}',
    "codex": '{"type": "item.completed", "item": {"type": "agent_message", "text": "still here"}}',
}


@pytest.mark.parametrize("fmt", ["claude", "gemini", "codex"])
@pytest.mark.parametrize("pad", ["", "  "])
def test_a_line_nested_past_any_limit_is_a_notice_and_the_stream_goes_on(fmt: str, pad: str) -> None:
    decoder = decoder_for(fmt)
    events = decoder.decode(pad + DEEP + "\n") + decoder.decode(TEXT_LINES[fmt] + "\n")
    assert [e.detail[:47] for e in events if isinstance(e, Notice)] == [
        f"JSON nested too deeply (more than {MAX_DEPTH} levels): "[:47]
    ]
    assert text_of(events) == "still here"


def test_a_line_the_slow_path_reads_is_held_to_max_depth() -> None:
    deeper = ' {"a": ' + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "}"  # padded: json.loads reads it
    got = parse_object(deeper)
    assert isinstance(got, Notice) and got.detail.startswith("JSON nested too deeply")
    assert parse_object(' {"a": ' + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "}") == {
        "a": json.loads("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1))
    }


@pytest.mark.parametrize("fmt", ["claude", "gemini", "codex"])
def test_blank_lines_are_nothing(fmt: str) -> None:
    assert decoder_for(fmt).decode("  \n") == []


@pytest.mark.parametrize(
    "line, expected",
    [
        ('{"a": 1}', {"a": 1}),
        ('{"a": 1}\r\n', {"a": 1}),
        ('\t {"a": 1} \n', {"a": 1}),
        ('\u00a0{"a": 1}\u2003\n', {"a": 1}),
        (" \r\n", None),
        ("", None),
        ('{"a": 1} {"b": 2}\n', "not JSON (Extra data)"),
        ('{"a": 1}x', "not JSON (Extra data)"),
        ('{"a": 1,}', "not JSON (Expecting property name"),
        ("\ufeff{}", "not JSON (Unexpected UTF-8 BOM"),
        ("[1]", "not a JSON object: [1]"),
        ("[" * 50_000, "JSON nested too deeply"),
    ],
)
def test_a_line_is_read_as_json_loads_reads_it_stripped(line: str, expected: object) -> None:
    got = parse_object(line)
    if isinstance(expected, str):
        assert isinstance(got, Notice) and got.kind == "corrupt" and got.detail.startswith(expected)
    else:
        assert got == expected


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    value=JSON_VALUES,
    before=st.sampled_from(["", " ", "\t", "\n ", "\u00a0"]),
    after=st.sampled_from(["", "\n", "\r\n", " \t", "\u2028", "x", " 1", "}", "\x00"]),
)
@pytest.mark.slow
def test_any_line_gives_what_json_loads_gives_for_it_stripped(value: object, before: str, after: str) -> None:
    line = before + json.dumps(value, ensure_ascii=False) + after
    try:
        loaded = json.loads(line.strip())
    except ValueError:
        loaded = Notice
    got = parse_object(line)
    if isinstance(loaded, dict):
        assert got == loaded
    else:
        assert isinstance(got, Notice) and got.kind == "corrupt"


def real_events() -> list[dict]:
    events = []
    for path in sorted(FIXTURES.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                pass  # the corrupt lines the fixtures hold on purpose
    return events


REAL_EVENTS = real_events()
ODD_VALUES = [None, True, 0, 5, 1.5, "", "x", "assistant", "text", [], [1], ["x"], {}, {"a": 1}, {"type": "text"}]


def mutate(value: object, rnd: random.Random, drop: float = 0) -> object:
    """A real event with some of its values, at any depth, replaced by a value of another shape (and
    a share `drop` of its keys left out)."""
    if isinstance(value, dict):
        return {
            k: rnd.choice(ODD_VALUES) if rnd.random() < 0.15 else mutate(v, rnd, drop)
            for k, v in value.items()
            if not drop or rnd.random() >= drop
        }
    if isinstance(value, list):
        return [mutate(v, rnd, drop) for v in value]
    return value


@settings(max_examples=150, deadline=None)
@given(picks=st.lists(st.sampled_from(REAL_EVENTS), min_size=1, max_size=4), rnd=st.randoms())
@pytest.mark.slow
def test_real_event_shapes_with_any_values_decode_without_raising_and_text_is_a_string(
    picks: list[dict], rnd: random.Random
) -> None:
    for fmt in formats():
        decoder = decoder_for(fmt)
        for obj in picks:
            for event in decoder.decode(json.dumps(mutate(obj, rnd))):
                assert not isinstance(event, Text) or isinstance(event.text, str)


class WholeClaudeDecoder(ClaudeDecoder):
    """The claude decoder reading every field of each line: what reading its fields alone must equal."""

    fields = None


def fast_json(patch: pytest.MonkeyPatch, msgspec_taken: bool) -> None:
    """jsonio.decode with msgspec from the next line on (a long stream: claude's lines are read to
    ClaudeDecoder.fields alone), or json's scanner for every line (a process's first lines)."""
    patch.setattr(jsonio, "_decoders", {})
    patch.setattr(jsonio, "_lines", jsonio.FAST_AFTER if msgspec_taken else 0)
    patch.setattr(jsonio, "FAST_AFTER", jsonio.FAST_AFTER if msgspec_taken else float("inf"))
    patch.setattr(jsonio, "FAST_AFTER_CHARS", jsonio.FAST_AFTER_CHARS if msgspec_taken else float("inf"))


def same_events(lines: list[str]) -> None:
    """Each line read to claude's fields by msgspec gives the events of the whole line read by json's
    scanner (the reference: it takes any JSON json takes, whole)."""
    fields, whole = ClaudeDecoder(), WholeClaudeDecoder()
    for line in lines:
        with pytest.MonkeyPatch.context() as patch:
            fast_json(patch, msgspec_taken=True)
            got = fields.decode(line)
            assert isinstance(
                getattr(jsonio._decoders.get(ClaudeDecoder.fields), "__self__", None), msgspec.json.Decoder
            ) or not line.strip().startswith("{")
        with pytest.MonkeyPatch.context() as patch:
            fast_json(patch, msgspec_taken=False)
            assert got == whole.decode(line), line
    assert fields.end() == whole.end()


def test_claude_lines_read_to_their_fields_give_the_events_of_whole_lines() -> None:
    for path in sorted(FIXTURES.glob("*")):
        same_events(path.read_text().splitlines(keepends=True))
    assert text_of(decode("claude", "claude_stream_partial.jsonl"))  # they hold text


@pytest.mark.parametrize(
    "line",
    [
        '{"type": "stream_event", "event": {"type": "content_block_delta", '
        '"delta": {"type": "text_delta", "text": 5}}}',
        '{"type": "stream_event", "event": null, "uuid": "u"}',
        '{"type": "stream_event", "event": {"type": "message_start", "message": null}}',
        '{"type": "assistant", "message": {"id": "m", "content": [{"type": "text", "text": ["x"]}]}, "extra": [1]}',
        '{"type": "assistant", "message": {"id": "m", "content": "a string"}}',
        '{"type": "user", "message": {"content": [{"type": "tool_result", "content": "\\ud800"}]}}',
        '{"type": "user", "message": "not an object"}',
        '{"type": "result", "usage": [1], "extra": "' + "x" * 200 + '"}',
        '{"type": "system", "subtype": "init", "big": 1e400, "deep": ' + "[" * 150 + "]" * 150 + "}",
        '{"type": "assistant", "skipped": ' + "[" * 5_000 + "]" * 5_000 + "}",
    ],
)
def test_a_claude_line_of_an_unexpected_shape_gives_the_events_of_the_whole_line(line: str) -> None:
    same_events([line + "\n"])


CLAUDE_EVENTS = [e for e in REAL_EVENTS if e.get("type") in ("system", "stream_event", "assistant", "user", "result")]


@settings(max_examples=300, deadline=None)
@given(picks=st.lists(st.sampled_from(CLAUDE_EVENTS), min_size=1, max_size=6), rnd=st.randoms())
@pytest.mark.slow
def test_claude_events_of_any_shape_read_to_their_fields_give_the_events_of_whole_lines(
    picks: list[dict], rnd: random.Random
) -> None:
    same_events([json.dumps(mutate(obj, rnd, drop=rnd.choice([0, 0.1]))) + "\n" for obj in picks])
