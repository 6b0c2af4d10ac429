"""crew as an MCP server (`crew mcp`): crew's tools under their plain names, and `ask`, `job` and
`cancel` to run agents, over stdio (a JSON-RPC message a line) or streamable HTTP.

JSON-RPC is written here rather than taken from the official SDK: the SDK's server takes about a
second to import (pydantic, anyio, starlette), several times the time `crew mcp` may take to answer
`initialize`, while the few methods a tools-only server answers fit in this module. The tests drive
it with the SDK's own client and with the real claude, gemini and codex.
"""

from __future__ import annotations

import itertools
import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.config import AgentSpec, Config
from crewbridge.errors import CrewError, UsageError
from crewbridge.modes import Mode
from crewbridge.native import rpc_error, tool_content
from crewbridge.version import __version__

# For start-up speed: `initialize` is answered before the engine is imported; it loads when the
# client first lists or calls a tool.
if TYPE_CHECKING:
    from crewbridge.api import Stop
    from crewbridge.asking import Asked, Asker
    from crewbridge.caller import Caller
    from crewbridge.loop import Progress
    from crewbridge.registry import ToolContext, ToolRegistry
    from crewbridge.transcript import Transcript

PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")  # oldest to newest
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
SERVER_TOOLS = ("ask", "job", "cancel")
EMPTY_LISTS = {
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
    "prompts/list": "prompts",
}
SHOWN_PROGRESS = 50  # progress lines a job keeps for `job`
CLIENT = "mcp"  # how the MCP client is named in transcripts and hooks, unless --policy-of names an agent

Send = Callable[[dict[str, Any]], None]


class RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Job:
    """An ask running in the background (`ask` with background: true)."""

    id: str
    task: str
    stop: Stop
    status: str = "running"  # running | done | failed | cancelled
    progress: list[str] = field(default_factory=list)
    asked: Asked | None = None
    error: str | None = None

    def view(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "status": self.status, "task": self.task}
        out["progress"] = self.progress[-SHOWN_PROGRESS:]
        if self.asked is not None:
            out["answer"] = self.asked.text
            out["result"] = self.asked.data
        if self.error is not None:
            out["error"] = self.error
        return out


