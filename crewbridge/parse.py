"""`crew parse`: raw CLI output in, one record per tool-call attempt out."""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

from crewbridge.errors import UsageError
from crewbridge.events import Failure, MessageEnd, Notice, Text
from crewbridge.extract import Extractor, ToolCall
from crewbridge.providers.base import Decoder
from crewbridge.providers.claude import ClaudeDecoder
from crewbridge.providers.codex import CodexDecoder
from crewbridge.providers.gemini import GeminiDecoder
from crewbridge.providers.generic import TextDecoder
from crewbridge.registry import DEFAULT_PREFIX, ToolRegistry

DECODERS: dict[str, Callable[[], Decoder]] = {
    "claude": ClaudeDecoder, "gemini": GeminiDecoder, "codex": CodexDecoder, "text": TextDecoder}
FORMATS = tuple(DECODERS)


def decoder_for(fmt: str) -> Decoder:
    """A fresh decoder for an output format."""
    make = DECODERS.get(fmt)
    if make is None:
        raise UsageError(f"format '{fmt}' is not known; use one of: {', '.join(FORMATS)}")
    return make()


def parse_stream(lines: Iterable[str], fmt: str, registry: ToolRegistry | None = None,
                 prefix: str = DEFAULT_PREFIX, *,
                 warn: Callable[[str], None] = lambda message: None) -> Iterator[dict[str, Any]]:
    """`{"name", "input", "error"}` for each tool-call attempt in a CLI's output, as soon as its
    block closes. A corrupt line, or an error the CLI reports, goes to `warn` as one line."""
    decoder = decoder_for(fmt)
    extractor = Extractor(registry, prefix)
    for number, line in enumerate(lines, 1):
        for event in decoder.decode(line):
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
            yield from map(record, calls)
    yield from map(record, extractor.finish())


def record(call: ToolCall) -> dict[str, Any]:
    """What `crew parse` prints for one attempt."""
    return {"name": call.name, "input": call.input, "error": call.error}
