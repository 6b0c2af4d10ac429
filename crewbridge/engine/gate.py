"""The check gate (`--check CMD`, `--check-rounds N`, crew.yaml `check:`): once an agent in execute
mode answers, crew runs each check command in the agent's folder, inside the sandbox its commands
run in (as crew:run_command's: its folder writable, no network unless the agent's sandbox_network
lists hosts), bounded by what is left of --timeout. When one fails, the same agent is told, in its
conversation, which command failed, its exit status and the end of its output (prompts/
check_failed.md), and its next answer is checked again: at most N runs of the check. Still failing
after the last, the run ends with CheckFailed (exit 9), its answer kept. Each command's run is a
`check` event of the run's record, which every face shows. With --review, the writer's change passes
the check before the reviewer sees it."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from crewbridge.base.templates import render
from crewbridge.errors import BudgetExceeded, CheckFailed, CrewTimeout
from crewbridge.record.events import Check
from crewbridge.toolkit.registry import ToolFailure
from crewbridge.tools.shell import run_command

if TYPE_CHECKING:
    from crewbridge.engine.context import RunContext, Work
    from crewbridge.engine.loop import AgentLoop, RunResult

ROUNDS = 3  # the check runs at most this often, unless --check-rounds or crew.yaml says
TAIL = 4000  # characters of a check's output kept (its end): what the agent and the record are given
UNBOUNDED = 365 * 24 * 3600.0  # seconds a check may take in a run without --timeout


@dataclass
class Gate:
    """The checks of one agent's part of a run: its commands, how many rounds, when the run's
    --timeout ends (None: never), and every check run so far (`runs`, the record's events)."""

    commands: tuple[str, ...]
    rounds: int
    deadline: float | None
    runs: list[Check] = field(default_factory=list)

    @classmethod
    def of(cls, ctx: RunContext, work: Work, deadline: float | None = None) -> Gate | None:
        """The gate of a run (None: no check: query mode, or none given nor configured); `deadline`:
        the run's end, else --timeout from now."""
        options = work.options
        commands = options.checks if options.checks is not None else ctx.config.check
        if work.mode != "execute" or not commands:
            return None
        if deadline is None and options.timeout:
            deadline = time.monotonic() + options.timeout
        return cls(tuple(commands), options.check_rounds or ctx.config.check_rounds or ROUNDS, deadline)

    def through(self, loop: AgentLoop, result: RunResult, work: Work) -> tuple[RunResult, CheckFailed | None]:
        """The agent's answer `result` checked, and while a check fails, the agent told and its next
        answer checked, up to the rounds: its last answer, and the CheckFailed of a check that never
        passed (None once all passed). CrewTimeout when the run's time ends first, BudgetExceeded when
        its budget does before a fix is asked for."""
        for number in range(1, self.rounds + 1):
            failed = [run for run in (self._run(loop, command, number) for command in self.commands) if not run.passed]
            if not failed:
                return result, None
            if number == self.rounds:
                return result, self._failed(loop.agent, failed)
            passed = work.budget.passed()
            if passed:
                raise BudgetExceeded(
                    f"@{loop.agent}'s check failed in round {number} and the run used {passed}; crew asked for no "
                    "fix (raise the limit)"
                )
            left = self._left(loop.agent)
            if left is not None:
                loop.timeout = min(loop.timeout or left, left)
            result = loop.converse(self.message(failed))
        raise AssertionError("unreachable: the last round returns")

    def message(self, failed: Sequence[Check]) -> str:
        """What the agent is told of the checks that failed in a round."""
        shown = []
        for run in failed:
            fence = "`" * max(3, max(map(len, re.findall("`+", run.output)), default=0) + 1)
            status = run.exit_code if run.exit_code is not None else "none (it did not run to its end)"
            shown.append(render("check_failure.md", command=run.command, status=status, fence=fence, output=run.output))
        return render("check_failed.md", round=failed[0].round, rounds=self.rounds, failures="\n".join(shown))

    def _run(self, loop: AgentLoop, command: str, number: int) -> Check:
        """One command run where the agent's commands run, recorded."""
        left = self._left(loop.agent)
        ctx = replace(loop.ctx, timeout=UNBOUNDED if left is None else left, max_output=2 * TAIL)
        began = time.monotonic()
        try:
            done = run_command(ctx, command)
            code, output = int(done["exit_code"]), str(done["output"])
        except ToolFailure as exc:  # it did not end within the run's time, or could not start
            self._left(loop.agent)
            code, output = None, str(exc)
        took = round((time.monotonic() - began) * 1000, 1)
        run = Check(
            agent=loop.agent,
            command=command,
            round=number,
            rounds=self.rounds,
            passed=code == 0,
            exit_code=code,
            output=_tail(output),
            ms=took,
        )
        self.runs.append(run)
        loop.record.emit(run)
        return run

    def _left(self, agent: str) -> float | None:
        return seconds_left(
            self.deadline,
            lambda: (
                f"@{agent}'s check passed --timeout after {len(self.runs)} run(s); crew ended it and the agent "
                "(raise --timeout for the check's rounds)"
            ),
        )

    def _failed(self, agent: str, failed: Sequence[Check]) -> CheckFailed:
        names = ", ".join(f"`{run.command}` (exit status {run.exit_code})" for run in failed)
        rounds = f"{self.rounds} round{'' if self.rounds == 1 else 's'}"
        return CheckFailed(
            f"@{agent}'s change still fails its check after {rounds}: {names}; --json and `crew log show` have its "
            "output (raise --check-rounds, or take the change as it is)"
        )


def seconds_left(deadline: float | None, overdue: Callable[[], str]) -> float | None:
    """Seconds until `deadline` (time.monotonic(); None: there is none); CrewTimeout saying
    `overdue()` once none are left."""
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise CrewTimeout(overdue())
    return left


def _tail(output: str) -> str:
    """The end of a check's output, within TAIL characters (and a line saying its start is cut)."""
    return output if len(output) <= TAIL else f"[… crew cut the output's start here]\n{output[-TAIL:]}"
