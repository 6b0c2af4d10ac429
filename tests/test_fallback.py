"""crewbridge.fallback: one mentioned agent's part of a task and its fallbacks. When its provider
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
from crewbridge.config import AgentSpec, Config, default_agents
from crewbridge.context import RunContext, Work
from crewbridge.errors import CLINotFound, Interrupted, ProviderError, ProviderUnavailable
from crewbridge.fallback import run_agent, stand_in
from crewbridge.loop import Progress
from crewbridge.mentions import Mention
from crewbridge.options import RunOptions
from crewbridge.sandbox import MECHANISM_ENV, Sandboxing
from crewbridge.stop import Stop
from crewbridge.transcript import read_run
from crewbridge.usage import Budget

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
    the loops made, and the transcript's fallback and error records."""

    def __init__(self, tmp_path: Path, agent: str, stop: Stop | None = None) -> None:
        config = Config(agents={**default_agents(), **AGENTS}, providers=PROVIDERS)
        self.said: list[Progress] = []
        ctx = RunContext(config, tmp_path, sandboxing=Sandboxing({MECHANISM_ENV: "none"}), emit=self.said.append)
        ctx = ctx.reporting(self.said.append, stop)
        transcript = ctx.transcript("query", [agent], None)
        work = Work("hi", "query", RunOptions(), Budget(None, None), transcript)
        conversation, held = ctx.conversation(Mention(agent), "query", RunOptions())
        self.loops: list = []
        try:
            self.outcome: Outcome = run_agent(
                ctx, work, Mention(agent), config.agent(agent), conversation, (None, held), self.loops
            )
        finally:
            for loop in self.loops:
                loop.close()
            transcript.close("ok")
        self.records = [
            {key: record[key] for key in ("kind", "agent", "to", "reason", "message") if key in record}
            for record in read_run(transcript.run_id)
            if record["kind"] in ("fallback", "error")
        ]


@pytest.mark.slow
def test_an_agent_that_answers_is_its_own_outcome(tmp_path: Path):
    ran = Ran(tmp_path, "helper")
    assert (ran.outcome.agent, ran.outcome.error, ran.outcome.fell_back_from) == ("helper", None, None)
    assert ran.outcome.result is not None and ran.outcome.result.answer == "done"
    assert ran.records == [] and len(ran.loops) == 1


@pytest.mark.slow
def test_an_unavailable_provider_and_a_cli_not_installed_hand_the_task_down_the_fallback_list(tmp_path: Path):
    ran = Ran(tmp_path, "busy")
    assert (ran.outcome.agent, ran.outcome.error, ran.outcome.fell_back_from) == ("helper", None, "busy")
    assert ran.outcome.result is not None and ran.outcome.result.answer == "done"
    assert [(p.kind, p.agent, p.text) for p in ran.said if p.kind == "fallback"] == [
        ("fallback", "busy", "@busy cannot answer (rate limited (HTTP 429)); @missing takes over"),
        ("fallback", "missing", "@missing cannot answer (not installed); @helper takes over"),
    ]
    falls = [record for record in ran.records if record["kind"] == "fallback"]
    assert [(r["agent"], r["to"], r["reason"]) for r in falls] == [
        ("busy", "missing", "rate limited (HTTP 429)"),
        ("missing", "helper", "not installed"),
    ]
    assert falls[1]["message"] == NOT_INSTALLED
    assert len(ran.loops) == 3  # each loop made is the caller's to close on Ctrl-C


@pytest.mark.slow
def test_the_last_of_the_chain_unavailable_is_the_outcomes_error(tmp_path: Path):
    ran = Ran(tmp_path, "alone")
    assert ran.outcome.agent == "alone" and ran.outcome.fell_back_from is None
    assert isinstance(ran.outcome.error, ProviderUnavailable) and ran.outcome.error.reason == "rate limited (HTTP 429)"
    assert ran.records[-1]["kind"] == "error" and ran.records[-1]["agent"] == "alone"
    assert not [p for p in ran.said if p.kind == "fallback"]


@pytest.mark.slow
def test_a_cli_not_installed_without_a_fallback_is_the_outcomes_error(tmp_path: Path):
    ran = Ran(tmp_path, "missing")
    assert isinstance(ran.outcome.error, CLINotFound) and str(ran.outcome.error) == NOT_INSTALLED
    assert ran.records[-1] == {"kind": "error", "agent": "missing", "message": NOT_INSTALLED}


@pytest.mark.slow
def test_a_failure_that_is_not_about_availability_never_falls_back(tmp_path: Path):
    ran = Ran(tmp_path, "bad")
    assert ran.outcome.agent == "bad" and ran.outcome.fell_back_from is None
    assert type(ran.outcome.error) is ProviderError and "Error: bad prompt" in str(ran.outcome.error)
    assert [r["kind"] for r in ran.records] == ["error", "error"] and len(ran.loops) == 1
    assert not [p for p in ran.said if p.kind == "fallback"]


@pytest.mark.slow
def test_an_agent_of_a_stopped_run_ends_interrupted_whatever_its_cli_said_last(tmp_path: Path):
    stop = Stop()
    stop.set()  # the run was stopped: the loop is closed as soon as it is made
    ran = Ran(tmp_path, "helper", stop)
    assert isinstance(ran.outcome.error, Interrupted) and str(ran.outcome.error) == "@helper was stopped"
    assert ran.records == [{"kind": "error", "agent": "helper", "message": "@helper was stopped"}]


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
