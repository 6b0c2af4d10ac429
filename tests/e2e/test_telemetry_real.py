"""crew's traces in a real tracing backend (Arize Phoenix, started by the tests on 127.0.0.1), from
runs of the real CLIs against the mock model server: the span tree and its attributes, claude's own
spans nested under crew's agent span, the tokens and cost `crew log` sums, an editor's trace
continued over ACP, an MCP client's over `ask`, a review's rounds, and a collector that never
answers costing a run nothing but the bound (and given the user's headers), spans over gRPC too."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from test_acp_real import acp_client

from clienv import cli_env as build_env
from clienv import require_cli
from crewbridge.record.trace import trace_of_batch
from crewcli import CREW, run_crew, tool_block
from gitrepo import make_repo
from mockserver import MockServer, reply
from sockets import stop_listening

pytestmark = pytest.mark.e2e

USAGE = {"input_tokens": 100, "output_tokens": 10, "cached_tokens": 40}
EDITOR_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
EDITOR_SPAN = "00f067aa0ba902b7"


def traced(env: dict[str, str], phoenix: Any, project: str) -> dict[str, str]:
    """`env` with crew's telemetry pointed at Phoenix, its spans in `project`."""
    return {
        **env,
        "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.url,
        "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}",
    }


def with_claude_telemetry(env: dict[str, str]) -> dict[str, str]:
    """claude exporting its own traces (DESIGN.md: 2.1.197 honours TRACEPARENT then)."""
    env = {k: v for k, v in env.items() if k != "DISABLE_TELEMETRY"}
    return {
        **env,
        "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
        "CLAUDE_CODE_ENHANCED_TELEMETRY_BETA": "1",
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_TRACES_EXPORT_INTERVAL": "500",
    }


def tree(spans: list[dict]) -> dict[str, list[dict]]:
    """Spans by their parent's id."""
    children: dict[str, list[dict]] = {}
    for span in spans:
        children.setdefault(span.get("parent_id") or "", []).append(span)
    return children


def by_name(spans: list[dict], name: str) -> list[dict]:
    return [span for span in spans if span["name"] == name]


def record_of(cwd: Path, env: dict[str, str]) -> list[dict]:
    shown = run_crew(["log", "show", "--json", "last"], env=env, cwd=cwd)
    return [json.loads(line) for line in shown.stdout.splitlines()]


