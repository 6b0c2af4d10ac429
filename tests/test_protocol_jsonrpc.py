"""crewbridge.protocol.jsonrpc: JSON-RPC 2.0 once, for the live CLIs crew is a client of and the MCP servers it
runs — the lines of each kind, what a message is (and why one is not), the codes, reading a message
with its nesting bounded, and an Endpoint that numbers crew's requests, matches the answers by id,
and routes the other side's requests (params typed at the boundary, a handler's bug raised as one).
Driven with what a peer could send, and much it should not."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from crewbridge.base.jsonio import MAX_DEPTH
from crewbridge.errors import CrewError
from crewbridge.protocol.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    JSONRPC,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    Endpoint,
    Misshapen,
    Reply,
    Request,
    Route,
    RpcError,
    answer,
    invalid,
    notification,
    read_message,
    refusal,
    request_id,
    request_line,
    shaped,
    valid_id,
)

NOT_JSONRPC = "not a JSON-RPC 2.0 message: it needs jsonrpc '2.0'"
A_BATCH = "a batch: crew takes no batches; send one JSON-RPC message at a time"
NEITHER = "not a request, notification or response: it needs a method (a response: an id and a result or error)"
BAD_ID = "a request's id must be a string or an integer"
HUGE = 2**200  # past any machine integer: JSON has no bound, and neither does an id
LONG = "x" * 100_000


class Look(msgspec.Struct):
    """The params of the `look` route below."""

    path: str
    depth: int = 0


class Seen(msgspec.Struct):
    """The result crew reads from the other side's answer to its `look`."""

    saw: list[str]


def looking(request: Request, *context: Any) -> dict[str, Any]:
    return {"saw": request.params.path, "depth": request.params.depth, "context": list(context)}


def endpoint(**routes: Route) -> Endpoint:
    return Endpoint(routes={"look": Route(looking, Look), **routes})


def nested(levels: int, open_: str = "[", close: str = "]", inner: str = "1") -> str:
    return open_ * levels + inner + close * levels


def deep_params(levels: int) -> str:
    """A request whose params nest `levels` objects deep."""
    return '{"jsonrpc": "2.0", "id": 1, "method": "look", "params": ' + nested(levels, '{"a": ', "}") + "}"


# -- the lines of each kind ------------------------------------------------------------------------


def test_each_kind_of_line_has_the_shape_the_spec_gives_it():
    assert request_line(7, "look", {"path": "a"}) == {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "look",
        "params": {"path": "a"},
    }
    assert answer("s", {"ok": True}) == {"jsonrpc": "2.0", "id": "s", "result": {"ok": True}}
    assert refusal(None, PARSE_ERROR, "bad") == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "bad"},
    }
    assert notification("done") == {"jsonrpc": "2.0", "method": "done", "params": {}}
    assert notification("done", {"why": "end"}) == {"jsonrpc": "2.0", "method": "done", "params": {"why": "end"}}


def test_the_codes_are_the_specs():
    assert (PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR) == (
        -32700,
        -32600,
        -32601,
        -32602,
        -32603,
    )


# -- reading a message -----------------------------------------------------------------------------


def test_a_message_is_read_as_the_json_it_is_text_or_bytes():
    line = '{"jsonrpc": "2.0", "id": 1, "method": "look", "params": {"path": "é"}}'
    assert read_message(line) == read_message(line.encode()) == json.loads(line)
    assert read_message(f'{{"id": {HUGE}}}') == {"id": HUGE}  # read exactly, never rounded to a float
    assert read_message(json.dumps({"params": {"text": LONG * 100}}))["params"]["text"] == LONG * 100


@pytest.mark.parametrize("data", ["not json", "", "{", '{"id": 1,}', b"\xff\xfe not utf-8"])
def test_what_is_not_json_is_a_parse_error_that_says_what_to_send(data):
    with pytest.raises(RpcError) as raised:
        read_message(data)
    assert raised.value.code == PARSE_ERROR
    assert str(raised.value).startswith("the message is not JSON (")
    assert str(raised.value).endswith("); send one JSON-RPC message")


def test_json_nested_past_the_bound_is_a_parse_error():
    line = "[" * 1000 + "]" * 1000
    with pytest.raises(RpcError) as raised:
        read_message(line)
    assert raised.value.code == PARSE_ERROR and f"more than {MAX_DEPTH} levels" in str(raised.value)
    with pytest.raises(RpcError):
        read_message(b"\xff\xfe not utf-8")


