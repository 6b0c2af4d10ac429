"""JSON-RPC 2.0, once, for both of crew's sides: the live CLIs crew is a client of (codex
app-server, gemini --acp, and claude's control protocol, which has the same roles in another
framing) and the MCP servers crew runs (crewbridge.protocol.mcp).

Here: the codes, the error a handler raises (RpcError), the lines of each kind, what a message is
(`invalid`, `request_id`), how a stream frames requests and answers (a Wire: JSONRPC, or another
protocol's), and an Endpoint, one side of a conversation apart from its transport: it numbers its
own requests and matches the answers to them by id, and routes the other side's requests to their
handlers, refusing the rest.

Messages are typed at this boundary: a route names the msgspec Struct its params are converted
into, a request the Struct of its answer's result. A message of another shape is refused
(INVALID_PARAMS, naming the field) or set aside (Misshapen) before any handler sees it, so handlers
read fields and never guess: an exception in one is crew's bug, and is raised as one.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Protocol

from crewbridge.base.jsonio import loads

if TYPE_CHECKING:
    from collections.abc import Callable

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
VERSION = "2.0"


class RpcError(Exception):
    """An error answer to the request being served: its JSON-RPC code and message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Misshapen(ValueError):
    """A message whose params or result are not of the shape its reader takes."""


class Request:
    """A request from the other side: its id, method and params (converted to its route's shape
    once routed). (Plain classes here: dataclasses is not loaded before crew mcp answers.)"""

    __slots__ = ("id", "method", "params")

    def __init__(self, id: Any, method: str, params: Any) -> None:
        self.id, self.method, self.params = id, method, params

    def __repr__(self) -> str:
        return f"Request({self.id!r}, {self.method!r}, {self.params!r})"


class Reply:
    """The other side's answer to one of crew's requests: its result (converted to the request's
    shape), or the error object of a refusal (`misread`: crew's own, for a result of another shape)."""

    __slots__ = ("error", "id", "misread", "result")

    def __init__(self, id: Any, result: Any, error: dict[str, Any] | None = None) -> None:
        self.id, self.result, self.error = id, result, error
        self.misread = False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Reply) and (self.id, self.result, self.error) == (other.id, other.result, other.error)

    def __repr__(self) -> str:
        return f"Reply({self.id!r}, {self.result!r}, {self.error!r})"


