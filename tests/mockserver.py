"""A mock model server for the real CLIs: Anthropic Messages, Gemini, OpenAI Responses and OpenAI
Chat Completions over SSE.

It listens on 127.0.0.1 at a free port in a background thread and answers each model request with
the next reply of a per-test script::

    with MockServer() as mock:
        mock.script(reply("Hello ", "world"), error(500))
        ...  # run a CLI against mock.url
        assert mock.requests[0].text() == "…"

A reply is a list of text chunks, streamed one SSE event per chunk (flushed as written), with an
optional delay between chunks; an error is an HTTP status with a body in the vendor's error shape.
The CLIs' auxiliary calls (Gemini's routing call, token counts, probes) are answered without
consuming the script and recorded apart, in `aux`. The server also serves as the HTTP(S) proxy the
CLIs are given: anything that tries to reach another host is refused and recorded in `problems`.
"""

from __future__ import annotations

import json
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

GEMINI_PATH = re.compile(r"^/v1beta/models/(?P<model>[^:/]+):(?P<method>\w+)$")
# HTTP status → the error type each vendor names in its error body.
ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}
GEMINI_ERRORS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    503: "UNAVAILABLE",
}
OPENAI_ERRORS = {401: "invalid_api_key", 429: "rate_limit_exceeded"}


@dataclass
class Reply:
    """One scripted answer: text chunks streamed `delay` seconds apart, or an HTTP error."""

    chunks: list[str] = field(default_factory=list)
    delay: float = 0.0
    status: int = 200
    message: str = ""  # the error message, for status != 200
    input_tokens: int = 11  # every input token, the cached ones included
    output_tokens: int = 7
    tool: str = ""  # a native tool call: the offered tool whose name ends with this
    arguments: dict[str, Any] = field(default_factory=dict)
    cached_tokens: int = 0  # of the input tokens, those read from the provider's cache
    own: bool = False  # the tool is the CLI's own, named exactly `tool` (gemini's write_file, not crew's)

    @property
    def text(self) -> str:
        return "".join(self.chunks)

    def tool_name(self, request: Request) -> str | None:
        """The name of the tool this reply calls, as `request` offered it (the CLIs prefix MCP
        tools: claude `mcp__crew__read_file`, gemini `mcp_crew_read_file`), or None. crew's tool
        comes first when the CLI has one of its own by that name (gemini's `read_file`), unless the
        reply calls the CLI's `own`."""
        if self.own:
            return self.tool if self.tool in request.tool_names() else None
        named = [name for name in request.tool_names() if re.search(rf"(^|_){re.escape(self.tool)}$", name)]
        return min(named, key=lambda name: ("crew" not in name, len(name)), default=None)


def reply(*chunks: str, delay: float = 0.0, **usage: int) -> Reply:
    """A streamed answer made of `chunks`, `delay` seconds apart; `usage` sets the token counts it
    reports (input_tokens, output_tokens, cached_tokens)."""
    return Reply(list(chunks), delay, **usage)


def tool_call(name: str, arguments: dict[str, Any] | None = None, *chunks: str, own: bool = False) -> Reply:
    """An answer that calls the offered native tool whose name ends with `name` (after the text
    `chunks`, if any); with `own`, the CLI's own tool of exactly that name."""
    return Reply(list(chunks), tool=name, arguments=arguments or {}, own=own)


def error(status: int, message: str | None = None) -> Reply:
    """An HTTP error answer (500, 429, 401, …) with `message` in the vendor's error shape."""
    return Reply(status=status, message=message or f"mock error {status}")