@pytest.mark.parametrize(
    "line",
    [
        nested(100_000),  # arrays
        nested(100_000, '{"a": ', "}"),  # objects
        nested(50_000, '[{"a": ', "}]"),  # both
        deep_params(100_000),  # a request whose params nest past the bound
        deep_params(MAX_DEPTH),  # the bound counts the message's own level too
    ],
    ids=["arrays", "objects", "mixed", "params", "params-at-the-bound"],
)
def test_a_hundred_thousand_levels_of_nesting_are_a_parse_error_and_never_a_recursion_error(line):
    with pytest.raises(RpcError) as raised:
        read_message(line)
    assert raised.value.code == PARSE_ERROR
    assert f"JSON nested more than {MAX_DEPTH} levels deep; send flatter data" in str(raised.value)


def test_nesting_up_to_the_bound_is_read():
    message = read_message(deep_params(MAX_DEPTH - 1))
    depth, params = 0, message["params"]
    while isinstance(params, dict):
        depth, params = depth + 1, params["a"]
    assert depth == MAX_DEPTH - 1 and params == 1


# -- what a message is -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 1, "method": "look", "params": {}},
        {"jsonrpc": "2.0", "id": "a", "method": "look"},  # params may be left out
        {"jsonrpc": "2.0", "id": HUGE, "method": "look"},
        {"jsonrpc": "2.0", "id": LONG, "method": "look"},
        {"jsonrpc": "2.0", "id": -1, "method": "look"},
        {"jsonrpc": "2.0", "method": "done"},  # a notification
        {"jsonrpc": "2.0", "id": 1, "result": None},  # a response, its result null
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": PARSE_ERROR, "message": "bad"},
        },  # the answer to an unreadable one
    ],
)
def test_a_request_a_notification_or_a_response_is_a_message(message):
    assert invalid(message) is None


@pytest.mark.parametrize(
    ("message", "why"),
    [
        ([], A_BATCH),
        ([{"jsonrpc": "2.0", "id": 1, "method": "look"}], A_BATCH),
        ("look", NOT_JSONRPC),
        (None, NOT_JSONRPC),
        (7, NOT_JSONRPC),
        (1.5, NOT_JSONRPC),
        (True, NOT_JSONRPC),
        ({"id": 1, "method": "look"}, NOT_JSONRPC),
        ({"jsonrpc": "1.0", "id": 1, "method": "look"}, NOT_JSONRPC),
        ({"jsonrpc": 2.0, "id": 1, "method": "look"}, NOT_JSONRPC),
        ({"jsonrpc": "2.0", "id": 1, "method": 7}, "the method must be a string"),
        ({"jsonrpc": "2.0", "id": 1, "method": None}, "the method must be a string"),
        ({"jsonrpc": "2.0", "id": 1, "method": ["look"]}, "the method must be a string"),
        ({"jsonrpc": "2.0", "id": None, "method": "look"}, BAD_ID),
        ({"jsonrpc": "2.0", "id": True, "method": "look"}, BAD_ID),
        ({"jsonrpc": "2.0", "id": False, "method": "look"}, BAD_ID),
        ({"jsonrpc": "2.0", "id": 1.0, "method": "look"}, BAD_ID),
        ({"jsonrpc": "2.0", "id": [1], "method": "look"}, BAD_ID),
        ({"jsonrpc": "2.0", "id": {"n": 1}, "method": "look"}, BAD_ID),
        ({"jsonrpc": "2.0"}, NEITHER),
        ({"jsonrpc": "2.0", "id": 1}, NEITHER),
        ({"jsonrpc": "2.0", "result": {}}, NEITHER),  # a response needs its id
        ({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {}}, NEITHER),
    ],
)
def test_anything_else_is_not_a_message_and_invalid_says_why(message, why):
    assert invalid(message) == why


@pytest.mark.parametrize("rid", ["", "a", LONG, 0, -5, 7, HUGE])
def test_an_id_is_a_string_or_an_integer_and_an_answer_carries_it(rid):
    assert valid_id(rid)
    assert request_id({"jsonrpc": "2.0", "id": rid, "method": "look"}) == rid


