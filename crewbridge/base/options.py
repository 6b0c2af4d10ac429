"""The options of a run, in one place: `crew query`, `crew execute` and `crew chat` (their click
options), `Bridge.run`, `ask`, `stream` and `chat` (their keywords) all take these.

Adding an option: a field here (with its default and a comment), its entry in `crewbridge.base.flags`
(LOOP, or TASK for one of TASK_ONLY: the same name; click's option and the early reading before
click are made from it), and the code that reads it from the RunOptions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from crewbridge.errors import UsageError

TASK_ONLY = ("worktree", "review", "rounds")  # of a task (query, execute, Bridge.run), not of a chat


@dataclass(frozen=True)
class RunOptions:
    max_turns: int = 10  # model replies before crew stops a tool loop (MaxTurnsReached)
    timeout: float | None = 300.0  # seconds the whole run may take, tools included (CrewTimeout)
    approve_all: bool = False  # approve every tool that needs approval
    max_cost: float | None = None  # dollars the run may cost, every agent summed (BudgetExceeded)
    max_tokens: int | None = None  # tokens (input + output) the run may use, every agent summed
    resume: str | None = None  # the id of an earlier run whose conversations this one continues
    tools_via: str | None = None  # "text" or "native": replaces each agent's tools_via (crewbridge.toolkit.native)
    worktree: bool = False  # each agent in a git worktree of its own (crewbridge.work.worktrees)
    review: str | None = None  # an agent that reviews the one writer's change (crewbridge.engine.review)
    rounds: int = 3  # review rounds at most
    sandbox: str | None = None  # "auto", "required" or "off": replaces crew.yaml's sandbox: (crewbridge.sandbox)
    network: str | None = None  # "allow" or "open": replaces crew.yaml's network: (crewbridge.sandbox.egress)

    @classmethod
    def names(cls) -> list[str]:
        return [field.name for field in fields(cls)]

    def given(self, values: Mapping[str, Any]) -> RunOptions:
        """These options with `values` (option names → values) in place of theirs; a UsageError
        names any name that is not an option."""
        unknown = sorted(set(values) - set(self.names()))
        if unknown:
            raise UsageError(f"unknown run option {', '.join(unknown)}; the options are: {', '.join(self.names())}")
        return replace(self, **values)

    def check(self, mode: str) -> None:
        """A UsageError when these options cannot go with `mode`: --worktree and --review are for a
        task that changes files, which query mode never does."""
        given = [flag for flag, on in (("--worktree", self.worktree), ("--review", self.review)) if on]
        if given and mode != "execute":
            raise UsageError(
                f"{' and '.join(given)} go{'' if len(given) > 1 else 'es'} with crew execute only: {mode} mode "
                "changes no file, so there is nothing to keep in a worktree or to review"
            )

    @classmethod
    def pick(cls, values: dict[str, Any]) -> RunOptions:
        """The run options among `values` (a click command's keyword arguments), taken out of it:
        what is left is the command's own."""
        return cls().given({name: values.pop(name) for name in cls.names() if name in values})
