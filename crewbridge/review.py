"""Write, then review, in bounded rounds (`crew execute --review REVIEWER [--rounds N] "@writer task"`).

A round: the writer works (the task first, then the reviewer's findings, in one conversation); the
reviewer, in query mode (read-only) in the writer's working directory (its worktree with
--worktree), is given the task, the writer's answer and its diff against where it started, and answers
by calling crew's tool `verdict` (crewbridge.verdict). "approve" ends the review; "changes" sends the
findings, numbered, to the writer as its next message, where it may fix each or `dispute` it with a
reason. The reviewer starts each round afresh and is shown every earlier finding and dispute, so no
finding is argued twice. After N rounds without approval the run ends with ReviewNotApproved (exit 6).

A reviewer that answers in prose is asked once more to call `verdict`; if it still does not, its
answer stands as one finding of a "changes" verdict. The diff it is given is cut at MAX_DIFF
characters, with a marker saying how much is left out. One budget (--max-cost, --max-tokens) and one
deadline (--timeout) cover both agents, every round.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from crewbridge.api import Outcome, Stop
from crewbridge.config import AgentSpec, Config
from crewbridge.errors import BudgetExceeded, CrewError, CrewTimeout, Interrupted, ReviewNotApproved, UsageError
from crewbridge.git import GIT_TIMEOUT, Change, Checkout, summary
from crewbridge.gitguard import Armed
from crewbridge.loop import AgentLoop, Progress, RunResult
from crewbridge.mentions import Mention, parse_agent, parse_mentions
from crewbridge.modes import Mode
from crewbridge.options import RunOptions
from crewbridge.piped import with_context
from crewbridge.registry import Tool, ToolRegistry
from crewbridge.templates import render
from crewbridge.transcript import Transcript
from crewbridge.usage import Budget
from crewbridge.verdict import DISPUTE_TOOL, VERDICT_TOOL, Ballot, Dispute, Finding, Review, Verdict
from crewbridge.worktrees import Made, Worktree

MAX_DIFF = 60_000  # characters of the writer's diff the reviewer is given
MAX_ANSWER = 4_000  # characters of the writer's answer the reviewer is given
MAX_FILES = 200  # changed files listed by name


class Runner(Protocol):
    """What a review needs of crewbridge.bridge.Bridge, which starts it (Bridge.run with `review`)."""

    config: Config
    workdir: Path

    @property
    def registry(self) -> ToolRegistry: ...

    def with_tools(self, tools: list[Tool]) -> Runner: ...

    def worktrees(self, mentions: list[Mention], options: RunOptions) -> Made: ...

    def placed(self, spec: AgentSpec, made: Made, worktree: Worktree) -> AgentSpec: ...

    def loop(
        self,
        mention: Mention,
        mode: Mode,
        options: RunOptions,
        *,
        spec: AgentSpec,
        budget: Budget,
        transcript: Transcript,
        on_progress: Callable[[Progress], None] | None,
    ) -> AgentLoop: ...

    def _transcript(self, command: str, agents: list[str], resume: str | None, **fields: Any) -> Transcript: ...


@dataclass
class Round:
    """One round as the reviewer saw it: its findings, and the writer's disputes of them."""

    number: int
    findings: list[Finding]
    disputes: list[Dispute]


def review_run(
    bridge: Runner,
    text: str,
    mode: Mode,
    options: RunOptions,
    context: str | None = None,
    transcript: Transcript | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    stop: Stop | None = None,
) -> list[Outcome]:
    """Run the task in `text` ("@writer task") in `mode`, reviewed by agent `options.review`
    ("gemini", "@gemini:model") for at most `options.rounds` rounds: the writer's outcome, with its
    review (and its worktree with `options.worktree`)."""
    assert options.review is not None
    mentions, task = parse_mentions(text)
    if len(mentions) != 1:
        raise UsageError(f"--review takes one writer, and {len(mentions)} agents are mentioned; mention one")
    if options.rounds < 1:
        raise UsageError(f"--rounds {options.rounds}: a review needs at least one round")
    if options.resume:
        raise UsageError("--review starts afresh; it cannot go with --continue or --resume")
    writer, checker = mentions[0], parse_agent(options.review)
    ballot = Ballot()
    verdict_tool, dispute_tool = ballot.tools()
    writer_spec = _with_tool(bridge.config.agent(writer.agent), DISPUTE_TOOL)
    checker_spec = _with_tool(bridge.config.agent(checker.agent), VERDICT_TOOL)
    made = bridge.worktrees([writer], options) if options.worktree else None
    if made is not None:
        writer_spec = bridge.placed(writer_spec, made, made.worktrees[0])
    folder = Path(writer_spec.workdir) if writer_spec.workdir else bridge.workdir
    checkout = Checkout.of(folder, "--review")
    task = with_context(task, context)
    own = transcript is None
    if transcript is None:
        review = {"reviewer": checker.agent, "rounds": options.rounds}
        run_id = made.run_id if made else None
        transcript = bridge._transcript(
            mode, [writer.agent, checker.agent], None, task=task, review=review, run_id=run_id
        )
    status = "interrupted"
    try:
        if made is not None:
            made.announce(
                transcript, lambda kind, agent, text: on_progress and on_progress(Progress(kind, agent, text))
            )
        session = Session(
            writing=bridge.with_tools([dispute_tool]),
            reviewing=bridge.with_tools([verdict_tool]),
            ballot=ballot,
            writer=writer,
            checker=checker,
            checker_spec=replace(checker_spec, workdir=str(folder)),
            checkout=checkout,
            task=task,
            mode=mode,
            options=options,
            transcript=transcript,
            budget=Budget(options.max_cost, options.max_tokens),
            deadline=time.monotonic() + options.timeout if options.timeout else None,
            emit=on_progress or (lambda progress: None),
            stop=stop,
        )
        outcome = replace(session.run(writer_spec), run=transcript.run_id)
        if made is not None:
            outcome = replace(outcome, worktree=made.worktrees[0], changes=made.changed(made.worktrees[0], transcript))
        status = "ok" if outcome.error is None else "failed"
        return [outcome]
    finally:
        if own:
            transcript.close(status)


