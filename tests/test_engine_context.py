"""crewbridge.engine.context: a run's context, the one value holding what a run needs — the configuration,
the working directory, the machine's sandboxing, the tools built once and shared by every copy,
where the run reports — and what makes a run's parts: its record (its start, held until its
transcript is made, the observers that join it), each agent's conversation (or the error that
stops that agent alone) and loop, the CLIs started ahead for the next run to take; and
`checked`, the options of a run in a mode. Configured agents here are small scripts run as CLIs."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from crewbridge.providers.generic import GenericSpec

from chatfakes import Script
from crewbridge.base.mentions import Mention
from crewbridge.base.options import RunOptions
from crewbridge.base.stop import Stop
from crewbridge.base.usage import Budget
from crewbridge.config import AgentSpec, Config, default_agents
from crewbridge.engine.context import RunContext, Tools, Work, checked
from crewbridge.errors import AgentNotFound, CrewError, SandboxUnavailable, UsageError
from crewbridge.record import events as ev
from crewbridge.record.stream import Record
from crewbridge.record.transcript import read_run
from crewbridge.sandbox import MECHANISM_ENV, Sandboxing
from crewbridge.system.approval import Question
from crewbridge.toolkit.functions import tool

# A model run as a CLI: it reads its prompt on stdin, then answers once.
ANSWER = "import sys; sys.stdin.read(); print('done')"


@tool(read_only=True)
def weather(ctx, city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool(read_only=True)
def verdict(ctx, ok: bool) -> str:
    """A review's verdict: a run's own tool."""
    return "noted"


def config(**agents: AgentSpec) -> Config:
    """The built-in agents, @script (a script run as a CLI) and `agents`; transcripts off."""
    script = GenericSpec(name="script", command=[sys.executable, "-c", ANSWER])
    every = {**default_agents(), "script": AgentSpec(id="script", provider="script"), **agents}
    return Config(agents=every, providers={"script": script}, transcripts=False)


def context(tmp_path: Path, **fields) -> RunContext:
    return RunContext(config(), tmp_path, sandboxing=Sandboxing({MECHANISM_ENV: "none"}), **fields)


# -- the value -------------------------------------------------------------------------------------


def test_the_working_directory_is_held_resolved(tmp_path: Path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert context(tmp_path / "link" / ".." / "link").workdir == (tmp_path / "real").resolve()


def test_of_gives_the_configured_tools_and_those_given(tmp_path: Path):
    ctx = RunContext.of(config(), tmp_path, tools=[weather])
    names = ctx.registry.names()
    assert "weather" in names and "read_file" in names
    assert "weather" not in RunContext.of(config(), tmp_path).registry.names()


def test_the_tools_are_built_once_when_first_needed_and_shared_by_every_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    built = []
    registry = Config.registry
    monkeypatch.setattr(Config, "registry", lambda self: (built.append(self), registry(self))[1])
    ctx = RunContext.of(config(), tmp_path)
    assert built == []  # a run needs them once its CLIs have started, not before
    copy = ctx.reporting(print, Stop())
    assert ctx.registry is copy.registry is ctx.registry
    assert len(built) == 1


def test_a_runs_own_tools_are_added_in_a_registry_of_their_own(tmp_path: Path):
    tools = Tools(config(), [weather])
    assert tools.with_([]) is tools.registry
    review = tools.with_([verdict])
    assert {"verdict", "weather"} <= set(review.names())
    assert "verdict" not in tools.registry.names()  # the shared tools stay as they were


def test_a_copy_for_one_run_reports_to_its_sink_is_stopped_by_its_stop_and_shares_the_rest(tmp_path: Path):
    ctx, stop, seen = context(tmp_path), Stop(), []
    run = ctx.reporting(seen.append, stop)
    assert run.emit is not None and run.stop is stop and ctx.emit is None and ctx.stop is None
    assert run.sandboxing is ctx.sandboxing and run.tools is ctx.tools and run.started is ctx.started
    assert run.config is ctx.config and run.workdir == ctx.workdir


def test_a_runs_record_starts_with_what_names_it_and_tells_the_faces_sink_at_once(tmp_path: Path):
    seen: list[ev.Event] = []
    ctx = context(tmp_path, emit=seen.append)
    parent = ev.Parent(session="sess-1")
    record = ctx.record("acp", "execute", ["script"], "fix it", models={"script": "m1"}, parent=parent)
    [start] = seen
    assert isinstance(start, ev.Start) and start.run == record.run
    assert (start.command, start.mode, start.agents, start.task, start.models, start.parent) == (
        "acp",
        "execute",
        ["script"],
        "fix it",
        {"script": "m1"},
        parent,
    )
    assert (start.cwd, start.pid, start.resumed_from) == (str(tmp_path.resolve()), os.getpid(), None)
    assert not record.kept  # held until keep(): the run's CLIs start meanwhile
    elsewhere = ctx.record("query", "query", ["script"], "hi", run="20300101-000000-abc123", workdir=tmp_path / "w")
    assert (elsewhere.run, seen[-1].cwd, seen[-1].resumed_from) == ("20300101-000000-abc123", str(tmp_path / "w"), None)
    assert ctx.record("query", "query", ["script"], "hi", resume="20290101-000000-abc123").run != record.run


# -- where and how an agent works ------------------------------------------------------------------


def test_an_agent_works_in_its_own_folder_under_the_runs_else_in_the_runs(tmp_path: Path):
    (tmp_path / "api").mkdir()
    ctx = context(tmp_path)
    assert ctx.workdir_of(AgentSpec(id="a", provider="script", workdir="api")) == (tmp_path / "api").resolve()
    assert ctx.workdir_of(AgentSpec(id="a", provider="script", workdir=str(tmp_path))) == tmp_path.resolve()
    assert ctx.workdir_of(AgentSpec(id="a", provider="script")) == tmp_path.resolve()


@pytest.mark.parametrize(
    ("option", "configured", "agents", "level"),
    [
        (None, "auto", None, "auto"),  # crew.yaml's, when the run gives none
        ("off", "required", None, "off"),  # the run's option beats crew.yaml's
        ("auto", "off", "required", "required"),  # the agent's own, where stricter
        ("auto", "off", "off", "off"),  # an agent's off lets it out of auto
        ("required", "auto", "off", "required"),  # but never out of required
    ],
)
def test_an_agents_sandbox_level_is_the_runs_unless_its_own_is_stricter(tmp_path, option, configured, agents, level):
    ctx = RunContext(Config(agents=default_agents(), sandbox=configured), tmp_path)
    agent = AgentSpec(id="a", provider="script", sandbox=agents)
    assert ctx.sandbox_level(RunOptions(sandbox=option), agent) == level


def test_a_required_sandbox_not_to_be_had_is_refused_before_anything_starts(tmp_path: Path):
    ctx, record, seen = context(tmp_path), Record(), []
    record.attach(seen.append)
    with pytest.raises(SandboxUnavailable, match="the sandbox is required, but no mechanism works here"):
        ctx.check_sandbox(RunOptions(sandbox="required"), [ctx.config.agent("script")], record)
    assert seen == []


def test_auto_without_a_sandbox_says_so_once_in_the_runs_record_and_off_says_nothing(tmp_path: Path):
    ctx, record, seen = context(tmp_path), Record(), []
    record.attach(seen.append)
    agents = [ctx.config.agent("script"), ctx.config.agent("demo")]
    ctx.check_sandbox(RunOptions(sandbox="off"), agents, record)
    assert seen == []
    ctx.check_sandbox(RunOptions(sandbox="auto"), agents, record)
    assert [(e.kind, e.about, e.agent) for e in seen] == [("notice", "sandbox", "script")]
    assert seen[0].text.startswith(f"no sandbox here ({MECHANISM_ENV}=none)") and "--sandbox off" in seen[0].text
    ctx.check_sandbox(RunOptions(sandbox="auto"), agents)  # no record (a check before the run): nothing to fail


def test_a_sandbox_level_that_is_not_one_is_a_usage_error(tmp_path: Path):
    ctx = context(tmp_path)
    with pytest.raises(UsageError, match="sandbox 'strict' is not one of auto, required, off"):
        ctx.check_sandbox(RunOptions(sandbox="strict"), [ctx.config.agent("script")])


def test_the_first_prompt_is_the_catalogue_of_the_agents_tools_and_the_task_with_its_context(tmp_path: Path):
    ctx = RunContext.of(config(), tmp_path, tools=[weather], sandboxing=Sandboxing({MECHANISM_ENV: "none"}))
    prompt = ctx.first_prompt("@script what is the weather?", context="It is Tuesday.")
    assert "crew:weather" in prompt and "crew:read_file" in prompt
    assert "what is the weather?" in prompt and "It is Tuesday." in prompt
    assert "@script" not in prompt  # the mention picks the agent; it is not the task
    query = ctx.first_prompt("@script hi")
    assert "crew:write_file" not in query and "crew:write_file" in ctx.first_prompt("@script hi", "execute")


def test_the_first_prompt_of_an_agent_that_is_not_configured_names_the_agents(tmp_path: Path):
    with pytest.raises(AgentNotFound, match=re.escape("agent 'scrpt' not found; did you mean 'script'?")):
        context(tmp_path).first_prompt("@scrpt hi")


# -- a run's parts ---------------------------------------------------------------------------------


def test_with_transcripts_off_a_runs_record_is_written_nowhere(tmp_path: Path):
    ctx = context(tmp_path)
    record = ctx.record("query", "query", ["script"], "hi")
    assert ctx.keep(record) == [] and not record.kept
    record.emit(ev.Answer(agent="script", text="never kept"))
    record.end("done")
    assert not list(Path(os.environ["XDG_STATE_HOME"]).rglob("*.jsonl"))


def test_with_transcripts_on_a_runs_record_is_written_in_a_transcript_of_its_own(tmp_path: Path):
    ctx = RunContext(Config(agents=default_agents()), tmp_path, sandboxing=Sandboxing({MECHANISM_ENV: "none"}))
    record = ctx.record("query", "query", ["demo"], "hi")
    record.emit(ev.Notice(text="while the CLIs boot"))
    ctx.keep(record)
    record.end("done")
    start, notice, end = read_run(record.run)
    assert (start.command, start.agents, start.task, notice.text, end.status) == (
        "query",
        ["demo"],
        "hi",
        "while the CLIs boot",
        "done",
    )


def test_the_observers_join_each_kept_record_and_add_their_approval_channels(tmp_path: Path):
    joined: list[Record] = []
    channel = object()

    def observer(record: Record) -> list:
        joined.append(record)
        record.attach(lambda event: None)
        return [channel]

    ctx = context(tmp_path, observers=[observer])
    record = ctx.record("query", "query", ["script"], "hi")
    assert joined == []  # not before its transcript is made
    assert ctx.keep(record) == [channel] and joined == [record] and len(record.sinks) == 1


def test_a_loop_is_a_part_of_the_run_and_its_approvals_are_in_the_record_under_the_calls_id(tmp_path: Path):
    class Browser:
        source = "browser"

        def available(self) -> bool:
            return True

        def ask(self, question, deadline):
            return "yes"

        def withdraw(self) -> None: ...

        def reopen(self) -> None: ...

        def settled(self, question, answer) -> None: ...

    ctx, seen = context(tmp_path), []
    record = Record()
    record.attach(seen.append)
    work = Work("hi", "execute", RunOptions(), Budget(None, None), record, channels=[Browser()])
    loop = ctx.loop(Mention("script"), work, conversation=Script(), role="writer", round=1)
    try:
        answer = loop.policy.approver.ask(Question("script", "crew:write_file", {"path": "a"}, call="c4"), None)
    finally:
        loop.close()
    assert answer is not None and (answer.verdict, answer.source) == ("yes", "browser")
    part, ask, approval = seen
    assert (part.kind, part.agent, part.part, part.role, part.round, part.via) == (
        "part",
        "script",
        1,
        "writer",
        1,
        "text",
    )
    assert (ask.kind, ask.call, ask.name, ask.input) == ("ask", "c4", "crew:write_file", {"path": "a"})
    assert (approval.call, approval.answer, approval.source) == ("c4", "yes", "browser")


def test_worktrees_start_afresh_and_refuse_a_resumed_run(tmp_path: Path):
    with pytest.raises(UsageError, match="--worktree starts afresh; it cannot go with --continue or --resume"):
        context(tmp_path).worktrees([Mention("script")], RunOptions(worktree=True, resume="last"))


def test_an_agent_whose_provider_is_unknown_gets_the_error_that_stops_it_alone(tmp_path: Path):
    ctx = RunContext(
        config(lost=AgentSpec(id="lost", provider="nowhere")), tmp_path, sandboxing=Sandboxing({MECHANISM_ENV: "none"})
    )
    conversation, held = ctx.conversation(Mention("lost"), "query", RunOptions())
    assert isinstance(conversation, UsageError) and not held
    assert str(conversation).startswith("provider 'nowhere' not found; configured providers: ")


def test_the_loop_of_an_agent_whose_conversation_did_not_start_raises_that_error(tmp_path: Path):
    ctx = context(tmp_path)
    work = Work("hi", "query", RunOptions(), Budget(None, None), Record())
    error = CrewError("the CLI is not installed")
    with pytest.raises(CrewError, match="the CLI is not installed"):
        ctx.loop(Mention("script"), work, conversation=error)


@pytest.mark.slow
def test_a_cli_started_ahead_is_taken_by_the_next_run_of_that_agent_mode_and_options(tmp_path: Path, started_clis):
    ctx = context(tmp_path)
    ctx.start("@script hello")
    ctx.start("@script hello")  # already started for that run: not again
    assert len(started_clis) == 1 and list(ctx.started) == [(Mention("script"), "query", None, None, None)]
    other, _ = ctx.conversation(Mention("script"), "execute", RunOptions())  # another mode: its own CLI
    taken, held = ctx.conversation(Mention("script"), "query", RunOptions())
    assert held and ctx.started == {} and len(started_clis) == 2
    for conversation in (other, taken):
        assert not isinstance(conversation, CrewError)
        conversation.close()
    assert all(child.proc.poll() is not None for child in started_clis)


@pytest.mark.slow
def test_the_clis_started_ahead_that_no_run_took_are_ended(tmp_path: Path, started_clis):
    ctx = context(tmp_path)
    ctx.start("@script @demo hello", "execute")
    assert len(ctx.started) == 2 and len(started_clis) == 2
    ctx.close_started()
    assert ctx.started == {} and all(child.proc.poll() is not None for child in started_clis)


def test_start_refuses_a_required_sandbox_not_to_be_had_with_nothing_started(tmp_path: Path, started_clis):
    ctx = context(tmp_path)
    with pytest.raises(SandboxUnavailable):
        ctx.start("@script hello", options=RunOptions(sandbox="required"))
    assert ctx.started == {} and started_clis == []


def test_start_leaves_an_agent_that_cannot_start_to_its_run(tmp_path: Path, started_clis):
    ctx = RunContext(
        config(lost=AgentSpec(id="lost", provider="nowhere")), tmp_path, sandboxing=Sandboxing({MECHANISM_ENV: "none"})
    )
    ctx.start("@lost hello")
    assert ctx.started == {} and started_clis == []


# -- the options of a run --------------------------------------------------------------------------


def test_checked_gives_the_options_with_those_named_in_place():
    assert checked("execute", RunOptions(max_turns=3), {"timeout": 5.0}) == RunOptions(max_turns=3, timeout=5.0)
    assert checked("query", None, {}) == RunOptions()


@pytest.mark.parametrize(
    ("mode", "values", "message"),
    [
        ("ask", {}, "mode 'ask' is not one of query, execute"),
        ("query", {"max_turn": 1}, "unknown run option max_turn; the options are: max_turns"),
        ("query", {"worktree": True}, "--worktree goes with crew execute only: query mode changes no file"),
        ("query", {"review": "gemini", "worktree": True}, "--worktree and --review go with crew execute only"),
    ],
)
def test_checked_refuses_a_mode_an_option_or_a_pairing_that_is_not_one(mode, values, message):
    with pytest.raises(UsageError) as raised:
        checked(mode, None, values)
    assert str(raised.value).startswith(message)
