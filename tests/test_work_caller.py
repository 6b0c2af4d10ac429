"""crewbridge.work.caller: one path for every tool call, whoever makes it. Hooks see the calls the policy
allows, the policy decides, the tool runs, hooks see its result, and the run's record has the call,
crew's decision (and by whom) and the result under the call's id; the answer is always a result
envelope, never an exception, and input that breaks the schema (or nests past the bound) is never
run. With a guarded folder, what a call that may
write left there for git is disarmed and said."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from crewbridge.base.jsonio import MAX_DEPTH
from crewbridge.config import AgentSpec
from crewbridge.record import events as ev
from crewbridge.record.stream import Record
from crewbridge.record.transcript import Transcript, read_run
from crewbridge.toolkit.functions import tool
from crewbridge.toolkit.hooks import AFTER, BEFORE, Block, Hooks
from crewbridge.toolkit.registry import ToolContext, ToolRegistry, ToolResult
from crewbridge.work.caller import Caller
from crewbridge.work.policy import Policy

RAN: list[tuple[str, Any]] = []  # every call a tool below ran, with its input


@tool(read_only=True)
def weather(ctx, city: str) -> str:
    """The weather in a city."""
    RAN.append(("weather", city))
    return f"sunny in {city}"


@tool(read_only=False)
def note(ctx, path: str, text: str) -> str:
    """Write a note to a file."""
    RAN.append(("note", path))
    target = ctx.workdir / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return "written"


@tool(read_only=True)
def broken(ctx) -> str:
    """A tool with a bug."""
    raise RuntimeError("the tool's own bug")


@pytest.fixture(autouse=True)
def no_tool_ran_yet() -> None:
    RAN.clear()


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def caller(mode: str = "execute", hooks: dict[str, list[Any]] | None = None, guarded: Path | None = None) -> Caller:
    registry = ToolRegistry()
    registry.register_all([weather, note, broken])
    agent = AgentSpec(id="claude", provider="claude", profile="full")
    record = Record()
    record.keep(Transcript.create(record.run))
    return Caller("claude", registry, Policy(agent, mode), Hooks(hooks), record, guarded)


def records(who: Caller) -> list[ev.Event]:
    """The run's call, decision, result and disarmed events, as its transcript has them, their
    times zeroed."""
    who.record.end("done")
    kinds = (ev.Call, ev.Decision, ev.Result, ev.Disarmed)
    events = [event for event in read_run(who.record.run) if isinstance(event, kinds)]
    for event in events:
        event.t = 0.0
    return events


def test_a_call_runs_its_tool_and_the_record_has_the_call_the_decision_then_the_result(work: Path):
    who = caller()
    result = who.call("crew:weather", {"city": "Oslo"}, ToolContext(work))
    assert (result.success, result.data, result.error, result.tool) == (True, "sunny in Oslo", None, "weather")
    assert RAN == [("weather", "Oslo")]
    assert records(who) == [
        ev.Call(agent="claude", call="c1", name="crew:weather", input={"city": "Oslo"}, via="mcp"),
        ev.Decision(agent="claude", call="c1", decision="allowed", by="policy"),
        ev.Result(
            agent="claude",
            call="c1",
            name="crew:weather",
            success=True,
            data="sunny in Oslo",
            metadata=result.to_dict()["metadata"],
        ),
    ]


def test_a_call_whose_start_was_recorded_by_its_maker_keeps_its_id(work: Path):
    who = caller()
    who.record.emit(ev.Call(agent="claude", call="c7", name="crew:weather", input={"city": "Oslo"}, via="native"))
    who.call("crew:weather", {"city": "Oslo"}, ToolContext(work), "c7")
    assert [(e.kind, e.call) for e in records(who)] == [("call", "c7"), ("decision", "c7"), ("result", "c7")]


def test_calls_at_once_on_many_threads_each_have_their_own_id_and_result(work: Path):
    who = caller()
    cities = [f"city{n}" for n in range(40)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda city: who.call("crew:weather", {"city": city}, ToolContext(work)), cities))
    events = records(who)
    ids = {e.input["city"]: e.call for e in events if isinstance(e, ev.Call)}
    results = {e.call: e.data for e in events if isinstance(e, ev.Result)}
    assert len(set(ids.values())) == 40
    assert all(results[ids[city]] == f"sunny in {city}" for city in cities)  # each result under its call's id


def test_a_bare_tool_name_is_the_same_call(work: Path):
    assert caller().call("weather", {"city": "Oslo"}, ToolContext(work)).data == "sunny in Oslo"


def test_an_unknown_tool_is_an_error_result_naming_the_nearest(work: Path):
    who = caller()
    result = who.call("crew:wether", {"city": "Oslo"}, ToolContext(work))
    assert (result.success, result.tool) == (False, "crew:wether")
    assert result.error == "unknown tool 'crew:wether'; did you mean 'crew:weather'?"
    assert RAN == [] and [r.kind for r in records(who)] == ["call", "result"]  # nothing to decide on


@pytest.mark.parametrize(
    "data",
    [{}, {"city": 3}, {"city": "Oslo", "when": "now"}, ["Oslo"], "Oslo", None],
    ids=["missing", "wrong-type", "extra", "array", "string", "null"],
)
def test_input_that_breaks_the_schema_is_an_error_result_and_never_runs(work: Path, data):
    result = caller().call("crew:weather", data, ToolContext(work))
    assert not result.success and result.error.startswith("invalid input for crew:weather ")
    assert RAN == []


def test_input_nested_past_the_bound_is_an_error_result_and_never_runs(work: Path):
    deep: Any = "Oslo"
    for _ in range(100_000):  # made in Python: no decoder bounded it
        deep = [deep]
    who = caller()
    result = who.call("crew:weather", {"city": deep}, ToolContext(work))
    assert (result.success, result.tool) == (False, "crew:weather")
    assert (
        result.error
        == f"invalid input for crew:weather: JSON nested more than {MAX_DEPTH} levels deep; send flatter data"
    )
    assert RAN == []
    call, answered = records(who)  # the record keeps a note for the input, and the error
    assert call.input == f"[crew left this out: nested more than {MAX_DEPTH} levels deep]"
    assert (answered.call, answered.error) == (call.call, result.error)


def test_a_tools_bug_is_an_error_result_never_an_exception(work: Path):
    result = caller().call("crew:broken", {}, ToolContext(work))
    assert (result.success, result.error) == (False, "RuntimeError: the tool's own bug")


def test_a_call_the_policy_refuses_never_runs_and_no_hook_sees_it(work: Path):
    seen = []
    who = caller("query", {BEFORE: [seen.append], AFTER: [seen.append]})
    result = who.call("crew:note", {"path": "a.txt", "text": "x"}, ToolContext(work))
    assert not result.success and result.tool == "note" and "query mode" in result.error
    assert RAN == [] and seen == [] and not (work / "a.txt").exists()
    decision = records(who)[1]
    assert (decision.decision, decision.by, decision.reason) == ("refused", "policy", result.error)


def test_hooks_see_the_call_before_and_its_result_after(work: Path):
    seen: list[dict[str, Any]] = []
    who = caller(hooks={BEFORE: [seen.append], AFTER: [seen.append]})
    who.call("crew:weather", {"city": "Oslo"}, ToolContext(work))
    assert [(s["event"], s["tool"], s["agent"], s["input"]) for s in seen] == [
        (BEFORE, "weather", "claude", {"city": "Oslo"}),
        (AFTER, "weather", "claude", {"city": "Oslo"}),
    ]
    assert seen[1]["result"]["data"] == "sunny in Oslo"


def test_a_hook_may_change_the_input_the_tool_runs_with(work: Path):
    who = caller(hooks={BEFORE: [lambda payload: {"city": payload["input"]["city"].upper()}]})
    assert who.call("crew:weather", {"city": "Oslo"}, ToolContext(work)).data == "sunny in OSLO"
    assert RAN == [("weather", "OSLO")]


def test_a_hook_that_blocks_the_call_keeps_the_tool_from_running(work: Path):
    def refuse(payload: dict[str, Any]) -> None:
        raise Block("no weather on Sundays")

    who = caller(hooks={BEFORE: [refuse]})
    result = who.call("crew:weather", {"city": "Oslo"}, ToolContext(work))
    assert (result.success, result.error) == (False, f"blocked by a {BEFORE} hook: no weather on Sundays")
    assert RAN == []
    decision = records(who)[1]
    assert (decision.decision, decision.by, decision.reason) == ("refused", "hook", result.error)


def test_a_hook_after_the_call_may_replace_its_result(work: Path):
    who = caller(hooks={AFTER: [lambda payload: {"success": True, "data": "cloudy"}]})
    result = who.call("crew:weather", {"city": "Oslo"}, ToolContext(work))
    assert (result.success, result.data) == (True, "cloudy") and RAN == [("weather", "Oslo")]
    assert records(who)[-1].data == "cloudy"  # the record has what the model gets


def test_a_new_repository_a_writing_call_leaves_in_the_guarded_folder_is_disarmed_and_said(work: Path):
    who = caller(guarded=work)
    result = who.call("crew:note", {"path": "sub/.git/HEAD", "text": "ref: refs/heads/main\n"}, ToolContext(work))
    assert result.success and result.data == "written"
    assert not (work / "sub" / ".git").exists()  # moved to crew's quarantine, not deleted
    assert len(result.notices) == 1
    assert result.notices[0].startswith("the run left what would run code on your next git command; crew disarmed it:")
    [call, _, disarmed, _] = records(who)
    assert isinstance(disarmed, ev.Disarmed) and disarmed.call == call.call and len(disarmed.found) == 1
    assert disarmed.text == result.notices[0]


def test_a_read_only_call_and_an_unguarded_caller_disarm_nothing(work: Path):
    (work / "sub" / ".git").mkdir(parents=True)  # there before: the user's own
    assert caller(guarded=work).call("crew:weather", {"city": "Oslo"}, ToolContext(work)).notices == ()
    unguarded = caller()
    result = unguarded.call(
        "crew:note", {"path": "other/.git/HEAD", "text": "ref: refs/heads/main\n"}, ToolContext(work)
    )
    assert result.notices == () and (work / "other" / ".git" / "HEAD").exists()


def test_the_result_is_an_envelope_every_time(work: Path):
    who = caller()
    for name, data in [("crew:weather", {"city": "x"}), ("nope", {}), ("crew:weather", {}), ("crew:broken", {})]:
        assert isinstance(who.call(name, data, ToolContext(work)), ToolResult)
