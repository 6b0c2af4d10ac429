"""A real tracing backend for the tests: Arize Phoenix, from a venv of its own (`.venv-phoenix`,
~860 MB: scripts/test makes it once and reuses it, so crew's own environment stays lean), started
once per test session on 127.0.0.1 at free ports with a temporary working folder, and stopped at
the end. Spans reach it over OTLP/HTTP (`/v1/traces`) or gRPC; its REST API lists a project's
spans (`GET /v1/projects/NAME/spans`)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
VENV = REPO / ".venv-phoenix"
START_WAIT = 180.0  # seconds Phoenix may take to answer (5-45 s measured here, more on a busy machine)


def binary() -> Path | None:
    found = VENV / "bin" / "phoenix"
    return found if found.exists() else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Phoenix:
    """One running Phoenix (`start()`, `stop()`)."""

    def __init__(self, program: Path) -> None:
        self.program = program
        self.root = Path(tempfile.mkdtemp(prefix="crew-phoenix-"))
        self.port, self.grpc_port = _free_port(), _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Phoenix:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PHOENIX_"))},
            "PHOENIX_WORKING_DIR": str(self.root),
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(self.port),
            "PHOENIX_GRPC_PORT": str(self.grpc_port),
            "PHOENIX_TELEMETRY_ENABLED": "false",
        }
        log = (self.root / "log").open("wb")
        self.proc = subprocess.Popen(
            [str(self.program), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + START_WAIT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"phoenix exited {self.proc.returncode}: {self.log()[-2000:]}")
            try:
                self.get("/v1/projects")
                return self
            except (OSError, urllib.error.URLError):
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"phoenix did not answer in {START_WAIT:.0f} s: {self.log()[-2000:]}")

    def log(self) -> str:
        return (self.root / "log").read_text(errors="replace")

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=10) as answer:
            return json.loads(answer.read())

    def spans(self, project: str, trace_id: str | None = None, want: int = 1, wait: float = 30.0) -> list[dict]:
        """The spans of `project` (of trace `trace_id` only, when given), once there are `want` of
        them (Phoenix writes what it receives in batches)."""
        deadline = time.monotonic() + wait
        found: list[dict] = []
        while time.monotonic() < deadline:
            try:
                found = self.get(f"/v1/projects/{project}/spans?limit=1000")["data"]
            except urllib.error.HTTPError as exc:
                if exc.code != 404:  # the project is made with its first span
                    raise
                found = []
            if trace_id is not None:
                found = [span for span in found if span["context"]["trace_id"] == trace_id]
            if len(found) >= want:
                return found
            time.sleep(0.5)
        return found

    def stop(self) -> None:
        try:
            if self.proc is not None and self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGTERM)
                try:
                    self.proc.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
