"""`parse_stream`, the engine of `crew parse`: raw CLI output in, one record per tool-call attempt out."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from crewbridge.providers.parse import formats, parse_stream
from hypothesis import given, settings
from hypothesis import strategies as st

from crewbridge.base import jsonio
from crewbridge.errors import UsageError
from crewcli import CREW, crew_env, error_line, run_crew
from test_toolkit_extract import make_registry

FIXTURES = Path(__file__).parent / "fixtures"
CAPTURES = {
    "claude": [
        "claude_stream_simple.jsonl",
        "claude_stream.jsonl",
        "claude_stream_partial.jsonl",
        "claude_stream_maxturns.jsonl",
        "claude_stream_error500.jsonl",
    ],
    "gemini": ["gemini_stream.jsonl", "gemini_stream_error500.jsonl"],
    "codex": ["codex_simple.jsonl", "codex.jsonl"],
}


REGISTRY = make_registry()


def parse(fmt: str, name: str, *, as_bytes: bool = False, **kw: Any) -> tuple[list[dict], list[str]]:
    warnings: list[str] = []
    text = (FIXTURES / name).read_text()
    lines: list[str] | list[bytes] = (
        text.encode().splitlines(keepends=True) if as_bytes else text.splitlines(keepends=True)
    )
    records = list(parse_stream(lines, fmt, kw.pop("registry", REGISTRY), warn=warnings.append, **kw))
    return records, warnings


def ok(name: str, data: dict) -> dict:
    return {"name": name, "input": data, "error": None}


@pytest.mark.parametrize("fmt,name", [(fmt, name) for fmt, names in CAPTURES.items() for name in names])
def test_the_captures_hold_no_crew_call(fmt: str, name: str) -> None:
    records, warnings = parse(fmt, name)
    assert records == []  # their {"tool_use": {"name": "search"}} block is not the format
    assert all("the CLI reported an error" in w for w in warnings)


def test_claude() -> None:
    records, warnings = parse("claude", "claude_crew.jsonl")
    assert records[:2] == [ok("crew:read_file", {"path": "a.txt"}), ok("crew:read_file", {"path": "b.txt"})]
    assert records[2]["name"] == "crew:grpe" and "did you mean 'crew:grep'?" in records[2]["error"]
    assert len(records) == 3  # not the tool result's, the subagent's, nor the final `result` copy
    assert warnings == [
        "line 6: not JSON (Unterminated string starting at): "
        '{"type":"assistant","message":{"id":"msg_cut","content":[{"type":"te'
    ]


def test_claude_partial_messages_give_each_call_once() -> None:
    records, _ = parse("claude", "claude_crew_partial.jsonl")
    assert records == [ok("crew:write_file", {"path": "q.txt", "content": 'say "hi" \\ 😀'})]


def test_gemini() -> None:
    records, warnings = parse("gemini", "gemini_crew.jsonl")
    assert records == [ok("crew:read_file", {"path": "😀.txt"}), ok("crew:list_files", {})]
    assert warnings == ["line 11: not JSON (Expecting value): not json at all"]


def test_codex() -> None:
    records, _ = parse("codex", "codex_crew.jsonl")
    assert records == [
        {
            "name": "crew:read_file",
            "input": {"path": 7},
            "error": "invalid input for crew:read_file at $.path: 7 is not of type 'string'",
        }
    ]


def test_text() -> None:
    records, _ = parse("text", "text_crew.txt")
    assert records == [ok("crew:read_file", {"path": "a.txt"})]


def test_an_api_error_is_a_warning() -> None:
    _, warnings = parse("gemini", "gemini_stream_error500.jsonl")
    assert (
        len(warnings) == 1
        and warnings[0] == "line 3: the CLI reported an error: API Error 500 INTERNAL: mock failure 500"
    )


def test_without_a_registry_only_the_format_is_checked() -> None:
    records, _ = parse("claude", "claude_crew.jsonl", registry=None)
    assert records[2] == ok("crew:grpe", {"pattern": "TODO"})


def test_another_prefix() -> None:
    records, _ = parse("text", "text_crew.txt", registry=make_registry("ops"), prefix="ops")
    assert records == []


def test_an_unknown_format_names_the_known_ones() -> None:
    with pytest.raises(UsageError, match="format 'json' is not known; use one of: claude, gemini, codex, demo, text"):
        list(parse_stream([], "json"))
    assert formats() == ["claude", "gemini", "codex", "demo", "text"]


def test_a_record_comes_as_soon_as_its_block_closes() -> None:
    lines = (FIXTURES / "claude_crew.jsonl").read_text().splitlines(keepends=True)
    read = 0

    def source() -> Iterator[str]:
        nonlocal read
        for line in lines:
            read += 1
            yield line

    records = parse_stream(source(), "claude", REGISTRY)
    next(records)
    assert read == 2  # the init line and the first assistant event, nothing after


ALL = [(fmt, path.name) for fmt in formats() for path in sorted(FIXTURES.glob("*"))]


@pytest.fixture(params=["json's scanner", "msgspec"])
def json_lines(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines decoded by json's scanner (a process's first lines), then by msgspec (a long stream)."""
    monkeypatch.setattr(jsonio, "_decoders", {})
    monkeypatch.setattr(jsonio, "_lines", jsonio.FAST_AFTER if request.param == "msgspec" else 0)
    monkeypatch.setattr(jsonio, "_chars", 0)


