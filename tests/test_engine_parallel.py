"""crewbridge.engine.parallel: a task on every agent it mentions at once. The agents are checked before
anything starts; each agent's CLI starts first; one record (ended done, or failed when an agent
failed; its id, command and parent as the caller names them) and one budget cover the run; each
agent's outcome comes back in mention order, with the run's id; the CLIs started ahead that no
agent took are ended. The CLIs are small scripts that answer with their name and the prompt's last
line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from crewbridge.providers.generic import GenericSpec

from crewbridge.base.mentions import Mention
from crewbridge.base.options import RunOptions
from crewbridge.config import AgentSpec, Config, default_agents
from crewbridge.engine.context import RunContext
from crewbridge.engine.parallel import run_task
from crewbridge.errors import AgentNotFound, ProviderError, SandboxUnavailable, UsageError
from crewbridge.record import events as ev
from crewbridge.record.transcript import read_run
from crewbridge.sandbox import MECHANISM_ENV, Sandboxing

# Answers "<name>: <the prompt's last line>", after sleeping the seconds given (to finish out of order).
SAYS = """
import sys, time
lines = [line for line in sys.stdin.read().splitlines() if line.strip()]
time.sleep(float(sys.argv[2]))
print(sys.argv[1] + ": " + lines[-1])
"""
FAILS = "import sys; sys.stdin.read(); sys.exit('Error: bad prompt')"


def says(name: str, pause: float = 0.0) -> GenericSpec:
    return GenericSpec(name=name, command=[sys.executable, "-c", SAYS, name, str(pause)])


def context(tmp_path: Path) -> RunContext:
    providers = {
        "slow": says("slow", 0.5),
        "quick": says("quick"),
        "fails": GenericSpec("fails", [sys.executable, "-c", FAILS]),
    }
    agents = {name: AgentSpec(id=name, provider=name) for name in providers}
    config = Config(agents={**default_agents(), **agents}, providers=providers)
    return RunContext(config, tmp_path, sandboxing=Sandboxing({MECHANISM_ENV: "none"}))


def run_record(outcomes) -> list[ev.AnyEvent]:
    return read_run(outcomes[0].run)


@pytest.mark.slow
def test_every_mentioned_agent_answers_and_the_outcomes_come_in_mention_order(tmp_path: Path, started_clis):
    outcomes = run_task(context(tmp_path), "@slow @quick say hello")
    assert [(o.agent, o.error) for o in outcomes] == [("slow", None), ("quick", None)]
    assert [o.result.answer for o in outcomes] == ["slow: say hello", "quick: say hello"]
    assert len(started_clis) == 2 and all(child.proc.poll() is not None for child in started_clis)


@pytest.mark.slow
def test_one_transcript_covers_the_run_and_every_outcome_carries_its_id(tmp_path: Path):
    outcomes = run_task(context(tmp_path), "@quick @slow say hello")
    assert outcomes[0].run is not None and outcomes[0].run == outcomes[1].run
    events = run_record(outcomes)
    start, end = events[0], events[-1]
    assert (start.kind, start.run, start.agents, start.task) == (
        "start",
        outcomes[0].run,
        ["quick", "slow"],
        "say hello",
    )
    assert (start.command, start.mode, start.cwd) == ("query", "query", str(tmp_path.resolve()))  # the run's own folder
    assert (end.kind, end.status) == ("end", "done")
    assert sorted(e.agent for e in events if isinstance(e, ev.Part)) == ["quick", "slow"]
    assert sorted(e.agent for e in events if isinstance(e, ev.Answer)) == ["quick", "slow"]


@pytest.mark.slow
def test_a_run_where_an_agent_failed_is_closed_failed_and_the_others_answer(tmp_path: Path):
    outcomes = run_task(context(tmp_path), "@fails @quick say hello")
    assert isinstance(outcomes[0].error, ProviderError) and outcomes[1].result.answer == "quick: say hello"
    events = run_record(outcomes)
    assert events[-1].status == "failed" and events[-1].errors == 1
    assert [e.agent for e in events if isinstance(e, ev.Error)] == ["fails"]


@pytest.mark.slow
def test_the_context_given_is_added_to_the_task(tmp_path: Path):
    (outcome,) = run_task(context(tmp_path), "@quick say hello", context="Here is the log.")
    assert outcome.result.answer.startswith("quick: ")
    assert "Here is the log." in run_record([outcome])[0].task


@pytest.mark.slow
def test_the_caller_names_the_runs_id_its_command_and_what_it_is_part_of(tmp_path: Path):
    seen: list[ev.Event] = []
    parent = ev.Parent(session="sess-9")
    run = "20300101-120000-abc123"
    ctx = context(tmp_path).reporting(seen.append)
    (outcome,) = run_task(ctx, "@quick say hello", run=run, command="acp", parent=parent)
    assert outcome.run == run
    start = read_run(run)[0]
    assert (start.run, start.command, start.mode, start.parent) == (run, "acp", "query", parent)
    assert seen[0].kind == "start" and seen[-1].kind == "end"  # the face's sink heard it all
    assert [e.kind for e in seen] == [e.kind for e in read_run(run)]  # in the transcript's order


@pytest.mark.slow
def test_with_transcripts_off_the_run_has_no_id_to_resume_and_its_sink_still_hears_it(tmp_path: Path):
    seen: list[ev.Event] = []
    ctx = context(tmp_path)
    ctx.config.transcripts = False
    (outcome,) = run_task(ctx.reporting(seen.append), "@quick say hello")
    assert outcome.run is None and outcome.result.answer == "quick: say hello"
    assert seen[0].kind == "start" and seen[-1].kind == "end" and seen[-1].status == "done"


def test_an_agent_that_is_not_configured_fails_the_run_before_any_cli_starts(tmp_path: Path, started_clis):
    with pytest.raises(AgentNotFound, match="agent 'nobody' not found"):
        run_task(context(tmp_path), "@quick @nobody say hello")
    assert started_clis == []


def test_a_required_sandbox_not_to_be_had_fails_the_run_before_any_cli_starts(tmp_path: Path, started_clis):
    with pytest.raises(SandboxUnavailable):
        run_task(context(tmp_path), "@quick say hello", sandbox="required")
    assert started_clis == []


@pytest.mark.parametrize(
    ("mode", "values", "message"),
    [
        ("ask", {}, "mode 'ask' is not one of query, execute"),
        ("query", {"worktree": True}, "--worktree goes with crew execute only"),
        ("query", {"max_turn": 1}, "unknown run option max_turn"),
    ],
)
def test_a_mode_or_options_that_are_not_ones_are_refused_before_any_cli_starts(
    tmp_path: Path, started_clis, mode, values, message
):
    with pytest.raises(UsageError, match=message):
        run_task(context(tmp_path), "@quick say hello", mode, **values)
    assert started_clis == []


@pytest.mark.slow
def test_the_clis_started_ahead_that_no_agent_took_are_ended_when_the_run_ends(tmp_path: Path, started_clis):
    ctx = context(tmp_path)
    ctx.start("@quick say hello", "execute")  # another mode: not this run's
    assert len(ctx.started) == 1
    run_task(ctx, "@quick say hello")
    assert ctx.started == {} and all(child.proc.poll() is not None for child in started_clis)


@pytest.mark.slow
def test_the_clis_started_ahead_are_ended_also_when_the_run_is_refused(tmp_path: Path, started_clis):
    ctx = context(tmp_path)
    ctx.start("@quick say hello")
    with pytest.raises(AgentNotFound):
        run_task(ctx, "@nobody say hello")
    assert ctx.started == {} and len(started_clis) == 1 and started_clis[0].proc.poll() is not None


@pytest.mark.slow
def test_a_run_takes_the_cli_started_ahead_for_it(tmp_path: Path, started_clis):
    ctx = context(tmp_path)
    ctx.start("@quick say hello")
    (outcome,) = run_task(ctx, "@quick say hello", options=RunOptions(max_turns=2))
    assert outcome.result.answer == "quick: say hello" and len(started_clis) == 1
    assert (Mention("quick"), "query", None, None) not in ctx.started
