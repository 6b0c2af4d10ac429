"""Write, then review, in bounded rounds (`crew execute --review REVIEWER [--rounds N] "@writer task"`).

A round: the writer works (the task first, then the reviewer's findings, in one conversation); the
reviewer, in query mode (read-only) in the writer's working directory (its worktree with
--worktree), is given the task, the writer's answer and its diff against where it started, and answers
by calling crew's tool `verdict` (crewbridge.toolkit.verdict). "approve" ends the review; "changes" sends the
findings, numbered, to the writer as its next message, where it may fix each or `dispute` it with a
reason. The reviewer starts each round afresh and is shown every earlier finding and dispute, so no
finding is argued twice. After N rounds without approval the run ends with ReviewNotApproved (exit 6).
With a check (crewbridge.engine.gate), each of the writer's answers passes it before the reviewer sees
the change; one that still fails after the check's rounds ends the run (exit 9), unreviewed.

A reviewer that answers in prose is asked once more to call `verdict`; if it still does not, its
answer stands as one finding of a "changes" verdict. The diff it is given is cut at MAX_DIFF
characters, with a marker saying how much is left out. One budget (--max-cost, --max-tokens) and one
deadline (--timeout) cover both agents, every round.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

from crewbridge.api import Outcome
from crewbridge.base.mentions import Mention, parse_agent, parse_mentions
from crewbridge.base.modes import Mode
from crewbridge.base.options import RunOptions
from crewbridge.base.piped import with_context
from crewbridge.base.templates import render
from crewbridge.base.usage import Budget
from crewbridge.config import AgentSpec
from crewbridge.engine.context import Named, RunContext, Work
from crewbridge.engine.fallback import record_failure
from crewbridge.engine.gate import Gate, seconds_left
from crewbridge.engine.loop import AgentLoop, RunResult
from crewbridge.engine.pulls import Proposer
from crewbridge.errors import BudgetExceeded, CrewError, Interrupted, ReviewNotApproved, UsageError
from crewbridge.providers.base import Image
from crewbridge.record.events import Ended, Notice
from crewbridge.record.events import Review as ReviewEvent
from crewbridge.record.stream import Record
from crewbridge.system.git import GIT_TIMEOUT, Change, Checkout, summary
from crewbridge.system.gitguard import Armed
from crewbridge.toolkit.registry import Tool
from crewbridge.toolkit.verdict import DISPUTE_TOOL, VERDICT_TOOL, Ballot, Dispute, Finding, Review, Verdict
from crewbridge.work.worktrees import Made

MAX_DIFF = 60_000  # characters of the writer's diff the reviewer is given
MAX_ANSWER = 4_000  # characters of the writer's answer the reviewer is given
MAX_FILES = 200  # changed files listed by name


@dataclass
class Round:
    """One round as the reviewer saw it: its findings, and the writer's disputes of them."""

    number: int
    findings: list[Finding]
    disputes: list[Dispute]


def review_run(
    ctx: RunContext,
    text: str,
    mode: Mode,
    options: RunOptions,
    context: str | None = None,
    named: Named | None = None,
    images: tuple[Image, ...] = (),
) -> list[Outcome]:
    """Run the task in `text` ("@writer task") in `mode`, reviewed by agent `options.review`
    ("gemini", "@gemini:model") for at most `options.rounds` rounds: the writer's outcome, with its
    review (and its worktree with `options.worktree`). `named`: the run's id, command and parent,
    as crewbridge.engine.parallel.run_task's."""
    named = named or Named(command=mode)
    writer, checker, task = _parties(text, options)
    proposer = Proposer.of(ctx.workdir, options)  # --pr that could not be proposed: refused before all
    made = ctx.worktrees([writer], options, named.run) if options.worktree else None
    writer_spec = _with_tool(ctx.config.agent(writer.agent), DISPUTE_TOOL)
    if made is not None:
        writer_spec = ctx.placed(writer_spec, made, made.worktrees[0])
    folder = Path(writer_spec.workdir) if writer_spec.workdir else ctx.workdir
    checkout = Checkout.of(folder, "--review")
    task = with_context(task, context)
    agents = [writer.agent, checker.agent]
    models = {writer.agent: writer.model or writer_spec.model, checker.agent: checker.model}
    run = made.run_id if made is not None else named.run
    record = ctx.record(named.command, mode, agents, task, run=run, models=models, workdir=folder, parent=named.parent)
    status: Ended = "cancelled"
    try:
        channels = ctx.keep(record)
        if made is not None:
            made.announce(record)
        checker_spec = replace(_with_tool(ctx.config.agent(checker.agent), VERDICT_TOOL), workdir=str(folder))
        work = Work(task, mode, options, Budget(options.max_cost, options.max_tokens), record, channels, images)
        outcome = Session(ctx, work, writer, checker, checker_spec, checkout).run(writer_spec)
        outcome = replace(outcome, run=record.run if record.kept else None)
        if made is not None:
            outcome = _placed(outcome, made, record)
        if proposer is not None:
            outcome = proposer.deliver(work, outcome)
        status = "done" if outcome.error is None else "failed"
        return [outcome]
    except BaseException as exc:
        status = record.fail(exc)
        if made is not None:  # stopped (Ctrl-C, an error): where the writer's work stays
            record.emit(Notice(agent=writer.agent, text=made.left(), about="warning"))
        raise
    finally:
        record.end(status)