def test_a_two_agent_run_is_one_trace_with_claudes_own_spans_under_its_agent_span(
    tmp_path, mock_server, workdir, notes, phoenix
):
    require_cli("claude"), require_cli("codex")
    project = f"two-{uuid.uuid4().hex[:8]}"
    with MockServer() as codex_mock:
        env = {
            **build_env("claude", mock_server.url, tmp_path / "home"),
            **build_env("codex", codex_mock.url, tmp_path / "home"),
        }
        env = traced(with_claude_telemetry(env), phoenix, project)
        mock_server.script(
            reply(tool_block("crew:read_file", path="notes.txt"), **USAGE), reply("Claude: 7-4-1.", **USAGE)
        )
        codex_mock.script(reply("Codex: nothing to read.", **USAGE))
        done = run_crew(["query", "@claude @codex what does notes.txt say?"], env=env, cwd=workdir)
    assert done.returncode == 0, done.stderr
    events = record_of(workdir, env)
    start = events[0]
    trace_id = start["trace"]
    spans = phoenix.spans(project, trace_id, want=6)
    ours = [span for span in spans if span["name"].startswith(("invoke_", "execute_tool"))]
    children = tree(spans)
    [run] = by_name(spans, "invoke_workflow crew query")
    assert run["context"]["span_id"] == start["span"] and not run.get("parent_id")
    assert run["attributes"]["crew.run.id"] == start["run"]
    assert run["attributes"]["gen_ai.operation.name"] == "invoke_workflow"
    agents = {span["attributes"]["gen_ai.agent.name"]: span for span in children[start["span"]]}
    assert set(agents) == {"claude", "codex"}
    parts = {e["agent"]: e for e in events if e["kind"] == "part"}
    for name, provider in (("claude", "anthropic"), ("codex", "openai")):
        span = agents[name]
        assert span["name"] == f"invoke_agent {name}"
        assert span["context"]["span_id"] == parts[name]["span"]
        assert span["attributes"]["gen_ai.provider.name"] == provider
        session = next(
            e["session"] for e in events if e["kind"] == "session" and e["agent"] == name and e.get("session")
        )
        assert span["attributes"]["gen_ai.conversation.id"] == session
    [tool] = by_name(ours, "execute_tool crew:read_file")
    assert tool["parent_id"] == parts["claude"]["span"]
    call = next(e for e in events if e["kind"] == "call")
    assert tool["attributes"]["gen_ai.tool.call.id"] == call["call"]
    assert tool["attributes"]["crew.decision"] == "allowed"
    assert notes not in json.dumps(spans)  # no file content without the opt-in

    # claude's own spans: its interaction takes crew's agent span as parent (TRACEPARENT)
    own = [span for span in spans if span["name"].startswith("claude_code.")]
    interactions = by_name(own, "claude_code.interaction")
    assert interactions, [span["name"] for span in spans]
    assert {span["parent_id"] for span in interactions} == {parts["claude"]["span"]}

    # the tokens and cost of each agent: as `crew log --by agent` sums them
    rows = run_crew(["log", "--since", "1d", "--by", "agent", "--json"], env=env, cwd=workdir).stdout.splitlines()
    for row in map(json.loads, rows):
        span = agents[row["agent"]]["attributes"]
        assert span["gen_ai.usage.input_tokens"] == row["input_tokens"]
        assert span["gen_ai.usage.output_tokens"] == row["output_tokens"]
        assert span.get("crew.cost.usd") == row["cost_usd"]
        assert span.get("llm.cost.total") == row["cost_usd"]
    assert agents["claude"]["attributes"]["crew.cost.usd"] > 0  # claude reports its own


def test_an_editors_prompt_continues_the_editors_trace(tmp_path, mock_server, workdir, phoenix):
    """The editor (the ACP TypeScript SDK's client) sends its traceparent in the prompt's _meta."""
    require_cli("claude")
    project = f"acp-{uuid.uuid4().hex[:8]}"
    env = traced(build_env("claude", mock_server.url, tmp_path / "home"), phoenix, project)
    mock_server.script(reply("Hello from the editor's run.", **USAGE))
    meta = {"traceparent": f"00-{EDITOR_TRACE}-{EDITOR_SPAN}-01", "tracestate": "editor=1"}
    seen = acp_client({"prompts": [{"text": "@claude hi", "meta": meta}]}, env, workdir)
    assert seen["stops"] == ["end_turn"]
    spans = phoenix.spans(project, EDITOR_TRACE, want=2)
    [run] = by_name(spans, "invoke_workflow crew acp")
    assert run["parent_id"] == EDITOR_SPAN
    assert run["attributes"]["crew.parent.session"] == seen["sessionId"]
    [agent] = by_name(spans, "invoke_agent claude")
    assert agent["parent_id"] == run["context"]["span_id"]
    start = record_of(workdir, env)[0]
    assert start["parent"]["traceparent"] == meta["traceparent"] and start["trace"] == EDITOR_TRACE


