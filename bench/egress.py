"""Figure 14: what egress by allow-list costs (docs/sandbox.md, "The network").

- per model request: a client in a sandbox (bubblewrap, as crew starts CLIs) makes keep-alive
  POSTs to a model-like HTTP server in a process of its own on 127.0.0.1, reached as a loopback
  base URL (carried into the sandbox's namespace and relayed by crew's proxy), and through the
  proxy's CONNECT tunnel; against the same client unsandboxed, connecting directly: the time added
  per request (goal ≤ 3 ms). Also a new CONNECT per request (a client that does not keep its
  connection), and under Landlock (its port rules, the proxy on the machine's loopback);
- a sandboxed start: a process (`true`) started in a sandbox with its network namespace and gate
  against one with the network open (`--network open`), crew's part until it runs and exits;
- `crew query "@claude hi"` with the default (allow-list) and with `--network open`, against raw
  `claude -p`, in the same rounds (the overhead figure's goal: no worse than 1.15×).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import Row, Settings, installed, interleaved, median, paired, ratio_row, run_timed, side_rows, spread

REQUEST_TARGET = 3.0  # ms a request, through the proxy
QUERY_TARGET = 1.15  # crew query vs claude -p, as the overhead figure measured it before egress
ANSWER = "Hello from the mock model."

# A model-like server: keep-alive, answers each POST with a 2 KB body, in a process of its own.
SERVER = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # as a model API's server: no 40 ms wait for a delayed ACK
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        body = b"data: " + b"x" * 2040 + b"\\n\\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""

# The client: N requests (after a few unrecorded), each's time in ms as JSON. "direct" connects to
# the server; "connect" asks the proxy HTTPS_PROXY names for a tunnel once (keep-alive through it);
# "connect-each" asks for a tunnel per request.
CLIENT = """
import http.client, json, os, sys, time
port, how, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
proxy = os.environ.get("HTTPS_PROXY", "").rsplit(":", 1)[-1]
def connection():
    if how == "direct":
        return http.client.HTTPConnection("127.0.0.1", port)
    c = http.client.HTTPConnection("127.0.0.1", int(proxy))
    c.set_tunnel("127.0.0.1", port)
    return c
