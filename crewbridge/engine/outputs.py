"""The JSON crew writes for programs, in one place; each shape has a JSON Schema in docs/schemas/
(tests/test_engine_outputs.py holds real output to them).

`crew query --json` (docs/schemas/outcome.json): one object at the end, the same shape for one
  agent and many: ``{"run": RUN_ID, "results": [one object per agent, in mention order]}``. ``run``
  is what ``--resume`` takes (null when transcripts are off). An agent's object: its result —
  ``agent``, ``answer``, ``tool_calls`` (``name``, ``input``, ``success``, ``error``), ``usage``,
  ``session``, ``turns``, ``needed_approval`` (the calls refused because they needed a person's
  approval and nobody could be asked: then ``error`` says so and ``exit_code`` is 8),
  ``fell_back_from`` (the agent asked, when another took its task over, else null), ``error``
  (null) — or, when it failed, ``{"agent", "answer": null, "fell_back_from", "error",
  "exit_code"}``. With --worktree also ``run_id``, ``worktree``, ``branch``, ``base`` and
  ``changes``; with --review ``review`` (``reviewer``, ``rounds``, ``verdict``, ``findings``,
  ``disputed``), and ``error`` and ``exit_code`` beside the answer when it was not approved. When
  the run left what would run code on the user's next git command, ``disarmed``: each thing
  (``path``, ``what``, ``done``) as crewbridge.system.gitguard disarmed it. With a check
  (--check, crew.yaml's check:), ``checks``: each command's run (``command``, ``round``, ``passed``,
  ``exit_code``, ``output``: its end, ``ms``); exit code 9 when it never passed. With --pr, ``pull``:
  the pull request (``url``, ``number``, ``branch``, ``opened``: false when an open one was updated).
  MCP's `ask` returns the same object as its structured content (and the `ask` tool an agent is
  given, as its data).

`crew query --jsonl` (docs/schemas/event.json): the run's record, one event a line as it happens
  (crewbridge.record.events: its first event, `start`, carries the run's id).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from crewbridge.base import jsonio

if TYPE_CHECKING:
    from crewbridge.api import Outcome
    from crewbridge.engine.loop import CallRecord, RunResult
    from crewbridge.record.events import Check


def result_record(result: RunResult) -> dict[str, Any]:
    """An agent's finished run: its answer, its tool calls, usage, session and turns."""
    return {
        "agent": result.agent,
        "answer": result.answer,
        "tool_calls": [call_record(call) for call in result.tool_calls],
        "usage": result.usage,
        "session": result.session,
        "turns": result.turns,
        "needed_approval": [call.to_dict() for call in result.needed_approval],
    }


def call_record(call: CallRecord) -> dict[str, Any]:
    return {"name": call.name, "input": call.input, "success": call.result.success, "error": call.result.error}


def outcome_record(outcome: Outcome) -> dict[str, Any]:
    """One agent's outcome (--json for one agent), with --worktree where it worked and what it
    changed, with --review the review."""
    failed = {"error": str(outcome.error), "exit_code": getattr(outcome.error, "exit_code", 1)}
    if outcome.result is not None:
        record = {**result_record(outcome.result), "fell_back_from": outcome.fell_back_from, "error": None}
        if outcome.error is not None:  # a review that did not approve the answer
            record.update(failed)
    else:
        record = {"agent": outcome.agent, "answer": None, "fell_back_from": outcome.fell_back_from, **failed}
    if outcome.worktree is not None:
        record.update(_worktree(outcome))
    if outcome.review is not None:
        record["review"] = outcome.review.to_dict()
    if outcome.disarmed:
        record["disarmed"] = [armed.to_dict() for armed in outcome.disarmed]
    if outcome.checks:
        record["checks"] = [check_record(check) for check in outcome.checks]
    if outcome.pull is not None:
        pull = outcome.pull
        record["pull"] = {"url": pull.url, "number": pull.number, "branch": pull.branch, "opened": pull.opened}
    return record


def check_record(check: Check) -> dict[str, Any]:
    """One run of a check command (crewbridge.engine.gate) as --json shows it."""
    return {
        "command": check.command,
        "round": check.round,
        "passed": check.passed,
        "exit_code": check.exit_code,
        "output": check.output,
        "ms": check.ms,
    }


def _worktree(outcome: Outcome) -> dict[str, Any]:
    assert outcome.worktree is not None
    changes = None if outcome.changes is None else [change.to_dict() for change in outcome.changes]
    worktree = outcome.worktree
    return {
        "run_id": worktree.run_id,
        "worktree": str(worktree.path),
        "branch": worktree.branch,
        "base": worktree.base,
        "changes": changes,  # null when they could not be told
    }


def outcomes_record(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """A run's outcomes (--json, ask), one shape however many agents ran: the run's id and each
    agent's object, in mention order."""
    run = next((outcome.run for outcome in outcomes if outcome.run), None)
    return {"run": run, "results": [outcome_record(outcome) for outcome in outcomes]}


def json_line(obj: Any) -> str:
    """One line of JSON (an event of the record, or any JSON value); text that cannot be UTF-8 (a
    lone surrogate) is written as escapes."""
    if isinstance(obj, dict):
        return jsonio.dumps_bytes(obj).decode("utf-8") + "\n"
    from crewbridge.record.events import encode  # for start-up speed: msgspec, only for --jsonl

    return encode(obj).decode("utf-8") + "\n"
