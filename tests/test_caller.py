"""crewbridge.caller: one path for every tool call, whoever makes it. Hooks see the calls the policy
allows, the policy decides, the tool runs, hooks see its result, and the transcript records the call
and the result; the answer is always a result envelope, never an exception, and input that breaks
the schema (or nests past the bound) is never run. With a guarded folder, what a call that may
write left there for git is disarmed and said."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crewbridge.caller import Caller
from crewbridge.config import AgentSpec
from crewbridge.functions import tool
from crewbridge.hooks import AFTER, BEFORE, Block, Hooks
from crewbridge.jsonio import MAX_DEPTH
from crewbridge.policy import Policy
from crewbridge.registry import ToolContext, ToolRegistry, ToolResult
from crewbridge.transcript import Transcript, read_run

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
    transcript = Transcript.open(command="query", agents=["claude"])
    return Caller("claude", registry, Policy(agent, mode), Hooks(hooks), transcript, guarded)


def records(who: Caller) -> list[dict[str, Any]]:
    """The transcript's tool_call, tool_result and disarmed records, without their times."""
    who.transcript.close("ok")
    kept = ("kind", "agent", "name", "input", "result", "found")
    return [
        {key: record[key] for key in kept if key in record}
        for record in read_run(who.transcript.run_id)
        if record["kind"] in ("tool_call", "tool_result", "disarmed")
    ]


def test_a_call_runs_its_tool_and_the_transcript_records_the_call_then_the_result(work: Path):
    who = caller()
    result = who.call("crew:weather", {"city": "Oslo"}, ToolContext(work))
    assert (result.success, result.data, result.error, result.tool) == (True, "sunny in Oslo", None, "weather")
    assert RAN == [("weather", "Oslo")]
    assert records(who) == [
        {"kind": "tool_call", "agent": "claude", "name": "crew:weather", "input": {"city": "Oslo"}},
        {"kind": "tool_result", "agent": "claude", "name": "crew:weather", "result": result.to_dict()},
    ]


def test_a_bare_tool_name_is_the_same_call(work: Path):
    assert caller().call("weather", {"city": "Oslo"}, ToolContext(work)).data == "sunny in Oslo"


def test_an_unknown_tool_is_an_error_result_naming_the_nearest(work: Path):
    who = caller()
    result = who.call("crew:wether", {"city": "Oslo"}, ToolContext(work))
    assert (result.success, result.tool) == (False, "crew:wether")
    assert result.error == "unknown tool 'crew:wether'; did you mean 'crew:weather'?"
    assert RAN == [] and [r["kind"] for r in records(who)] == ["tool_call", "tool_result"]


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
    result = caller().call("crew:weather", {"city": deep}, ToolContext(work))
    assert (result.success, result.tool) == (False, "crew:weather")
    assert (
        result.error
        == f"invalid input for crew:weather: JSON nested more than {MAX_DEPTH} levels deep; send flatter data"
    )
    assert RAN == []


def test_a_tools_bug_is_an_error_result_never_an_exception(work: Path):
    result = caller().call("crew:broken", {}, ToolContext(work))
    assert (result.success, result.error) == (False, "RuntimeError: the tool's own bug")


def test_a_call_the_policy_refuses_never_runs_and_no_hook_sees_it(work: Path):
    seen = []
    who = caller("query", {BEFORE: [seen.append], AFTER: [seen.append]})
    result = who.call("crew:note", {"path": "a.txt", "text": "x"}, ToolContext(work))
    assert not result.success and result.tool == "note" and "query mode" in result.error
    assert RAN == [] and seen == [] and not (work / "a.txt").exists()


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

    result = caller(hooks={BEFORE: [refuse]}).call("crew:weather", {"city": "Oslo"}, ToolContext(work))
    assert (result.success, result.error) == (False, f"blocked by a {BEFORE} hook: no weather on Sundays")
    assert RAN == []


def test_a_hook_after_the_call_may_replace_its_result(work: Path):
    who = caller(hooks={AFTER: [lambda payload: {"success": True, "data": "cloudy"}]})
    result = who.call("crew:weather", {"city": "Oslo"}, ToolContext(work))
    assert (result.success, result.data) == (True, "cloudy") and RAN == [("weather", "Oslo")]
    assert records(who)[-1]["result"]["data"] == "cloudy"  # the transcript has what the model gets


def test_a_new_repository_a_writing_call_leaves_in_the_guarded_folder_is_disarmed_and_said(work: Path):
    who = caller(guarded=work)
    result = who.call("crew:note", {"path": "sub/.git/HEAD", "text": "ref: refs/heads/main\n"}, ToolContext(work))
    assert result.success and result.data == "written"
    assert not (work / "sub" / ".git").exists()  # moved to crew's quarantine, not deleted
    assert len(result.notices) == 1
    assert result.notices[0].startswith("the run left what would run code on your next git command; crew disarmed it:")
    disarmed = [record for record in records(who) if record["kind"] == "disarmed"]
    assert len(disarmed) == 1 and disarmed[0]["name"] == "note" and len(disarmed[0]["found"]) == 1


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
