"""crewbridge.jsonio: JSON from outside, decoded with a bound on nesting, encoded whatever its text."""

from __future__ import annotations

import json

import pytest

from crewbridge.jsonio import MAX_DEPTH, TooDeep, check_depth, dumps_bytes, loads


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_plain_json_decodes_as_json_loads_does() -> None:
    text = '{"a": [1, {"b": "c"}], "d": null}'
    assert loads(text) == json.loads(text)
    assert loads(text.encode()) == json.loads(text)


def test_nesting_up_to_the_limit_is_kept() -> None:
    assert loads(nested(MAX_DEPTH)) is not None


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1_000, 100_000])
def test_deeper_nesting_is_a_value_error_not_a_crash(depth: int) -> None:
    with pytest.raises(TooDeep, match=f"more than {MAX_DEPTH} levels"):
        loads(nested(depth))
    with pytest.raises(ValueError):  # readers that catch bad JSON catch this too
        loads(nested(depth).encode())


def test_many_brackets_side_by_side_are_not_deep() -> None:
    wide = "[" + ",".join(["[{}]"] * 5_000) + "]"
    assert len(loads(wide)) == 5_000


def test_brackets_inside_strings_do_not_count_as_depth() -> None:
    text = json.dumps({"text": "[" * 10_000})
    assert loads(text) == {"text": "[" * 10_000}


def test_check_depth_walks_any_depth_without_recursion() -> None:
    value: list = []
    for _ in range(50_000):
        value = [value]
    with pytest.raises(TooDeep):
        check_depth(value)


def test_dumps_bytes_is_utf8_and_escapes_a_lone_surrogate() -> None:
    assert dumps_bytes({"a": "é"}) == '{"a": "é"}'.encode()
    out = dumps_bytes({"a": "x\udc80y"})
    assert out == b'{"a": "x\\udc80y"}'
    assert json.loads(out) == {"a": "x\udc80y"}