def _with_tool(spec: AgentSpec, tool: str) -> AgentSpec:
    """`spec`, its allow list (if it has one) naming `tool` too: a review's tools are always offered."""
    return replace(spec, allow=[*spec.allow, tool]) if spec.allow else spec


@dataclass
class Session:
    """One review run's rounds: the writer's conversation, and a reviewer's per round."""

    writing: Runner  # the writer's tools: crew's and dispute
    reviewing: Runner  # the reviewer's: crew's and verdict
    ballot: Ballot
    writer: Mention
    checker: Mention
    checker_spec: AgentSpec  # working where the writer works
    checkout: Checkout
    task: str
    mode: Mode  # the writer's
    options: RunOptions
    transcript: Transcript
    budget: Budget  # the run's, both agents
    deadline: float | None
    emit: Callable[[Progress], None]
    stop: Stop | None
    review: Review = field(init=False)
    history: list[Round] = field(default_factory=list)
    disarmed: list[Armed] = field(default_factory=list)  # the writer's loop's, filled when it closes

    def __post_init__(self) -> None:
        self.review = Review(self.checker.agent)

    def run(self, writer_spec: AgentSpec) -> Outcome:
        """The rounds, to approval or their end; errors become the outcome's."""
        result: RunResult | None = None
        loop: AgentLoop | None = None
        try:
            base = self.checkout.snapshot(self._left() or GIT_TIMEOUT)  # the writer's changes: what differs from it
            loop = self._loop(self.writing, self.writer, self.mode, writer_spec, self.emit)
            self.disarmed = loop.disarmed
            message = loop.opening(self.task)
            for number in range(1, self.options.rounds + 1):
                self._bound(loop)
                result = loop.converse(message)
                if self.history:
                    self.history[-1].disputes = self.ballot.disputes()
                    self.review.disputes += self.history[-1].disputes
                self._check()
                verdict = self._verdict(number, result, base)
                if verdict.approved:
                    return self._outcome(result)
                if number == self.options.rounds:
                    error = self._not_approved(len(verdict.findings))
                    self.transcript.write("error", agent=self.writer.agent, message=str(error))
                    return self._outcome(result, error)
                self._check()
                self.ballot.give(verdict.findings)
                message = render(
                    "review_changes.md",
                    reviewer=self.checker.agent,
                    round=number,
                    rounds=self.options.rounds,
                    findings=_numbered(verdict.findings),
                    dispute=self.writing.registry.qualified(DISPUTE_TOOL),
                )
            raise AssertionError("unreachable: the last round returns")
        except CrewError as exc:
            failed: CrewError = exc
            if self.stop is not None and self.stop.is_set():
                failed = Interrupted(f"@{self.writer.agent}'s review was stopped")
            self.transcript.write("error", agent=self.writer.agent, message=str(failed))
            return self._outcome(result, failed)
        finally:
            if loop is not None:
                loop.close()

    def _verdict(self, number: int, written: RunResult, base: str) -> Verdict:
        """The reviewer's round: its verdict on the change as it is now, recorded and reported."""
        tree = self.checkout.snapshot(self._left() or GIT_TIMEOUT)
        changed = self.checkout.changes(base, tree)
        diff = self.checkout.diff(base, tree).decode("utf-8", "replace")
        prompt = render(
            "review.md",
            writer=self.writer.agent,
            task=self.task,
            answer=_cut(written.answer, MAX_ANSWER, "of the answer"),
            summary=summary(changed),
            files=_files(changed),
            diff=_cut(diff, MAX_DIFF, "of the diff") if diff else "(no changes)",
            earlier=render("review_earlier.md", writer=self.writer.agent, rounds=self._earlier())
            if self.history
            else "",
            verdict=self.reviewing.registry.qualified(VERDICT_TOOL),
        )
        self.ballot.clear_verdict()
        loop = self._loop(self.reviewing, self.checker, "query", self.checker_spec, self._reviewer_progress)
        try:
            self._bound(loop)
            answer = loop.converse(loop.opening(prompt)).answer
            verdict = self.ballot.verdict()
            if verdict is None:
                self._check()
                self._bound(loop)
                missing = render("review_verdict_missing.md", verdict=self.reviewing.registry.qualified(VERDICT_TOOL))
                answer = loop.converse(missing).answer
                verdict = self.ballot.verdict()
        finally:
            loop.close()
        if verdict is None:  # its prose stands as one finding
            verdict = Verdict("changes", [Finding("", 0, "medium", _cut(answer, MAX_ANSWER, "of the answer"))], False)
        self.review.rounds, self.review.last = number, verdict
        self.history.append(Round(number, verdict.findings, []))
        data = {
            "round": number,
            "rounds": self.options.rounds,
            "verdict": verdict.verdict,
            "findings": [f.to_dict() for f in verdict.findings],
            "called": verdict.called,
            "disputed": [d.to_dict() for d in self.history[-2].disputes] if len(self.history) > 1 else [],
        }
        self.transcript.write("review", agent=self.checker.agent, **data)
        self.emit(Progress("review", self.checker.agent, verdict.verdict, data=data))
        return verdict

    def _loop(
        self, bridge: Runner, mention: Mention, mode: Mode, spec: AgentSpec, progress: Callable[[Progress], None]
    ) -> AgentLoop:
        options = replace(self.options, timeout=self._left())
        loop = bridge.loop(
            mention, mode, options, spec=spec, budget=self.budget, transcript=self.transcript, on_progress=progress
        )
        if self.stop is not None:
            self.stop.on_set(loop.close)
        return loop

    def _not_approved(self, left: int) -> ReviewNotApproved:
        rounds = self.options.rounds
        return ReviewNotApproved(
            f"@{self.writer.agent}'s change was not approved by @{self.checker.agent} in {rounds} "
            f"round{'' if rounds == 1 else 's'} ({left} finding{'' if left == 1 else 's'} left; --json shows "
            "them); raise --rounds, or take the change as it is"
        )

    def _reviewer_progress(self, event: Progress) -> None:
        """The reviewer's events but its words (the transcript has them): the run's answer is the
        writer's, streamed alone; the reviewer's is its verdict, the review event."""
        if event.kind not in ("text", "answer"):
            self.emit(event)

    def _left(self) -> float | None:
        """Seconds left of the run's --timeout (None without one; CrewTimeout once none are left)."""
        if self.deadline is None:
            return None
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise CrewTimeout(
                f"@{self.writer.agent}'s review passed --timeout after round {self.review.rounds}; crew ended "
                "both agents (raise --timeout for more rounds)"
            )
        return left

    def _bound(self, loop: AgentLoop) -> None:
        """The loop's next message bounded by what is left of the run's --timeout too."""
        left = self._left()
        if left is not None:
            loop.timeout = min(loop.timeout or left, left)

    def _check(self) -> None:
        """BudgetExceeded once the run (both agents, every round) passed --max-cost or --max-tokens."""
        why = self.budget.passed()
        if why:
            self.transcript.write("budget", agent=self.writer.agent, reason=why)
            raise BudgetExceeded(
                f"@{self.writer.agent}'s review was stopped after round {self.review.rounds}: the run used {why}, "
                "the writer's and the reviewer's usage together; raise the limit"
            )

    def _earlier(self) -> str:
        lines = []
        for past in self.history:
            lines.append(f"Round {past.number}:")
            disputed = {d.finding: d.reason for d in past.disputes}
            for n, finding in enumerate(past.findings, 1):
                lines.append(f"{n}. {finding.shown()}")
                if finding in disputed:
                    lines.append(f"   @{self.writer.agent} disputed it: {disputed[finding]}")
        return "\n".join(lines)

    def _outcome(self, result: RunResult | None, error: CrewError | None = None) -> Outcome:
        return Outcome(self.writer.agent, result=result, error=error, review=self.review, disarmed=self.disarmed)


def _numbered(findings: list[Finding]) -> str:
    return "\n".join(f"{n}. {f.shown()}" for n, f in enumerate(findings, 1))


def _files(changed: list[Change]) -> str:
    shown = [change.line() for change in changed[:MAX_FILES]]
    if len(changed) > MAX_FILES:
        shown.append(f"… and {len(changed) - MAX_FILES} more files")
    return "\n".join(shown)


def _cut(text: str, limit: int, what: str) -> str:
    """`text` within `limit` characters, cut at a line end with a marker saying how much is left out."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    head = head[: head.rfind("\n") + 1] or head
    left = text[len(head) :]
    size = f"{len(left):,} more characters, {left.count(chr(10)):,} lines"
    return f"{head}[… crew cut the rest {what} here: {size}; read the files for them]"
