"""Sending the runs' spans: out of the runs' way.

A run's record calls its sinks under its lock on the run's threads, so the sink only puts the
event on a queue. One thread per process (`crew-otel`) loads the OpenTelemetry SDK (~0.2-1 s of
imports, while the run's CLIs work), turns the events into spans (crewbridge.telemetry.spans) and
hands them to the SDK's BatchSpanProcessor, which sends them over OTLP in batches from a thread of
its own. At the command's end `close()` waits for what is queued to be sent, at most
Settings.exit_wait seconds: a collector that is slow, unreachable or never answers costs a run no
more than that, and never its exit code. Without the SDK installed the first traced run says so
once, with the pip command, and nothing else happens.
"""

from __future__ import annotations

import atexit
import os
import queue
import sys
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from crewbridge.record.trace import Tracing
from crewbridge.telemetry.settings import Settings, settings

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor

    from crewbridge.config import Config
    from crewbridge.record import events as ev
    from crewbridge.record.stream import Record
    from crewbridge.system.approval import Channel
    from crewbridge.telemetry.spans import RunSpans

_STOP = object()


class Exporter:
    """This process's way out for traces (one for every run it makes: `crew mcp`'s asks, an editor's
    prompts). `observe` is a RunContext observer: it joins each run's record."""

    def __init__(self, settings: Settings, processor: SpanProcessor | None = None) -> None:
        """`processor`: where spans go instead of an OTLP exporter (tests give one of the SDK's)."""
        self.settings = settings
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._processor = processor
        self._resource: Any = None
        self._failed: str | None = None
        self._thread = threading.Thread(target=self._work, name="crew-otel", daemon=True)
        self._started = False
        self._closed = False
        self._lock = threading.Lock()

    @property
    def tracing(self) -> Tracing:
        """What the contexts of its runs are given: their runs are traced, under crew's own TRACEPARENT."""
        return Tracing.of(os.environ)

    def observe(self, record: Record) -> Sequence[Channel]:
        """Trace the run of `record` (crewbridge.engine.context.Observer): its events from its start on."""
        start = record.start
        if start is None or self._closed:
            return []
        self._start()
        handle = _Run(start)
        put = self._queue.put
        put((handle, start))
        record.attach(lambda event: put((handle, event)))
        return []

    def _start(self) -> None:
        with self._lock:
            if not self._started:
                self._started = True
                self._thread.start()
                atexit.register(self.close)

    def close(self) -> None:
        """Send what is queued, waiting Settings.exit_wait seconds at most; then take no more runs."""
        with self._lock:
            if self._closed or not self._started:
                self._closed = True
                return
            self._closed = True
        self._queue.put(_STOP)
        self._thread.join(self.settings.exit_wait)

    # -- the thread

    def _work(self) -> None:
        if not self._ready():
            while self._queue.get() is not _STOP:  # drained, so that the runs' sinks never block
                pass
            return
        while True:
            item = self._queue.get()
            if item is _STOP:
                break
            handle, event = item
            try:
                self._feed(handle, event)
            except Exception as exc:  # a bug in crew's mapping: said once, the runs go on untraced
                self._say(f"crew: telemetry stopped: {type(exc).__name__}: {exc}")
                return self._drain()
        assert self._processor is not None
        deadline = time.monotonic() + self.settings.exit_wait
        self._processor.force_flush(int(max(deadline - time.monotonic(), 0.05) * 1000))
        self._processor.shutdown()

    def _drain(self) -> None:
        while self._queue.get() is not _STOP:
            pass

    def _feed(self, handle: _Run, event: ev.Event) -> None:
        from crewbridge.telemetry.spans import RunSpans

        if handle.spans is None:
            assert self._processor is not None
            handle.spans = RunSpans(handle.start, self.settings, self._resource, self._processor.on_end)
        if event is not handle.start:
            handle.spans.feed(event)

    def _ready(self) -> bool:
        """Load the SDK and make the processor; False (said once) when the SDK is not installed."""
        # for start-up speed: importlib.metadata (extras) loads here, on this thread, not as crew starts
        from crewbridge.base.extras import EXTRAS, missing

        try:
            from opentelemetry.sdk.resources import OTELResourceDetector, Resource
        except ImportError:
            self._say(f"crew: {missing(EXTRAS['otel'], f'telemetry ({self.settings.where})')}; the runs go on untraced")
            return False
        if self.settings.notice:
            print(self.settings.notice, file=sys.stderr, flush=True)
        from crewbridge.version import __version__

        given = {
            **dict(self.settings.resource),
            "service.name": self.settings.service_name,
            "service.version": __version__,
        }
        # the SDK's create() lets the attributes given win; the user's OTEL_RESOURCE_ATTRIBUTES and
        # OTEL_SERVICE_NAME are the more particular, so they are merged last
        self._resource = Resource.create(given).merge(OTELResourceDetector().detect())
        if self._processor is None:
            try:
                self._processor = _processor(self.settings)
            except ImportError:
                self._say(
                    f"crew: telemetry is on ({self.settings.where}) but the OTLP exporter for "
                    f"{self.settings.protocol} is not installed: {EXTRAS['otel'].install()}"
                )
                return False
        return True

    def _say(self, text: str) -> None:
        if self._failed is None:
            self._failed = text
            print(text, file=sys.stderr, flush=True)


class _Run:
    """A run's handle on the queue: its start, then its spans once the thread made them."""

    def __init__(self, start: ev.Start) -> None:
        self.start = start
        self.spans: RunSpans | None = None


def _processor(settings: Settings) -> SpanProcessor:
    """A BatchSpanProcessor over the OTLP exporter of the settings' protocol."""
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    options: dict[str, Any] = {}
    if settings.traces_endpoint is not None:
        options["endpoint"] = settings.traces_endpoint
    if settings.headers:
        options["headers"] = dict(settings.headers)
    if settings.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc

        if "endpoint" in options:
            options["insecure"] = options["endpoint"].startswith("http://")
        return BatchSpanProcessor(Grpc(**options), schedule_delay_millis=500)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

    return BatchSpanProcessor(Http(**options), schedule_delay_millis=500)


def exporter(config: Config | None) -> Exporter | None:
    """An exporter for the runs of a command or server with `config`, when telemetry is on (else None).
    A face makes one, gives its `observe` as an observer and `tracing` to its contexts."""
    found = settings(config)
    return Exporter(found) if found is not None else None