def request_line(request_id: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": VERSION, "id": request_id, "method": method, "params": params}


def answer(request_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": VERSION, "id": request_id, "result": result}


def refusal(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": VERSION, "id": request_id, "error": {"code": code, "message": message}}


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """A request that gets no answer."""
    return {"jsonrpc": VERSION, "method": method, "params": params or {}}


def read_message(data: bytes | str) -> Any:
    """One message as a transport read it; RpcError (a parse error) when it is not JSON or nests too deep."""
    try:
        return loads(data)
    except ValueError as exc:  # TooDeep and UnicodeDecodeError are ValueErrors too
        raise RpcError(PARSE_ERROR, f"the message is not JSON ({exc}); send one JSON-RPC message") from None


def valid_id(rid: Any) -> bool:
    return isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))


def request_id(message: Any) -> Any:
    """The id an answer to `message` carries: its own when it has a valid one, else null."""
    rid = message.get("id") if isinstance(message, dict) else None
    return rid if valid_id(rid) else None


def invalid(message: Any) -> str | None:
    """Why `message` is not one JSON-RPC 2.0 request, notification or response; None when it is."""
    if isinstance(message, list):
        return "a batch: crew takes no batches; send one JSON-RPC message at a time"
    if not isinstance(message, dict) or message.get("jsonrpc") != VERSION:
        return "not a JSON-RPC 2.0 message: it needs jsonrpc '2.0'"
    if "method" in message:
        if not isinstance(message["method"], str):
            return "the method must be a string"
        if "id" in message and not valid_id(message["id"]):
            return "a request's id must be a string or an integer"
        return None
    if "id" in message and ("result" in message) != ("error" in message):
        return None  # a response
    return "not a request, notification or response: it needs a method (a response: an id and a result or error)"


def shaped(value: Any, shape: type | None, what: str) -> Any:
    """`value` converted to `shape` (a msgspec Struct; None: as it is); Misshapen naming `what` and
    the field that differs."""
    if shape is None:
        return value
    # For start-up speed: msgspec takes ~30 ms to import, and only the routes and requests of a
    # live CLI name shapes (crew mcp answers its first messages without it).
    import msgspec

    try:
        return msgspec.convert(value, shape)
    except msgspec.ValidationError as exc:
        raise Misshapen(f"crew could not read {what} ({exc})") from None


class Wire(Protocol):
    """How a stream frames requests and answers."""

    def request(self, number: int, method: str, params: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """Crew's `number`th request: its id, and the line to write."""

    def answer(self, request_id: Any, result: Any) -> dict[str, Any]:
        """The line that answers the other side's request."""

    def refusal(self, request_id: Any, code: int, message: str) -> dict[str, Any]:
        """The line that refuses the other side's request, saying why."""

    def parse(self, obj: dict[str, Any]) -> Request | Reply | None:
        """What a line is: a request to crew, an answer to one of crew's, or neither (None: a
        notification, or a line of the stream's own)."""


class JsonRpc:
    """JSON-RPC 2.0's own framing (codex app-server, gemini --acp)."""

    def request(self, number: int, method: str, params: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        return number, request_line(number, method, params)

    def answer(self, request_id: Any, result: Any) -> dict[str, Any]:
        return answer(request_id, result)

    def refusal(self, request_id: Any, code: int, message: str) -> dict[str, Any]:
        return refusal(request_id, code, message)

    def parse(self, obj: dict[str, Any]) -> Request | Reply | None:
        if "id" not in obj:
            return None
        if "method" in obj:
            return Request(obj["id"], str(obj["method"]), obj.get("params"))
        result, error = obj.get("result"), obj.get("error")
        if error is not None and not isinstance(error, dict):
            error = {"message": str(error)}
        return Reply(obj["id"], result, error)


JSONRPC = JsonRpc()


class Route:
    """A method's handler, and the shape of the params it reads (None: the params as they came)."""

    __slots__ = ("handler", "shape")

    def __init__(self, handler: Callable[..., Any], shape: type | None = None) -> None:
        self.handler, self.shape = handler, shape


class Endpoint:
    """One side of a JSON-RPC conversation, apart from its transport: it numbers its own requests
    and matches the answers (`request`, `settle`), and answers the other side's requests by their
    routes (`dispatch`). `unknown` words the refusal of a method it has no route for."""

    def __init__(
        self,
        wire: Wire = JSONRPC,
        routes: dict[str, Route] | None = None,
        unknown: Callable[[str], str] = lambda method: f"crew does not handle {method}",
    ) -> None:
        self.wire = wire
        self.routes = routes or {}
        self.unknown = unknown
        self._waiting: dict[Any, tuple[Callable[[Reply], Any], type | None, str]] = {}
        self._numbers = itertools.count(1)

    def request(
        self, method: str, params: dict[str, Any], then: Callable[[Reply], Any] | None = None, shape: type | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Crew's next request: its id and its line. `then` acts on its answer when it comes, the
        result converted to `shape` first."""
        request_id, line = self.wire.request(next(self._numbers), method, params)
        if then is not None:
            self._waiting[request_id] = (then, shape, method)
        return request_id, line

    def settle(self, reply: Reply) -> Any:
        """What the `then` of the request `reply` answers gives (None for an answer nobody waits
        for, or an id of a type crew never sends: true and 1.0 are not crew's 1, a list no key). A
        result of another shape than the request's reaches `then` as an error (misread)."""
        waiting = self._waiting.pop(reply.id, None) if valid_id(reply.id) else None
        if waiting is None:
            return None
        then, shape, method = waiting
        if reply.error is None:
            try:
                reply.result = shaped(reply.result, shape, f"the answer to {method}")
            except Misshapen as exc:
                reply.result, reply.error, reply.misread = None, {"code": INVALID_PARAMS, "message": str(exc)}, True
        return then(reply)

    def dispatch(self, request: Request, *context: Any) -> dict[str, Any] | None:
        """The line that answers `request` (None: its handler answers later): its route's handler's
        result, called with the params in the route's shape and `context`. Refused when there is no
        route (METHOD_NOT_FOUND), the params are of another shape (INVALID_PARAMS) or the handler
        raises RpcError. Anything else the handler raises is raised: a CrewError ends the caller's
        run, and anything else is crew's bug."""
        route = self.routes.get(request.method)
        try:
            if route is None:
                raise RpcError(METHOD_NOT_FOUND, self.unknown(request.method))
            try:
                request.params = shaped(request.params, route.shape, f"the {request.method} request")
            except Misshapen as exc:
                raise RpcError(INVALID_PARAMS, str(exc)) from None
            result = route.handler(request, *context)
        except RpcError as exc:
            return self.wire.refusal(request.id, exc.code, str(exc))
        return None if result is None else self.wire.answer(request.id, result)
