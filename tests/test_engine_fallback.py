"""crewbridge.engine.fallback: one mentioned agent's part of a task and its fallbacks. When its provider
cannot serve (the CLI says it is unavailable, or the CLI is not installed) the next agent of its
`fallback:` list takes the task over — its own CLI and model, the asked agent's tools, limits and
working directory — and the outcome says whom it stood in for; any other error ends the agent's
part as the outcome's error (Interrupted once the run was stopped). The CLIs are small scripts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from crewbridge.providers.generic import GenericSpec

from crewbridge.api import Outcome
from crewbridge.base.mentions import Mention
from crewbridge.base.options import RunOptions
from crewbridge.base.stop import Stop
from crewbridge.base.usage import Budget
from crewbridge.config import AgentSpec, Config, default_agents
from crewbridge.engine.context import RunContext, Work
from crewbridge.engine.fallback import run_agent, stand_in
from crewbridge.errors import CLINotFound, Interrupted, ProviderError, ProviderUnavailable
from crewbridge.record import events as ev
from crewbridge.record.transcript import read_run
from crewbridge.sandbox import MECHANISM_ENV, Sandboxing

ANSWERS = "import sys; sys.stdin.read(); print('done')"
RATE_LIMITED = "import sys; sys.stdin.read(); sys.exit('Error: 429 Too Many Requests: rate limit exceeded')"
BAD_PROMPT = "import sys; sys.stdin.read(); sys.exit('Error: bad prompt')"
NOWHERE = "/nonexistent/cli"

PROVIDERS = {
    "answers": GenericSpec(name="answers", command=[sys.executable, "-c", ANSWERS]),
    "limited": GenericSpec(name="limited", command=[sys.executable, "-c", RATE_LIMITED]),
    "broken": GenericSpec(name="broken", command=[sys.executable, "-c", BAD_PROMPT]),
    "gone": GenericSpec(name="gone", command=[NOWHERE]),
}
AGENTS = {
    "busy": AgentSpec(id="busy", provider="limited", fallback=["missing", "helper"]),
    "missing": AgentSpec(id="missing", provider="gone"),
    "helper": AgentSpec(id="helper", provider="answers"),
    "bad": AgentSpec(id="bad", provider="broken", fallback=["helper"]),
    "alone": AgentSpec(id="alone", provider="limited"),
}
NOT_INSTALLED = f"'{NOWHERE}' not found on PATH; install it with: install '{NOWHERE}' and put it on PATH"


class Ran:
    """One agent's part run by run_agent, as a run would: its outcome, what the run's sink was told,
    the loops made, and the transcript's part, fallback and error events."""

    def __init__(self, tmp_path: Path, agent: str, stop: Stop | None = None) -> None:
        config = Config(agents={**default_agents(), **AGENTS}, providers=PROVIDERS)
        self.said: list[ev.Event] = []
        ctx = RunContext(config, tmp_path, sandboxing=Sandboxing({MECHANISM_ENV: "none"}))
        ctx = ctx.reporting(self.said.append, stop)
        record = ctx.record("query", "query", [agent], "hi")
        ctx.keep(record)
        work = Work("hi", "query", RunOptions(), Budget(None, None), record)
        conversation, held = ctx.conversation(Mention(agent), "query", RunOptions())
        self.loops: list = []
        try:
            self.outcome: Outcome = run_agent(
                ctx, work, Mention(agent), config.agent(agent), conversation, (None, held), self.loops
            )
        finally:
            for loop in self.loops:
                loop.close()
            record.end("done")
        events = read_run(record.run)
        self.records = [e for e in events if isinstance(e, (ev.Fallback, ev.Error))]
        self.parts = [(e.agent, e.part) for e in events if isinstance(e, ev.Part)]


@pytest.mark.slow
def test_an_agent_that_answers_is_its_own_outcome(tmp_path: Path):
    ran = Ran(tmp_path, "helper")
    assert (ran.outcome.agent, ran.outcome.error, ran.outcome.fell_back_from) == ("helper", None, None)
    assert ran.outcome.result is not None and ran.outcome.result.answer == "done"
    assert ran.records == [] and len(ran.loops) == 1 and ran.parts == [("helper", 1)]


