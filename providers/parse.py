"""`crew parse`: raw CLI output in, one record per tool-call attempt out."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from crewbridge.providers.base import Decoder, JsonLineDecoder, as_text
from crewbridge.providers.generic import TextDecoder

from crewbridge import providers
from crewbridge.base.decoded import Event, Failure, MessageEnd, Notice, Text
from crewbridge.errors import UsageError
from crewbridge.toolkit.extract import Extractor, ToolCall
from crewbridge.toolkit.registry import DEFAULT_PREFIX, ToolRegistry

TEXT = "text"  # plain text, every line the model's


def formats() -> list[str]:
    """Every output format: each provider's (built-in, then installed plugins'), and plain text."""
    return [*providers.names(), TEXT]


def decoder_for(fmt: str) -> Decoder:
    """A fresh decoder for an output format: the named provider's, or plain text."""
    if fmt == TEXT:
        return TextDecoder()
    if fmt not in providers.BUILTIN and fmt not in providers.plugins():  # a built-in one needs no look at them
        raise UsageError(f"format '{fmt}' is not known; use one of: {', '.join(formats())}")
    return providers.load(fmt).decoder()


def parse_stream(
    lines: Iterable[str] | Iterable[bytes],
    fmt: str,
    registry: ToolRegistry | None = None,
    prefix: str = DEFAULT_PREFIX,
    *,
    warn: Callable[[str], None] = lambda message: None,
) -> Iterator[dict[str, Any]]:
    """`{"name", "input", "error"}` for each tool-call attempt in a CLI's output, as soon as its
    block closes. A corrupt line, or an error the CLI reports, goes to `warn` as one line. Lines of
    UTF-8 bytes go as they are to a decoder that reads them with JsonLineDecoder.decode (which makes
    text only of what it reads), as text to any other (bytes that are not UTF-8 as lone surrogates,
    as crew reads stdin)."""
    decoder = decoder_for(fmt)
    decode = decoder.decode if type(decoder).decode is JsonLineDecoder.decode else _as_text(decoder)
    extractor = Extractor(registry, prefix)
    for number, line in enumerate(lines, 1):
        for event in decode(line):  # type: ignore[arg-type]  # bytes only to JsonLineDecoder.decode
            if isinstance(event, Text):
                calls = extractor.feed(event.text)
            elif isinstance(event, MessageEnd):
                calls = extractor.end_message()
            else:
                if isinstance(event, Notice) and event.kind == "corrupt":
                    warn(f"line {number}: {event.detail}")
                elif isinstance(event, Failure):
                    warn(f"line {number}: the CLI reported an error: {event.message}")
                continue
            if calls:
                yield from map(record, calls)
    yield from map(record, extractor.finish())


def _as_text(decoder: Decoder) -> Callable[[str | bytes], list[Event]]:
    def decode(line: str | bytes) -> list[Event]:
        return decoder.decode(as_text(line))

    return decode


def record(call: ToolCall) -> dict[str, Any]:
    """What `crew parse` prints for one attempt."""
    return {"name": call.name, "input": call.input, "error": call.error}
