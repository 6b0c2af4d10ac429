"""crewbridge.base.jsonio: JSON from outside, decoded with a bound on nesting, encoded whatever its text."""

from __future__ import annotations

import json
from typing import Any, TypedDict

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crewbridge.base import jsonio
from crewbridge.base.jsonio import MAX_DEPTH, TooDeep, check_depth, decode, dumps_bytes, loads


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


@pytest.mark.slow
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


def use(patch: pytest.MonkeyPatch, fast: str) -> None:
    """Make decode use msgspec from its next line on, or json's scanner for every line."""
    patch.setattr(jsonio, "_decoders", {})
    if fast == "msgspec":
        patch.setattr(jsonio, "_lines", jsonio.FAST_AFTER)
    else:
        patch.setattr(jsonio, "FAST_AFTER", float("inf"))
        patch.setattr(jsonio, "FAST_AFTER_CHARS", float("inf"))


@pytest.fixture(params=["msgspec", "json's scanner"])
def fast_decoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test of decode runs with msgspec, and with json's scanner (a process's first lines, or
    a platform without msgspec)."""
    use(monkeypatch, request.param)
    return str(request.param)


def taken(fields: object = None) -> bool:
    return isinstance(getattr(jsonio._decoders.get(fields), "__self__", None), msgspec.json.Decoder)


def test_a_process_takes_msgspec_once_it_has_read_enough_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonio, "_decoders", {})
    monkeypatch.setattr(jsonio, "_lines", 0)
    monkeypatch.setattr(jsonio, "_chars", 0)
    for number in range(jsonio.FAST_AFTER - 1):
        assert decode(f'{{"n": {number}}}') == {"n": number}
    assert not taken()  # a short run never imports it
    assert decode('{"n": -1}\n') == {"n": -1}
    assert taken()


def test_or_enough_characters_in_fewer_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonio, "_decoders", {})
    monkeypatch.setattr(jsonio, "_lines", 0)
    monkeypatch.setattr(jsonio, "_chars", 0)
    big = json.dumps({"text": "x" * (jsonio.FAST_AFTER_CHARS // 2)})
    assert decode(big) == json.loads(big)
    assert not taken()
    assert decode(big) == json.loads(big)
    assert taken()


class Inner(TypedDict, total=False):
    text: Any


class Fields(TypedDict, total=False):
    type: Any
    inner: Inner


def test_fields_decode_what_the_reader_looks_at_and_skip_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    line = '{"type": "a", "big": ["' + "x" * 1000 + '"], "inner": {"text": "t", "id": 1}}'
    for fast in ("json's scanner", "msgspec"):
        use(monkeypatch, fast)
        value = decode(line, Fields)
        assert value["type"] == "a" and value["inner"]["text"] == "t"
    assert decode(line, Fields) == {"type": "a", "inner": {"text": "t"}}  # msgspec took it: the rest is skipped
    assert taken(Fields) and not taken()  # a decoder per fields


@pytest.mark.parametrize("line", ['{"inner": null}', '{"inner": [1]}', "[1]", '{"type": 1e400, "inner": "x"}'])
def test_a_line_of_another_shape_than_its_fields_is_a_value_error(line: str, monkeypatch: pytest.MonkeyPatch) -> None:
    use(monkeypatch, "msgspec")
    with pytest.raises(ValueError):
        decode(line, Fields)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def decoded(line: str) -> object:
    """What a stream's reader makes of a line: the fast decoder's value, else `loads`'s."""
    try:
        return decode(line)
    except (ValueError, RecursionError):
        return loads(line.strip())


@given(value=JSON_VALUES)
@pytest.mark.slow
def test_decode_or_loads_gives_what_json_loads_gives(value: object) -> None:
    for line in (json.dumps(value) + "\n", json.dumps(value, ensure_ascii=False)):
        for fast in ("msgspec", "json's scanner"):
            with pytest.MonkeyPatch.context() as patch:
                use(patch, fast)
                assert repr(decoded(line)) == repr(json.loads(line))


def test_msgspec_keeps_an_integer_past_64_bits_exact(fast_decoder: str) -> None:
    assert decode("[123456789012345678901234567890, -9223372036854775809]") == [
        123456789012345678901234567890,
        -9223372036854775809,
    ]


@pytest.mark.parametrize("line", ['{"n": NaN}', '{"big": 1e400}', '"\\ud800"', '  {"padded": true}  \n'])
def test_what_the_fast_decoder_may_refuse_loads_takes_as_json_does(line: str, fast_decoder: str) -> None:
    assert repr(decoded(line)) == repr(json.loads(line))


def test_a_line_padded_in_front_is_left_to_loads_and_its_bound(fast_decoder: str) -> None:
    with pytest.raises(ValueError, match="whitespace before the value"):
        decode(" " + nested(MAX_DEPTH + 1))
    with pytest.raises(TooDeep):
        decoded(" " + nested(MAX_DEPTH + 1))


@pytest.mark.parametrize("line", ["", "\n", "{", '{"cut": "in a string\n', '{"a": 1} trailing', "[1,]"])
def test_a_line_that_is_not_json_is_a_value_error(line: str, fast_decoder: str) -> None:
    with pytest.raises(ValueError):
        decode(line)


def test_decode_bounds_nesting_only_as_the_decoders_do(fast_decoder: str) -> None:
    assert decode(nested(500)) == json.loads(nested(500))  # a stream's reader picks fields by name
    for depth in (2_000, 100_000):  # past the recursion limit
        with pytest.raises((RecursionError, ValueError)):
            decode(nested(depth))