def _parties(text: str, options: RunOptions) -> tuple[Mention, Mention, str]:
    """The writer `text` mentions, the reviewer, and the task; a UsageError for a review that cannot run."""
    assert options.review is not None
    mentions, task = parse_mentions(text)
    if len(mentions) != 1:
        raise UsageError(f"--review takes one writer, and {len(mentions)} agents are mentioned; mention one")
    if options.rounds < 1:
        raise UsageError(f"--rounds {options.rounds}: a review needs at least one round")
    if options.resume:
        raise UsageError("--review starts afresh; it cannot go with --continue or --resume")
    return mentions[0], parse_agent(options.review), task


def _placed(outcome: Outcome, made: Made, record: Record) -> Outcome:
    """The outcome with the writer's worktree and what it changed there."""
    return replace(outcome, worktree=made.worktrees[0], changes=made.changed(made.worktrees[0], record))


def _with_tool(spec: AgentSpec, tool: str) -> AgentSpec:
    """`spec`, its allow list (if it has one) naming `tool` too: a review's tools are always offered."""
    return replace(spec, allow=[*spec.allow, tool]) if spec.allow else spec


class Session:
    """One review run's rounds: the writer's conversation (crew's tools and dispute), and a
    reviewer's per round (crew's tools and verdict), under one budget and one deadline."""

    def __init__(
        self,
        ctx: RunContext,
        work: Work,
        writer: Mention,
        checker: Mention,
        checker_spec: AgentSpec,
        checkout: Checkout,
    ) -> None:
        self.ctx, self.work = ctx, work
        self.writer, self.checker = writer, checker
        self.checker_spec = checker_spec  # working where the writer works
        self.checkout = checkout
        self.ballot = Ballot()
        self.disarmed: list[Armed] = []  # the writer's loop's, filled when it closes
        self.verdict_tool, self.dispute_tool = self.ballot.tools()
        self.review = Review(self.checker.agent)
        self.history: list[Round] = []
        timeout = work.options.timeout
        self.deadline = time.monotonic() + timeout if timeout else None
        self.gate = Gate.of(ctx, work, self.deadline)

    def run(self, writer_spec: AgentSpec) -> Outcome:
        """The rounds, to approval or their end; errors become the outcome's."""
        result: RunResult | None = None
        loop: AgentLoop | None = None
        try:
            base = self.checkout.snapshot(self._left() or GIT_TIMEOUT)  # the writer's changes: what differs from it
            loop = self._loop(self.writer, self.work.mode, writer_spec, [self.dispute_tool], "writer", 1)
            self.disarmed = loop.disarmed
            message = loop.opening(self.work.task)
            for number in range(1, self.work.options.rounds + 1):
                self._bound(loop)
                result = loop.converse(message)
                if self.history:
                    self.history[-1].disputes = self.ballot.disputes()
                    self.review.disputes += self.history[-1].disputes
                self._check()
                if self.gate is not None:  # the change passes its check before the reviewer sees it
                    result, unchecked = self.gate.through(loop, result, self.work)
                    if unchecked is not None:
                        record_failure(self.work, self.writer.agent, unchecked)
                        return self._outcome(result, unchecked)
                verdict = self._verdict(number, result, base)
                if verdict.approved:
                    return self._outcome(result)
                if number == self.work.options.rounds:
                    error = self._not_approved(len(verdict.findings))
                    record_failure(self.work, self.writer.agent, error)
                    return self._outcome(result, error)
                self._check()
                self.ballot.give(verdict.findings)
                message = render(
                    "review_changes.md",
                    reviewer=self.checker.agent,
                    round=number,
                    rounds=self.work.options.rounds,
                    findings=_numbered(verdict.findings),
                    dispute=self.ctx.registry.qualified(DISPUTE_TOOL),
                )
            raise AssertionError("unreachable: the last round returns")
        except CrewError as exc:
            failed: CrewError = exc
            if (self.ctx.stop is not None and self.ctx.stop.is_set()) or self.work.record.cancelled:
                failed = Interrupted(f"@{self.writer.agent}'s review was stopped")
            record_failure(self.work, self.writer.agent, failed)
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
            task=self.work.task,
            answer=_cut(written.answer, MAX_ANSWER, "of the answer"),
            summary=summary(changed),
            files=_files(changed),
            diff=_cut(diff, MAX_DIFF, "of the diff") if diff else "(no changes)",
            earlier=render("review_earlier.md", writer=self.writer.agent, rounds=self._earlier())
            if self.history
            else "",
            verdict=self.ctx.registry.qualified(VERDICT_TOOL),
        )
        self.ballot.clear_verdict()
        loop = self._loop(self.checker, "query", self.checker_spec, [self.verdict_tool], "reviewer", number)
        try:
            self._bound(loop)
            answer = loop.converse(loop.opening(prompt)).answer
            verdict = self.ballot.verdict()
            if verdict is None:
                self._check()
                self._bound(loop)
                missing = render("review_verdict_missing.md", verdict=self.ctx.registry.qualified(VERDICT_TOOL))
                answer = loop.converse(missing).answer
                verdict = self.ballot.verdict()
        finally:
            loop.close()
        if verdict is None:  # its prose stands as one finding
            verdict = Verdict("changes", [Finding("", 0, "medium", _cut(answer, MAX_ANSWER, "of the answer"))], False)
        self.review.rounds, self.review.last = number, verdict
        self.history.append(Round(number, verdict.findings, []))
        self.work.record.emit(
            ReviewEvent(
                agent=self.checker.agent,
                round=number,
                rounds=self.work.options.rounds,
                verdict=verdict.verdict,
                findings=[f.to_dict() for f in verdict.findings],
                called=verdict.called,
                disputed=[d.to_dict() for d in self.history[-2].disputes] if len(self.history) > 1 else [],
            )
        )
        return verdict

    def _loop(
        self, mention: Mention, mode: Mode, spec: AgentSpec, extra: list[Tool], role: str, number: int
    ) -> AgentLoop:
        """An agent's loop with the review's tool `extra`, its options bounded by what is left of the
        run: its part of the run (`role` in round `number`)."""
        work = replace(self.work, mode=mode, options=replace(self.work.options, timeout=self._left()))
        loop = self.ctx.loop(mention, work, spec=spec, extra=extra, role=role, round=number)
        if self.ctx.stop is not None:
            self.ctx.stop.on_set(loop.close)
        return loop

    def _not_approved(self, left: int) -> ReviewNotApproved:
        rounds = self.work.options.rounds
        return ReviewNotApproved(
            f"@{self.writer.agent}'s change was not approved by @{self.checker.agent} in {rounds} "
            f"round{'' if rounds == 1 else 's'} ({left} finding{'' if left == 1 else 's'} left; --json shows "
            "them); raise --rounds, or take the change as it is"
        )

    def _left(self) -> float | None:
        """Seconds left of the run's --timeout (None without one; CrewTimeout once none are left)."""
        return seconds_left(
            self.deadline,
            lambda: (
                f"@{self.writer.agent}'s review passed --timeout after round {self.review.rounds}; crew ended "
                "both agents (raise --timeout for more rounds)"
            ),
        )

    def _bound(self, loop: AgentLoop) -> None:
        """The loop's next message bounded by what is left of the run's --timeout too."""
        left = self._left()
        if left is not None:
            loop.timeout = min(loop.timeout or left, left)

    def _check(self) -> None:
        """BudgetExceeded once the run (both agents, every round) passed --max-cost or --max-tokens."""
        why = self.work.budget.passed()
        if why:
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
        checks = self.gate.runs if self.gate is not None else []
        return Outcome(
            self.writer.agent, result=result, error=error, review=self.review, disarmed=self.disarmed, checks=checks
        )


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
