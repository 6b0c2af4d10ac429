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

# of a task (query, execute, Bridge.run), not of a chat
PULL = ("pr", "draft", "pr_title", "pr_body", "labels")  # whether and how a change is proposed as a pull request
TASK_ONLY = ("worktree", "review", "rounds", "checks", "check_rounds", *PULL)


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
    checks: tuple[str, ...] | None = None  # commands that must pass (crewbridge.engine.gate); None: crew.yaml's check:
    check_rounds: int | None = None  # check rounds at most (None: crew.yaml's, else 3)
    pr: bool = False  # push each agent's worktree branch and open its pull request (crewbridge.engine.pulls)
    draft: bool = False  # the pull request as a draft
    pr_title: str | None = None  # its title (default: the task's first line)
    pr_body: str | None = None  # the text its body starts with (default: the task)
    labels: tuple[str, ...] = ()  # labels it gets

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
        """A UsageError when these options cannot go with `mode` or with each other: --worktree,
        --review, --check and --pr are for a task that changes files, which query mode never does;
        --pr pushes a worktree's branch; --draft, --pr-title, --pr-body and --label say how."""
        pairs = (("--worktree", self.worktree), ("--review", self.review), ("--check", self.checks), ("--pr", self.pr))
        given = [flag for flag, on in pairs if on]
        if given and mode != "execute":
            raise UsageError(
                f"{' and '.join(given)} go{'' if len(given) > 1 else 'es'} with crew execute only: {mode} mode "
                "changes no file, so there is nothing to keep in a worktree, check, review or propose"
            )
        if self.pr and not self.worktree:
            raise UsageError("--pr proposes the branch of an agent's worktree; give --worktree too")
        how = (("--draft", self.draft), ("--pr-title", self.pr_title), ("--pr-body", self.pr_body))
        loose = [flag for flag, on in (*how, ("--label", self.labels)) if on]
        if loose and not self.pr:
            raise UsageError(
                f"{', '.join(loose)} say{'s' if len(loose) == 1 else ''} how to open a pull request; give --pr too"
            )

    @classmethod
    def pick(cls, values: dict[str, Any]) -> RunOptions:
        """The run options among `values` (a click command's keyword arguments), taken out of it:
        what is left is the command's own."""
        return cls().given({name: values.pop(name) for name in cls.names() if name in values})


def command_line(values: dict[str, Any]) -> None:
    """click's values of the check and pull request options (crewbridge.base.flags) made what
    RunOptions takes, in place: no --check is crew.yaml's check (None), --no-check none at all;
    --pr-body's file read (a UsageError naming it when it cannot be)."""
    no_check = values.pop("no_check", False)
    given = tuple(values.get("checks") or ())
    if no_check and given:
        raise UsageError("--check and --no-check were both given; choose one")
    if "checks" in values or no_check:
        values["checks"] = () if no_check else given or None
    if "labels" in values:
        values["labels"] = tuple(values["labels"])
    path = values.pop("pr_body_file", None)
    if path is not None:
        try:
            values["pr_body"] = open(path, encoding="utf-8").read()
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise UsageError(f"--pr-body {path}: cannot read it ({why}); give a text file") from None
