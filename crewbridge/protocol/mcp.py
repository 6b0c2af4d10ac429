"""MCP's protocol, once for every MCP server crew runs: `crew mcp` (crewbridge.mcp.server), and the
tools-only McpTools that claude's SDK MCP server and the server gemini reaches over ACP answer. A
configuration (a subclass) says what is served: its tools and how a call runs. The core answers
every message: it negotiates the version, refuses requests before `initialize` (ping apart),
cancels any call, keeps each client's state in its session, accepts a client's responses
silently, refuses batches (the 2025-06-18 revision removed them) and gives error codes that say
what happened (-32602 only for bad params).

JSON-RPC is crew's own (crewbridge.protocol.jsonrpc, shared with the live CLIs) rather than the official
SDK's: the SDK's server takes about a second to import (pydantic, anyio, starlette), several times
the time `crew mcp` may take to answer `initialize`, while the few methods a tools-only server
answers fit in this module. The tests drive it with the SDK's own client, the official conformance
suite and the real claude, gemini and codex.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from crewbridge.base.stop import Stop
from crewbridge.errors import CrewError
from crewbridge.protocol.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    Endpoint,
    Request,
    Route,
    RpcError,
    invalid,
    notification,
    read_message,
    refusal,
    request_id,
    valid_id,
)
from crewbridge.toolkit.native import SERVER, result_text
from crewbridge.version import __version__

if TYPE_CHECKING:
    from crewbridge.toolkit.native import Channel
    from crewbridge.toolkit.registry import Tool, ToolResult

__all__ = [  # the JSON-RPC names the transports and the tests take from here with the core's own
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "RpcError",
    "invalid",
    "read_message",
    "refusal",
    "request_id",
]

PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")  # oldest to newest
NOT_INITIALIZED = -32002  # implementation-defined codes (LSP uses -32002 for the same)
BUSY = -32001
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
NOTHING_LISTED = {  # asked by some clients whatever the capabilities say: answered with empty lists
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
    "prompts/list": "prompts",
}
SHOWN_PROGRESS = 50  # progress lines a job keeps for `job`

Send = Callable[[dict[str, Any]], None]


class Served(Protocol):
    """What a transport serves: McpCore, or crewbridge.mcp.server.McpServer (not imported:
    crewbridge.mcp.early sets up stdio before that loads)."""

    timeout: float

    def respond(self, message: Any, session: McpSession, notify: Send) -> dict[str, Any] | None: ...

    def close(self) -> None: ...


class Job:
    """Work a call left running in the background (`ask` with background: true), followed with `job`.
    (A plain class: dataclasses is not loaded before `crew mcp` answers initialize.)"""

    def __init__(self, id: str, task: str) -> None:
        self.id, self.task = id, task
        self.stop = Stop()
        self.status = "running"  # running | done | failed | cancelled
        self.progress: deque[str] = deque(maxlen=SHOWN_PROGRESS)
        self.outcome: dict[str, Any] = {}  # what it gave (an ask: answer and result)
        self.error: str | None = None
        self.thread: threading.Thread | None = None

    def view(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "status": self.status, "task": self.task, "progress": list(self.progress)}
        out.update(self.outcome)
        if self.error is not None:
            out["error"] = self.error
        return out


class McpSession:
    """One client's state: its protocol version (None until `initialize`), the requests it has
    running (each with the Stop its `notifications/cancelled` sets) and its jobs. Nothing of one
    session is reachable from another."""

    MAX_JOBS = 8  # jobs running at once
    KEPT_JOBS = 64  # finished jobs kept to be read; the oldest go first

    def __init__(self) -> None:
        self.id = os.urandom(16).hex()  # visible ASCII, as Mcp-Session-Id must be; not `secrets`: start-up speed
        self.version: str | None = None
        self.used = time.monotonic()
        self.closed = False
        self._lock = threading.Lock()
        self._running: dict[Any, Stop] = {}
        self._jobs: dict[str, Job] = {}

    def begin(self, rid: Any) -> Stop:
        """Note request `rid` as running: the Stop a cancellation of it sets."""
        stop = Stop()
        with self._lock:
            if rid in self._running:
                raise RpcError(INVALID_REQUEST, f"request id {rid!r} is already running in this session; use a new id")
            self._running[rid] = stop
            if self.closed:
                stop.set()
        return stop

    def end(self, rid: Any) -> None:
        with self._lock:
            self._running.pop(rid, None)

    def cancel(self, rid: Any) -> None:
        with self._lock:
            stop = self._running.get(rid)
        if stop is not None:
            stop.set()

    def busy(self) -> bool:
        """Whether a request or a job of this session is still running."""
        with self._lock:
            return bool(self._running) or any(job.status == "running" for job in self._jobs.values())

    def add_job(self, job: Job) -> str | None:
        """Keep `job` as this session's; why not, when too many run already or the session has ended."""
        with self._lock:
            if self.closed:
                return "the session has ended; no new job starts"
            if sum(other.status == "running" for other in self._jobs.values()) >= self.MAX_JOBS:
                return f"{self.MAX_JOBS} jobs are running already; wait for one (job) or stop one (cancel)"
            finished = [key for key, other in self._jobs.items() if other.status != "running"]
            for key in finished[: max(0, len(self._jobs) - self.KEPT_JOBS + 1)]:
                del self._jobs[key]
            self._jobs[job.id] = job
        return None

    def job(self, job_id: Any) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id) if isinstance(job_id, str) else None

    def job_ids(self) -> list[str]:
        with self._lock:
            return list(self._jobs)

    def close(self) -> None:
        """End the session: every running request and job is stopped (their CLIs and commands end)."""
        with self._lock:
            self.closed = True
            stops = [*self._running.values(), *(job.stop for job in self._jobs.values())]
        for stop in stops:
            stop.set()


