"""Asking agents from outside a run: `crew mcp`'s `ask`, and the same tool handed to the asked agents
so that one agent can ask another, no deeper than a limit.

The depth travels in the environment: crew sets CREW_ASK_DEPTH in the environment of every CLI it
runs for an ask, so a `crew mcp` that such a CLI starts knows how deep it is too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.api import Outcome
from crewbridge.base.mentions import parse_mentions
from crewbridge.base.modes import Mode
from crewbridge.base.options import RunOptions
from crewbridge.base.stop import Stop
from crewbridge.config import Config
from crewbridge.engine.context import Observer, RunContext
from crewbridge.engine.outputs import outcomes_record
from crewbridge.engine.parallel import run_task
from crewbridge.errors import UsageError
from crewbridge.sandbox import Sandboxing
from crewbridge.system.git import summary
from crewbridge.toolkit.registry import Tool, ToolContext, ToolFailure

if TYPE_CHECKING:
    from crewbridge.record.events import Parent
    from crewbridge.record.stream import Sink
    from crewbridge.record.trace import Tracing

DEPTH_ENV = "CREW_ASK_DEPTH"
DEFAULT_MAX_DEPTH = 1  # an asked agent may ask one more agent, which may not ask again

TASK_PROPERTY = {
    "type": "string",
    "minLength": 1,
    "description": "The agents to ask as leading mentions, then the task: '@gemini what does notes.txt say?'. "
    "Several mentions ('@claude @gemini:gemini-2.5-flash …') run in parallel; each answers.",
}
# What an ask takes besides its task, as `crew execute --worktree --review AGENT --rounds N` does.
CHANGE_PROPERTIES = {
    "worktree": {
        "type": "boolean",
        "default": False,
        "description": "Each asked agent works in a git worktree of its own, on branch crew/RUN_ID/AGENT made "
        "from HEAD; the checkout is not touched (the answer says how to apply the changes).",
    },
    "review": {
        "type": "string",
        "minLength": 1,
        "description": "An agent ('gemini', '@codex:gpt-5.5') that reviews the one asked agent's change "
        "read-only and approves it or sends it back with findings, for at most `rounds` rounds.",
    },
    "rounds": {"type": "integer", "minimum": 1, "default": 3, "description": "Review rounds at most."},
}


def change_options(arguments: dict[str, Any]) -> dict[str, Any] | str:
    """An ask's worktree, review and rounds, or what is wrong with them."""
    options = {key: arguments[key] for key in CHANGE_PROPERTIES if key in arguments}
    if not isinstance(options.get("worktree", False), bool):
        return "worktree must be true or false"
    review = options.get("review")
    if review is not None and (not isinstance(review, str) or not review.strip()):
        return "review must name an agent, e.g. 'gemini'"
    rounds = options.get("rounds", 1)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        return "rounds must be a whole number of 1 or more"
    if "rounds" in options and review is None:
        return "rounds counts review rounds; give review too"
    return options


AGENT_ASK_SCHEMA = {
    "type": "object",
    "properties": {"task": TASK_PROPERTY},
    "required": ["task"],
    "additionalProperties": False,
}


@dataclass
class Asked:
    """What an ask gave: the text a client shows, the --json object, and whether an agent failed."""

    text: str
    data: dict[str, Any]
    failed: bool


def current_depth(env: Mapping[str, str] | None = None) -> int:
    """How many asks deep this process runs (0 when no agent asked for it)."""
    raw = (os.environ if env is None else env).get(DEPTH_ENV, "0")
    return int(raw) if raw.strip().isdigit() else 0