@pytest.mark.parametrize("rid", [None, True, False, 1.0, 1.5, float("inf"), [1], {"n": 1}])
def test_any_other_id_is_not_one_and_the_answer_carries_null(rid):
    assert not valid_id(rid)
    assert request_id({"jsonrpc": "2.0", "id": rid, "method": "look"}) is None


@pytest.mark.parametrize("message", [None, "x", 1, [{"id": 1}], {"method": "look"}])
def test_a_message_that_is_not_an_object_or_has_no_id_is_answered_with_a_null_id(message):
    assert request_id(message) is None


# -- the JSON-RPC wire -----------------------------------------------------------------------------


def test_the_jsonrpc_wire_numbers_crews_requests_with_their_number_as_id():
    assert JSONRPC.request(3, "look", {"path": "a"}) == (3, request_line(3, "look", {"path": "a"}))
    assert JSONRPC.answer(3, {}) == answer(3, {})
    assert JSONRPC.refusal(3, METHOD_NOT_FOUND, "no") == refusal(3, METHOD_NOT_FOUND, "no")


def test_the_jsonrpc_wire_tells_a_request_from_an_answer_and_a_notification():
    request = JSONRPC.parse({"jsonrpc": "2.0", "id": "r", "method": "look", "params": {"path": "a"}})
    assert isinstance(request, Request) and (request.id, request.method, request.params) == ("r", "look", {"path": "a"})
    assert JSONRPC.parse({"jsonrpc": "2.0", "id": 4, "result": {"saw": []}}) == Reply(4, {"saw": []})
    assert JSONRPC.parse({"jsonrpc": "2.0", "id": 4, "error": {"code": 1, "message": "no"}}) == Reply(
        4, None, {"code": 1, "message": "no"}
    )
    assert JSONRPC.parse({"jsonrpc": "2.0", "method": "done", "params": {}}) is None


def test_an_error_that_is_not_an_object_becomes_one_that_says_it():
    assert JSONRPC.parse({"jsonrpc": "2.0", "id": 4, "error": "quota"}) == Reply(4, None, {"message": "quota"})
    assert JSONRPC.parse({"jsonrpc": "2.0", "id": 4, "error": 429}) == Reply(4, None, {"message": "429"})


# -- shapes ----------------------------------------------------------------------------------------


def test_a_value_is_converted_to_its_shape_or_misshapen_naming_what_and_the_field():
    assert shaped({"path": "a"}, Look, "the look request") == Look("a")
    assert shaped({"anything": [1]}, None, "x") == {"anything": [1]}
    with pytest.raises(Misshapen) as raised:
        shaped({"path": "a", "depth": "deep"}, Look, "the look request")
    assert str(raised.value) == "crew could not read the look request (Expected `int`, got `str` - at `$.depth`)"


# -- the endpoint: crew's requests and their answers -----------------------------------------------


def test_crews_requests_are_numbered_from_one_on_the_wire():
    rpc = Endpoint()
    assert rpc.request("a", {}) == (1, request_line(1, "a", {}))
    assert rpc.request("b", {"x": 1}) == (2, request_line(2, "b", {"x": 1}))


def test_each_answer_reaches_what_waits_for_its_request_by_id_in_any_order():
    rpc, got = Endpoint(), []
    first, _ = rpc.request("a", {}, then=lambda reply: got.append(("a", reply.result)) or "a settled")
    second, _ = rpc.request("b", {}, then=lambda reply: got.append(("b", reply.result)) or "b settled")
    assert rpc.settle(Reply(second, {"n": 2})) == "b settled"
    assert rpc.settle(Reply(first, {"n": 1})) == "a settled"
    assert got == [("b", {"n": 2}), ("a", {"n": 1})]


@pytest.mark.parametrize("rid", [0, 3, -1, "1", "", LONG, HUGE, None, True, 1.0, [1], {"a": 1}])
def test_an_answer_to_an_id_nobody_waits_for_is_set_aside(rid):
    rpc, got = Endpoint(), []
    rpc.request("a", {}, then=got.append)  # id 1, the only one waited for
    assert rpc.settle(Reply(rid, {"stolen": True})) is None
    assert got == []  # the string "1", true and 1.0 are not the integer 1: ids match by type as well as value
    rpc.settle(Reply(1, {"mine": True}))
    assert got == [Reply(1, {"mine": True})]