def test_a_collector_that_never_answers_costs_a_run_only_the_bound(tmp_path, mock_server, workdir):
    require_cli("claude")
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    held: list[socket.socket] = []

    heard = bytearray()

    def accept() -> None:  # takes each connection, reads what it is sent and never answers
        while True:
            try:
                conn = silent.accept()[0]
                held.append(conn)
                conn.settimeout(5)
                heard.extend(conn.recv(65536))
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    env = {
        **build_env("claude", mock_server.url, tmp_path / "home"),
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{silent.getsockname()[1]}",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "60",  # the SDK's own would wait a minute: crew's bound ends it first
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20t0ken,x-team=crew",  # the user's, as the spec writes them
    }
    mock_server.script(reply("Done.", **USAGE))
    began = time.monotonic()
    try:
        done = run_crew(["query", "@claude hi"], env=env, cwd=workdir)
    finally:
        stop_listening(silent)
        for conn in held:
            conn.close()
    took = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    assert "Done." in done.stdout
    assert held, "crew never tried to send its spans"
    head = bytes(heard).split(b"\r\n\r\n")[0].lower()
    assert head.startswith(b"post /v1/traces ") and b"\r\nauthorization: bearer t0ken" in head
    assert b"\r\nx-team: crew" in head and b"application/x-protobuf" in head
    assert took < 30, f"crew took {took:.1f} s: the exit bound (2 s) did not hold against a silent collector"


def test_with_telemetry_off_nothing_of_it_loads(tmp_path, mock_server, workdir):
    """Python's import log of the whole `crew query` (PYTHONPROFILEIMPORTTIME): no OpenTelemetry and
    none of crew's exporter without an endpoint; both with one (the log would show them)."""
    require_cli("claude")
    env = {**build_env("claude", mock_server.url, tmp_path / "home"), "PYTHONPROFILEIMPORTTIME": "1"}

    def imported(run_env: dict[str, str]) -> set[str]:
        mock_server.script(reply("Done.", **USAGE))
        done = run_crew(["query", "@claude hi"], env=run_env, cwd=workdir)
        assert done.returncode == 0 and "Done." in done.stdout, done.stderr[-2000:]
        return {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}

    off = imported(env)
    assert "crewbridge.engine.loop" in off  # the log is there
    assert not {name for name in off if name.startswith(("opentelemetry", "crewbridge.telemetry."))}
    on = imported({**env, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})  # nothing listens: sent nowhere
    assert {"opentelemetry.sdk.trace", "crewbridge.telemetry.exporter", "crewbridge.telemetry.spans"} <= on


def test_spans_reach_the_collector_over_grpc_when_the_protocol_says_so(tmp_path, mock_server, workdir, phoenix):
    require_cli("claude")
    project = f"grpc-{uuid.uuid4().hex[:8]}"
    env = {
        **traced(build_env("claude", mock_server.url, tmp_path / "home"), phoenix, project),
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{phoenix.grpc_port}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
    }
    mock_server.script(reply("Sent by gRPC.", **USAGE))
    done = run_crew(["query", "@claude hi"], env=env, cwd=workdir)
    assert done.returncode == 0 and "telemetry" not in done.stderr, done.stderr
    start = record_of(workdir, env)[0]
    spans = phoenix.spans(project, start["trace"], want=2)
    [agent] = by_name(spans, "invoke_agent claude")
    assert agent["parent_id"] == start["span"]
    assert agent["attributes"]["gen_ai.usage.input_tokens"] > 0


def test_an_mcp_clients_ask_continues_the_clients_trace(tmp_path, mock_server, workdir, phoenix):
    """The MCP SDK's client sends its trace context in the ask's params._meta (MCP's semantic conventions)."""
    require_cli("claude")
    project = f"mcp-{uuid.uuid4().hex[:8]}"
    env = traced(build_env("claude", mock_server.url, tmp_path / "home"), phoenix, project)
    mock_server.script(reply("Asked and answered.", **USAGE))
    server = StdioServerParameters(command=CREW[0], args=[*CREW[1:], "mcp"], env=env, cwd=workdir)
    meta = {"traceparent": f"00-{EDITOR_TRACE.replace('4', '5')}-{EDITOR_SPAN}-01"}

    async def main() -> Any:
        async with stdio_client(server) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            return await client.call_tool("ask", {"task": "@claude hi"}, meta=meta)

    answer = anyio.run(main)
    assert not answer.is_error and "Asked and answered." in answer.content[0].text
    trace_id = EDITOR_TRACE.replace("4", "5")
    spans = phoenix.spans(project, trace_id, want=2)
    [run] = by_name(spans, "invoke_workflow crew query")
    assert run["parent_id"] == EDITOR_SPAN
    [agent] = by_name(spans, "invoke_agent claude")
    assert agent["parent_id"] == run["context"]["span_id"]


