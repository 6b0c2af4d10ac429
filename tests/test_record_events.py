"""The record's one vocabulary (crewbridge.record.events): typed events tagged by `kind`, written as
JSON and read back as the same event, and their JSON Schema, docs/schemas/event.json."""

import json
import typing
from pathlib import Path

import msgspec
import pytest
from jsonschema import Draft202012Validator

from crewbridge.record import events as ev

SCHEMA = Path(__file__).resolve().parent.parent / "docs" / "schemas" / "event.json"

ONE_OF_EACH = [
    ev.Start(run="20250101-120000-abc123", at="2025-01-01T12:00:00.000+00:00", command="query", agents=["claude"]),
    ev.Start(run="20250101-120000-abc124", parent=ev.Parent(batch="b1", repo="/r")),
    ev.Part(agent="claude", part=1, provider="claude", model="sonnet", via="native", role="writer", round=1),
    ev.Turn(agent="claude", turn=1, prompt="hi"),
    ev.Text(agent="claude", text="```json", shown=""),
    ev.Session(agent="claude", session="s1", model="sonnet", reported={"input_tokens": 3}),
    ev.Call(agent="claude", call="c1", name="crew:read_file", input={"path": "a"}, turn=1),
    ev.Call(agent="codex", call="c2", name="native:exec_command", input={"cmd": "ls"}, via="own", ref="item_1"),
    ev.Decision(agent="claude", call="c1", decision="refused", by="browser", reason="no"),
    ev.Ask(agent="claude", call="c1", name="crew:write_file", input={"path": "a"}),
    ev.Approval(agent="claude", call="c1", name="crew:write_file", answer="yes", source="terminal"),
    ev.Result(
        agent="claude",
        call="c1",
        name="crew:write_file",
        success=True,
        data={"bytes": 1},
        metadata={"tool": "write_file"},
        change=ev.Change(path="/w/a", new="x", old=None),
    ),
    ev.Usage(agent="claude", turn=1, input_tokens=10, output_tokens=2, cached_tokens=8, cost_usd=0.01),
    ev.Reply(agent="claude", turn=1, text="kept"),
    ev.Answer(agent="claude", text="done", turns=2, session="s1", calls=["c1"]),
    ev.Error(agent="claude", message="boom", exit_code=3, status=429),
    ev.Fallback(agent="claude", to="gemini", reason="rate limit"),
    ev.Resume(agent="claude", of="20250101-110000-abc123", how="replay", text="replayed"),
    ev.Notice(text="no sandbox", about="sandbox"),
    ev.Disarmed(agent="claude", text="disarmed a hook", found=[{"path": ".git/hooks/x", "what": "hook"}], call="c1"),
    ev.Review(agent="gemini", round=1, rounds=2, verdict="approve"),
    ev.Check(agent="claude", command="pytest -q", round=1, rounds=3, passed=False, exit_code=1, output="1 failed"),
    ev.Pull(agent="claude", url="https://github.com/o/r/pull/7", number=7, branch="crew/x/claude", forge="github"),
    ev.Worktree(agent="claude", worktree="/w/.crew/x", branch="crew/x", base="abc", changes=None),
    ev.Egress(agent="claude", host="169.254.169.254", port=80, why="not in the allow-list", process="pid 7: curl"),
    ev.Cancel(source="browser"),
    ev.End(status="done", calls=1, usage={"claude": {"turns": 1, "input_tokens": 10}}),
    ev.Unreadable(line=3, error="not JSON", text="{"),
]


def test_there_is_an_example_here_of_every_kind():
    kinds = {kind.__struct_config__.tag for kind in typing.get_args(ev.AnyEvent)}
    assert {event.kind for event in ONE_OF_EACH} == kinds and len(kinds) == 26


@pytest.mark.parametrize("event", ONE_OF_EACH, ids=lambda e: e.kind)
def test_an_event_reads_back_as_it_was_written(event):
    line = ev.encode(event)
    assert b"\n" not in line
    assert json.loads(line)["kind"] == event.kind
    assert ev.decode(line) == event == ev.convert(json.loads(line))
    assert next(iter(ev.to_builtins(event))) == "kind"


def test_what_is_its_default_is_left_out_of_the_line():
    assert json.loads(ev.encode(ev.Call(call="c1", name="x"))) == {"kind": "call", "call": "c1", "name": "x"}


def test_a_line_that_is_not_an_event_is_refused():
    for line in [b'{"kind": "whatever"}', b'{"kind": "call", "name": "x"}', b'{"kind": "usage", "input_tokens": "1"}']:
        with pytest.raises(msgspec.ValidationError):
            ev.decode(line)
    with pytest.raises(ValueError):
        ev.decode(b'{"kind": ')


def test_text_that_cannot_be_utf8_is_written_as_escapes():
    line = ev.encode(ev.Text(text="caf\udce9"))
    line.decode("utf-8")
    assert ev.decode(line).text == "caf\udce9"


def test_what_is_not_json_in_a_tools_data_is_written_as_its_text(tmp_path):
    assert json.loads(ev.encode(ev.Result(call="c1", name="x", success=True, data={"at": tmp_path}))) == {
        "kind": "result",
        "call": "c1",
        "name": "x",
        "success": True,
        "data": {"at": str(tmp_path)},
    }


def test_what_a_person_sees_of_text_and_what_usage_adds_up_to():
    assert ev.Text(text="hi").visible == "hi"
    assert ev.Text(text='```json\n{"type"', shown="").visible == ""
    assert ev.Usage(input_tokens=10, output_tokens=3).tokens == 13


def test_the_status_words_are_one_set_and_an_end_says_one_that_ended():
    assert ev.STATUSES == ("running", "waiting", "done", "failed", "cancelled", "unfinished")
    assert ev.ENDED == ("done", "failed", "cancelled")


def test_the_schema_in_the_docs_is_the_one_the_types_make():
    """Regenerate it with: python -c 'import json; from crewbridge.record.events import schema;
    print(json.dumps(schema(), indent=2))' > docs/schemas/event.json"""
    assert json.loads(SCHEMA.read_text()) == ev.schema()


@pytest.mark.parametrize("event", ONE_OF_EACH, ids=lambda e: e.kind)
def test_every_event_holds_to_the_schema(event):
    Draft202012Validator.check_schema(ev.schema())
    assert list(Draft202012Validator(ev.schema()).iter_errors(json.loads(ev.encode(event)))) == []


def test_the_schema_refuses_what_crew_does_not_write():
    validator = Draft202012Validator(ev.schema())
    for wrong in [
        {"kind": "whatever", "text": "x"},
        {"kind": "turn", "agent": "claude"},  # no turn
        {"kind": "call", "name": "crew:read_file"},  # no call id
        {"kind": "result", "call": "c1", "name": "x"},  # no success
        {"kind": "usage", "input_tokens": "many"},
        {"kind": "disarmed", "text": "x"},  # what it found
    ]:
        assert list(validator.iter_errors(wrong)), wrong
