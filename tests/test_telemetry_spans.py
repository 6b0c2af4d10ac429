"""A run's record as GenAI spans (crewbridge.telemetry.spans, through the exporter's sink), read
back from the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from crewbridge.record import events as ev
from crewbridge.record.stream import Record
from crewbridge.telemetry.exporter import Exporter
from crewbridge.telemetry.settings import Settings

TRACE = "0af7651916cd43dd8448eb211c80319c"
RUN_SPAN = "b7ad6b7169203331"
CLAUDE_SPAN = "00f067aa0ba902b7"
GEMINI_SPAN = "11f067aa0ba902b7"
SECRET = "the launch code is 7-4-1"


def hex16(value: int) -> str:
    return format(value, "016x")


def traced(events: list[ev.Event], settings: Settings | None = None, parent: ev.Parent | None = None) -> dict:
    """The spans of a run made of `events` (after its start), by name."""
    memory = InMemorySpanExporter()
    exporter = Exporter(settings or Settings(), SimpleSpanProcessor(memory))
    record = Record()
    start = ev.Start(
        run=record.run,
        at="2026-03-01T10:00:00.000+00:00",
        command="query",
        mode="query",
        agents=["claude", "gemini"],
        task=f"what does notes.txt say? {SECRET}",
        trace=TRACE,
        span=RUN_SPAN,
        parent=parent,
    )
    record.emit(start)
    exporter.observe(record)
    for event in events:
        record.emit(event)
    record.end("failed" if any(isinstance(e, ev.Error) for e in events) else "done")
    exporter.close()
    return {span.name: span for span in memory.get_finished_spans()}


def two_agents() -> list[ev.Event]:
    return [
        ev.Part(agent="claude", part=1, provider="claude", model="sonnet", span=CLAUDE_SPAN),
        ev.Part(agent="gemini", part=1, provider="gemini", span=GEMINI_SPAN),
        ev.Session(agent="claude", session="s-claude", model="claude-sonnet-4"),
        ev.Turn(agent="claude", turn=1, prompt=f"catalogue … {SECRET}"),
        ev.Call(agent="claude", call="c1", name="crew:read_file", input={"path": "notes.txt"}, turn=1),
        ev.Decision(agent="claude", call="c1", decision="allowed"),
        ev.Result(agent="claude", call="c1", name="crew:read_file", success=True, data=SECRET),
        ev.Call(agent="gemini", call="c2", name="native:run_shell_command", via="own", ref="run_shell_command-1"),
        ev.Ask(agent="gemini", call="c2", name="native:run_shell_command"),
        ev.Approval(agent="gemini", call="c2", name="native:run_shell_command", answer="no", source="terminal"),
        ev.Decision(agent="gemini", call="c2", decision="refused", by="terminal", reason="a person said no"),
        ev.Result(agent="gemini", call="c2", name="native:run_shell_command", success=False, error=SECRET),
        ev.Usage(agent="claude", input_tokens=100, output_tokens=10, cached_tokens=40, cost_usd=0.012),
        ev.Usage(agent="claude", input_tokens=50, output_tokens=5, cost_usd=0.003),
        ev.Usage(agent="gemini", input_tokens=200, output_tokens=20, cost_usd=0.0001, priced="2026-03-01"),
        ev.Egress(agent="gemini", host="example.com", port=443, why="not allowed", process="pid 1: gemini"),
        ev.Answer(agent="claude", text=SECRET, turns=2),
        ev.Answer(agent="gemini", text="no", turns=1),
    ]


def test_the_run_is_the_root_and_each_agent_a_span_under_it_with_the_records_ids():
    spans = traced(two_agents())
    run, claude, gemini = (
        spans["invoke_workflow crew query"],
        spans["invoke_agent claude"],
        spans["invoke_agent gemini"],
    )
    assert format(run.context.trace_id, "032x") == TRACE and hex16(run.context.span_id) == RUN_SPAN
    assert run.parent is None
    assert (hex16(claude.context.span_id), hex16(claude.parent.span_id)) == (CLAUDE_SPAN, RUN_SPAN)
    assert (hex16(gemini.context.span_id), hex16(gemini.parent.span_id)) == (GEMINI_SPAN, RUN_SPAN)
    assert run.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert run.attributes["gen_ai.workflow.name"] == "crew query"
    assert run.attributes["crew.status"] == "done" and run.attributes["crew.calls"] == 2
    expected = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "claude",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "sonnet",
        "gen_ai.response.model": "claude-sonnet-4",
        "gen_ai.conversation.id": "s-claude",
        "openinference.span.kind": "AGENT",
    }
    assert {key: claude.attributes[key] for key in expected} == expected
    assert gemini.attributes["gen_ai.provider.name"] == "gcp.gemini"
    assert run.start_time == 1772359200 * 10**9


def test_each_agents_tokens_and_cost_are_its_usage_events_summed():
    spans = traced(two_agents())
    claude, gemini, run = (
        spans["invoke_agent claude"],
        spans["invoke_agent gemini"],
        spans["invoke_workflow crew query"],
    )
    assert (claude.attributes["gen_ai.usage.input_tokens"], claude.attributes["gen_ai.usage.output_tokens"]) == (
        150,
        15,
    )
    assert claude.attributes["gen_ai.usage.cache_read.input_tokens"] == 40
    assert claude.attributes["crew.cost.usd"] == claude.attributes["llm.cost.total"] == 0.015
    assert "crew.cost.priced" not in claude.attributes  # claude's own figure
    assert gemini.attributes["crew.cost.usd"] == 0.0001 and gemini.attributes["crew.cost.priced"] == "2026-03-01"
    assert run.attributes["gen_ai.usage.input_tokens"] == 350
    assert run.attributes["crew.cost.usd"] == pytest.approx(0.0151)


def test_a_run_without_cost_says_none():
    spans = traced([ev.Part(agent="gemini", part=1, provider="gemini"), ev.Usage(agent="gemini", input_tokens=5)])
    assert "crew.cost.usd" not in spans["invoke_agent gemini"].attributes
    assert "llm.cost.total" not in spans["invoke_workflow crew query"].attributes


def test_every_tool_call_is_a_span_under_its_agent_with_crews_decision():
    spans = traced(two_agents())
    read, shell = spans["execute_tool crew:read_file"], spans["execute_tool native:run_shell_command"]
    assert hex16(read.parent.span_id) == CLAUDE_SPAN and hex16(shell.parent.span_id) == GEMINI_SPAN
    assert read.attributes["gen_ai.tool.call.id"] == "c1" and read.attributes["crew.decision"] == "allowed"
    assert read.status.status_code is StatusCode.OK
    assert shell.attributes["crew.tool.ref"] == "run_shell_command-1" and shell.attributes["crew.tool.via"] == "own"
    assert (shell.attributes["crew.decision"], shell.attributes["crew.decision.by"]) == ("refused", "terminal")
    assert (shell.attributes["crew.approval.answer"], shell.attributes["crew.approval.source"]) == ("no", "terminal")
    assert shell.status.status_code is StatusCode.ERROR and shell.attributes["error.type"] == "tool_error"


def test_no_prompt_answer_file_or_tool_output_leaves_without_the_opt_in():
    spans = traced(two_agents())
    everything = json.dumps(
        [
            {**dict(s.attributes), "events": [dict(e.attributes) for e in s.events], "status": s.status.description}
            for s in spans.values()
        ],
        default=str,
    )
    assert SECRET not in everything and "notes.txt" not in everything


def test_content_is_captured_bounded_when_asked():
    long = "x" * 20_000
    events = [
        ev.Part(agent="claude", part=1, provider="claude"),
        ev.Turn(agent="claude", turn=1, prompt=long),
        ev.Call(agent="claude", call="c1", name="crew:read_file", input={"path": "notes.txt"}),
        ev.Result(agent="claude", call="c1", name="crew:read_file", success=True, data=SECRET),
        ev.Answer(agent="claude", text=SECRET),
    ]
    spans = traced(events, Settings(capture_content=True))
    agent, read = spans["invoke_agent claude"], spans["execute_tool crew:read_file"]
    assert len(agent.attributes["input.value"]) < 8_100 and "more characters" in agent.attributes["input.value"]
    assert SECRET in agent.attributes["output.value"]
    assert json.loads(read.attributes["gen_ai.tool.call.arguments"]) == {"path": "notes.txt"}
    assert SECRET in read.attributes["gen_ai.tool.call.result"]


def test_a_review_fallback_and_refused_connection_are_where_they_belong():
    events = [
        ev.Part(agent="claude", part=1, provider="claude", role="writer", round=1),
        ev.Part(agent="gemini", part=1, provider="gemini", role="reviewer", round=1),
        ev.Review(agent="gemini", round=1, rounds=2, verdict="changes", findings=[{"text": "a"}]),
        ev.Part(agent="gemini", part=2, provider="gemini", role="reviewer", round=2),
        ev.Review(agent="gemini", round=2, rounds=2, verdict="approve"),
        ev.Part(agent="codex", part=1, provider="codex"),
        ev.Fallback(agent="codex", to="claude", reason="unavailable"),
    ]
    memory = InMemorySpanExporter()
    exporter = Exporter(Settings(), SimpleSpanProcessor(memory))
    record = Record()
    record.emit(ev.Start(run=record.run, at="2026-03-01T10:00:00+00:00", command="execute", trace=TRACE, span=RUN_SPAN))
    exporter.observe(record)
    for event in events:
        record.emit(event)
    record.end("done")
    exporter.close()
    reviewers = [s for s in memory.get_finished_spans() if s.name == "invoke_agent gemini"]
    assert sorted((s.attributes["crew.review.round"], s.attributes["crew.review.verdict"]) for s in reviewers) == [
        (1, "changes"),
        (2, "approve"),
    ]
    [codex] = [s for s in memory.get_finished_spans() if s.name == "invoke_agent codex"]
    assert [e.name for e in codex.events] == ["crew.fallback"] and codex.status.status_code is StatusCode.ERROR


def test_the_run_continues_the_trace_it_was_given():
    parent = ev.Parent(session="s1", traceparent=f"00-{TRACE}-{CLAUDE_SPAN}-01", tracestate="editor=1")
    run = traced([], parent=parent)["invoke_workflow crew query"]
    assert hex16(run.parent.span_id) == CLAUDE_SPAN and run.parent.is_remote
    assert run.context.trace_state.to_header() == "editor=1"
    assert run.attributes["crew.parent.session"] == "s1"


def test_the_latest_semantic_conventions_drop_the_older_names():
    spans = traced(two_agents(), Settings(latest=True))
    assert "gen_ai.system" not in spans["invoke_agent claude"].attributes
    assert spans["invoke_workflow crew query"].attributes["gen_ai.agent.name"] == "crew query"
    assert "gen_ai.system" in traced(two_agents())["invoke_agent claude"].attributes


def test_the_users_resource_variables_win_over_crew_yaml_and_the_default(monkeypatch):
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "team=env,service.name=from-attributes")
    given = Settings(resource=(("team", "yaml"), ("openinference.project.name", "crew")))
    resource = traced([], given)["invoke_workflow crew query"].resource.attributes
    assert resource["team"] == "env" and resource["openinference.project.name"] == "crew"
    assert resource["service.name"] == "from-attributes"  # not crew's default
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-service-name")  # the most particular of all
    resource = traced([], Settings(service_name="from-service-name"))["invoke_workflow crew query"].resource.attributes
    assert resource["service.name"] == "from-service-name" and resource["service.version"]
