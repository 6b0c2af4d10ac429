"""The Python API: `import crewbridge` stays light, `Bridge` runs a query from code, registers plain
typed functions as tools, and reports events through a callback or an iterator."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Literal

import pytest
from crewbridge.providers.generic import GenericSpec

import crewbridge
from crewbridge import Bridge, Config, Event
from crewbridge.config import AgentSpec, default_agents
from crewbridge.errors import AgentNotFound, ConfigError, Interrupted, UsageError
from crewbridge.sandbox import Sandboxing
from crewbridge.system import process

# A scripted model run as a CLI: the first turn calls the tool given as its argument, the next
# answers with what the tool returned. Each turn's whole prompt arrives on stdin (no session resume).
SCRIPTED = textwrap.dedent("""
    import json, re, sys, time
    prompt = sys.stdin.read()
    results = re.findall(r"^```+json\\n(.*)$", prompt, re.M)
    if "[crew tool results]" in prompt:
        print("The tool said: " + json.dumps(json.loads(results[-1])["data"]))
    else:
        print("Let me check.")
        print("```json")
        print(json.dumps({"type": "tool_use", "name": sys.argv[1], "input": json.loads(sys.argv[2])}))
        print("```")
""")


@pytest.fixture(autouse=True)
def scratch_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No crew.yaml of the person running the tests, transcripts under tmp_path."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.setenv("CREW_LIVE", "0")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    (path / "notes.txt").write_text("Buy milk.\nCall Ada.\n")
    return path


def scripted(tmp_path: Path, call: str, data: dict) -> Config:
    """A configuration whose agent @fake calls tool `call` with `data` once, then answers."""
    script = tmp_path / "model.py"
    script.write_text(SCRIPTED)
    command = [sys.executable, str(script), call, json.dumps(data)]
    agents = {**default_agents(), "fake": AgentSpec(id="fake", provider="fake", profile="full")}
    return Config(agents=agents, providers={"fake": GenericSpec(name="fake", command=command)}, transcripts=False)


# --- importing ---------------------------------------------------------------------------------


def test_importing_crewbridge_loads_none_of_the_engine() -> None:
    code = "import sys, crewbridge; print(sorted(m for m in sys.modules if m.startswith('crewbridge')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['crewbridge', 'crewbridge.version']"


def test_the_api_names_are_exported_lazily_and_listed() -> None:
    from crewbridge.bridge import Bridge as EngineBridge
    from crewbridge.toolkit.functions import tool

    assert crewbridge.Bridge is EngineBridge and crewbridge.tool is tool
    assert {"Bridge", "EventStream", "Event", "tool", "function_tool", "ToolContext"} <= set(dir(crewbridge))
    assert "Progress" not in crewbridge.__all__  # the loop's events before the record
    assert set(crewbridge.__all__) == {"VERSION_MESSAGE", "__version__", *crewbridge._EXPORTS}
    assert set(crewbridge.__all__) <= set(dir(crewbridge))
    with pytest.raises(AttributeError, match="module 'crewbridge' has no attribute 'Bridg'"):
        crewbridge.Bridg  # noqa: B018


# --- running a query ------------------------------------------------------------------------------


@pytest.mark.slow
def test_ask_runs_a_query_and_returns_the_answer_with_its_tool_calls(workdir: Path) -> None:
    result = Bridge(workdir=workdir).ask("@demo what is in notes.txt?")
    assert result.agent == "demo" and "notes.txt has 2 non-empty lines" in result.answer
    assert [(c.name, c.input, c.result.success) for c in result.tool_calls] == [
        ("crew:read_file", {"path": "notes.txt"}, True)
    ]


def test_ask_raises_the_error_that_ended_the_run(workdir: Path) -> None:
    with pytest.raises(AgentNotFound, match="agent 'nobody' not found"):
        Bridge(workdir=workdir).ask("@nobody hello")


@pytest.mark.slow
def test_a_run_takes_its_options_as_one_object_or_by_name(workdir: Path) -> None:
    from crewbridge.errors import MaxTurnsReached

    bridge = Bridge(workdir=workdir)
    (outcome,) = bridge.run("@demo what is in notes.txt?", options=crewbridge.RunOptions(max_turns=1))
    assert isinstance(outcome.error, MaxTurnsReached)  # the demo needs a second turn for its answer
    assert bridge.run("@demo what is in notes.txt?", max_turns=2)[0].error is None
    with pytest.raises(UsageError, match="unknown run option max_turn; the options are: max_turns"):
        bridge.run("@demo hello", max_turn=1)


@pytest.mark.slow
def test_a_chat_goes_on_across_messages_in_one_transcript(workdir: Path) -> None:
    from crewbridge.record.transcript import read_run

    (workdir / "plan.txt").write_text("ship\n")
    chat = Bridge(workdir=workdir).chat("@demo")
    try:
        assert "notes.txt has 2 non-empty lines" in chat.ask("what is in notes.txt?").answer
        assert "plan.txt has 1 non-empty line" in chat.ask("and in plan.txt?").answer
    finally:
        chat.close()
    events = read_run("last")
    assert (events[0].command, events[0].mode, events[-1].status) == ("chat", "query", "done")
    assert len([event for event in events if event.kind == "answer"]) == 2


def test_ask_takes_one_agent(workdir: Path) -> None:
    with pytest.raises(UsageError, match=r"ask\(\) runs one agent, and 2 are mentioned; use run\(\)"):
        Bridge(workdir=workdir).ask("@demo @claude hello")


@pytest.mark.slow
def test_events_arrive_through_a_callback_in_order(workdir: Path) -> None:
    seen: list[Event] = []
    Bridge(workdir=workdir).ask("@demo what is in notes.txt?", on_progress=seen.append)
    assert all(isinstance(event, Event) for event in seen)
    kinds = [event.kind for event in seen]
    assert (kinds[0], kinds[-1]) == ("start", "end")  # the run's whole record, its id first
    assert seen[0].run and seen[-1].status == "done"
    turns = [i for i, kind in enumerate(kinds) if kind == "turn"]
    assert len(turns) == 2 and "text" in kinds[turns[0] : turns[1]]
    assert kinds.index("call") < kinds.index("result") < turns[1]  # the result is sent in turn 2
    call, result = (next(e for e in seen if e.kind == kind) for kind in ("call", "result"))
    assert call.call == result.call and (call.name, result.success) == ("crew:read_file", True)
    assert "".join(e.visible for e in seen if e.kind == "text").startswith("I'll read notes.txt")


@pytest.mark.slow
def test_each_agents_cli_starts_before_the_tools_and_the_catalogue_are_built(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    order: list[str] = []
    spawn, tools = process.Child.__init__, Config.registry
    monkeypatch.setattr(
        process.Child, "__init__", lambda self, argv, **kw: (order.append("cli"), spawn(self, argv, **kw))[1]
    )
    monkeypatch.setattr(Config, "registry", lambda self: (order.append("tools"), tools(self))[1])
    result = Bridge(workdir=workdir).ask("@demo what is in notes.txt?")
    assert "notes.txt has 2 non-empty lines" in result.answer
    assert order == ["cli", "tools", "cli"]  # turn 1's CLI, then the tools; turn 2 needs its own


def test_an_error_in_the_tools_configuration_ends_the_run_and_the_clis_started_for_it(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[process.Child] = []
    spawn = process.Child.__init__
    monkeypatch.setattr(
        process.Child, "__init__", lambda self, argv, **kw: (started.append(self), spawn(self, argv, **kw))[1]
    )

    def broken(self: Config) -> None:
        raise ConfigError("crew.yaml:3: agents.demo.deny[0]: 'nope' matches no tool")

    monkeypatch.setattr(Config, "registry", broken)
    with pytest.raises(ConfigError, match="'nope' matches no tool"):
        Bridge(workdir=workdir).run("@demo @demo hello")
    assert len(started) == 2 and all(child.proc.poll() is not None for child in started)


@pytest.mark.slow
def test_every_run_starts_its_own_clis_and_leaves_none_running(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[process.Child] = []
    spawn = process.Child.__init__
    monkeypatch.setattr(
        process.Child, "__init__", lambda self, argv, **kw: (started.append(self), spawn(self, argv, **kw))[1]
    )
    for _ in range(2):  # nothing a run started is kept for, or taken by, another run or Bridge
        assert "notes.txt has 2 non-empty lines" in Bridge(workdir=workdir).ask("@demo what is in notes.txt?").answer
    assert len(started) == 4 and len({id(child) for child in started}) == 4
    assert all(child.proc.poll() is not None for child in started)


# --- tools from plain functions ----------------------------------------------------------------


def test_a_bridge_given_a_sandboxing_and_each_of_its_runs_detect_the_sandbox_with_it(workdir: Path) -> None:
    sandboxing = Sandboxing()
    bridge = Bridge(Config(agents=default_agents()), workdir, sandboxing=sandboxing)
    assert bridge.sandboxing is sandboxing and bridge.context.reporting(print).sandboxing is sandboxing  # a run's
    assert Bridge(Config(agents=default_agents()), workdir).sandboxing is not sandboxing


@pytest.mark.slow
def test_a_typed_function_becomes_a_tool_the_model_calls(tmp_path: Path, workdir: Path) -> None:
    bridge = Bridge(scripted(tmp_path, "crew:weather", {"city": "Paris", "days": 2}), workdir=workdir)
    calls = []

    @bridge.tool(read_only=True)
    def weather(city: str, unit: Literal["C", "F"] = "C", days: int = 1) -> dict:
        """Current weather for a city.

        Args:
            city: The city's name.
        """
        calls.append((city, unit, days))
        return {"city": city, "temperature": 21, "unit": unit}

    assert weather("Rome") == {"city": "Rome", "temperature": 21, "unit": "C"}  # still a function
    calls.clear()
    spec = bridge.registry.resolve("crew:weather")
    assert spec.input_schema["properties"]["city"] == {"type": "string", "description": "The city's name."}
    assert "crew:weather" in bridge.first_prompt("@fake weather?")
    result = bridge.ask("@fake what is the weather in Paris?")
    assert calls == [("Paris", "C", 2)]
    assert result.answer == 'The tool said: {"city": "Paris", "temperature": 21, "unit": "C"}'


@pytest.mark.slow
def test_input_that_breaks_the_schema_goes_back_to_the_model_and_the_function_never_runs(
    tmp_path: Path, workdir: Path
) -> None:
    bridge = Bridge(scripted(tmp_path, "crew:weather", {"town": "Paris"}), workdir=workdir)
    ran = []
    bridge.tool(lambda city: ran.append(city), name="weather", read_only=True)
    result = bridge.ask("@fake weather?")
    assert ran == [] and not result.tool_calls[0].result.success
    assert "invalid input for crew:weather" in result.tool_calls[0].result.error


def test_a_function_declared_with_the_decorator_keeps_its_declaration(workdir: Path) -> None:
    bridge = Bridge(Config(agents=default_agents(), transcripts=False), workdir=workdir)

    @crewbridge.tool(read_only=True, name="shout")
    def loud(text: str) -> str:
        """Say it louder."""
        return text.upper()

    bridge.tool(loud)
    assert bridge.registry.resolve("shout").read_only


def test_a_tool_name_that_is_taken_is_refused(workdir: Path) -> None:
    bridge = Bridge(Config(agents=default_agents(), transcripts=False), workdir=workdir)

    def read_file(path: str) -> str:
        return ""

    with pytest.raises(crewbridge.CrewError, match="tool 'read_file' is registered twice"):
        bridge.tool(read_file)


# --- events as an iterator -----------------------------------------------------------------------


@pytest.mark.slow
def test_stream_yields_events_as_they_happen_then_holds_the_outcomes(workdir: Path) -> None:
    events = Bridge(workdir=workdir).stream("@demo what is in notes.txt?")
    with pytest.raises(UsageError, match="the run is still going"):
        events.outcomes  # noqa: B018
    seen = list(events)
    assert [e.kind for e in seen if e.kind in ("call", "result")] == ["call", "result"]
    assert next(iter(events), None) is None  # it stays ended
    (outcome,) = events.outcomes
    assert outcome.error is None and "notes.txt has 2 non-empty lines" in outcome.result.answer


def test_leaving_a_stream_early_stops_the_run(workdir: Path) -> None:
    with Bridge(workdir=workdir).stream("@demo what is in notes.txt?") as events:
        first = next(events)
    assert first.kind == "start"
    (outcome,) = events.outcomes
    assert isinstance(outcome.error, Interrupted) and outcome.result is None


def test_closing_a_stream_ends_a_cli_that_says_nothing_at_once(workdir: Path) -> None:
    silent = [sys.executable, "-c", "import sys, time; sys.stdin.read(); time.sleep(600)"]
    agents = {**default_agents(), "quiet": AgentSpec(id="quiet", provider="quiet")}
    config = Config(agents=agents, providers={"quiet": GenericSpec(name="quiet", command=silent)}, transcripts=False)
    with Bridge(config, workdir=workdir).stream("@quiet hello", timeout=None) as events:
        assert [next(events).kind for _ in range(3)] == ["start", "part", "turn"]
    # close() returned: the run did not wait for an event the CLI would never send (its Stop ended it)
    (outcome,) = events.outcomes
    assert isinstance(outcome.error, Interrupted) and outcome.result is None


def test_a_stream_raises_an_error_of_the_run_itself_to_its_reader(workdir: Path) -> None:
    events = Bridge(workdir=workdir).stream("no mention here")
    with pytest.raises(UsageError, match="no agent mentioned"):
        list(events)


# --- usage, budgets, continuing -------------------------------------------------------------------


@pytest.mark.slow
def test_ask_reports_usage_takes_a_budget_and_continues_an_earlier_run(tmp_path: Path, workdir: Path) -> None:
    from crewbridge.record.transcript import read_run

    config = scripted(tmp_path, "crew:read_file", {"path": "notes.txt"})
    config.transcripts = True
    bridge = Bridge(config, workdir=workdir)
    first = bridge.ask("@fake what is in notes.txt?", max_tokens=10)  # a generic text CLI reports no usage
    assert first.usage == {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0, "cost_usd": None}
    run_id = read_run("last")[0].run
    again = bridge.ask("@fake and now?", resume=run_id)
    assert again.answer.startswith("The tool said:") and again.tool_calls == []  # the replay held the result
    assert read_run("last")[0].resumed_from == run_id


@pytest.mark.slow
def test_a_run_takes_the_cli_started_for_it_and_ends_those_started_for_another(
    workdir: Path, started_clis: list[process.Child]
) -> None:
    started = started_clis
    bridge = Bridge(workdir=workdir)
    bridge.start("@demo what is in notes.txt?", "query")
    bridge.start("@demo what is in notes.txt?", "execute")  # another mode: not this run's
    assert len(started) == 2
    assert "notes.txt has 2 non-empty lines" in bridge.ask("@demo what is in notes.txt?").answer
    assert len(started) == 3  # the first turn's CLI was the one started; turn 2 needs its own
    assert all(child.proc.poll() is not None for child in started)


def test_close_ends_the_clis_no_run_took(workdir: Path, started_clis: list[process.Child]) -> None:
    started = started_clis
    bridge = Bridge(workdir=workdir)
    bridge.start("@demo @demo hello")
    bridge.close()
    assert len(started) == 1 and started[0].proc.poll() is not None
