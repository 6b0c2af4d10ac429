"""Transcript files as crew writes them, for the tests of what reads them (crew ui)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_run(
    directory: Path,
    run_id: str,
    *,
    agents: list[str] | None = None,
    task: str = "a task",
    end: str | None = "ok",
    pid: int | None = None,
    tokens: tuple[int, int] = (11, 7),
    cost: float | None = 0.001,
    started: str | None = None,
    **start: Any,
) -> str:
    """A transcript as crew writes one: start, a turn with one tool call, and (unless `end` is None)
    its answer and end event, each agent's usage summed there."""
    agents = agents or ["claude"]
    directory.mkdir(parents=True, exist_ok=True)
    started = (
        started or f"{run_id[:4]}-{run_id[4:6]}-{run_id[6:8]}T{run_id[9:11]}:{run_id[11:13]}:{run_id[13:15]}+00:00"
    )
    usage = {"input_tokens": tokens[0], "output_tokens": tokens[1], "cached_tokens": 0, "cost_usd": cost}
    events: list[dict[str, Any]] = [
        {"kind": "start", "time": started, "ms": 0.1, "run_id": run_id, "pid": pid or os.getpid(), "cwd": "/w"}
        | {"command": "query", "agents": agents, "task": task, **start},
        {"kind": "prompt", "agent": agents[0], "turn": 1, "text": "[crew tools] …"},
        {"kind": "tool_call", "agent": agents[0], "name": "crew:read_file", "input": {"path": "notes.txt"}},
        {"kind": "tool_result", "agent": agents[0], "name": "crew:read_file", "result": {"success": True, "data": 1}},
    ]
    if end is not None:
        events.append({"kind": "answer", "agent": agents[0], "text": "done"})
        events.append(
            {"kind": "end", "ms": 1234.5, "status": end, "tool_calls": 1, "errors": 0}
            | {"usage": {agent: {"turns": 1, **usage} for agent in agents}}
        )
    (directory / f"{run_id}.jsonl").write_text("".join(json.dumps(event) + "\n" for event in events))
    return run_id