class Call:
    """One tools/call, as a configuration runs it: its session, the Stop a cancellation sets, where
    its progress messages go, and its `_meta` (the client's trace context among it). (A plain
    class: a dataclass costs start-up time.)"""

    def __init__(
        self, session: McpSession, stop: Stop, progress: Callable[[str], None], meta: dict[str, Any] | None = None
    ) -> None:
        self.session, self.stop, self.progress = session, stop, progress
        self.meta = meta or {}


class McpCore:
    """MCP's protocol, apart from its transport. A subclass says what is served (tool_list,
    call_tool, instructions). `respond` answers one message of a session; `answer` one message of
    the core's own session, for a transport with a single client (claude's SDK MCP server)."""

    name = SERVER

    def __init__(self) -> None:
        self.session = McpSession()
        self.endpoint = Endpoint(
            routes={
                "initialize": Route(self._initialize),
                "ping": Route(lambda request, session, notify: {}),
                "logging/setLevel": Route(self._set_level),
                "tools/list": Route(lambda request, session, notify: {"tools": self.tool_list()}),
                "tools/call": Route(self._call),
                **{
                    method: Route(lambda request, session, notify: {NOTHING_LISTED[request.method]: []})
                    for method in NOTHING_LISTED
                },
            },
            unknown=lambda method: f"method '{method}' is not served; crew serves tools only",
        )

    def instructions(self) -> str | None:
        return None

    def tool_list(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def call_tool(self, name: str, arguments: dict[str, Any], call: Call) -> dict[str, Any]:
        """The result of tools/call of `name` (MCP's CallToolResult); RpcError for a request that
        cannot be served (an unknown tool: INVALID_PARAMS)."""
        raise NotImplementedError

    def answer(self, message: Any) -> dict[str, Any] | None:
        return self.respond(message, self.session, nowhere)

    def respond(self, message: Any, session: McpSession, notify: Send) -> dict[str, Any] | None:
        """The answer to one message (None for a notification, a client's response or a cancelled
        request); a call's progress notifications go through `notify` meanwhile. A CrewError that
        a configuration's call raises (one that ends the caller's run) reaches the caller."""
        problem = invalid(message)
        if problem is not None:
            return refusal(request_id(message), INVALID_REQUEST, problem)
        if "method" not in message:
            return None  # a response: crew sends clients no requests, so there is nothing it answers
        method, rid, params = message["method"], message.get("id"), message.get("params")
        params = {} if params is None else params
        if "id" not in message:
            if method == "notifications/cancelled" and isinstance(params, dict) and valid_id(params.get("requestId")):
                session.cancel(params["requestId"])
            return None
        if not isinstance(params, dict):
            return refusal(rid, INVALID_PARAMS, f"the params of {method} must be an object")
        if session.version is None and method not in ("initialize", "ping"):
            return refusal(rid, NOT_INITIALIZED, f"{method} before initialize: send initialize first")
        try:
            return self.endpoint.dispatch(Request(rid, method, params), session, notify)
        except CrewError:
            raise
        except Exception as exc:  # a bug in crew: answered, never the end of the server
            return refusal(rid, INTERNAL_ERROR, f"internal error: {type(exc).__name__}: {exc}")

    def _initialize(self, request: Request, session: McpSession, notify: Send) -> dict[str, Any]:
        asked = request.params.get("protocolVersion")
        if not isinstance(asked, str):
            raise RpcError(INVALID_PARAMS, "initialize needs params.protocolVersion, e.g. '2025-06-18'")
        session.version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1]
        result = {
            "protocolVersion": session.version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": self.name, "version": __version__},
        }
        instructions = self.instructions()
        return {**result, "instructions": instructions} if instructions else result

    def _set_level(self, request: Request, session: McpSession, notify: Send) -> dict[str, Any]:
        if request.params.get("level") not in LOG_LEVELS:
            raise RpcError(INVALID_PARAMS, f"logging/setLevel needs a level, one of {', '.join(LOG_LEVELS)}")
        return {}

    def _call(self, request: Request, session: McpSession, notify: Send) -> dict[str, Any] | None:
        """tools/call: None when it was cancelled (or its session ended): the client expects no answer."""
        params = request.params
        name, arguments, meta = params.get("name"), params.get("arguments"), params.get("_meta")
        if not isinstance(name, str):
            raise RpcError(INVALID_PARAMS, "tools/call needs a tool name in params.name")
        arguments = {} if arguments is None else arguments
        if not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, f"the arguments of tools/call {name} must be an object")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        stop = session.begin(request.id)
        try:
            meta = meta if isinstance(meta, dict) else None
            result = self.call_tool(name, arguments, Call(session, stop, _progress(notify, token), meta))
        finally:
            session.end(request.id)
        return None if stop.is_set() else result