def test_a_reviews_rounds_are_agent_spans_of_the_writer_and_each_reviewer_round(
    tmp_path, mock_server, workdir, phoenix
):
    require_cli("claude")
    make_repo(workdir, {"notes.txt": "deploy: Friday\n"})
    project = f"review-{uuid.uuid4().hex[:8]}"
    env = traced(build_env("claude", mock_server.url, tmp_path / "home"), phoenix, project)
    changes = {"path": "notes.txt", "line": 1, "severity": "high", "message": "say Tuesday"}
    mock_server.script(
        tool_block("crew:write_file", path="notes.txt", content="deploy: Monday\n"),
        "Set it.",
        tool_block("crew:verdict", verdict="changes", findings=[changes]),
        tool_block("crew:write_file", path="notes.txt", content="deploy: Tuesday\n"),
        "Fixed it.",
        tool_block("crew:verdict", verdict="approve"),
    )
    done = run_crew(["execute", "--review", "claude", "@claude set the deploy day"], env=env, cwd=workdir)
    assert done.returncode == 0, done.stderr
    start = record_of(workdir, env)[0]
    spans = phoenix.spans(project, start["trace"], want=8)
    [run] = by_name(spans, "invoke_workflow crew execute")
    agents = [span for span in spans if span["name"] == "invoke_agent claude"]
    roles = sorted((s["attributes"]["crew.review.role"], s["attributes"]["crew.review.round"]) for s in agents)
    assert roles == [("reviewer", 1), ("reviewer", 2), ("writer", 1)]
    assert {s["parent_id"] for s in agents} == {run["context"]["span_id"]}
    reviewers = {
        s["attributes"]["crew.review.round"]: s for s in agents if s["attributes"]["crew.review.role"] == "reviewer"
    }
    assert [reviewers[n]["attributes"]["crew.review.verdict"] for n in (1, 2)] == ["changes", "approve"]
    reviewer_spans = {s["context"]["span_id"] for s in reviewers.values()}
    verdict_calls = by_name(spans, "execute_tool crew:verdict")
    assert len(verdict_calls) == 2 and {s["parent_id"] for s in verdict_calls} == reviewer_spans


def test_a_batchs_repositories_are_runs_of_one_trace(tmp_path, mock_server, phoenix):
    require_cli("claude")
    repos = [make_repo(tmp_path / f"repo-{n}", {"notes.txt": f"repository {n}\n"}) for n in "ab"]
    write = tool_block("crew:write_file", path="todo.md", content="- ship it\n")
    mock_server.respond(lambda request: "Done." if '"success": true' in request.text() else write)
    project = f"batch-{uuid.uuid4().hex[:8]}"
    env = traced(build_env("claude", mock_server.url, tmp_path / "home"), phoenix, project)
    done = run_crew(
        ["batch", "--id", "traced", "--json", "@claude add todo.md", *map(str, repos)],
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    spans = phoenix.spans(project, trace_of_batch("traced"), want=4)
    runs = by_name(spans, "invoke_workflow crew execute")
    assert sorted(run["attributes"]["crew.parent.repo"] for run in runs) == sorted(map(str, repos))
    assert {run["attributes"]["crew.parent.batch"] for run in runs} == {"traced"}
    agents = by_name(spans, "invoke_agent claude")
    assert {agent["parent_id"] for agent in agents} == {run["context"]["span_id"] for run in runs}