@pytest.mark.parametrize("fmt,name", ALL)
def test_lines_read_as_utf8_bytes_give_what_lines_of_text_give(fmt: str, name: str, json_lines: None) -> None:
    assert parse(fmt, name, as_bytes=True) == parse(fmt, name)


BROKEN = [
    b'{"type": "stream_event", "event": {"type": "message_start", "message": {"id": "m"}}}\n',
    b'{"type": "stream_event", "event": {"type": "content_block_delta", "delta": {"type": "text_delta", '
    b'"text": "\xff\\n```json\\n{\\"name\\": \\"crew:read_file\\", \\"input\\": {\\"path\\": '
    b'\\"\xc3\xa9\xfe\\"}}\\n```\\n"}}, "skipped": "\xfd"}\n',
    b"\xff not json\n",
]


def parsed(lines: list[str] | list[bytes], fmt: str) -> tuple[list[dict], list[str]]:
    warnings: list[str] = []
    return list(parse_stream(lines, fmt, REGISTRY, warn=warnings.append)), warnings


@pytest.mark.parametrize("fmt", formats())
def test_bytes_that_are_not_utf8_read_as_stdin_reads_them(fmt: str, json_lines: None) -> None:
    got = parsed(BROKEN, fmt)
    assert got == parsed([line.decode("utf-8", "surrogateescape") for line in BROKEN], fmt)
    if fmt == "claude":
        assert got == (
            [ok("crew:read_file", {"path": "é\udcfe"})],
            ["line 3: not JSON (Expecting value): \udcff not json"],
        )


@pytest.mark.slow
def test_crew_parse_reads_stdin_as_the_engine_does(tmp_path: Path) -> None:
    text = (FIXTURES / "claude_crew.jsonl").read_text()
    done = run_crew(["parse", "--format", "claude"], env=crew_env(tmp_path / "home"), cwd=tmp_path, input=text)
    records, warnings = parse("claude", "claude_crew.jsonl", registry=None)
    assert [json.loads(line) for line in done.stdout.splitlines()][:2] == records[:2]
    assert done.stderr.splitlines() == [f"crew: {w}" for w in warnings]


@pytest.mark.slow
def test_crew_parse_with_its_stdin_closed_says_so(tmp_path: Path) -> None:
    done = subprocess.run(
        ["sh", "-c", 'exec "$@" <&-', "sh", *CREW, "parse", "--format", "claude"],
        cwd=tmp_path,
        env=crew_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert error_line(done.stderr) == (
        "crew: error: stdin is closed; pipe a CLI's output in, e.g. claude -p … | crew parse --format claude"
    )


def test_records_print_as_json() -> None:
    records, _ = parse("gemini", "gemini_crew.jsonl")
    assert [json.loads(json.dumps(r)) for r in records] == records


def gemini_lines(pieces: list[str]) -> list[str]:
    head = [
        {"type": "init", "session_id": "s", "model": "gemini-2.5-pro"},
        {"type": "message", "role": "user", "content": "run " + REPLY},
    ]
    deltas = [{"type": "message", "role": "assistant", "content": p, "delta": True} for p in pieces]
    return [json.dumps(e) + "\n" for e in head + deltas + [{"type": "result", "status": "success", "stats": {}}]]


def claude_partial_lines(pieces: list[str]) -> list[str]:
    def event(ev: dict) -> dict:
        return {"type": "stream_event", "event": ev, "session_id": "s", "parent_tool_use_id": None}

    events = [event({"type": "message_start", "message": {"id": "msg_1", "content": []}})]
    events += [
        event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}) for p in pieces
    ]
    events += [
        {
            "type": "assistant",
            "message": {"id": "msg_1", "model": "m", "content": [{"type": "text", "text": "".join(pieces)}]},
        },
        event({"type": "content_block_stop", "index": 0}),
        {"type": "result", "is_error": False, "result": "".join(pieces), "usage": {}},
    ]
    return [json.dumps(e, ensure_ascii=False) + "\n" for e in events]