class McpServer:
    """The protocol, apart from its transport: `respond` answers one message."""

    def __init__(
        self,
        config: Config,
        workdir: Path,
        *,
        execute: bool = False,
        policy_of: str | None = None,
        depth: int | None = None,
        max_depth: int = 1,
        timeout: float = 300.0,
        max_turns: int = 10,
    ) -> None:
        self.config = config
        self.workdir = workdir
        self.mode: Mode = "execute" if execute else "query"
        self.client = config.agent(policy_of) if policy_of else AgentSpec(id=CLIENT, provider=CLIENT)
        self.depth, self.max_depth = depth, max_depth  # depth None: CREW_ASK_DEPTH says
        self.timeout, self.max_turns = timeout, max_turns
        self._lock = threading.Lock()
        self._running: dict[Any, Stop] = {}  # request id → the Stop of its ask
        self._jobs: dict[str, Job] = {}
        self._closed = False
        self._tools: tuple[ToolRegistry, Caller, ToolContext, Transcript] | None = None

    # -- messages -------------------------------------------------------------------------------

    def handle_line(self, line: bytes | str, send: Send, call_async: bool = True) -> None:
        """Take one line of the stdio channel: answer it through `send`. A tool call is answered
        from a thread of its own when `call_async`; a line that is not JSON-RPC gets an error."""
        try:
            message = json.loads(line)
        except ValueError as exc:
            send(rpc_error(None, PARSE_ERROR, f"the line is not JSON ({exc}); send one JSON-RPC message a line"))
            return
        for one in message if isinstance(message, list) else [message]:
            if call_async and isinstance(one, dict) and one.get("method") == "tools/call" and "id" in one:
                threading.Thread(target=self._answer, args=(one, send), name="crew-mcp-call", daemon=True).start()
            else:
                self._answer(one, send)

    def _answer(self, message: Any, send: Send) -> None:
        response = self.respond(message, send)
        if response is not None:
            send(response)

    def respond(self, message: Any, notify: Send) -> dict[str, Any] | None:
        """The response to one message (None for a notification or a cancelled request); progress
        notifications for it go through `notify` meanwhile."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or "method" not in message:
            rid = message.get("id") if isinstance(message, dict) else None
            return rpc_error(rid, INVALID_REQUEST, "not a JSON-RPC 2.0 request: it needs jsonrpc '2.0' and a method")
        method, params, rid = message["method"], message.get("params") or {}, message.get("id")
        if "id" not in message:
            self._notification(method, params)
            return None
        if not isinstance(params, dict):
            return rpc_error(rid, INVALID_PARAMS, f"the params of {method} must be an object")
        try:
            if method == "tools/call":
                return self._tool_call(rid, params, notify)
            return {"jsonrpc": "2.0", "id": rid, "result": self._request(method, params)}
        except RpcError as exc:
            return rpc_error(rid, exc.code, str(exc))
        except CrewError as exc:
            return rpc_error(rid, INVALID_PARAMS, str(exc))
        except Exception as exc:  # a bug in crew: answered, never the end of the server
            return rpc_error(rid, INTERNAL_ERROR, f"internal error: {type(exc).__name__}: {exc}")

    def _notification(self, method: str, params: Any) -> None:
        if method == "notifications/cancelled" and isinstance(params, dict):
            with self._lock:
                stop = self._running.get(params.get("requestId"))
            if stop is not None:
                stop.set()

    def _request(self, method: str, params: dict[str, Any]) -> Any:
        if method == "initialize":
            asked = params.get("protocolVersion")
            return {
                "protocolVersion": asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1],
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "crew", "version": __version__},
                "instructions": "crew's tools work inside "
                f"{self.workdir}; `ask` runs other CLI agents (@claude, @gemini, @codex, …) on a task.",
            }
        if method in ("ping", "logging/setLevel"):
            return {}
        if method == "tools/list":
            return {"tools": self.tool_list()}
        if method in ("resources/list", "resources/templates/list", "prompts/list"):  # asked by some clients anyway
            key = {"resources/list": "resources", "resources/templates/list": "resourceTemplates"}.get(
                method, "prompts"
            )
            return {key: []}
        raise RpcError(METHOD_NOT_FOUND, f"method '{method}' is not served; crew mcp serves tools only")

    # -- tools ----------------------------------------------------------------------------------

    def tool_list(self) -> list[dict[str, Any]]:
        """crew's tools this mode offers, then ask, job and cancel."""
        from crewbridge.asking import TASK_PROPERTY

        registry = self._crew_tools()[0]
        listed = [
            {
                "name": spec.name,
                "description": spec.description,
                "inputSchema": spec.input_schema,
                "annotations": {"readOnlyHint": spec.read_only},
            }
            for spec in registry
        ]
        modes = ["query", "execute"] if self.mode == "execute" else ["query"]
        ask_schema = {
            "type": "object",
            "properties": {
                "task": TASK_PROPERTY,
                "mode": {
                    "type": "string",
                    "enum": modes,
                    "default": "query",
                    "description": "query: the agents may read (their own and crew's read-only tools); "
                    "execute: they may change files and run commands"
                    + ("" if self.mode == "execute" else " (needs `crew mcp --execute`)"),
                },
                "background": {
                    "type": "boolean",
                    "default": False,
                    "description": "Return a job id at once instead of waiting; follow it with `job`.",
                },
            },
            "required": ["task"],
            "additionalProperties": False,
        }
        id_schema = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
        return [
            *listed,
            {
                "name": "ask",
                "description": "Ask other CLI agents (@claude, @gemini, @codex, or any configured in "
                "crew.yaml) to do a task with crew's tools, and get each one's answer. Mentions lead the "
                "task: '@gemini what does notes.txt say?'; several run in parallel.",
                "inputSchema": ask_schema,
            },
            {
                "name": "job",
                "description": "The status, progress and, once done, the answers of a background ask.",
                "inputSchema": id_schema,
                "annotations": {"readOnlyHint": True},
            },
            {
                "name": "cancel",
                "description": "Stop a background ask and everything it started.",
                "inputSchema": id_schema,
            },
        ]

    def _crew_tools(self) -> tuple[ToolRegistry, Caller, ToolContext, Transcript]:
        """The tools this mode offers the client, and the one path their calls take (made once)."""
        with self._lock:
            if self._tools is None:
                from crewbridge.caller import Caller
                from crewbridge.hooks import Hooks
                from crewbridge.policy import Policy
                from crewbridge.registry import ToolContext
                from crewbridge.transcript import Transcript

                policy = Policy(self.client, self.mode)
                registry = policy.offered(self.config.registry())
                clash = next((name for name in SERVER_TOOLS if name in registry), None)
                if clash:
                    where = self.config.file_of(("tools", clash))
                    raise UsageError(f"a tool is named '{clash}', as crew mcp's own; rename it in {where}")
                transcript = (
                    Transcript.open(command="mcp", agents=[self.client.id], task="", secrets=self.config.provider_env())
                    if self.config.transcripts
                    else Transcript()
                )
                caller = Caller(
                    self.client.id, registry, policy, Hooks(self.config.hooks, workdir=self.workdir), transcript
                )
                self._tools = (registry, caller, ToolContext(self.workdir, registry=registry), transcript)
            return self._tools

    def _tool_call(self, rid: Any, params: dict[str, Any], notify: Send) -> dict[str, Any] | None:
        name, arguments = params.get("name"), params.get("arguments") or {}
        if not isinstance(name, str):
            raise RpcError(INVALID_PARAMS, "tools/call needs a tool name in params.name")
        token = (params.get("_meta") or {}).get("progressToken")
        if name in SERVER_TOOLS:
            from crewbridge.api import Stop

            stop = Stop()
            with self._lock:
                self._running[rid] = stop
            try:
                result = self._server_tool(name, arguments, _progress(notify, token), stop)
            finally:
                with self._lock:
                    self._running.pop(rid, None)
            if stop.is_set():
                return None  # cancelled: the client expects no answer
        else:
            registry, caller, ctx, _ = self._crew_tools()
            if name not in registry:
                raise RpcError(INVALID_PARAMS, self._unknown(name, registry))
            result = tool_content(caller.call(name, arguments, ctx))
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    def _unknown(self, name: str, registry: ToolRegistry) -> str:
        if self.mode == "query" and name in self.config.registry():
            return f"tool '{name}' changes files or runs commands; it is served by `crew mcp --execute` only"
        return registry.unknown_message(name).replace(registry.prefix + ":", "")

    def _server_tool(self, name: str, arguments: Any, progress: Callable[[str], None], stop: Stop) -> dict[str, Any]:
        if not isinstance(arguments, dict):
            return _content(f"{name}: arguments must be an object", error=True)
        if name == "ask":
            return self._ask(arguments, progress, stop)
        job_id = arguments.get("id")
        with self._lock:
            found = self._jobs.get(job_id) if isinstance(job_id, str) else None
            known = ", ".join(self._jobs) or "none yet"
        if found is None:
            return _content(f"no job '{job_id}'; jobs of this server: {known}", error=True)
        if name == "cancel" and found.status == "running":
            found.stop.set()
            found.status = "cancelled"
        return _content(json.dumps(found.view(), ensure_ascii=False, indent=1), structured=found.view())

    def _ask(self, arguments: dict[str, Any], progress: Callable[[str], None], stop: Stop) -> dict[str, Any]:
        problem = _ask_problem(arguments, self.mode)
        if problem:
            return _content(problem, error=True)
        from crewbridge.asking import Asker, current_depth

        task, mode = arguments["task"], arguments.get("mode", "query")
        depth = current_depth() if self.depth is None else self.depth
        asker = Asker(self.config, self.workdir, depth, self.max_depth, self.timeout, self.max_turns)
        try:
            asker.check(task)
        except CrewError as exc:
            return _content(str(exc), error=True)
        if arguments.get("background"):
            job = self._start_job(asker, task, mode)
            return _content(
                f'job {job.id} started; call job with {{"id": "{job.id}"}} for its progress and answers, '
                "cancel to stop it",
                structured=job.view(),
            )
        answer = asker.ask(task, mode, on_progress=_reporter(progress), stop=stop)
        return _content(answer.text, error=answer.failed, structured=answer.data)

    def _start_job(self, asker: Asker, task: str, mode: Mode) -> Job:
        from crewbridge.api import Stop

        job = Job(uuid.uuid4().hex[:8], task, Stop())

        def work() -> None:
            try:
                job.asked = asker.ask(task, mode, on_progress=_reporter(job.progress.append), stop=job.stop)
                if job.status == "running":
                    job.status = "failed" if job.asked.failed else "done"
            except Exception as exc:  # the job reports it; the server goes on
                job.error, job.status = str(exc), "failed"

        with self._lock:
            if self._closed:
                raise UsageError("the server is shutting down; no new job starts")
            self._jobs[job.id] = job
        threading.Thread(target=work, name=f"crew-job-{job.id}", daemon=True).start()
        return job

    def close(self) -> None:
        """Stop every ask and job (their CLIs end), end the processes tools started, close the transcript."""
        with self._lock:
            self._closed = True
            stops = [*self._running.values(), *(job.stop for job in self._jobs.values())]
            tools = self._tools
        for stop in stops:
            stop.set()
        if tools is not None:
            tools[2].groups.end()
            tools[3].close("ok")


