"""A review's words (`crew execute --review`): the reviewer's verdict and findings, the writer's
disputes, and the two run-scoped tools that take them — `verdict` for the reviewer, `dispute` for
the writer. They are registered like any tool (a Bridge's `tools=`), so their input is checked
against their schemas and a mistake goes back to the model as an error result.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from crewbridge.toolkit.registry import Tool, ToolContext, ToolFailure

VERDICT_TOOL = "verdict"
DISPUTE_TOOL = "dispute"
SEVERITIES = ("high", "medium", "low")
MAX_FINDINGS = 50
MAX_MESSAGE = 4000  # characters of one finding's message or one dispute's reason

FINDING_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "maxLength": 1000, "description": "the file, relative to the working directory"},
        "line": {"type": "integer", "minimum": 0, "description": "the line it is about (0: the whole file)"},
        "severity": {"enum": list(SEVERITIES)},
        "message": {"type": "string", "minLength": 1, "maxLength": MAX_MESSAGE, "description": "what is wrong and why"},
    },
    "required": ["path", "line", "severity", "message"],
    "additionalProperties": False,
}
VERDICT_SCHEMA = {
    "type": "object",
    "properties": {
        "verdict": {"enum": ["approve", "changes"], "description": "approve the change, or ask for changes"},
        "findings": {"type": "array", "items": FINDING_SCHEMA, "maxItems": MAX_FINDINGS},
    },
    "required": ["verdict"],
    "additionalProperties": False,
    # asking for changes names at least one
    "if": {"properties": {"verdict": {"const": "changes"}}},
    "then": {"required": ["findings"], "properties": {"findings": {"minItems": 1}}},
}
DISPUTE_SCHEMA = {
    "type": "object",
    "properties": {
        "finding": {"type": "integer", "minimum": 1, "description": "the finding's number, as the review lists it"},
        "reason": {"type": "string", "minLength": 1, "maxLength": MAX_MESSAGE, "description": "why it is wrong"},
    },
    "required": ["finding", "reason"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    severity: str
    message: str

    @classmethod
    def of(cls, data: dict[str, Any]) -> Finding:
        return cls(data["path"], data["line"], data["severity"], data["message"])

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "severity": self.severity, "message": self.message}

    def shown(self) -> str:
        """`[high] notes.txt:3: the date is wrong`."""
        return f"[{self.severity}] {self.where()}: {self.message}"

    def where(self) -> str:
        """`notes.txt:3` (`notes.txt` for line 0, `(no file)` without a path)."""
        if not self.path:
            return "(no file)"
        return f"{self.path}:{self.line}" if self.line else self.path


@dataclass(frozen=True)
class Verdict:
    verdict: str  # approve | changes
    findings: list[Finding] = field(default_factory=list)
    called: bool = True  # False: the reviewer never called the tool; its answer stands in as one finding

    @property
    def approved(self) -> bool:
        return self.verdict == "approve"


@dataclass(frozen=True)
class Dispute:
    """A finding the writer holds to be wrong, and why; the reviewer sees it in the rounds after."""

    round: int
    finding: Finding
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"round": self.round, "finding": self.finding.to_dict(), "reason": self.reason}


@dataclass
class Review:
    """A review as it went: the rounds run, the last verdict, every dispute."""

    reviewer: str
    rounds: int = 0
    last: Verdict | None = None
    disputes: list[Dispute] = field(default_factory=list)

    @property
    def approved(self) -> bool:
        return self.last is not None and self.last.approved

    def to_dict(self) -> dict[str, Any]:
        return {
            "reviewer": self.reviewer,
            "rounds": self.rounds,
            "verdict": self.last.verdict if self.last else None,
            "findings": [f.to_dict() for f in self.last.findings] if self.last else [],
            "disputed": [d.to_dict() for d in self.disputes],
        }


class Ballot:
    """What the two tools record: the reviewer's verdict in its round, the writer's disputes of the
    findings it was given in its turn. Thread-safe: tools run in worker threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.round = 0
        self._verdict: Verdict | None = None
        self._open: list[Finding] = []  # the findings the writer was given
        self._disputes: dict[int, Dispute] = {}

    def give(self, findings: list[Finding]) -> None:
        """The writer is given `findings` (numbered from 1) and may dispute them; earlier disputes are done with."""
        with self._lock:
            self.round += 1
            self._open, self._disputes = list(findings), {}

    def clear_verdict(self) -> None:
        """A reviewer's round starts: no verdict yet."""
        with self._lock:
            self._verdict = None

    def verdict(self) -> Verdict | None:
        with self._lock:
            return self._verdict

    def disputes(self) -> list[Dispute]:
        """The writer's disputes of the findings it was last given, by finding number."""
        with self._lock:
            return [self._disputes[n] for n in sorted(self._disputes)]

    def tools(self) -> tuple[Tool, Tool]:
        """`verdict` (for the reviewer) and `dispute` (for the writer), recording into this ballot."""

        def verdict(ctx: ToolContext, verdict: str, findings: list[dict[str, Any]] | None = None) -> dict[str, Any]:
            taken = Verdict(verdict, [Finding.of(f) for f in findings or []])
            with self._lock:
                self._verdict = taken
            return {"recorded": verdict, "findings": len(taken.findings)}

        def dispute(ctx: ToolContext, finding: int, reason: str) -> dict[str, Any]:
            with self._lock:
                if not self._open:
                    raise ToolFailure("there is no review finding to dispute now; do the task")
                if finding > len(self._open):
                    raise ToolFailure(f"there is no finding {finding}; the review lists 1 to {len(self._open)}")
                self._disputes[finding] = Dispute(self.round, self._open[finding - 1], reason.strip())
            return {"disputed": finding, "note": "the reviewer will see your reason in the next round"}

        return (
            Tool(
                name=VERDICT_TOOL,
                description="Give your review's verdict: approve the change, or ask for changes with "
                "findings (each with its file, line, severity and what is wrong). Call it once, "
                "when you are done reviewing; it ends your review.",
                input_schema=VERDICT_SCHEMA,
                func=verdict,
                read_only=True,
                ends_run=True,
            ),
            Tool(
                name=DISPUTE_TOOL,
                description="Dispute a review finding you hold to be wrong, with your reason, instead "
                "of changing the code for it; the reviewer sees your reason in its next round.",
                input_schema=DISPUTE_SCHEMA,
                func=dispute,
                read_only=True,
            ),
        )
