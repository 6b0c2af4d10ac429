"""Figure 7: crew mcp. How long `crew mcp` (installed as users install it) takes from its start to its
answer to `initialize`; and `ask` through MCP against `crew query` for the same task, the real claude
against the mock model server, timed in pairs. The MCP client is this process (a few lines of
JSON-RPC on pipes), so the ask row holds crew mcp's start, its initialize and the ask."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from bench.common import (
    Row,
    Settings,
    installed,
    interleaved,
    kill_group,
    median,
    run_timed,
    side_rows,
    spread,
    with_bytecode,
)
from bench.harness import claude_env

INITIALIZE_TARGET = 40.0  # ms
ASK_TARGET = 1.02
ANSWER = "Hello from the mock model."
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}


def run(settings: Settings) -> list[Row]:
    crews = {side: str(installed(repo) / "crew") for side, repo in settings.sides().items()}
    rows = []
    with claude_env() as (mock, env, work):
        waits = interleaved(
            {
                side: lambda crew=crew: _mcp(crew, env, work, [])  # type: ignore[misc]
                for side, crew in crews.items()
            },
            settings.repeats(21, 7),
        )
        for side, took in waits.items():
            rows.append(
                Row(
                    "7 mcp",
                    "crew mcp: start to its answer to initialize (wall)" + ("" if side == "crew" else f" [{side}]"),
                    median(took) * 1000,
                    "ms",
                    target=INITIALIZE_TARGET,
                    spread=spread(took, " ms", 1000),
                )
            )
        if settings.cli:
            ask = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "ask", "arguments": {"task": "@claude say hello"}},
            }

            def through_mcp(crew: str) -> float:
                mock.script(ANSWER)
                return _mcp(crew, env, work, [ask])

            def query(crew: str) -> float:
                mock.script(ANSWER)
                result = run_timed([crew, "query", "@claude say hello"], env=env, cwd=work)
                if result.returncode != 0 or ANSWER not in result.stdout.decode():
                    raise RuntimeError(f"crew query failed (exit {result.returncode})")
                return result.wall

            measures = {}
            for side, crew in crews.items():
                measures[f"{side} query"] = lambda crew=crew: query(crew)  # type: ignore[misc]
                measures[side] = lambda crew=crew: through_mcp(crew)  # type: ignore[misc]
            values = interleaved(measures, settings.repeats(9, 3))
            for side in crews:
                rows += side_rows(
                    "7 mcp",
                    "ask @claude through crew mcp vs crew query (wall)",
                    {side: values[side], "query": values[f"{side} query"]},
                    "query",
                    unit="s",
                    scale=1,
                    target=ASK_TARGET,
                    note="the MCP side includes crew mcp's start and initialize",
                )
    return rows


def _mcp(crew: str, env: dict[str, str], work: Path, calls: list[dict]) -> float:
    """Seconds from starting `crew mcp` to its answer to the last message (initialize, then `calls`)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [crew, "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=with_bytecode(env),
        cwd=work,
        start_new_session=True,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        for message in (INITIALIZE, *calls):
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            proc.stdin.flush()
            answer = json.loads(proc.stdout.readline())
            if "error" in answer or answer.get("result", {}).get("isError"):
                raise RuntimeError(f"crew mcp answered {answer}")
        took = time.perf_counter() - start
        proc.stdin.close()
        proc.wait(timeout=30)
        return took
    finally:
        kill_group(proc.pid)
        proc.wait()
