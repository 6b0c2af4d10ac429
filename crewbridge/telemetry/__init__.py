"""OpenTelemetry traces of crew's runs (docs/observability.md): each run's record
(crewbridge.record) turned into GenAI spans — the run's `invoke_workflow`, each agent's part
`invoke_agent` (tokens, cost), every tool call `execute_tool` — exported over OTLP in the
background. `settings` decides from the standard OTEL_* variables and crew.yaml's `telemetry:`
whether it is on, without loading OpenTelemetry; `exporter` loads the SDK (the `otel` extra) on a
thread of its own once a run is traced; `spans` maps the record's events to spans."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def wanted(given: Mapping[str, Any], env: Mapping[str, str] | None = None) -> bool:
    """Whether crew exports traces, by crew.yaml's `telemetry:` (`given`) and the environment: an
    OTLP endpoint set, or `enabled: true`; never with OTEL_SDK_DISABLED=true, OTEL_TRACES_EXPORTER=none
    or `enabled: false`. Cheap: every command asks it, and with telemetry off nothing more loads."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none" or given.get("enabled") is False:
        return False
    return any(env.get(name) for name in ENDPOINTS) or bool(given.get("endpoint")) or given.get("enabled") is True