REPLY = (
    "Two calls:\n```json\n"
    + json.dumps({"type": "tool_use", "name": "crew:write_file", "input": {"path": "a", "content": 'q "\\ ```\n😀'}})
    + "\n```\n~~~\n"
    + json.dumps([{"type": "tool_use", "name": "crew:grep", "input": {"pattern": "é"}}], ensure_ascii=False)
    + "\n~~~\nDone."
)


@settings(max_examples=100, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=len(REPLY)), max_size=12))
@pytest.mark.slow
def test_any_cut_of_the_reply_into_events_gives_the_same_records(cuts: list[int]) -> None:
    points = sorted(set(cuts) | {0, len(REPLY)})
    pieces = [REPLY[a:b] for a, b in itertools.pairwise(points)]
    expected = [ok("crew:write_file", {"path": "a", "content": 'q "\\ ```\n😀'}), ok("crew:grep", {"pattern": "é"})]
    assert list(parse_stream(gemini_lines(pieces), "gemini", REGISTRY)) == expected
    assert list(parse_stream(claude_partial_lines(pieces), "claude", REGISTRY)) == expected


# A plugin provider whose CLI writes {"say": "…"} lines: only its own decoder finds the call in them.
SAY_PLUGIN = """
from crewbridge.providers.generic import GenericProvider, GenericSpec

class SayProvider(GenericProvider):
    def __init__(self):
        super().__init__(GenericSpec(name="say", command=["say"], format="jsonl", text_key="say"))
"""
SAY_OUTPUT = [
    json.dumps({"session": "s1"}) + "\n",
    json.dumps(
        {
            "say": 'Reading it.\n```json\n{"type": "tool_use", "name": "crew:read_file", '
            '"input": {"path": "a.txt"}}\n```\n'
        }
    )
    + "\n",
]


@pytest.fixture
def say_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A distribution declaring the provider `say` under crewbridge.providers, on sys.path."""
    site = tmp_path / "site"
    info = site / "sayplug-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sayplug\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[crewbridge.providers]\nsay = sayplug:SayProvider\n")
    (site / "sayplug.py").write_text(textwrap.dedent(SAY_PLUGIN))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "sayplug", raising=False)
    return site


def test_a_plugin_providers_output_is_read_with_its_own_decoder(say_plugin: Path) -> None:
    assert formats() == ["claude", "gemini", "codex", "demo", "say", "text"]
    assert list(parse_stream(SAY_OUTPUT, "say", REGISTRY)) == [ok("crew:read_file", {"path": "a.txt"})]
    assert list(parse_stream(SAY_OUTPUT, "text", REGISTRY)) == []  # the JSON lines are not its text


@pytest.mark.slow
def test_crew_parse_takes_a_plugin_providers_format(say_plugin: Path, tmp_path: Path) -> None:
    env = crew_env(tmp_path / "home", PYTHONPATH=str(say_plugin))
    done = run_crew(["parse", "--format", "say"], env=env, cwd=tmp_path, input="".join(SAY_OUTPUT))
    assert (done.returncode, done.stderr) == (0, "")
    assert [json.loads(line) for line in done.stdout.splitlines()] == [ok("crew:read_file", {"path": "a.txt"})]
    unknown = run_crew(["parse", "--format", "sya"], env=env, cwd=tmp_path, input="")
    assert (unknown.returncode, unknown.stdout) == (2, "")
    assert unknown.stderr.splitlines() == [
        "crew: error: format 'sya' is not known; use one of: claude, gemini, codex, demo, say, text"
    ]
