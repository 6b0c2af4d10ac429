"""Issue 15's measurements for gemini's native channel, against the tests' mock model server and the
real gemini (package.json's pin), the same task each time: the model reads notes.txt with crew's
read_file, then answers.

1. Where crew's MCP server runs, within ACP (`gemini --acp`, session/new's mcpServers): inside crew's
   own process over HTTP (what crew does), or as a `crew mcp` child that gemini starts over stdio.
   Per run: the tool turn as the mock sees it (the end of the reply that calls the tool → the next
   model request), the whole run, and whether crew's run (its progress events, its result) saw the call.
2. `crew query --tools-via text` against `--tools-via native`: model requests, characters of the
   first model request, wall time.

    PATH="$PWD/node_modules/.bin:$PATH" .venv/bin/python scripts/measure_gemini_native.py [RUNS]
"""

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from crewbridge.providers.base import Turn
from crewbridge.tools import builtin_registry

from clienv import cli_env
from crewbridge import providers
from crewbridge.config import AgentSpec
from crewbridge.conversations.gemini_acp import GeminiAcpConversation
from crewbridge.engine.loop import AgentLoop
from crewbridge.work.policy import Policy
from crewcli import CREW, tool_block
from mockserver import MockServer, tool_call

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
SECRET, ANSWER, TASK = "the launch code is 7-4-1", "The code is 7-4-1.", "what does notes.txt say?"


class StdioConversation(GeminiAcpConversation):
    """crew's MCP server as a `crew mcp` child of gemini's, over stdio: outside crew's run."""

    def _serve(self):
        return {"name": "crew", "command": CREW[0], "args": [*CREW[1:], "mcp"], "env": []}


def loop_run(conversation_class, mock, env, work):
    mock.requests.clear()
    mock.script(tool_call("read_file", {"path": "notes.txt"}), ANSWER)
    seen = []
    start = time.perf_counter()
    conversation = conversation_class(providers.load("gemini"), Turn(prompt="", native=True), cwd=work, env=env)
    loop = AgentLoop(
        "gemini",
        conversation,
        builtin_registry(),
        Policy(AgentSpec("gemini", "gemini"), "query"),
        workdir=work,
        timeout=90,
        on_progress=lambda p: seen.append(p.kind),
    )
    result = loop.run(TASK)
    wall = time.perf_counter() - start
    assert result.answer == ANSWER, result.answer
    first, second = mock.requests[:2]
    assert SECRET in second.text()
    return {
        "gap": second.received - first.ended,
        "wall": wall,
        "seen": "call" in seen and "result" in seen and bool(result.tool_calls),
    }


def crew_run(via, mock, env, work):
    mock.requests.clear()
    call = (
        tool_call("read_file", {"path": "notes.txt"})
        if via == "native"
        else tool_block("crew:read_file", path="notes.txt")
    )
    mock.script(call, ANSWER)
    start = time.perf_counter()
    done = subprocess.run(
        [*CREW, "query", "--tools-via", via, f"@gemini {TASK}"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    wall = time.perf_counter() - start
    assert done.returncode == 0 and ANSWER in done.stdout, done.stderr
    return {
        "requests": len(mock.requests),
        "chars": len(json.dumps(mock.requests[0].body)),
        "wall": wall,
        "gap": mock.requests[1].received - mock.requests[0].ended,
    }


def show(name, runs, *keys):
    parts = []
    for key in keys:
        values = [run[key] for run in runs]
        if key in ("gap", "wall"):
            scale, unit = (1000, "ms") if key == "gap" else (1, "s")
            parts.append(
                f"{key} median {statistics.median(values) * scale:.{0 if scale > 1 else 2}f} {unit} "
                f"(min {min(values) * scale:.{0 if scale > 1 else 2}f}, "
                f"max {max(values) * scale:.{0 if scale > 1 else 2}f})"
            )
        else:
            parts.append(f"{key} {sorted(set(values))}")
    print(f"{name:<28} n={len(runs)}  " + "  ".join(parts))


base = Path(tempfile.mkdtemp(prefix="crew-measure-gemini-"))
try:
    with MockServer() as mock:
        env = {**cli_env("gemini", mock.url, base / "home"), "XDG_STATE_HOME": str(base / "state")}
        work = base / "work"
        work.mkdir()
        (work / "notes.txt").write_text(SECRET + "\n")
        loop_run(GeminiAcpConversation, mock, env, work)  # warm the disk caches
        runs = {"http": [], "stdio": []}
        for _ in range(RUNS):  # alternated: the machine's load falls on both alike
            runs["http"].append(loop_run(GeminiAcpConversation, mock, env, work))
            runs["stdio"].append(loop_run(StdioConversation, mock, env, work))
        show("ACP, in-process HTTP MCP", runs["http"], "gap", "wall", "seen")
        show("ACP, stdio `crew mcp` child", runs["stdio"], "gap", "wall", "seen")
        runs = {"text": [], "native": []}
        for _ in range(RUNS):
            for via in runs:
                runs[via].append(crew_run(via, mock, env, work))
        for via, measured in runs.items():
            show(f"crew query --tools-via {via}", measured, "requests", "chars", "gap", "wall")
        assert not mock.problems, mock.problems
finally:
    shutil.rmtree(base, ignore_errors=True)
