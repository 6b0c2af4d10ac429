"""W3C trace context read and made (crewbridge.record.trace): what crew continues, and what it
gives each CLI."""

from __future__ import annotations

import pytest

from crewbridge.record.trace import RunTrace, TraceParent, Tracing, carried, state_of

GOOD = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_a_traceparent_is_read_as_w3c_trace_context_says():
    found = TraceParent.parse(GOOD)
    assert found == TraceParent("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "01")
    assert found.header == GOOD and found.sampled
    assert TraceParent.parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-future") is not None


@pytest.mark.parametrize(
    "header",
    [
        None,
        42,
        "",
        "garbage",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # version ff is invalid
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # an all-zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # an all-zero span id
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",  # upper case
        GOOD + "-more",  # version 00 has nothing after its flags
        "00-" + "a" * 10_000,
        GOOD.replace("-", "\n"),
    ],
)
def test_anything_else_is_no_traceparent(header):
    assert TraceParent.parse(header) is None


def test_a_tracestate_is_passed_on_only_when_it_is_short_printable_ascii():
    assert state_of("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE") == "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
    for bad in (None, 7, "", "x" * 600, "a=b\nc=d", "naïve=1"):
        assert state_of(bad) is None


def test_a_runs_trace_continues_its_parent_else_the_one_its_clis_started_in_else_a_new_one():
    parent = TraceParent.parse(GOOD)
    given = RunTrace.begin(parent, "a=1")
    assert (given.trace_id, given.parent, given.state) == (parent.trace_id, parent, "a=1")
    assert given.span_id != parent.span_id
    assert RunTrace.begin(None, trace_id="ab" * 16).trace_id == "ab" * 16
    fresh = RunTrace.begin(None)
    assert len(fresh.trace_id) == 32 and fresh.parent is None and fresh.trace_id != RunTrace.begin(None).trace_id


def test_each_agent_gets_a_span_of_its_own_in_the_runs_trace():
    trace = RunTrace.begin(TraceParent.parse(GOOD), "a=1")
    one, two = trace.child(), trace.child()
    assert one.trace_id == two.trace_id == trace.trace_id and one.span_id != two.span_id
    assert trace.env(one) == {"TRACEPARENT": one.header, "TRACESTATE": "a=1"}


def test_the_environment_crew_was_started_with_is_what_its_runs_continue():
    assert Tracing.of({"TRACEPARENT": GOOD}).parent == TraceParent.parse(GOOD)
    assert Tracing.of({"TRACEPARENT": "nonsense"}).parent is None


def test_a_messages_meta_carries_text_only():
    assert carried({"traceparent": GOOD, "tracestate": ["no"]}) == {"traceparent": GOOD, "tracestate": None}
    assert carried({}) == {"traceparent": None, "tracestate": None}
