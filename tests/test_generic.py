"""The generic provider: a CLI described by configuration (argv template, text or jsonl output)."""

from __future__ import annotations

import json

import pytest
from crewbridge.providers.base import Turn
from crewbridge.providers.generic import GenericProvider, GenericSpec

from crewbridge.base.decoded import Failure, MessageEnd, Session, Text
from crewbridge.errors import ConfigKeyError


def provider(**spec) -> GenericProvider:
    return GenericProvider(GenericSpec(name="cli", **{"command": ["cli", "run"], **spec}))


FULL = provider(
    model_args=["-m", "{model}"],
    system_args=["-s", "{system}"],
    options={"query": ["--read-only"], "execute": ["--yes"]},
    resume=["-r", "{session}"],
    format="jsonl",
    session_key="sid",
)


def test_each_key_adds_its_argv_in_order_and_only_when_it_applies() -> None:
    turn = Turn("hi", mode="query", model="m1", session_id="S", system_prompt="be brief", options=["--x"])
    assert FULL.argv(turn) == ["cli", "run", "-m", "m1", "-s", "be brief", "--read-only", "-r", "S", "--x"]
    assert FULL.argv(Turn("hi", mode="execute")) == ["cli", "run", "--yes"]


def test_the_providers_own_model_is_the_default() -> None:
    assert provider(model="small", model_args=["--model={model}"]).argv(Turn("hi")) == ["cli", "run", "--model=small"]
    assert provider(model="small", model_args=["-m", "{model}"]).argv(Turn("hi", model="big"))[-1] == "big"


def test_a_star_in_text_key_joins_the_text_of_every_item() -> None:
    decoder = provider(format="jsonl", text_key="message.content.*.text", session_key="session_id").decoder()
    line = {
        "session_id": "S1",
        "message": {
            "content": [
                {"type": "thinking"},
                {"type": "text", "text": "a"},
                {"type": "tool_use"},
                {"type": "text", "text": "b"},
            ]
        },
    }
    assert decoder.decode(json.dumps(line)) == [Session("S1"), Text("ab"), MessageEnd()]
    assert decoder.decode(json.dumps({"session_id": "S1", "type": "result"})) == [Session("S1")]
    assert decoder.end() == []


def test_jsonl_output_without_text_at_the_key_ends_in_a_failure_quoting_the_first_line() -> None:
    decoder = provider(format="jsonl", text_key="text").decoder()
    first = json.dumps({"type": "init", "detail": "x" * 300})
    assert decoder.decode(first) == [] and decoder.decode('{"content": "hello"}') == []
    [failure] = decoder.end()
    assert isinstance(failure, Failure)
    assert failure.message.startswith(
        "provider 'cli': no line of its output has text at text_key 'text' (format: jsonl); "
        'a line it wrote: {"type": "init", "detail": "xxx'
    )
    assert failure.message.endswith("...; fix format or text_key in crew.yaml")


def test_text_output_is_never_a_failure_at_its_end() -> None:
    decoder = provider().decoder()
    assert decoder.decode("hello") == [Text("hello\n")]
    assert decoder.end() == []


def test_text_output_read_as_jsonl_fails_quoting_the_text() -> None:
    decoder = provider(format="jsonl").decoder()
    assert [type(e).__name__ for e in decoder.decode("Hello, world")] == ["Notice"]  # not JSON
    [failure] = decoder.end()
    assert (
        "no line of its output has text at text_key 'text' (format: jsonl); a line it wrote: Hello, world;"
        in failure.message
    )


@pytest.mark.parametrize(
    "spec, key",
    [
        ({"command": []}, "command"),
        ({"format": "json"}, "format"),
        ({"model_args": ["--model"]}, "model_args"),
        ({"format": "jsonl", "resume": ["-r", "{session}"]}, "resume"),
        ({"endpoints": ["http://api.example.com"]}, "endpoints"),
        ({"endpoints": ["$not a variable"]}, "endpoints"),
        ({"endpoints_from": [{"file": "relative.json", "key": "url"}]}, "endpoints_from"),
    ],
)
def test_a_description_that_cannot_work_names_its_key(spec, key) -> None:
    with pytest.raises(ConfigKeyError) as caught:
        provider(**spec)
    assert caught.value.key == key


def test_deltas_are_pieces_of_one_message_so_a_block_may_span_them() -> None:
    decoder = provider(format="jsonl", text_key="event.delta.text", deltas=True).decoder()
    lines = [{"event": {"delta": {"text": "```js"}}}, {"event": {"delta": {"text": "on\n"}}}]
    assert [e for line in lines for e in decoder.decode(json.dumps(line))] == [Text("```js"), Text("on\n")]


def test_a_configured_cli_reaches_its_endpoints_its_variables_base_urls_and_those_in_its_own_config(tmp_path) -> None:
    (tmp_path / "models.yaml").write_text("- model_id: a\n  api_base: http://127.0.0.1:11434/v1\n- model_id: b\n")
    (tmp_path / "config.json").write_text(
        json.dumps({"provider": {"x": {"options": {"baseURL": "https://gw.example"}}}})
    )
    spec = {
        "endpoints": ["api.example.com", "$MY_BASE_URL", "$UNSET_URL"],
        "endpoints_from": [
            {"file": "$HOME/models.yaml", "key": "*.api_base"},
            {"file": "~/config.json", "key": "provider.*.options.baseURL"},
            {"file": "~/missing.json", "key": "url"},
        ],
    }
    env = {"HOME": str(tmp_path), "MY_BASE_URL": "http://10.0.0.7:8000/v1"}
    assert [one.shown() for one in provider(**spec).endpoints(env)] == [
        "api.example.com",
        "10.0.0.7:8000",
        "127.0.0.1:11434",
        "gw.example:443",
    ]
