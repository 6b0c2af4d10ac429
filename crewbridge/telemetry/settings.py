"""Whether crew exports traces, and where: the standard OpenTelemetry variables first (what the
user's environment says is the more particular), then crew.yaml's `telemetry:` mapping. Nothing of
OpenTelemetry is imported here.

On as crewbridge.telemetry.wanted says."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from crewbridge.telemetry import ENDPOINTS, wanted

if TYPE_CHECKING:
    from crewbridge.config import Config

PROTOCOLS = ("http/protobuf", "grpc")
PROTOCOL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
LATEST = "gen_ai_latest_experimental"  # OTEL_SEMCONV_STABILITY_OPT_IN's value for the newest GenAI names
CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
EXIT_WAIT = 2.0  # seconds a command waits at its end for its spans to be sent, at most
_VARIABLE = re.compile(r"\$\{(\w+)\}")


@dataclass(frozen=True)
class Settings:
    """What the exporter is given. `endpoint`, `protocol`, `headers`: crew.yaml's, each only where no
    OTEL_* variable sets it (the SDK's exporter reads those itself)."""

    endpoint: str | None = None  # crew.yaml's base URL (…/v1/traces is added for http/protobuf)
    protocol: str = "http/protobuf"
    headers: tuple[tuple[str, str], ...] = ()
    service_name: str = "crewbridge"
    resource: tuple[tuple[str, str], ...] = ()  # crew.yaml's; OTEL_RESOURCE_ATTRIBUTES wins
    capture_content: bool = False  # prompts, answers, tool input and output in attributes (bounded)
    latest: bool = False  # OTEL_SEMCONV_STABILITY_OPT_IN has gen_ai_latest_experimental
    exit_wait: float = EXIT_WAIT
    where: str = ""  # what turned it on, for messages
    notice: str = ""  # what crew could not follow (a protocol it does not send), said once when a run is traced

    @property
    def traces_endpoint(self) -> str | None:
        """crew.yaml's endpoint as the exporter takes it (None: the SDK reads OTEL_* itself)."""
        if self.endpoint is None:
            return None
        if self.protocol == "grpc":
            return self.endpoint
        return self.endpoint.rstrip("/") + "/v1/traces"


def _on(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def settings(config: Config | None, env: Mapping[str, str] | None = None) -> Settings | None:
    """The telemetry settings in force, or None when crew exports nothing."""
    env = os.environ if env is None else env
    given: dict[str, Any] = dict(config.telemetry) if config is not None else {}
    if not wanted(given, env):
        return None
    variable = next((name for name in ENDPOINTS if env.get(name)), None)
    named = next((name for name in PROTOCOL_VARIABLES if env.get(name)), None)
    protocol = (env[named] if named else given.get("protocol") or "http/protobuf").strip()
    notice = ""
    if protocol not in PROTOCOLS:  # http/json, which the SDK has no exporter for, or a typo
        notice = f"crew: {named}={protocol} is not a protocol crew sends; sending http/protobuf (or set grpc)"
    capture = env.get(CAPTURE)
    return Settings(
        endpoint=None if variable else given.get("endpoint"),
        protocol=protocol if protocol in PROTOCOLS else "http/protobuf",
        headers=()
        if env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or env.get("OTEL_EXPORTER_OTLP_HEADERS")
        else tuple((name, expand(str(value), env)) for name, value in (given.get("headers") or {}).items()),
        service_name=env.get("OTEL_SERVICE_NAME") or given.get("service_name") or "crewbridge",
        resource=tuple((name, str(value)) for name, value in (given.get("resource") or {}).items()),
        capture_content=_on(capture) if capture is not None else bool(given.get("capture_content")),
        latest=LATEST in [part.strip() for part in env.get("OTEL_SEMCONV_STABILITY_OPT_IN", "").split(",")],
        exit_wait=float(given.get("exit_wait", EXIT_WAIT)),
        where=variable or "telemetry: in crew.yaml",
        notice=notice,
    )


def expand(value: str, env: Mapping[str, str]) -> str:
    """`${NAME}` in a crew.yaml header replaced by the variable's value (a token kept out of the file)."""
    return _VARIABLE.sub(lambda found: env.get(found[1], ""), value)