@dataclass
class Asker:
    """Runs asks at one depth: the agents it starts run at `depth + 1`."""

    config: Config
    workdir: Path
    depth: int = 0
    max_depth: int = DEFAULT_MAX_DEPTH
    timeout: float = 300.0
    max_turns: int = 10
    # the machine's sandbox, detected once for every ask of this server (a probe is a process)
    sandboxing: Sandboxing = field(default_factory=Sandboxing)
    observers: Sequence[Observer] = ()  # join each ask's run (the face's: crew ui's link)
    tracing: Tracing | None = None  # the asks' runs are traced (the face's exporter is an observer)

    def ask(
        self,
        task: str,
        mode: Mode = "query",
        *,
        on_progress: Sink | None = None,
        stop: Stop | None = None,
        worktree: bool = False,
        review: str | None = None,
        rounds: int = 3,
        parent: Parent | None = None,
    ) -> Asked:
        """Run `task` as `crew query` (or `crew execute`) would, minus stdin: the answers. With
        `worktree`, each agent works in a git worktree of its own; with `review`, that agent reviews
        the one mentioned agent's change for at most `rounds` rounds (as --worktree, --review and
        --rounds do). `parent`: what the ask's run is part of (the client's trace context)."""
        self.check(task)
        deeper = replace(self, depth=self.depth + 1)
        tools = [deeper.tool()] if deeper.depth <= self.max_depth else []
        env = {DEPTH_ENV: str(self.depth + 1)}
        ctx = RunContext.of(
            self.config,
            self.workdir,
            env=env,
            tools=tools,
            sandboxing=self.sandboxing,
            emit=on_progress,
            stop=stop,
            observers=self.observers,
            tracing=self.tracing,
        )
        options = RunOptions(
            max_turns=self.max_turns, timeout=self.timeout, worktree=worktree, review=review, rounds=rounds
        )
        return asked(run_task(ctx, task, mode, options, parent=parent))

    def check(self, task: str) -> None:
        """Why this ask may not run, as a UsageError: too deep, no agent or task, an unknown agent."""
        if self.depth > self.max_depth:
            raise UsageError(
                f"ask is refused {self.depth} asks deep (the limit is {self.max_depth}, so that no chain of "
                "agents can recurse); answer with what you have"
            )
        for mention in parse_mentions(task)[0]:  # no agent, or no task: a UsageError saying so
            self.config.agent(mention.agent)

    def tool(self) -> Tool:
        """`ask` as a tool for agents that were asked themselves: read-only (the agent it asks gets
        query mode), its run bounded by the asking run's deadline."""

        def ask(ctx: ToolContext, task: str) -> dict[str, Any]:
            remaining = self.timeout if ctx.deadline is None else max(ctx.deadline - time.monotonic(), 1.0)
            runner = replace(self, workdir=ctx.workdir, timeout=remaining)
            try:
                answer = runner.ask(task, "query")
            except UsageError as exc:
                raise ToolFailure(str(exc)) from None
            if answer.failed:
                raise ToolFailure(answer.text)
            return answer.data

        return Tool(
            name="ask",
            description="Ask other agents (other CLIs and models) and get their answers; they can read "
            "files with their own tools but not change anything.",
            input_schema=AGENT_ASK_SCHEMA,
            func=ask,
            read_only=True,
            timeout=self.timeout,
        )


def asked(outcomes: list[Outcome]) -> Asked:
    """The text and data of a finished ask: each answer (labelled when several agents answered)."""
    parts = []
    for outcome in outcomes:
        body = outcome.result.answer if outcome.result is not None else f"failed: {outcome.error}"
        body += _where(outcome)
        parts.append(f"@{outcome.agent}: {body}" if len(outcomes) > 1 or outcome.error is not None else body)
    return Asked("\n\n".join(parts), outcomes_record(outcomes), any(o.error is not None for o in outcomes))


def _where(outcome: Outcome) -> str:
    """What an ask's answer leaves out: its review's verdict, where its changes are (--worktree)."""
    notes = []
    review = outcome.review
    if review is not None and review.approved:
        notes.append(f"@{review.reviewer} approved the change in round {review.rounds}")
    elif review is not None and outcome.result is not None:
        findings = "; ".join(f.shown() for f in review.last.findings) if review.last else ""
        rounds = f"{review.rounds} round{'' if review.rounds == 1 else 's'}"
        notes.append(f"@{review.reviewer} did not approve the change in {rounds}: {findings}")
    worktree = outcome.worktree
    if worktree is not None:
        what = "changes unknown" if outcome.changes is None else summary(outcome.changes)
        notes.append(
            f"the changes ({what}) are in {worktree.path} on branch {worktree.branch}; "
            f"`crew apply {worktree.run_id} {worktree.agent}` takes them into the checkout"
        )
    return "".join(f"\n[crew: {note}]" for note in notes)
