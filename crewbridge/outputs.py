"""The JSON crew writes for programs, in one place; each shape has a JSON Schema in docs/schemas/
(tests/test_outputs.py holds real output to them).

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
  (``path``, ``what``, ``done``) as crewbridge.gitguard disarmed it.
  MCP's `ask` returns the same object as its structured content (and the `ask` tool an agent is
  given, as its data).

`crew query --jsonl` (docs/schemas/event.json): the event stream, one object per line as it
  happens, each with ``type`` and ``agent``:
  ``{"type": "turn", "turn": 1}`` a model reply begins (1, 2, … per task);
  ``{"type": "text", "text": "…"}`` raw text as the model streams it, tool-call blocks and any text
  crew cut off included;
  ``{"type": "call", "name": "crew:read_file", "input": {…}}`` a tool call starts (a text block
  closed, or a native call);
  ``{"type": "result", "name", "input", "result": {"success", "data", "error", "metadata"}}`` its
  result envelope;
  ``{"type": "native", "text": "…"}`` crew's policy decided on one of the CLI's own tools;
  ``{"type": "usage", "input_tokens", "output_tokens", "cached_tokens", "cost_usd"}`` the agent's
  usage in this run so far, each time its CLI reports some;
  ``{"type": "answer", "answer", "tool_calls", "usage", "session", "turns", "needed_approval"}`` the
  final answer;
  ``{"type": "error", "error": "…", "exit_code": 3}`` the agent's run failed;
  ``{"type": "fallback", "text"}`` the agent's provider cannot answer; the next one of its
  `fallback:` takes the task over (then ``answer`` has ``fell_back_from``);
  ``{"type": "resume", "text"}`` continuing a run, the agent starts afresh (it was not in it) or
  has its conversation replayed (its CLI no longer has the session);
  ``{"type": "warning", "text": "…"}`` about the whole run (--worktree: the checkout's uncommitted
  changes are not in the worktrees);
  ``{"type": "review", "round", "rounds", "verdict", "findings", "called", "disputed"}`` a
  reviewer's verdict (--review), one per round;
  ``{"type": "worktree", "run_id", "worktree", "branch", "base", "changes"}`` where an agent worked
  with --worktree and what it changed, at the end;
  ``{"type": "disarmed", "text", "found": [{"path", "what", "done"}]}`` what the agent's run left
  that would run code on the user's next git command, disarmed once its CLI ended;
  ``{"type": "sandbox", "text": "…"}`` the sandbox is wanted (auto) but no mechanism works here:
  the run goes on unconfined;
  ``{"type": "egress", "text", "host", "port", "why", "process"}`` crew's egress proxy refused a
  connection of the agent's sandbox (``process``: "pid N: its command line", or null);
  ``{"type": "notice", "text": "…"}`` anything else worth knowing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from crewbridge import jsonio

if TYPE_CHECKING:
    from crewbridge.api import Outcome
    from crewbridge.loop import CallRecord, Progress, RunResult


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
    return record


def worktree_record(outcome: Outcome) -> dict[str, Any]:
    """The --jsonl line of where an agent worked with --worktree, and what it changed."""
    return {"type": "worktree", "agent": outcome.agent, **_worktree(outcome)}


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


def event_record(event: Progress) -> dict[str, Any]:
    """One --jsonl line."""
    base: dict[str, Any] = {"type": event.kind, "agent": event.agent}
    if event.kind == "turn":
        return {**base, "turn": int(event.text) if event.text.isdigit() else 0}
    if event.kind in ("call", "result") and event.call is not None:
        base.update(name=event.call.name, input=event.call.input)
        return {**base, "result": event.call.result.to_dict()} if event.kind == "result" else base
    if event.kind == "answer" and event.result is not None:
        return {**base, **result_record(event.result)}
    if event.kind == "usage" and event.usage is not None:
        return {**base, **event.usage.to_dict()}
    if event.data is not None:  # a review's round
        return {**base, **event.data}
    return {**base, "text": event.text}


def error_record(agent: str, error: Exception) -> dict[str, Any]:
    """The --jsonl line of an agent whose run failed."""
    return {"type": "error", "agent": agent, "error": str(error), "exit_code": getattr(error, "exit_code", 1)}


def json_line(obj: Any) -> str:
    """One line of JSON; text that cannot be UTF-8 (a lone surrogate) is written as escapes."""
    return jsonio.dumps_bytes(obj).decode("utf-8") + "\n"
