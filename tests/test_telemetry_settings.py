"""Whether crew exports traces and where (crewbridge.telemetry.settings), and what it says when it
cannot (crewbridge.telemetry.exporter)."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from crewbridge.record import events as ev
from crewbridge.record.stream import Record
from crewbridge.telemetry import wanted
from crewbridge.telemetry.exporter import Exporter
from crewbridge.telemetry.settings import Settings, settings

ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:6006"}


def config(**telemetry):
    return SimpleNamespace(telemetry=telemetry)


def test_off_unless_an_endpoint_is_given_or_crew_yaml_turns_it_on():
    assert settings(config(), {}) is None
    assert settings(config(), ENDPOINT) is not None
    assert settings(config(), {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}) is not None
    assert settings(config(endpoint="http://127.0.0.1:6006"), {}) is not None
    assert settings(config(enabled=True), {}) is not None


@pytest.mark.parametrize(
    "env, given",
    [
        ({**ENDPOINT, "OTEL_SDK_DISABLED": "true"}, {}),
        ({**ENDPOINT, "OTEL_TRACES_EXPORTER": "none"}, {}),
        (ENDPOINT, {"enabled": False}),
    ],
)
def test_whatever_turns_it_off_wins(env, given):
    assert settings(config(**given), env) is None and not wanted(given, env)


def test_the_environment_is_more_particular_than_crew_yaml():
    env = {
        **ENDPOINT,
        "OTEL_EXPORTER_OTLP_HEADERS": "x=1",
        "OTEL_SERVICE_NAME": "mine",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
    }
    found = settings(config(endpoint="http://elsewhere:4318", headers={"a": "b"}, protocol="http/protobuf"), env)
    assert found.endpoint is None and found.traces_endpoint is None  # the SDK reads OTEL_* itself
    assert found.headers == () and found.service_name == "mine" and found.protocol == "grpc"


def test_crew_yamls_endpoint_headers_and_resource_are_used_where_nothing_else_says():
    given = config(endpoint="http://127.0.0.1:6006/", headers={"authorization": "Bearer ${TOKEN}"}, resource={"a": "b"})
    found = settings(given, {"TOKEN": "s3cret"})
    assert found.traces_endpoint == "http://127.0.0.1:6006/v1/traces"
    assert found.headers == (("authorization", "Bearer s3cret"),) and found.resource == (("a", "b"),)
    assert (
        settings(config(endpoint="http://127.0.0.1:4317", protocol="grpc"), {}).traces_endpoint
        == "http://127.0.0.1:4317"
    )


def test_content_capture_and_the_newest_names_are_opt_in():
    assert not settings(config(), ENDPOINT).capture_content
    env = {**ENDPOINT, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
    assert settings(config(), env).capture_content
    assert not settings(
        config(capture_content=True), {**env, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "false"}
    ).capture_content
    assert settings(config(), {**ENDPOINT, "OTEL_SEMCONV_STABILITY_OPT_IN": "http, gen_ai_latest_experimental"}).latest


def two_runs(exporter: Exporter) -> None:
    """Two runs traced by `exporter`, then the exporter closed as a command's end closes it."""
    for _ in range(2):
        record = Record()
        record.emit(ev.Start(run=record.run, command="query"))
        exporter.observe(record)
        record.end("done")
    exporter.close()


def test_without_the_sdk_one_line_names_the_pip_command_and_the_run_goes_on(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.resources", None)  # as if it were not installed
    exporter = Exporter(Settings(where="OTEL_EXPORTER_OTLP_ENDPOINT"))
    two_runs(exporter)
    assert capsys.readouterr().err.splitlines() == [
        "crew: telemetry (OTEL_EXPORTER_OTLP_ENDPOINT) needs the 'otel' extra (opentelemetry-sdk), not installed: "
        "pip install '.[otel]' in a clone of crewbridge, pip install 'crewbridge[otel]' otherwise; "
        "the runs go on untraced"
    ]


def test_a_protocol_crew_does_not_send_is_said_once_and_http_protobuf_sent(capsys):
    found = settings(config(), {**ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
    assert found.protocol == "http/protobuf"
    assert settings(config(), {**ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}).notice == ""
    memory = InMemorySpanExporter()
    exporter = Exporter(found, SimpleSpanProcessor(memory))
    two_runs(exporter)
    assert capsys.readouterr().err.splitlines() == [
        "crew: OTEL_EXPORTER_OTLP_PROTOCOL=http/json is not a protocol crew sends; sending http/protobuf (or set grpc)"
    ]
    assert len(memory.get_finished_spans()) == 2  # the runs are traced all the same