class McpTools(McpCore):
    """A Channel's tools as an MCP server: what claude's SDK MCP server and the MCP server gemini
    reaches over ACP answer. A call takes the loop's path (Channel.call); one that ends the run
    (too many calls, a repeated failure) raises its CrewError to the conversation."""

    def __init__(self, channel: Channel, name: str = SERVER) -> None:
        super().__init__()
        self.channel = channel
        self.name = name

    def tool_list(self) -> list[dict[str, Any]]:
        return [mcp_tool(spec) for spec in self.channel.tools()]

    def call_tool(self, name: str, arguments: dict[str, Any], call: Call) -> dict[str, Any]:
        return tool_content(self.channel.call(name, arguments, call.stop))


def mcp_tool(spec: Tool) -> dict[str, Any]:
    """A tool as MCP's tools/list gives it."""
    return {
        "name": spec.name,
        "description": spec.description,
        "inputSchema": spec.input_schema,
        "annotations": {"readOnlyHint": spec.read_only},
    }


def tool_content(result: ToolResult) -> dict[str, Any]:
    """A tool's result as MCP's tools/call answers it."""
    return {"content": [{"type": "text", "text": result_text(result)}], "isError": not result.success}


def content(text: str, *, error: bool = False, structured: dict[str, Any] | None = None) -> dict[str, Any]:
    """A CallToolResult of `text` (and structured content)."""
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": error}
    if structured is not None:
        result["structuredContent"] = structured
    return result


def _progress(notify: Send, token: Any) -> Callable[[str], None]:
    """Send each message as a progress notification, when the client gave a token."""
    counter = itertools.count(1)

    def send(message: str) -> None:
        if valid_id(token):
            params = {"progressToken": token, "progress": next(counter), "message": message}
            notify(notification("notifications/progress", params))

    return send


def nowhere(message: dict[str, Any]) -> None:
    """Where the notifications go of a request answered without a stream to carry them."""
