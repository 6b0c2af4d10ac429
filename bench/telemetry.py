"""Figure 18: what OpenTelemetry export costs a run (docs/observability.md).

`crew query "@claude say hello"` against the real claude and the mock model, in the same rounds:
- telemetry off (no OTEL_* variable), this checkout against the one before (--before): goal, no change;
- telemetry on (OTEL_EXPORTER_OTLP_ENDPOINT at a collector on 127.0.0.1 that takes OTLP/HTTP and
  answers at once), against off: the milliseconds added to the whole command, its exit included
  (the SDK loads on a thread of its own while claude works; the spans are sent before crew exits,
  bounded). Goal: ≤ 5 ms. Also the CPU time it adds (crew's and claude's, user + system): on a
  loaded machine the SDK's import on its thread (~130 ms of CPU) competes with claude's start for
  the cores, which the wall time shows and the CPU time names.
"""

from __future__ import annotations

import functools
import http.server
import threading

from bench.common import Row, Settings, installed, interleaved, median, ratio_row, run_timed, side_rows
from bench.harness import claude_env

ADDED_TARGET = 5.0  # ms telemetry on may add to a run, exit included
ANSWER = "Hello from the mock model."


class _Collector(http.server.BaseHTTPRequestHandler):
    """An OTLP/HTTP collector that takes every export and answers at once (an empty
    ExportTraceServiceResponse), counting the requests."""

    protocol_version = "HTTP/1.1"
    received = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).received += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def run(settings: Settings) -> list[Row]:
    if not settings.cli:
        return []
    crews = {side: str(installed(repo) / "crew") for side, repo in settings.sides().items()}
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with claude_env() as (mock, env, work):
            traced = {**env, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}"}

            cpu: dict[str, list[float]] = {}  # CPU seconds of each measure's runs, warm-up included

            def timed(label: str, argv: list[str], run_env: dict[str, str]) -> float:
                mock.script(ANSWER)
                result = run_timed(argv, env=run_env, cwd=work)
                if result.returncode != 0 or ANSWER not in result.stdout.decode():
                    said = (result.stderr or result.stdout).decode(errors="replace").strip()[-300:]
                    raise RuntimeError(f"{' '.join(argv)} failed (exit {result.returncode}): {said}")
                cpu.setdefault(label, []).append(result.cpu)
                return result.wall

            measures = {
                side: functools.partial(timed, side, [crew, "query", "@claude say hello"], env)
                for side, crew in crews.items()
            }
            measures["on"] = functools.partial(timed, "on", [crews["crew"], "query", "@claude say hello"], traced)
            values = interleaved(measures, settings.repeats(15, 4))
    finally:
        server.shutdown()
    if _Collector.received == 0:
        raise RuntimeError("no span reached the collector: telemetry did not export")
    rows = []
    if "before" in values:
        rows += side_rows(
            "18 telemetry",
            "crew query, telemetry off: this checkout vs the one before (wall)",
            {"crew": values["crew"], "before": values["before"]},
            "before",
            unit="s",
            scale=1,
            target=1.05,
        )
    on, off = values["on"], values["crew"]
    added = median([a - b for a, b in zip(on, off, strict=True)]) * 1000
    row = ratio_row(
        "18 telemetry",
        "crew query, telemetry on (OTLP/HTTP to 127.0.0.1) vs off (wall, exit included)",
        on,
        off,
        [a / b for a, b in zip(on, off, strict=True)],
        unit="s",
        scale=1,
        target=None,
        note=f"{added:+.1f} ms a run (median of the paired differences; goal ≤ {ADDED_TARGET:g} ms)",
    )

    def more_cpu(ours: str, base: str) -> float:  # each list starts with its warm-up run: the pairs line up
        return median([a - b for a, b in zip(cpu[ours], cpu[base], strict=True)]) * 1000

    rows += [row, Row("18 telemetry", "ms telemetry on adds to a run", added, "ms", target=ADDED_TARGET)]
    rows.append(
        Row("18 telemetry", "ms of CPU (crew + claude) telemetry on adds to a run", more_cpu("on", "crew"), "ms")
    )
    if "before" in cpu:
        rows.append(
            Row(
                "18 telemetry",
                "ms of CPU, telemetry off: this checkout vs the one before",
                more_cpu("crew", "before"),
                "ms",
            )
        )
    return rows