def test_a_second_answer_to_the_same_id_is_set_aside():
    rpc, got = Endpoint(), []
    rid, _ = rpc.request("a", {}, then=got.append)
    rpc.settle(Reply(rid, {"first": True}))
    assert rpc.settle(Reply(rid, {"again": True})) is None
    assert got == [Reply(rid, {"first": True})]


def test_an_answer_to_a_request_sent_without_then_is_set_aside():
    rpc = Endpoint()
    rid, _ = rpc.request("tell", {})
    assert rpc.settle(Reply(rid, {})) is None


def test_an_answers_result_reaches_then_in_the_requests_shape():
    rpc, got = Endpoint(), []
    rid, _ = rpc.request("look", {}, then=got.append, shape=Seen)
    rpc.settle(Reply(rid, {"saw": ["a", "b"], "extra": 1}))
    assert got[0].result == Seen(["a", "b"]) and got[0].error is None and not got[0].misread


def test_a_result_of_another_shape_reaches_then_as_crews_own_misreading_naming_the_request_and_field():
    rpc, got = Endpoint(), []
    rid, _ = rpc.request("look", {}, then=got.append, shape=Seen)
    rpc.settle(Reply(rid, {"saw": "a"}))
    reply = got[0]
    assert reply.misread and reply.result is None
    assert reply.error == {
        "code": INVALID_PARAMS,
        "message": "crew could not read the answer to look (Expected `array`, got `str` - at `$.saw`)",
    }


def test_an_error_answer_reaches_then_as_it_came_and_is_never_shaped():
    rpc, got = Endpoint(), []
    rid, _ = rpc.request("look", {}, then=got.append, shape=Seen)
    rpc.settle(Reply(rid, None, {"code": 429, "message": "Rate limit exceeded."}))
    assert got == [Reply(rid, None, {"code": 429, "message": "Rate limit exceeded."})] and not got[0].misread


def test_a_bug_in_what_acts_on_an_answer_is_raised():
    rpc = Endpoint()
    rid, _ = rpc.request("a", {}, then=lambda reply: reply.result["missing"])
    with pytest.raises(KeyError, match="missing"):
        rpc.settle(Reply(rid, {}))