body = b"{" + b'"x": 1, ' * 250 + b'"y": 2}'
c = connection()
times = []
for i in range(count + 5):
    if how == "connect-each":
        c.close()
        c = connection()
    start = time.perf_counter()
    c.request("POST", "/v1/messages", body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    if i >= 5:
        times.append((time.perf_counter() - start) * 1000)
print(json.dumps(times))
"""


def run(settings: Settings) -> list[Row]:
    rows = _requests(settings)
    rows += _starts(settings)
    if settings.cli:
        rows += _query(settings)
    return rows


def _requests(settings: Settings) -> list[Row]:
    from crewbridge.sandbox import MECHANISM_ENV, Sandboxing, State, spawn
    from crewbridge.sandbox.allowlist import AllowList, entry

    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, start_new_session=True)
    rows: list[Row] = []
    work = Path(tempfile.mkdtemp(prefix="crew-bench-egress-"))
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        count = 200 if not settings.quick else 50

        def requests(mechanism: str | None, how: str) -> float:
            """The median time of one request, in seconds, of a client run in `mechanism`'s sandbox
            (None: unsandboxed)."""
            argv = [sys.executable, "-S", "-c", CLIENT, str(port), how, str(count)]
            if mechanism is None:
                out = subprocess.run(argv, capture_output=True, check=True, timeout=120).stdout
            else:
                sandboxing = Sandboxing({**os.environ, MECHANISM_ENV: mechanism})
                hosts = lambda env: AllowList((entry(f"127.0.0.1:{port}", "the base URL"),))  # noqa: E731
                box = sandboxing.cli("required", work, "query", lambda env: State(), hosts=hosts)
                proc, launch = spawn(argv, sandbox=box, env=None, cwd=work, stdout=subprocess.PIPE)
                out, _ = proc.communicate(timeout=120)
                launch.ended()
            return median(json.loads(out)) / 1000

        cases = [
            ("bwrap", "direct", "a loopback base URL carried in, keep-alive"),
            ("bwrap", "connect", "through the proxy's CONNECT tunnel, keep-alive"),
            ("bwrap", "connect-each", "a new CONNECT tunnel each request"),
            ("landlock", "direct", "Landlock: a loopback base URL (its port allowed), keep-alive"),
            ("landlock", "connect", "Landlock: through the proxy's CONNECT tunnel, keep-alive"),
        ]
        for mechanism, how, what in cases:
            mine, theirs, _ = paired(
                lambda m=mechanism, h=how: requests(m, h),
                lambda: requests(None, "direct"),
                settings.repeats(7, 3),
            )
            added = [(a - b) * 1000 for a, b in zip(mine, theirs, strict=True)]
            rows.append(
                Row(
                    "14 egress",
                    f"a model request: {what}, vs direct unsandboxed (ms added)",
                    median(added),
                    "ms",
                    median(theirs) * 1000,
                    None,
                    REQUEST_TARGET if how != "connect-each" else None,
                    spread(added, " ms"),
                    f"{median(mine) * 1000:.2f} ms against {median(theirs) * 1000:.2f} ms a request",
                )
            )
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)
    return rows


def _starts(settings: Settings) -> list[Row]:
    from crewbridge.sandbox import MECHANISM_ENV, Sandboxing, State, spawn
    from crewbridge.sandbox.allowlist import AllowList

    rows: list[Row] = []
    work = Path(tempfile.mkdtemp(prefix="crew-bench-egress-"))
    try:
        for mechanism in ("bwrap", "landlock"):
            sandboxing = Sandboxing({**os.environ, MECHANISM_ENV: mechanism})

            def start(gated: bool, sandboxing: Sandboxing = sandboxing) -> float:
                hosts = (lambda env: AllowList()) if gated else None
                box = sandboxing.cli("required", work, "query", lambda env: State(), hosts=hosts)
                begun = time.perf_counter()
                proc, launch = spawn(["true"], sandbox=box, env=None, cwd=work)
                proc.wait()
                launch.ended()
                return time.perf_counter() - begun

            mine, theirs, ratios = paired(lambda: start(True), lambda: start(False), settings.repeats(41, 11), warmup=3)
            rows.append(
                ratio_row(
                    "14 egress",
                    f"a sandboxed start (`true`), {mechanism}: with the network held vs open",
                    mine,
                    theirs,
                    ratios,
                    unit="ms",
                    scale=1000,
                    target=None,
                    note=f"{(median(mine) - median(theirs)) * 1000:.1f} ms added a start",
                )
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows


def _query(settings: Settings) -> list[Row]:
    from bench.harness import claude_env

    crew = str(installed() / "crew")
    with claude_env() as (mock, env, work):

        def timed(argv: list[str]) -> float:
            mock.script(ANSWER)
            result = run_timed(argv, env=env, cwd=work)
            if result.returncode != 0 or ANSWER not in result.stdout.decode():
                said = (result.stderr or result.stdout).decode(errors="replace").strip()[-300:]
                raise RuntimeError(f"{' '.join(argv)} failed (exit {result.returncode}): {said}")
            return result.wall

        values = interleaved(
            {
                "claude": lambda: timed(["claude", "-p", "say hello"]),
                "crew": lambda: timed([crew, "query", "@claude say hello"]),
                "open": lambda: timed([crew, "query", "--network", "open", "@claude say hello"]),
            },
            settings.repeats(9, 3),
        )
        if mock.problems:
            raise RuntimeError(f"the mock model server saw: {'; '.join(mock.problems)}")
    allowed = side_rows(
        "14 egress",
        "crew query (the allow-list, the default) vs claude -p (wall)",
        {"crew": values["crew"], "claude": values["claude"]},
        "claude",
        unit="s",
        scale=1,
        target=QUERY_TARGET,
    )
    opened = side_rows(
        "14 egress",
        "crew query --network open vs claude -p (wall)",
        {"crew": values["open"], "claude": values["claude"]},
        "claude",
        unit="s",
        scale=1,
        target=QUERY_TARGET,
    )
    return allowed + opened
