"""Egress by allow-list, with the real claude, gemini and codex (`--sandbox required`): the agent's
own shell (claude's Bash, gemini's run_shell_command, codex's exec_command) and crew's run_command
try to reach a loopback service the test runs (not the mock), the same service at the machine's
private address, the cloud metadata address and this machine's name, directly and through
the proxy the sandbox names; none of it reaches anything, each refusal through the proxy is in the
run's record (and on stderr under -v) with the process that asked, the model API answers all the
while, and a host crew.yaml lists is reached. With --network open the same attack reaches the
service: the check can fail."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from crewbridge.sandbox import MECHANISM_ENV
from crewcli import processes_in, run_crew, tool_block
from mockserver import tool_call

pytestmark = pytest.mark.e2e

SHELL = {
    "claude": (lambda cmd: tool_call("Bash", {"command": cmd}), []),
    "gemini": (lambda cmd: tool_call("run_shell_command", {"command": cmd}), ["--tools-via", "native"]),
    "codex": (lambda cmd: tool_call("exec_command", {"cmd": cmd}), []),
}
MODEL = {"codex": ":gpt-5.5"}  # the model whose tools include exec_command
SECRET = "the-service-s-secret-4242"


class Service:
    """An HTTP service on every address of this machine (0.0.0.0) that answers `says` and records
    each path asked: by default what an agent must not reach."""

    def __init__(self, says: str = SECRET) -> None:
        self.paths: list[str] = []
        service = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                service.paths.append(self.path)
                body = f"{says} {self.path}\n".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def service() -> Iterator[Service]:
    running = Service()
    yield running
    running.close()


def private_address() -> str:
    """This machine's own address on its network (where the service answers too): the source
    address of its route outward (a UDP socket's connect sends nothing)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("10.255.255.254", 9))
        address = probe.getsockname()[0]
    except OSError as exc:
        pytest.fail(f"this machine has no route outward, so no address of its own on a network to attack ({exc})")
    finally:
        probe.close()
    assert not address.startswith("127."), address
    return address


def attack(port: int, address: str, *, through_proxy: bool) -> str:
    """The shell command: the service directly (loopback, the machine's address), and, through the
    proxy the sandbox names, the service at that address, the metadata address, this machine's
    name."""
    direct = [f"http://127.0.0.1:{port}/loopback", f"http://{address}:{port}/private"]
    proxied = [
        f"http://{address}:{port}/proxied",
        "http://169.254.169.254/latest/meta-data/",
        f"http://{socket.gethostname()}:{port}/name",
    ]
    lines = [f"curl -s -m 5 --noproxy '*' {url}" for url in direct]
    lines += [f"curl -s -m 5 {url}" for url in proxied] if through_proxy else []
    return "; ".join(lines) + '; echo ATTACK""-DONE'


def user_config(env: dict[str, str], cli: str, allowed: list[str]) -> None:
    """The user's crew.yaml (trusted): the agent's commands may use the network (sandbox_network),
    and `allowed` hosts are listed."""
    folder = Path(env["XDG_CONFIG_HOME"]) / "crewbridge"
    folder.mkdir(parents=True, exist_ok=True)
    listed = json.dumps(allowed)
    (folder / "crew.yaml").write_text(f"network:\n  allow: {listed}\nagents:\n  {cli}:\n    sandbox_network: true\n")


def egress_records(env: dict[str, str]) -> list[dict]:
    """The `egress` records of every run's transcript."""
    runs = Path(env["XDG_STATE_HOME"]) / "crewbridge" / "runs"
    records = [json.loads(line) for path in runs.glob("*.jsonl") for line in path.read_text().splitlines()]
    return [record for record in records if record.get("kind") == "egress"]


@pytest.mark.parametrize("via", ["own shell", "run_command"])
def test_an_agent_reaches_only_its_model_api_and_the_listed_hosts(
    cli, via, cli_env, mock_server, service, workdir, tmp_path
):
    address = private_address()
    listed = Service("LISTED-SERVICE")  # a host crew.yaml lists: reached
    try:
        env = cli_env(cli)
        user_config(env, cli, [f"127.0.0.1:{listed.port}"])
        command = attack(service.port, address, through_proxy=True) + (
            f"; curl -s -m 5 http://127.0.0.1:{listed.port}/listed"
        )
        shell, args = SHELL[cli]
        step = shell(command) if via == "own shell" else tool_block("crew:run_command", command=command)
        mock_server.script(step, "Done.")
        done = run_crew(
            ["execute", "--sandbox", "required", "-v", *args, f"@{cli}{MODEL.get(cli, '')} look around"],
            env=env,
            cwd=workdir,
        )
        assert processes_in(tmp_path) == []
    finally:
        listed.close()
    assert (done.returncode, done.stdout) == (0, "Done.\n"), done.stderr  # the model API answered throughout
    assert service.paths == []  # nothing reached the service, at any address
    assert listed.paths == ["/listed"], mock_server.requests[-1].text()[-1500:]
    seen = mock_server.requests[-1].text()  # what the command printed, as the model read it
    assert "ATTACK-DONE" in seen and SECRET not in seen and f"crew refused {address}:{service.port}" in seen
    assert "LISTED-SERVICE /listed" in seen
    refused = {(record["host"], record["port"]) for record in egress_records(env)}
    assert {(address, service.port), ("169.254.169.254", 80), (socket.gethostname().lower(), service.port)} <= refused
    assert all(record["process"] and "curl" in record["process"] for record in egress_records(env))
    for host, port in ((address, service.port), ("169.254.169.254", 80)):
        assert f"crew: @{cli}: network: refused {host}:{port} (by pid " in done.stderr  # -v shows each


@pytest.mark.parametrize("via", ["own shell", "run_command"])
def test_with_the_network_open_the_same_attack_reaches_the_service(
    cli, via, cli_env, mock_server, service, workdir, tmp_path
):
    address = private_address()
    env = cli_env(cli)
    user_config(env, cli, [])
    shell, args = SHELL[cli]
    command = attack(service.port, address, through_proxy=False)  # the tests' proxy is the mock
    step = shell(command) if via == "own shell" else tool_block("crew:run_command", command=command)
    mock_server.script(step, "Done.")
    done = run_crew(
        ["execute", "--sandbox", "required", "--network", "open", *args, f"@{cli}{MODEL.get(cli, '')} look around"],
        env=env,
        cwd=workdir,
    )
    assert processes_in(tmp_path) == []
    assert (done.returncode, done.stdout) == (0, "Done.\n"), done.stderr
    assert sorted(service.paths) == ["/loopback", "/private"]
    assert SECRET in mock_server.requests[-1].text()
    assert "crew: the network is open (--network open): the CLIs and all they start reach any host\n" in done.stderr


@pytest.mark.parametrize("mechanism", ["bwrap", "landlock"])
def test_each_mechanism_holds_the_clis_shell_to_the_allow_list(
    mechanism, cli_env, mock_server, service, workdir, tmp_path
):
    """The same attack with claude's shell, each mechanism forced: under Landlock the kernel refuses
    a TCP connection to any port but the proxy's and the carried ones, and seccomp every UDP socket."""
    address = private_address()
    env = {**cli_env("claude"), MECHANISM_ENV: mechanism}
    user_config(env, "claude", [])
    send = f"socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('{address}', 9))"
    udp = f'python3 -c "import socket; {send}" && echo UDP""-SENT'
    mock_server.script(SHELL["claude"][0](attack(service.port, address, through_proxy=True) + "; " + udp), "Done.")
    done = run_crew(["execute", "--sandbox", "required", "@claude look around"], env=env, cwd=workdir)
    assert processes_in(tmp_path) == []
    assert (done.returncode, done.stdout) == (0, "Done.\n"), done.stderr
    assert service.paths == []
    seen = mock_server.requests[-1].text()
    assert "ATTACK-DONE" in seen and SECRET not in seen and "UDP-SENT" not in seen
    assert {("169.254.169.254", 80), (address, service.port)} <= {(r["host"], r["port"]) for r in egress_records(env)}
