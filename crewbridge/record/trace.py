"""A run's place in a distributed trace (W3C Trace Context), chosen before its CLIs start.

When crew exports OpenTelemetry (crewbridge.telemetry), every run is a trace's span (the
`invoke_workflow` one) and every agent's part a span under it (`invoke_agent`), whose id its CLI
is given in TRACEPARENT: a CLI that exports its own spans (claude with its telemetry on) puts them
under it. crew starts the CLIs before the run's record exists (they boot meanwhile), so the ids are
chosen here, when a CLI starts, and the record carries them (`start.trace`, `start.span`,
`part.span`); the exporter builds its spans from the record with those very ids. Nothing here
loads OpenTelemetry: a trace id is 16 random bytes, a span id 8.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

TRACEPARENT = "TRACEPARENT"  # the variables a CLI is given (and crew reads, when it is started by something traced)
TRACESTATE = "TRACESTATE"
# version-traceid-spanid-flags; a later version may add fields after a dash (W3C Trace Context §3.2)
_HEADER = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
MAX_STATE = 512  # characters of a tracestate passed on (the W3C list holds 32 members of 256 at most)


@dataclass(frozen=True)
class TraceParent:
    """A `traceparent`: a trace's id, the id of the span that is the parent, its flags."""

    trace_id: str
    span_id: str
    flags: str = "01"

    @classmethod
    def parse(cls, header: object) -> TraceParent | None:
        """A traceparent header read as W3C Trace Context reads it; None for anything that is not one
        (a version ff, an id of zeros, version 00 with more after it, upper-case hex, not text)."""
        if not isinstance(header, str):
            return None
        found = _HEADER.fullmatch(header.strip())
        if found is None:
            return None
        version, trace_id, span_id, flags, rest = found.groups()
        if version == "ff" or (version == "00" and rest) or not int(trace_id, 16) or not int(span_id, 16):
            return None
        return cls(trace_id, span_id, flags)

    @property
    def header(self) -> str:
        return f"00-{self.trace_id}-{self.span_id}-{self.flags}"

    @property
    def sampled(self) -> bool:
        return bool(int(self.flags, 16) & 1)


def state_of(value: object) -> str | None:
    """A tracestate worth passing on: text of printable ASCII within MAX_STATE; None otherwise."""
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_STATE or not value.isascii():
        return None
    return value.strip() if value.isprintable() else None


def carried(meta: Mapping[str, object]) -> dict[str, str | None]:
    """The W3C trace context a message carries in its `_meta` (an ACP prompt's, an MCP request's), as
    the fields of the record's Parent: text only; what is not a valid header is ignored when read."""
    return {key: value if isinstance(value := meta.get(key), str) else None for key in ("traceparent", "tracestate")}


def trace_of_batch(batch: str) -> str:
    """The trace id of batch `batch`'s runs: made from its id, so that every repository's run, on
    whatever machine and after whatever recovery, lands in the one trace."""
    import hashlib  # for start-up speed: a batch's runs only

    return hashlib.sha256(f"crew batch {batch}".encode()).hexdigest()[:32]


def new_trace_id() -> str:
    return os.urandom(16).hex()


def new_span_id() -> str:
    return os.urandom(8).hex()


@dataclass(frozen=True)
class Tracing:
    """That a context's runs are traced (crew exports them), and what trace they continue when nothing
    more particular names one: the TRACEPARENT crew itself was started with (a CI job's, the CLI
    that started `crew mcp`)."""

    parent: TraceParent | None = None
    state: str | None = None

    @classmethod
    def of(cls, env: Mapping[str, str]) -> Tracing:
        return cls(TraceParent.parse(env.get(TRACEPARENT)), state_of(env.get(TRACESTATE)))


@dataclass(frozen=True)
class RunTrace:
    """One run's trace: its id, the id of the run's own span, the span it continues (None: the run
    is the trace's root) and the tracestate passed along."""

    trace_id: str
    span_id: str
    parent: TraceParent | None = None
    state: str | None = None

    @classmethod
    def begin(cls, parent: TraceParent | None, state: str | None = None, trace_id: str | None = None) -> RunTrace:
        """A new run's trace: `parent`'s, else `trace_id` (the one its CLIs started ahead are in), else a new one."""
        return cls(parent.trace_id if parent else trace_id or new_trace_id(), new_span_id(), parent, state)

    @property
    def flags(self) -> str:
        return self.parent.flags if self.parent else "01"

    def child(self) -> TraceParent:
        """A new span of this trace (an agent's part): its traceparent."""
        return TraceParent(self.trace_id, new_span_id(), self.flags)

    def env(self, child: TraceParent) -> dict[str, str]:
        """What a CLI whose span is `child` is given."""
        return {TRACEPARENT: child.header, **({TRACESTATE: self.state} if self.state else {})}
