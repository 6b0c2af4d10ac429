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
    kill_group,
    median,
    paired,
    ratio_row,
    run_timed,
    spread,
    with_bytecode,
)
from bench.harness import claude_env

INITIALIZE_TARGET = 150.0  # ms
ASK_TARGET = 1.05
ANSWER = "Hello from the mock model."
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}


def run(settings: Settings) -> list[Row]:
    crew = str(installed() / "crew")
    rows = []
    with claude_env() as (mock, env, work):
        waits = [_mcp(crew, env, work, []) for _ in range(settings.repeats(21, 7) + 1)][1:]
        rows.append(
            Row(
                "7 mcp",
                "crew mcp: start to its answer to initialize (wall)",
                median(waits) * 1000,
                "ms",
                target=INITIALIZE_TARGET,
                spread=spread(waits, " ms", 1000),
            )
        )
        if settings.cli:
            ask = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "ask", "arguments": {"task": "@claude say hello"}},
            }

            def through_mcp() -> float:
                mock.script(ANSWER)
                return _mcp(crew, env, work, [ask])

            def query() -> float:
                mock.script(ANSWER)
                result = run_timed([crew, "query", "@claude say hello"], env=env, cwd=work)
                if result.returncode != 0 or ANSWER not in result.stdout.decode():
                    raise RuntimeError(f"crew query failed (exit {result.returncode})")
                return result.wall

            mine, theirs, ratios = paired(through_mcp, query, settings.repeats(9, 3))
            rows.append(
                ratio_row(
                    "7 mcp",
                    "ask @claude through crew mcp vs crew query (wall)",
                    mine,
                    theirs,
                    ratios,
                    unit="s",
                    scale=1,
                    target=ASK_TARGET,
                    note="the MCP side includes crew mcp's start and initialize",
                )
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