class Tagged:
    """A wire of another protocol: its ids are strings of its own, its lines wrap JSON-RPC's."""

    def request(self, number: int, method: str, params: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        return f"crew-{number}", {"ask": {"id": f"crew-{number}", "method": method, "params": params}}

    def answer(self, request_id: Any, result: Any) -> dict[str, Any]:
        return {"told": {"id": request_id, "result": result}}

    def refusal(self, request_id: Any, code: int, message: str) -> dict[str, Any]:
        return {"told": {"id": request_id, "refused": message, "code": code}}

    def parse(self, obj: dict[str, Any]) -> Request | Reply | None:
        return None


def test_an_endpoint_on_another_wire_takes_its_ids_and_lines_from_it():
    rpc, got = Endpoint(Tagged(), {"look": Route(looking, Look)}), []
    assert rpc.request("look", {"path": "a"}, then=got.append) == (
        "crew-1",
        {"ask": {"id": "crew-1", "method": "look", "params": {"path": "a"}}},
    )
    assert rpc.settle(Reply(1, {})) is None and got == []  # its number is not its id
    rpc.settle(Reply("crew-1", {"ok": True}))
    assert got == [Reply("crew-1", {"ok": True})]
    assert rpc.dispatch(Request(9, "look", {"path": "p"})) == {
        "told": {"id": 9, "result": {"saw": "p", "depth": 0, "context": []}}
    }
    assert rpc.dispatch(Request(9, "nothing", {})) == {
        "told": {"id": 9, "refused": "crew does not handle nothing", "code": METHOD_NOT_FOUND}
    }


# -- the endpoint: the other side's requests -------------------------------------------------------


def test_a_request_is_answered_by_its_routes_handler_with_the_params_in_its_shape_and_the_context():
    line = endpoint().dispatch(Request(5, "look", {"path": "a", "depth": 2, "unread": True}), "ctx", 7)
    assert line == answer(5, {"saw": "a", "depth": 2, "context": ["ctx", 7]})


def test_a_route_without_a_shape_gets_the_params_as_they_came():
    rpc = Endpoint(routes={"raw": Route(lambda request: {"params": request.params})})
    assert rpc.dispatch(Request(1, "raw", [1, {"a": None}])) == answer(1, {"params": [1, {"a": None}]})


@pytest.mark.parametrize("rid", ["", LONG, HUGE, 0, None, True, 1.5, [1], {"n": 1}])
def test_the_answer_carries_the_requests_id_whatever_it_is(rid):
    line = endpoint().dispatch(Request(rid, "look", {"path": "a"}))
    assert line is not None and line["id"] == rid and json.loads(json.dumps(line))["id"] == rid


def test_an_unknown_method_is_method_not_found_naming_it():
    assert endpoint().dispatch(Request(3, "tools/nothing", {})) == refusal(
        3, METHOD_NOT_FOUND, "crew does not handle tools/nothing"
    )
    method = "m" * 100_000
    assert endpoint().dispatch(Request(3, method, {}))["error"]["code"] == METHOD_NOT_FOUND


def test_the_endpoint_words_its_refusal_of_an_unknown_method_as_it_is_told():
    rpc = Endpoint(unknown=lambda method: f"the editor has no {method}; ask for fs/read_text_file")
    assert rpc.dispatch(Request(3, "fs/delete", {})) == refusal(
        3, METHOD_NOT_FOUND, "the editor has no fs/delete; ask for fs/read_text_file"
    )


@pytest.mark.parametrize(
    ("params", "why"),
    [
        ({}, "Object missing required field `path`"),
        ({"path": 3}, "Expected `str`, got `int` - at `$.path`"),
        ({"path": None}, "Expected `str`, got `null` - at `$.path`"),
        ({"path": "a", "depth": "deep"}, "Expected `int`, got `str` - at `$.depth`"),
        ({"path": "a", "depth": 1.5}, "Expected `int`, got `float` - at `$.depth`"),
        ([{"path": "a"}], "Expected `object`, got `array`"),
        (None, "Expected `object`, got `null`"),
        ("a", "Expected `object`, got `str`"),
        (7, "Expected `object`, got `int`"),
    ],
)
def test_params_of_another_shape_are_invalid_params_naming_the_request_and_the_field(params, why):
    called = []
    rpc = Endpoint(routes={"look": Route(lambda request: called.append(request) or {}, Look)})
    assert rpc.dispatch(Request(2, "look", params)) == refusal(
        2, INVALID_PARAMS, f"crew could not read the look request ({why})"
    )
    assert called == []  # no handler sees a message it would have to guess at


def test_huge_params_reach_the_handler_whole():
    text = "é" * 1_000_000
    assert endpoint().dispatch(Request(1, "look", {"path": text}))["result"]["saw"] == text


def test_a_handler_that_refuses_is_answered_with_its_code_and_message():
    def refuse(request):
        raise RpcError(INVALID_PARAMS, "look needs a path inside the working directory")

    assert endpoint(look=Route(refuse)).dispatch(Request(4, "look", {})) == refusal(
        4, INVALID_PARAMS, "look needs a path inside the working directory"
    )


def test_a_handler_that_answers_later_gives_no_line_now():
    later = []
    rpc = Endpoint(routes={"slow": Route(lambda request: later.append(request.id))})
    assert rpc.dispatch(Request("q", "slow", {})) is None and later == ["q"]


def test_a_bug_in_a_handler_is_raised_as_a_bug_and_never_turned_into_an_answer():
    def broken(request):
        return request.params.missing

    with pytest.raises(AttributeError, match="missing"):
        endpoint(look=Route(broken, Look)).dispatch(Request(1, "look", {"path": "a"}))
    with pytest.raises(ZeroDivisionError):
        Endpoint(routes={"x": Route(lambda request: 1 / 0)}).dispatch(Request(1, "x", {}))


def test_a_crew_error_in_a_handler_is_raised_to_end_the_callers_run():
    def ending(request):
        raise CrewError("the run's budget is spent")

    with pytest.raises(CrewError, match="budget is spent"):
        endpoint(look=Route(ending)).dispatch(Request(1, "look", {}))


def test_dispatch_routes_by_the_exact_method_name():
    rpc = endpoint()
    for method in ("Look", "look ", "/look", ""):
        assert rpc.dispatch(Request(1, method, {"path": "a"}))["error"]["code"] == METHOD_NOT_FOUND
