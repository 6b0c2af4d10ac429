"""A stand-in for `claude -p --output-format stream-json --include-partial-messages`, for the
dispatch figure: it writes a tool block as text deltas, notes the moment it writes the closing
fence, then keeps running (`--linger` seconds) before it writes more prose and ends. Given the
tool results (a second turn), it answers at once.

    python bench/fake_claude.py --stamps FILE --linger 1.0 < prompt
"""

from __future__ import annotations

import argparse
import json
import sys
import time

SESSION = "fa4ec1a0-0000-4000-8000-000000000001"


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def delta(text: str) -> None:
    emit(
        {
            "type": "stream_event",
            "event": {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
            "session_id": SESSION,
            "parent_tool_use_id": None,
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stamps", required=True, help="file the fence times are appended to")
    parser.add_argument("--linger", type=float, default=1.0)
    args = parser.parse_args()
    prompt = sys.stdin.read()
    emit({"type": "system", "subtype": "init", "session_id": SESSION, "model": "fake"})
    emit(
        {
            "type": "stream_event",
            "session_id": SESSION,
            "parent_tool_use_id": None,
            "event": {"type": "message_start", "message": {"id": "msg_fake1"}},
        }
    )
    if "[crew tool results]" in prompt:
        text = "Done: the mark was set."
        delta(text)
    else:
        call = json.dumps({"type": "tool_use", "name": "crew:mark", "input": {}})
        for piece in ("I will set the mark now.\n", "```json\n", call[:20], call[20:], "\n"):
            delta(piece)
        with open(args.stamps, "a", encoding="utf-8") as stamps:
            stamps.write(f"{time.monotonic()}\n")  # CLOCK_MONOTONIC: one clock for all processes
        delta("```\n")  # the closing fence line, complete
        time.sleep(args.linger)
        text = "This prose came long after the block; crew should have acted on the call already."
        delta(text)
    emit(
        {
            "type": "stream_event",
            "event": {"type": "content_block_stop", "index": 0},
            "session_id": SESSION,
            "parent_tool_use_id": None,
        }
    )
    emit(
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "result": text,
            "session_id": SESSION,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )


if __name__ == "__main__":
    main()