def _ask_problem(arguments: dict[str, Any], mode: Mode) -> str | None:
    task = arguments.get("task")
    if not isinstance(task, str) or not task.strip():
        return "ask needs a task: '@agent what to do', e.g. '@gemini what does notes.txt say?'"
    unknown = sorted(set(arguments) - {"task", "mode", "background"})
    if unknown:
        return f"ask takes task, mode and background, not {', '.join(unknown)}"
    if arguments.get("mode", "query") not in ("query", "execute"):
        return f"mode '{arguments['mode']}' is not query or execute"
    if arguments.get("mode") == "execute" and mode != "execute":
        return "mode 'execute' needs the server started with `crew mcp --execute`; ask in query mode"
    if not isinstance(arguments.get("background", False), bool):
        return "background must be true or false"
    return None


def _progress(notify: Send, token: Any) -> Callable[[str], None]:
    """Send each message as a progress notification, when the client gave a token."""
    counter = itertools.count(1)

    def send(message: str) -> None:
        if token is not None:
            params = {"progressToken": token, "progress": next(counter), "message": message}
            notify({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})

    return send


def _reporter(report: Callable[[str], None]) -> Callable[[Progress], None]:
    """A run's turns, calls, results and answers as one-line messages."""

    def on_progress(event: Progress) -> None:
        if event.kind == "turn":
            report(f"@{event.agent} turn {event.text}")
        elif event.kind == "call" and event.call is not None:
            report(f"@{event.agent} calls {event.call.name} {json.dumps(event.call.input, ensure_ascii=False)[:200]}")
        elif event.kind == "result" and event.call is not None:
            result = event.call.result
            report(f"@{event.agent} {event.call.name} " + ("ok" if result.success else f"failed: {result.error}"))
        elif event.kind == "answer":
            report(f"@{event.agent} answered")
        elif event.kind == "notice":
            report(f"@{event.agent}: {event.text}")

    return on_progress


def _content(text: str, *, error: bool = False, structured: dict[str, Any] | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": error}
    if structured is not None:
        result["structuredContent"] = structured
    return result