@dataclass
class Request:
    """A request the server received."""

    method: str
    path: str  # without the query string
    query: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or the raw text when not JSON
    vendor: str = ""  # "anthropic", "gemini", "openai", "chat" (Chat Completions) or ""
    streamed: int = 0  # chunks written for a scripted reply
    finished: bool = False  # the whole reply was written (False: the client hung up first)
    received: float = 0.0  # time.monotonic() when its body had been read
    ended: float = 0.0  # time.monotonic() when the whole reply had been written

    def messages(self) -> list[tuple[str, str]]:
        """The conversation this request carried as (role, text) pairs, roles normalised to
        "system", "user", "assistant" and "tool". Tool calls and results are rendered as text."""
        if not isinstance(self.body, dict):
            return []
        if self.vendor == "anthropic":
            return [(m["role"], _anthropic_text(m["content"])) for m in self.body.get("messages", [])]
        if self.vendor == "gemini":
            return [
                (_role(c.get("role", "user")), _gemini_text(c.get("parts", []))) for c in self.body.get("contents", [])
            ]
        if self.vendor == "openai":
            return _openai_messages(self.body.get("input", []))
        if self.vendor == "chat":
            return [_chat_message(m) for m in self.body.get("messages", [])]
        return []

    def text(self) -> str:
        """The conversation text this request carried (system messages left out), one message per
        paragraph."""
        return "\n\n".join(text for role, text in self.messages() if role != "system")

    @property
    def model(self) -> str | None:
        match = GEMINI_PATH.match(self.path)
        if match:
            return match["model"]
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def system(self) -> str:
        """The system prompt / instructions the request carried."""
        if not isinstance(self.body, dict):
            return ""
        if self.vendor == "anthropic":
            system = self.body.get("system") or ""
            return system if isinstance(system, str) else _anthropic_text(system)
        if self.vendor == "gemini":
            return _gemini_text((self.body.get("systemInstruction") or {}).get("parts", []))
        if self.vendor == "chat":
            return "\n\n".join(text for role, text in self.messages() if role == "system")
        return str(self.body.get("instructions") or "")

    def tool_names(self) -> list[str]:
        """Names of the native tools the CLI offered the model in this request."""
        if not isinstance(self.body, dict):
            return []
        tools = self.body.get("tools") or []
        if self.vendor == "gemini":
            return [d["name"] for t in tools for d in t.get("functionDeclarations", [])]
        if self.vendor == "chat":
            return [t["function"]["name"] for t in tools if "function" in t]
        return [tool.get("name") or tool.get("type", "") for tool in self.responses_tools()]

    def responses_tools(self) -> list[dict[str, Any]]:
        """The tools an OpenAI Responses request offered, namespaces flattened (codex also offers
        tools in an `additional_tools` input item, grouped in namespaces)."""
        if not isinstance(self.body, dict):
            return []
        tools = (self.body.get("tools") or []) + [
            t
            for item in self.body.get("input") or []
            if isinstance(item, dict) and item.get("type") == "additional_tools"
            for t in item.get("tools") or []
        ]
        return _flatten(tools)


