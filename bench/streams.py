"""Generated Claude Code stream-json output, shaped like the real thing (tests/fixtures, captures):
long assistant texts with markdown and code examples, some crew tool calls, and native tool round
trips whose results (file contents) are large. Deterministic for a given seed and size."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

VERSION = 1  # of the generator: a cached stream written by another version is written again
SESSION = "5e55a0b1-0000-4000-8000-00000000be4c"
WORDS = (
    "the a of to in is that for it with as was on be by this are from at or an which "
    "extractor stream block fence model reply tool call result file line value parser token "
    "bridge loop process buffer schema input output agent query execute memory latency "
    "Überblick naïve → café"
).split()


def prose(rng: random.Random, chars: int) -> str:
    """Markdown-ish text: paragraphs, inline code, the odd list and a fenced example."""
    out: list[str] = []
    size = 0
    while size < chars:
        kind = rng.random()
        if kind < 0.08:
            part = "```python\ndef f(x):\n    return x * 2  # ```json is an example here\n```\n"
        elif kind < 0.16:
            part = "".join(f"- {' '.join(rng.choices(WORDS, k=8))} `code`\n" for _ in range(4))
        else:
            part = " ".join(rng.choices(WORDS, k=rng.randint(40, 160))) + ".\n\n"
        out.append(part)
        size += len(part)
    return "".join(out)


def file_body(rng: random.Random, chars: int) -> str:
    """What a native Read returns: numbered source lines (with backticks and braces in them)."""
    lines = []
    size = n = 0
    while size < chars:
        n += 1
        words = " ".join(rng.choices(WORDS, k=6))
        line = f"{n:6}\t    value = {{'k': `{rng.randint(0, 10**6)}`, 'w': \"{words}\"}}"
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


def crew_call(rng: random.Random) -> str:
    call = {"type": "tool_use", "name": "crew:read_file", "input": {"path": f"src/m{rng.randint(1, 99)}.py"}}
    return f"I'll read it with the crew tool.\n```json\n{json.dumps(call)}\n```\n"


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"


def _common() -> dict[str, Any]:
    return {"parent_tool_use_id": None, "session_id": SESSION, "uuid": str(uuid.UUID(int=0))}


def _assistant(msg_id: str, block: dict[str, Any]) -> str:
    message = {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": "claude-bench",
        "content": [block],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 1},
    }
    return _line({"type": "assistant", "message": message, **_common()})


def _stream_event(event: dict[str, Any]) -> str:
    return _line({"type": "stream_event", "event": event, **_common()})


def _deltas(rng: random.Random, msg_id: str, text: str) -> Iterator[str]:
    """--include-partial-messages: the text as stream_event deltas (20–120 characters each)."""
    yield _stream_event(
        {"type": "message_start", "message": {"id": msg_id, "type": "message", "role": "assistant", "content": []}}
    )
    i = 0
    while i < len(text):
        step = rng.randint(20, 120)
        yield _stream_event(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text[i : i + step]}}
        )
        i += step
    yield _stream_event({"type": "content_block_stop", "index": 0})


def claude_stream(
    size: int, *, seed: int = 6, partial: bool = False, calls: bool = True, text_share: float = 0.5
) -> Iterator[str]:
    """Lines of a claude stream-json run of about `size` bytes: messages that are assistant text
    (2–24 KB; every fifth holds a crew call when `calls`) with probability `text_share`, else a
    native Read round trip (a 4–48 KB result). With `partial`, a text comes as deltas first."""
    rng = random.Random(seed)
    yield _line(
        {
            "type": "system",
            "subtype": "init",
            "session_id": SESSION,
            "model": "claude-bench",
            "tools": ["Read", "Glob", "Grep"],
            "cwd": "/bench",
        }
    )
    written = 0
    n = 0
    text = ""
    while written < size:
        n += 1
        msg_id = f"msg_bench{n:08}"
        if rng.random() < text_share:
            text = prose(rng, rng.randint(2_000, 24_000))
            if calls and n % 5 == 0:
                text += crew_call(rng)
            lines = list(_deltas(rng, msg_id, text)) if partial else []
            lines.append(_assistant(msg_id, {"type": "text", "text": text}))
        else:
            tool_id = f"toolu_bench{n:08}"
            result = {
                "tool_use_id": tool_id,
                "type": "tool_result",
                "content": file_body(rng, rng.randint(4_000, 48_000)),
            }
            lines = [
                _assistant(
                    msg_id,
                    {"type": "tool_use", "id": tool_id, "name": "Read", "input": {"file_path": f"/bench/src/m{n}.py"}},
                ),
                _line({"type": "user", "message": {"role": "user", "content": [result]}, **_common()}),
            ]
        for line in lines:
            written += len(line.encode())
            yield line
    yield _line(
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "result": text,
            "session_id": SESSION,
            "total_cost_usd": 0.5,
            "usage": {"input_tokens": 1000, "output_tokens": 1000},
        }
    )


def write_stream(path: Path, size: int, **options: Any) -> Path:
    """Write `claude_stream(size, **options)` to `path` unless the same one is already there."""
    stamp = path.with_suffix(".args")
    args = json.dumps({"version": VERSION, "size": size, **options}, sort_keys=True)
    if path.exists() and stamp.exists() and stamp.read_text() == args:
        return path
    with path.open("w", encoding="utf-8") as out:
        out.writelines(claude_stream(size, **options))
    stamp.write_text(args)
    return path