@pytest.mark.slow
def test_an_unavailable_provider_and_a_cli_not_installed_hand_the_task_down_the_fallback_list(tmp_path: Path):
    ran = Ran(tmp_path, "busy")
    assert (ran.outcome.agent, ran.outcome.error, ran.outcome.fell_back_from) == ("helper", None, "busy")
    assert ran.outcome.result is not None and ran.outcome.result.answer == "done"
    falls = [e for e in ran.said if isinstance(e, ev.Fallback)]  # the run's sink hears them as they happen
    assert [(e.agent, e.to, e.reason) for e in falls] == [
        ("busy", "missing", "rate limited (HTTP 429)"),
        ("missing", "helper", "not installed"),
    ]
    assert ran.records == falls  # and the transcript has them
    assert falls[1].message == NOT_INSTALLED
    assert len(ran.loops) == 3  # each loop made is the caller's to close on Ctrl-C
    assert ran.parts == [("busy", 1), ("missing", 1), ("helper", 1)]  # each agent's part of the run


@pytest.mark.slow
def test_the_last_of_the_chain_unavailable_is_the_outcomes_error(tmp_path: Path):
    ran = Ran(tmp_path, "alone")
    assert ran.outcome.agent == "alone" and ran.outcome.fell_back_from is None
    assert isinstance(ran.outcome.error, ProviderUnavailable) and ran.outcome.error.reason == "rate limited (HTTP 429)"
    [error] = ran.records
    assert (error.kind, error.agent, error.exit_code) == ("error", "alone", ran.outcome.error.exit_code)
    assert error.message == str(ran.outcome.error)
    assert not [e for e in ran.said if isinstance(e, ev.Fallback)]


@pytest.mark.slow
def test_a_cli_not_installed_without_a_fallback_is_the_outcomes_error(tmp_path: Path):
    ran = Ran(tmp_path, "missing")
    assert isinstance(ran.outcome.error, CLINotFound) and str(ran.outcome.error) == NOT_INSTALLED
    [error] = ran.records
    assert (error.kind, error.agent, error.message) == ("error", "missing", NOT_INSTALLED)


@pytest.mark.slow
def test_a_failure_that_is_not_about_availability_never_falls_back(tmp_path: Path):
    ran = Ran(tmp_path, "bad")
    assert ran.outcome.agent == "bad" and ran.outcome.fell_back_from is None
    assert type(ran.outcome.error) is ProviderError and "Error: bad prompt" in str(ran.outcome.error)
    assert [(r.kind, r.agent) for r in ran.records] == [("error", "bad")] and len(ran.loops) == 1  # said once
    assert not [e for e in ran.said if isinstance(e, ev.Fallback)]


@pytest.mark.slow
def test_an_agent_of_a_stopped_run_ends_interrupted_whatever_its_cli_said_last(tmp_path: Path):
    stop = Stop()
    stop.set()  # the run was stopped: the loop is closed as soon as it is made
    ran = Ran(tmp_path, "helper", stop)
    assert isinstance(ran.outcome.error, Interrupted) and str(ran.outcome.error) == "@helper was stopped"
    assert [(e.kind, e.agent, e.message) for e in ran.records] == [("error", "helper", "@helper was stopped")]


# -- a stand-in's settings -------------------------------------------------------------------------


def test_a_stand_in_brings_its_own_cli_and_model_and_keeps_the_asked_agents_tools_limits_and_folder():
    asked = AgentSpec(
        id="claude",
        provider="claude",
        model="opus",
        system_prompt="Be terse.",
        options={"query": ["--verbose"]},
        allow=["read_*"],
        deny=["run_command"],
        profile="read-only",
        workdir="/work/api",
        timeout=60.0,
        max_cost=1.5,
        max_tokens=1000,
        fallback=["gemini", "codex"],
        sandbox="required",
    )
    gemini = AgentSpec(id="gemini", provider="gemini", model="flash", system_prompt="Be kind.", timeout=90.0)
    config = Config(agents={"claude": asked, "gemini": gemini})
    spec = stand_in(config, asked, "gemini")
    assert (spec.id, spec.provider, spec.model, spec.system_prompt, spec.options, spec.timeout) == (
        "gemini",
        "gemini",
        "flash",
        "Be kind.",
        {},
        90.0,
    )
    assert (spec.allow, spec.deny, spec.profile, spec.workdir, spec.max_cost, spec.max_tokens, spec.sandbox) == (
        ["read_*"],
        ["run_command"],
        "read-only",
        "/work/api",
        1.5,
        1000,
        "required",
    )
    assert spec.fallback == []  # a stand-in hands the task to no one else: the asked agent's list does
    assert config.agents["claude"].provider == "claude"  # the asked agent's settings stay as they were


def test_a_stand_in_without_a_timeout_of_its_own_keeps_the_asked_agents():
    asked = AgentSpec(id="claude", provider="claude", timeout=60.0, fallback=["gemini"])
    config = Config(agents={"claude": asked, "gemini": AgentSpec(id="gemini", provider="gemini")})
    assert stand_in(config, asked, "gemini").timeout == 60.0
