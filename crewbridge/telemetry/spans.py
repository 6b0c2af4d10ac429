"""One run's record as OpenTelemetry GenAI spans, with the ids the record carries (chosen when the
CLIs started: crewbridge.record.trace), so that what a CLI exports itself under its TRACEPARENT
nests under its agent's span here.

- the run: `invoke_workflow crew COMMAND` (crew's run id, command, mode, status, every agent's
  tokens and cost summed), the child of what it continues (an editor's prompt, an MCP client's
  request, the TRACEPARENT crew was started with);
- each agent's part: `invoke_agent AGENT` (gen_ai.agent.name, gen_ai.provider.name,
  gen_ai.request.model, gen_ai.conversation.id = the CLI's session, the tokens and cost of its
  usage events summed, a review's role and round), ending with the last event of that part;
- each tool call, crew's and the CLI's own: `execute_tool TOOL` (gen_ai.tool.name,
  gen_ai.tool.call.id = the record's call id, crew's decision and who took it, who approved);
- fallbacks, review verdicts, turns, refused connections and a cancel: events on their span.

Prompts, answers, tool input and output go into attributes only with `capture_content` (then cut
at CAPTURED characters). Cost: what the record's usage events say (the CLI's own, or crew's price
table's, crewbridge.base.prices) as `crew.cost.usd` and OpenInference's `llm.cost.total`; absent
when no event had one."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event as SpanEvent
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from crewbridge.base.usage import Tally
from crewbridge.record import events as ev
from crewbridge.record.trace import TraceParent, new_span_id, new_trace_id
from crewbridge.telemetry.settings import Settings
from crewbridge.version import __version__

CAPTURED = 8_000  # characters of a prompt, answer, tool input or output kept with capture_content
SCOPE = InstrumentationScope("crewbridge", __version__)
# gen_ai.provider.name's well-known values, by crew's provider
PROVIDERS = {"claude": "anthropic", "gemini": "gcp.gemini", "codex": "openai"}
Done = Callable[[ReadableSpan], None]


@dataclass
class _Open:
    """A span being built."""

    name: str
    span_id: str
    parent: str | None
    start: float  # ms since the run started
    kind: str  # openinference.span.kind: CHAIN | AGENT | TOOL
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[SpanEvent] = field(default_factory=list)
    last: float = 0.0  # ms of the last event that belongs to it
    usage: Tally | None = None
    priced: str | None = None
    error: str | None = None  # error.type
    message: str | None = None  # the status' description


class RunSpans:
    """The spans of one run, built from its events in order (`feed`); each finished span goes to
    `done` (a span processor's on_end)."""

    def __init__(self, start: ev.Start, settings: Settings, resource: Resource, done: Done) -> None:
        self.settings, self.resource, self.done = settings, resource, done
        self.trace_id = start.trace or new_trace_id()
        given = TraceParent.parse(start.parent.traceparent) if start.parent else None
        self.flags = TraceFlags(int(given.flags, 16) if given else 1)
        self.state = (
            TraceState.from_header([start.parent.tracestate]) if start.parent and start.parent.tracestate else None
        )
        self.epoch_ns = _epoch_ns(start.at)
        self.run = _Open(
            self._workflow_name(start.command),
            start.span or new_span_id(),
            given.span_id if given and given.trace_id == self.trace_id else None,
            start.t,
            "CHAIN",
            self._workflow_attributes(start),
        )
        self.run.usage = Tally()
        self.parts: dict[str, _Open] = {}  # each agent's current part
        self.calls: dict[str, _Open] = {}  # the tool calls under way, by the record's call id
        self.ended = False

    # -- the run

    def _workflow_name(self, command: str) -> str:
        return f"invoke_workflow crew {command}".rstrip()

    def _workflow_attributes(self, start: ev.Start) -> dict[str, Any]:
        name = f"crew {start.command}".rstrip()
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_workflow",
            ("gen_ai.agent.name" if self.settings.latest else "gen_ai.workflow.name"): name,
            "crew.run.id": start.run,
            "crew.command": start.command,
            "crew.mode": start.mode,
            "crew.agents": list(start.agents),
        }
        parent = start.parent
        for key in ("batch", "repo", "session", "run"):
            value = getattr(parent, key, None) if parent else None
            if value:
                attributes[f"crew.parent.{key}"] = value
        if start.resumed_from:
            attributes["crew.resumed_from"] = start.resumed_from
        if self.settings.capture_content and start.task:
            attributes["input.value"] = _cut(start.task)
        return attributes

    def feed(self, event: ev.Event) -> None:
        """Take the run's next event."""
        if self.ended:
            return
        handler = getattr(self, f"_on_{event.kind}", None)
        if handler is not None:
            handler(event)
        agent = getattr(event, "agent", None)
        part = self.parts.get(agent) if agent else None
        if part is not None:
            part.last = max(part.last, event.t)

    def _on_end(self, event: ev.End) -> None:
        for call in list(self.calls.values()):
            call.error = call.error or "unfinished"
            self._finish(call, event.t)
        for part in list(self.parts.values()):
            self._finish(part, part.last)
        run = self.run
        run.attributes.update({"crew.status": event.status, "crew.calls": event.calls, "crew.errors": event.errors})
        if event.status == "failed":
            run.error = run.error or "failed"
        elif event.status == "cancelled":
            run.error = "cancelled"
        self._finish(run, event.t)
        self.ended = True

    def _on_cancel(self, event: ev.Cancel) -> None:
        self.run.events.append(self._event("crew.cancel", event.t, {"crew.cancel.source": event.source}))

    def _on_error(self, event: ev.Error) -> None:
        target = self.parts.get(event.agent) if event.agent else self.run
        if target is None:
            target = self.run
        target.error = str(event.status) if event.status else f"exit_{event.exit_code}"
        if self.settings.capture_content:
            target.message = _cut(event.message)

    # -- an agent's part

    def _on_part(self, event: ev.Part) -> None:
        agent = event.agent or ""
        earlier = self.parts.pop(agent, None)
        if earlier is not None:
            self._finish(earlier, earlier.last)
        provider = PROVIDERS.get(event.provider, event.provider)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.provider.name": provider,
            "crew.provider": event.provider,
            "crew.part": event.part,
            "crew.tools_via": event.via,
        }
        if not self.settings.latest:
            attributes["gen_ai.system"] = provider  # its name before semantic conventions 1.37
        if event.model:
            attributes["gen_ai.request.model"] = event.model
        if event.role:
            attributes["crew.review.role"] = event.role
        if event.round is not None:
            attributes["crew.review.round"] = event.round
        part = _Open(
            f"invoke_agent {agent}", event.span or new_span_id(), self.run.span_id, event.t, "AGENT", attributes
        )
        part.usage, part.last = Tally(), event.t
        self.parts[agent] = part

    def _on_session(self, event: ev.Session) -> None:
        part = self.parts.get(event.agent or "")
        if part is None:
            return
        if event.session:
            part.attributes["gen_ai.conversation.id"] = event.session
        if event.model:
            part.attributes["gen_ai.response.model"] = event.model

    def _on_usage(self, event: ev.Usage) -> None:
        tally = Tally(event.input_tokens, event.output_tokens, event.cached_tokens, event.cost_usd)
        assert self.run.usage is not None
        self.run.usage.add(tally)
        self.run.priced = self.run.priced or event.priced
        part = self.parts.get(event.agent or "")
        if part is not None and part.usage is not None:
            part.usage.add(tally)
            part.priced = part.priced or event.priced

    def _on_turn(self, event: ev.Turn) -> None:
        part = self.parts.get(event.agent or "")
        if part is None:
            return
        part.events.append(self._event("crew.turn", event.t, {"crew.turn": event.turn}))
        if self.settings.capture_content and event.turn == 1:
            part.attributes["input.value"] = _cut(event.prompt)
            part.attributes["gen_ai.input.messages"] = _messages("user", event.prompt)

    def _on_answer(self, event: ev.Answer) -> None:
        part = self.parts.get(event.agent or "")
        if part is None:
            return
        part.attributes["crew.turns"] = event.turns
        if self.settings.capture_content:
            part.attributes["output.value"] = _cut(event.text)
            part.attributes["gen_ai.output.messages"] = _messages("assistant", event.text)

    def _on_fallback(self, event: ev.Fallback) -> None:
        part = self.parts.get(event.agent or "")
        target = part if part is not None else self.run
        target.events.append(
            self._event("crew.fallback", event.t, {"crew.fallback.to": event.to, "crew.fallback.reason": event.reason})
        )
        if part is not None:
            part.error = part.error or event.reason or "unavailable"

    def _on_review(self, event: ev.Review) -> None:
        part = self.parts.get(event.agent or "")
        target = part if part is not None else self.run
        attributes = {
            "crew.review.verdict": event.verdict,
            "crew.review.round": event.round,
            "crew.review.rounds": event.rounds,
            "crew.review.findings": len(event.findings),
        }
        target.attributes.update({"crew.review.verdict": event.verdict, "crew.review.findings": len(event.findings)})
        target.events.append(self._event("crew.review", event.t, attributes))

    def _on_egress(self, event: ev.Egress) -> None:
        part = self.parts.get(event.agent or "")
        attributes: dict[str, Any] = {
            "server.address": event.host,
            "server.port": event.port,
            "crew.egress.why": event.why,
        }
        if event.process:
            attributes["crew.egress.process"] = event.process
        (part if part is not None else self.run).events.append(self._event("crew.egress.refused", event.t, attributes))

    # -- tool calls

    def _on_call(self, event: ev.Call) -> None:
        part = self.parts.get(event.agent or "")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": event.name,
            "gen_ai.tool.call.id": event.call,
            "gen_ai.tool.type": "function",
            "crew.tool.via": event.via,
        }
        if event.ref:
            attributes["crew.tool.ref"] = event.ref
        if event.turn is not None:
            attributes["crew.turn"] = event.turn
        if self.settings.capture_content and event.input is not None:
            attributes["gen_ai.tool.call.arguments"] = _json(event.input)
            attributes["input.value"] = attributes["gen_ai.tool.call.arguments"]
        parent = part.span_id if part is not None else self.run.span_id
        self.calls[event.call] = _Open(f"execute_tool {event.name}", new_span_id(), parent, event.t, "TOOL", attributes)

    def _on_decision(self, event: ev.Decision) -> None:
        call = self.calls.get(event.call)
        if call is not None:
            call.attributes.update({"crew.decision": event.decision, "crew.decision.by": event.by})
            if event.reason and self.settings.capture_content:
                call.attributes["crew.decision.reason"] = _cut(event.reason)

    def _on_approval(self, event: ev.Approval) -> None:
        call = self.calls.get(event.call or "")
        if call is None:
            return
        call.attributes["crew.approval.answer"] = event.answer or "none"
        if event.source:
            call.attributes["crew.approval.source"] = event.source
        call.events.append(self._event("crew.approval", event.t, {"crew.approval.answer": event.answer or "none"}))

    def _on_result(self, event: ev.Result) -> None:
        call = self.calls.pop(event.call, None)
        if call is None:
            return
        if not event.success:
            call.error = "tool_error"
            if self.settings.capture_content and event.error:
                call.message = _cut(event.error)
        elif self.settings.capture_content and event.data is not None:
            call.attributes["gen_ai.tool.call.result"] = _json(event.data)
            call.attributes["output.value"] = call.attributes["gen_ai.tool.call.result"]
        self._finish(call, event.t)

    # -- spans out

    def _event(self, name: str, t: float, attributes: dict[str, Any]) -> SpanEvent:
        return SpanEvent(name, attributes, timestamp=self._ns(t))

    def _ns(self, t: float) -> int:
        return self.epoch_ns + int(t * 1_000_000)

    def _finish(self, span: _Open, end: float) -> None:
        self.parts = {agent: part for agent, part in self.parts.items() if part is not span}
        attributes = {**span.attributes, "openinference.span.kind": span.kind}
        if span.usage is not None:
            attributes.update(_usage(span.usage, span.priced))
        status = Status(StatusCode.OK)
        if span.error is not None:
            attributes["error.type"] = span.error
            status = Status(StatusCode.ERROR, span.message)
        context = SpanContext(int(self.trace_id, 16), int(span.span_id, 16), False, self.flags, self.state)
        parent = (
            SpanContext(int(self.trace_id, 16), int(span.parent, 16), span is self.run, self.flags, self.state)
            if span.parent
            else None
        )
        self.done(
            ReadableSpan(
                span.name,
                context,
                parent,
                self.resource,
                attributes,
                span.events,
                kind=SpanKind.INTERNAL,
                status=status,
                start_time=self._ns(span.start),
                end_time=self._ns(max(end, span.start)),
                instrumentation_scope=SCOPE,
            )
        )


def _usage(usage: Tally, priced: str | None) -> dict[str, Any]:
    """A span's tokens and cost (none when nothing was reported)."""
    out: dict[str, Any] = {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
    }
    if usage.cached_tokens:
        out["gen_ai.usage.cache_read.input_tokens"] = usage.cached_tokens
    if usage.cost_usd is not None:
        out.update({"crew.cost.usd": usage.cost_usd, "llm.cost.total": usage.cost_usd})
        if priced:
            out["crew.cost.priced"] = priced  # by crew's price table of that date, not the CLI
    return out


def _epoch_ns(at: str) -> int:
    try:
        return int(datetime.fromisoformat(at).timestamp() * 1_000_000_000)
    except ValueError:
        import time

        return time.time_ns()


def _cut(text: str) -> str:
    return text if len(text) <= CAPTURED else text[:CAPTURED] + f"… [{len(text) - CAPTURED:,} more characters]"


def _json(value: Any) -> str:
    return _cut(json.dumps(value, ensure_ascii=False, default=str))


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": _cut(text)}]}], ensure_ascii=False)