def _flatten(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for tool in tools:
        out += _flatten(tool.get("tools") or []) if tool.get("type") == "namespace" else [tool]
    return out


_ROLES = {"model": "assistant", "developer": "system"}


def _role(vendor_role: str) -> str:
    return _ROLES.get(vendor_role, vendor_role)


def _anthropic_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            parts.append(block["text"])
        elif kind == "tool_use":
            parts.append(json.dumps({"tool_use": block.get("name"), "input": block.get("input")}))
        elif kind == "tool_result":
            parts.append(_anthropic_text(block.get("content") or ""))
    return "\n".join(parts)


def _gemini_text(parts: list[dict[str, Any]]) -> str:
    out = []
    for part in parts:
        if "text" in part:
            out.append(part["text"])
        elif "functionCall" in part:
            out.append(json.dumps(part["functionCall"]))
        elif "functionResponse" in part:
            out.append(json.dumps(part["functionResponse"]))
    return "\n".join(out)


def _openai_messages(items: Any) -> list[tuple[str, str]]:
    if isinstance(items, str):
        return [("user", items)]
    out = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            content = item.get("content")
            text = content if isinstance(content, str) else "\n".join(c.get("text", "") for c in content or [])
            out.append((_role(item.get("role", "user")), text))
        elif kind == "function_call":
            out.append(("assistant", f"{item.get('name')}({item.get('arguments')})"))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            out.append(("tool", output if isinstance(output, str) else json.dumps(output)))
    return out


def _chat_message(message: dict[str, Any]) -> tuple[str, str]:
    """One Chat Completions message as (role, text): text parts joined, tool calls as name(args)."""
    content = message.get("content")
    parts = [content] if isinstance(content, str) else [c.get("text", "") for c in content or [] if isinstance(c, dict)]
    parts += [
        f"{call['function']['name']}({call['function'].get('arguments')})" for call in message.get("tool_calls") or []
    ]
    return _role(message.get("role", "user")), "\n".join(parts)


def _codex_request_kind(request: Request) -> str | None:
    """What codex says a Responses call is for ("turn", "compaction", …), from its metadata header."""
    metadata = {k.lower(): v for k, v in request.headers.items()}.get("x-codex-turn-metadata")
    try:
        return json.loads(metadata).get("request_kind") if metadata else None
    except (ValueError, AttributeError):
        return None


class MockServer:
    """The server. Use as a context manager, or call `start()` and `stop()`."""

    def __init__(self) -> None:
        self._queue: list[Reply] = []
        self._lock = threading.Lock()
        self.requests: list[Request] = []  # model requests, each answered from the script
        self.aux: list[Request] = []  # everything else the CLIs asked
        self.problems: list[str] = []  # script exhausted, unknown route, tried to leave 127.0.0.1
        self._stopping = threading.Event()  # ends the delays of replies still streaming
        self.responder: Callable[[Request], Reply | str] | None = None  # answers instead of the script
        self.open = 0  # model requests being answered now
        self.most_open = 0  # the most ever answered at once
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.mock = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="mock-model-server", daemon=True
        )

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MockServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def __enter__(self) -> MockServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def script(self, *replies: Reply | str) -> None:
        """Queue replies for the next model requests; a plain string is a one-chunk reply."""
        with self._lock:
            self._queue += [reply(r) if isinstance(r, str) else r for r in replies]

    def respond(self, responder: Callable[[Request], Reply | str]) -> None:
        """Answer every model request with `responder(request)` (called on the request's own thread,
        so it may wait) instead of the script: for CLIs that run at once, in no set order."""
        self.responder = responder

    @property
    def pending(self) -> int:
        """Scripted replies not yet asked for."""
        with self._lock:
            return len(self._queue)

    def _next(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            responder = self.responder
        if responder is not None:
            answer = responder(request)
            return reply(answer) if isinstance(answer, str) else answer
        with self._lock:
            if self._queue:
                answer = self._queue.pop(0)
                if answer.tool and answer.tool_name(request) is None:
                    self.problems.append(
                        f"a call to tool {answer.tool!r} was scripted, but the request "
                        f"offered only {request.tool_names()}"
                    )
                return answer
            self.problems.append(f"script exhausted at {request.method} {request.path}")
        return error(500, "mock script exhausted: the test scripted fewer replies than the CLI asked for")

    def _opened(self, change: int) -> None:
        with self._lock:
            self.open += change
            self.most_open = max(self.most_open, self.open)

    def _note(self, request: Request, problem: str | None = None) -> None:
        with self._lock:
            self.aux.append(request)
            if problem:
                self.problems.append(problem)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    mock: MockServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, (BrokenPipeError, ConnectionResetError)):
            return  # the client hung up: CLIs do, when they stop a reply
        with self.mock._lock:
            self.mock.problems.append(f"the mock failed: {exc!r}")
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # -- dispatch -------------------------------------------------------------------------------

    def do_POST(self) -> None:
        self._dispatch()

    def do_GET(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def do_CONNECT(self) -> None:
        self._refuse(f"CONNECT {self.path}")

    def _dispatch(self) -> None:
        mock = self.server.mock
        url = urlsplit(self.path)
        if url.netloc and url.netloc != f"127.0.0.1:{mock.port}":  # a proxied request elsewhere
            self._refuse(f"{self.command} {self.path}")
            return
        request = self._read(url.path, url.query)
        route = self._route(request) if self.command == "POST" else None
        if route and not isinstance(request.body, dict):
            mock._note(request, f"not a JSON object: {self.command} {self.path}")
            self._json(400, {"error": {"message": "mock: the body is not a JSON object"}})
        elif route in (self._anthropic, self._gemini, self._openai, self._chat):  # a model request: counted
            mock._opened(1)
            try:
                route(request)
            finally:
                mock._opened(-1)
        elif route:
            route(request)
        else:  # probes (GET, HEAD) are expected; anything else means the mock lacks a route
            mock._note(
                request, None if self.command in ("GET", "HEAD") else f"unknown route {self.command} {self.path}"
            )
            self._json(404, {"error": {"message": f"mock: no route for {self.command} {url.path}"}})

    def _route(self, request: Request) -> Callable[[Request], None] | None:
        path = request.path
        if request.vendor == "anthropic":
            if path == "/v1/messages":
                return self._anthropic
            if path == "/v1/messages/count_tokens":
                return self._count_tokens
        elif request.vendor == "gemini":
            method = GEMINI_PATH.match(path)["method"]  # type: ignore[index]
            if method == "streamGenerateContent":
                return self._gemini
            if method == "generateContent":
                return self._gemini_aux
            if method == "countTokens":
                return self._count_tokens
        elif path == "/v1/responses":
            return self._openai
        elif path == "/v1/chat/completions":
            return self._chat
        return None

    def _read(self, path: str, query: str) -> Request:
        raw = self._body().decode("utf-8", "replace")
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        vendor = (
            "anthropic"
            if path.startswith("/v1/messages")
            else "gemini"
            if GEMINI_PATH.match(path)
            else "openai"
            if path.startswith("/v1/responses")
            else "chat"
            if path == "/v1/chat/completions"
            else ""
        )
        return Request(self.command, path, query, dict(self.headers), body, vendor, received=time.monotonic())

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))
        data = b""
        while size := int(self.rfile.readline().split(b";")[0], 16):
            data += self.rfile.read(size)
            self.rfile.readline()
        while self.rfile.readline().strip():  # trailers
            pass
        return data

    def _refuse(self, what: str) -> None:
        self.server.mock._note(
            Request(self.command, self.path, "", dict(self.headers), None), f"tried to leave 127.0.0.1: {what}"
        )
        self.close_connection = True
        self._json(403, {"error": {"message": "mock: outside hosts are not reachable in tests"}})

    # -- writing --------------------------------------------------------------------------------

    def _json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _stream(self, request: Request, answer: Reply, events: Iterable[tuple[Any, bool]], named: bool = True) -> None:
        """Write SSE events (`event:` line = the data's "type" when `named`), each sent as one HTTP
        chunk at once. An event flagged True carries a text chunk; from the second one on, each
        waits the reply's delay first."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        stopping = self.server.mock._stopping
        try:
            for data, is_chunk in events:
                if is_chunk:
                    if request.streamed and answer.delay and stopping.wait(answer.delay):
                        break
                    request.streamed += 1
                name = f"event: {data['type']}\n" if named else ""
                text = data if isinstance(data, str) else json.dumps(data)  # "[DONE]" goes as it is
                payload = f"{name}data: {text}\n\n".encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
            else:
                request.finished = True  # before the last write: a client that has it sees this
                request.ended = time.monotonic()
                self.wfile.write(b"0\r\n\r\n")
                return
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def _count_tokens(self, request: Request) -> None:
        """Token counting (Anthropic, Gemini): a rough count, without consuming the script."""
        self.server.mock._note(request)
        tokens = len(request.text()) // 4 + 1
        self._json(200, {"input_tokens": tokens} if request.vendor == "anthropic" else {"totalTokens": tokens})

    # -- Anthropic Messages ---------------------------------------------------------------------

    def _anthropic(self, request: Request) -> None:
        answer = self.server.mock._next(request)
        if answer.status != 200:
            kind = ANTHROPIC_ERRORS.get(answer.status, "api_error")
            error_body = {"type": "error", "error": {"type": kind, "message": answer.message}}
            return self._json(answer.status, error_body)
        # Anthropic counts cache reads apart from input_tokens
        input_usage = {
            "input_tokens": answer.input_tokens - answer.cached_tokens,
            "cache_read_input_tokens": answer.cached_tokens,
        }
        message = {
            "id": f"msg_mock{id(request)}",
            "type": "message",
            "role": "assistant",
            "model": request.model or "claude-mock",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**input_usage, "output_tokens": 1},
        }
        if not request.body.get("stream"):
            return self._json(
                200,
                {
                    **message,
                    "content": [{"type": "text", "text": answer.text}],
                    "stop_reason": "end_turn",
                    "usage": {**input_usage, "output_tokens": answer.output_tokens},
                },
            )

        tool = (answer.tool_name(request) or answer.tool) if answer.tool else ""

        def events() -> Iterator[tuple[Any, bool]]:
            yield {"type": "message_start", "message": message}, False
            index = 0
            if answer.chunks or not tool:
                yield {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}, False
                for chunk in answer.chunks:
                    yield (
                        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": chunk}},
                        True,
                    )
                yield {"type": "content_block_stop", "index": 0}, False
                index = 1
            if tool:
                yield (
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {
                            "type": "tool_use",
                            "id": f"toolu_mock{id(request)}",
                            "name": tool,
                            "input": {},
                        },
                    },
                    False,
                )
                yield (
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": json.dumps(answer.arguments)},
                    },
                    True,
                )
                yield {"type": "content_block_stop", "index": index}, False
            yield (
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "tool_use" if tool else "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": answer.output_tokens},
                },
                False,
            )
            yield {"type": "message_stop"}, False

        self._stream(request, answer, events())

    # -- Gemini ---------------------------------------------------------------------------------

    def _gemini(self, request: Request) -> None:
        answer = self.server.mock._next(request)
        if answer.status != 200:
            status = GEMINI_ERRORS.get(answer.status, "INTERNAL")
            error_body = {"code": answer.status, "message": answer.message, "status": status}
            return self._json(answer.status, {"error": error_body})
        usage = {
            "promptTokenCount": answer.input_tokens,
            "candidatesTokenCount": answer.output_tokens,
            "totalTokenCount": answer.input_tokens + answer.output_tokens,
            "cachedContentTokenCount": answer.cached_tokens,
        }
        parts: list[dict[str, Any]] = [{"text": chunk} for chunk in answer.chunks]
        if answer.tool:
            parts.append({"functionCall": {"name": answer.tool_name(request) or answer.tool, "args": answer.arguments}})

        def events() -> Iterator[tuple[Any, bool]]:
            for i, part in enumerate(parts or [{"text": ""}], 1):
                candidate = {"content": {"parts": [part], "role": "model"}, "index": 0}
                last = {"usageMetadata": usage} if i == max(len(parts), 1) else {}
                if last:
                    candidate["finishReason"] = "STOP"
                yield {"candidates": [candidate], "modelVersion": request.model, **last}, True

        self._stream(request, answer, events(), named=False)

    def _gemini_aux(self, request: Request) -> None:
        """Non-streamed calls, answered without consuming the script: the CLI's model routing
        (made when no -m is given; wants JSON with a complexity score) and other JSON helpers."""
        self.server.mock._note(request)
        answer = json.dumps({"reasoning": "mock", "complexity_score": 1, "next_speaker": "user"})
        self._json(
            200,
            {
                "candidates": [
                    {"content": {"parts": [{"text": answer}], "role": "model"}, "finishReason": "STOP", "index": 0}
                ],
                "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
            },
        )

    # -- OpenAI Responses -----------------------------------------------------------------------

    def _openai(self, request: Request) -> None:
        if _codex_request_kind(request) not in ("turn", None):
            # Codex's own calls, e.g. "compaction" when a session resumes with another model: the
            # summary it asks for is the conversation so far (its last message is the request).
            self.server.mock._note(request)
            talk = [text for role, text in request.messages()[:-1] if role != "system"]
            answer = reply("\n\n".join(talk))
        else:
            answer = self.server.mock._next(request)
        if answer.status != 200:
            kind = OPENAI_ERRORS.get(answer.status, "server_error")
            error_body = {"message": answer.message, "type": kind, "param": None, "code": kind}
            return self._json(answer.status, {"error": error_body})
        ids = {"item_id": f"msg_mock{id(request)}", "output_index": 0, "content_index": 0}
        text = {"type": "output_text", "text": answer.text, "annotations": []}
        item = {"type": "message", "id": ids["item_id"], "role": "assistant", "status": "in_progress", "content": []}
        done = {**item, "status": "completed", "content": [text]}
        response = {
            "id": f"resp_mock{id(request)}",
            "object": "response",
            "created_at": int(time.time()),
            "status": "in_progress",
            "model": request.model,
            "output": [],
        }
        usage = {
            "input_tokens": answer.input_tokens,
            "output_tokens": answer.output_tokens,
            "total_tokens": answer.input_tokens + answer.output_tokens,
            "input_tokens_details": {"cached_tokens": answer.cached_tokens},
            "output_tokens_details": {"reasoning_tokens": 0},
        }

        if answer.tool:
            call = {
                "type": "function_call",
                "id": f"fc_mock{id(request)}",
                "call_id": f"call_mock{id(request)}",
                "name": answer.tool_name(request) or answer.tool,
                "arguments": json.dumps(answer.arguments),
                "status": "completed",
            }
            if any(t.get("name") == call["name"] and t.get("type") == "custom" for t in request.responses_tools()):
                # a freeform tool (codex's code mode `exec`, its JavaScript calling its tools, MCP
                # ones too; codex's `apply_patch`): its one argument goes as text
                del call["arguments"]
                call.update(type="custom_tool_call", input=next(iter(answer.arguments.values())))

            def events() -> Iterator[tuple[Any, bool]]:
                yield {"type": "response.created", "response": response}, False
                if call["type"] == "function_call":
                    yield (
                        {
                            "type": "response.output_item.added",
                            "output_index": 0,
                            "item": {**call, "arguments": "", "status": "in_progress"},
                        },
                        False,
                    )
                    yield (
                        {
                            "type": "response.function_call_arguments.delta",
                            "item_id": call["id"],
                            "output_index": 0,
                            "delta": call["arguments"],
                        },
                        True,
                    )
                    yield (
                        {
                            "type": "response.function_call_arguments.done",
                            "item_id": call["id"],
                            "output_index": 0,
                            "arguments": call["arguments"],
                        },
                        False,
                    )
                yield {"type": "response.output_item.done", "output_index": 0, "item": call}, False
                yield (
                    {
                        "type": "response.completed",
                        "response": {**response, "status": "completed", "output": [call], "usage": usage},
                    },
                    False,
                )

            return self._stream(request, answer, events())

        def events() -> Iterator[tuple[Any, bool]]:
            yield {"type": "response.created", "response": response}, False
            yield {"type": "response.output_item.added", "output_index": 0, "item": item}, False
            yield {"type": "response.content_part.added", **ids, "part": {**text, "text": ""}}, False
            for chunk in answer.chunks:
                yield {"type": "response.output_text.delta", **ids, "delta": chunk}, True
            yield {"type": "response.output_text.done", **ids, "text": answer.text}, False
            yield {"type": "response.content_part.done", **ids, "part": text}, False
            yield {"type": "response.output_item.done", "output_index": 0, "item": done}, False
            yield (
                {
                    "type": "response.completed",
                    "response": {**response, "status": "completed", "output": [done], "usage": usage},
                },
                False,
            )

        self._stream(request, answer, events())

    # -- OpenAI Chat Completions ----------------------------------------------------------------

    def _chat(self, request: Request) -> None:
        answer = self.server.mock._next(request)
        if answer.status != 200:
            kind = OPENAI_ERRORS.get(answer.status, "server_error")
            error_body = {"message": answer.message, "type": kind, "param": None, "code": kind}
            return self._json(answer.status, {"error": error_body})
        usage = {
            "prompt_tokens": answer.input_tokens,
            "completion_tokens": answer.output_tokens,
            "total_tokens": answer.input_tokens + answer.output_tokens,
        }
        base = {"id": f"chatcmpl-mock{id(request)}", "created": int(time.time()), "model": request.model}
        if not request.body.get("stream"):
            message = {"role": "assistant", "content": answer.text}
            return self._json(
                200,
                {
                    **base,
                    "object": "chat.completion",
                    "usage": usage,
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                },
            )
        chunk = {**base, "object": "chat.completion.chunk"}

        def events() -> Iterator[tuple[Any, bool]]:
            yield (
                {
                    **chunk,
                    "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
                },
                False,
            )
            for text in answer.chunks:
                yield {**chunk, "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}, True
            yield {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}, False
            if (request.body.get("stream_options") or {}).get("include_usage"):
                yield {**chunk, "choices": [], "usage": usage}, False
            yield "[DONE]", False

        self._stream(request, answer, events(), named=False)
