"""crew acp's figures: its start to its answer to `initialize` (goal ≤ 50 ms), and the time from
`session/prompt` (and from crew acp's start, through `initialize` and `session/new`) to the first
`agent_message_chunk` against `claude -p`'s time from its start to its first text delta, the real
claude on the same mock (goal ≤ 1.1×). crew is installed as users
install it (bench.common.installed); runs alternate, medians are printed.

    .venv/bin/python -m bench.acp [--runs N] [--before CHECKOUT]

--before CHECKOUT (a copy of another commit's sources: `git archive`) installs that one too and
times it in the same rounds, its rows marked [before].

The ACP client is this process: JSON lines on the pipes, no SDK (its import would be measured too)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.common import installed, kill_group, median, spread
from bench.harness import claude_env

INITIALIZE_TARGET = 50.0  # ms
CHUNK_TARGET = 1.1
ANSWER = "Hello from the mock model."


def _send(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def _until(proc: subprocess.Popen[bytes], done: Any) -> dict[str, Any]:
    assert proc.stdout is not None
    while line := proc.stdout.readline():
        message = json.loads(line)
        if done(message):
            return message
    raise RuntimeError("crew acp ended early")


def initialize(crew: str, env: dict[str, str], work: Path) -> tuple[float, float, float]:
    """Seconds from crew acp's start to its answer to initialize; and of those, the seconds crew spent
    on a CPU and waiting for one (the kernel's schedstat of the process once the answer came: on a
    loaded machine the wait is the load's, the time on a CPU crew's own)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [crew, "acp"], cwd=work, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        _send(proc, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
        _until(proc, lambda m: m.get("id") == 0)
        took = time.perf_counter() - start
        on_cpu, waiting, _ = Path(f"/proc/{proc.pid}/schedstat").read_text().split()
        return took, int(on_cpu) / 1e9, int(waiting) / 1e9
    finally:
        kill_group(proc.pid)
        proc.wait()


def first_chunk(crew: str, env: dict[str, str], work: Path, mock: Any) -> tuple[float, float]:
    """Seconds from session/prompt to the first agent_message_chunk (the session made just before),
    and from crew acp's start (initialize, session/new, session/prompt) to it."""
    mock.script(ANSWER)
    began = time.perf_counter()
    proc = subprocess.Popen(
        [crew, "acp"], cwd=work, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        _send(proc, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
        _until(proc, lambda m: m.get("id") == 0)
        _send(
            proc, {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(work), "mcpServers": []}}
        )
        sid = _until(proc, lambda m: m.get("id") == 1)["result"]["sessionId"]
        start = time.perf_counter()
        prompt = [{"type": "text", "text": "say hello"}]
        _send(
            proc,
            {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": sid, "prompt": prompt}},
        )
        _until(proc, lambda m: m.get("params", {}).get("update", {}).get("sessionUpdate") == "agent_message_chunk")
        ended = time.perf_counter()
        _until(proc, lambda m: m.get("id") == 2)
        return ended - start, ended - began
    finally:
        kill_group(proc.pid)
        proc.wait()


def claude_first_delta(env: dict[str, str], work: Path, mock: Any) -> float:
    """Seconds from `claude -p`'s start to its first text delta (stream-json, partial messages)."""
    mock.script(ANSWER)
    argv = ["claude", "-p", "say hello", "--output-format", "stream-json", "--verbose", "--include-partial-messages"]
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            event = json.loads(line)
            if event.get("type") == "stream_event" and event["event"].get("delta", {}).get("type") == "text_delta":
                return time.perf_counter() - start
        raise RuntimeError("claude printed no text delta")
    finally:
        kill_group(proc.pid)
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--before", type=Path, help="another checkout, timed in the same rounds")
    args = parser.parse_args()
    crews = {"": str(installed() / "crew")}
    if args.before is not None:
        crews[" [before]"] = str(installed(args.before.resolve()) / "crew")
    starts: dict[str, list[tuple[float, float, float]]] = {mark: [] for mark in crews}
    chunks: dict[str, list[tuple[float, float]]] = {mark: [] for mark in crews}
    deltas = []
    with claude_env() as (mock, env, work):
        for _ in range(args.runs + 1):  # the first of each is a warm-up
            for mark, crew in crews.items():
                starts[mark].append(initialize(crew, env, work))
                chunks[mark].append(first_chunk(crew, env, work, mock))
            deltas.append(claude_first_delta(env, work, mock))
    deltas = deltas[1:]
    for mark in crews:
        started, chunked = starts[mark][1:], chunks[mark][1:]
        prompt, whole = [c[0] for c in chunked], [c[1] for c in chunked]
        rows = [
            (
                "crew acp: start to its answer to initialize",
                [s[0] for s in started],
                f"goal <= {INITIALIZE_TARGET:g} ms",
            ),
            ("  of which on a CPU (crew's own work)", [s[1] for s in started], ""),
            ("  of which waiting for a CPU (the load)", [s[2] for s in started], ""),
            ("crew acp: session/prompt to first chunk", prompt, ""),
            ("crew acp: its start (initialize) to first chunk", whole, ""),
        ]
        for name, values, goal in rows:
            print(f"{name + mark:56} {median(values) * 1000:7.1f} ms  ({spread(values, ' ms', 1000)}) {goal}")
        print(f"{'ratio to claude -p' + mark:56} {median(prompt) / median(deltas):7.2f}x     (goal <= {CHUNK_TARGET}x)")
        print(f"{'ratio to claude -p, from crew acp start' + mark:56} {median(whole) / median(deltas):7.2f}x")
    print(
        f"{'claude -p: start to first text delta':56} {median(deltas) * 1000:7.1f} ms  ({spread(deltas, ' ms', 1000)})"
    )
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
