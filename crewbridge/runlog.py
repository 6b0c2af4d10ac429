"""`crew log show RUN`: one run's transcript as a person reads it (`--json` gives the events as
written, one JSON object a line).

One line per event, led by the seconds since the run started and the agent: what crew sent each
turn, each tool call and its result (as the live tool lines show them), the CLI's own tools and
crew's decision, usage, errors, the answer. What a prompt repeats is named, not shown again: crew's
tool catalogue (its size), a replayed conversation (its size); the message itself follows. Long text
is cut to its first lines, and every line is made safe for a terminal (control characters escaped).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from crewbridge.render import brief, one_line, summary

SHOWN_LINES = 12  # lines of one text (a prompt, a reply, an answer) shown before it is cut
WIDTH = 160  # characters of one shown line
TASK = "\n[task]\n"  # where the catalogue ends in a first message (prompts/prompt.md)
REPLAYED = "[crew conversation so far"  # a replayed conversation (prompts/replay.md) …
NEW_MESSAGE = "\n[new message]\n"  # … and where the new message starts
RESULTS = "[crew tool results]"  # a message of tool results (prompts/tool_results.md)


def lines(events: Iterable[dict[str, Any]]) -> Iterator[str]:
    """The run's events as lines of text."""
    for event in events:
        kind = str(event.get("kind", "?"))
        show = _SHOWN.get(kind)
        head, body = show(event) if show else (_other(event), [])
        if kind in ("start", "end", "corrupt"):  # about the whole run
            yield head
            yield from body
            continue
        seconds = event.get("ms")
        when = f"{seconds / 1000:7.2f}s" if isinstance(seconds, (int, float)) else " " * 8
        agent = f"@{event['agent']} " if event.get("agent") else ""
        yield f"{when}  {agent}{head}"
        yield from (f"{' ' * 12}{line}" for line in body)


def _start(event: dict[str, Any]) -> tuple[str, list[str]]:
    agents = " ".join(f"@{agent}" for agent in event.get("agents") or [])
    resumed = f", continuing run {event['resumed_from']}" if event.get("resumed_from") else ""
    head = (
        f"run {event.get('run_id')}: crew {event.get('command')} {agents}, {event.get('time')}, "
        f"in {event.get('cwd')}{resumed}"
    )
    task = event.get("task")
    return one_line(head, WIDTH * 2), [f"task: {one_line(str(task), WIDTH)}"] if task else []


def _prompt(event: dict[str, Any]) -> tuple[str, list[str]]:
    text = str(event.get("text", ""))
    notes = []
    if text.startswith(REPLAYED) and NEW_MESSAGE in text:
        earlier, _, text = text.rpartition(NEW_MESSAGE)
        notes.append(f"(the conversation so far, replayed: {len(earlier):,} characters)")
    if TASK in text:
        catalogue, _, text = text.partition(TASK)
        notes.append(f"(crew's tool catalogue: {len(catalogue):,} characters; the task:)")
    elif text.startswith(RESULTS):  # each result is shown above, with its call
        count = text.count("\nResult of ")
        return f"turn {event.get('turn')}: crew sent", [
            *notes,
            f"(the results of {count} tool call{'' if count == 1 else 's'}: {len(text):,} characters)",
        ]
    return f"turn {event.get('turn')}: crew sent", notes + _text(text)


def _call(event: dict[str, Any]) -> tuple[str, list[str]]:
    return one_line(f"→ {event.get('name')} {brief(event.get('input'))}".rstrip(), WIDTH), []


def _result(event: dict[str, Any]) -> tuple[str, list[str]]:
    found = event.get("result")
    result: dict[str, Any] = found if isinstance(found, dict) else {}
    if result.get("success"):
        detail = summary(result.get("data"), bool((result.get("metadata") or {}).get("truncated")))
        return one_line(f"  ✓ {event.get('name')}: {detail}", WIDTH), []
    return one_line(f"  ✗ {event.get('name')}: {result.get('error')}", WIDTH), []


def _native(event: dict[str, Any]) -> tuple[str, list[str]]:
    decision = str(event.get("decision", ""))
    reason = f": {event['reason']}" if event.get("reason") else ""
    return one_line(f"native:{event.get('tool')} {brief(event.get('input'))}: {decision}{reason}", WIDTH), []


def _usage(event: dict[str, Any]) -> tuple[str, list[str]]:
    cost = event.get("cost_usd")
    spent = f", ${cost:.4f}" if isinstance(cost, (int, float)) else ""
    return (
        f"usage, turn {event.get('turn')}: {event.get('input_tokens', 0):,} tokens in "
        f"({event.get('cached_tokens', 0):,} cached), {event.get('output_tokens', 0):,} out{spent}",
        [],
    )


def _end(event: dict[str, Any]) -> tuple[str, list[str]]:
    calls, errors = event.get("tool_calls", 0), event.get("errors", 0)
    return f"end, {event.get('ms', 0) / 1000:.2f}s: {event.get('status')}, {calls} tool calls, {errors} errors", []


def _other(event: dict[str, Any]) -> str:
    """An event without a shape of its own here: its kind and its fields, on one line."""
    fields = {k: v for k, v in event.items() if k not in ("kind", "time", "ms", "agent")}
    return one_line(f"{event.get('kind')}: {json.dumps(fields, ensure_ascii=False, default=str)}", WIDTH)


def _said(label: str, key: str = "text") -> Any:
    """An event whose point is a text: a label, then the text's first lines."""
    return lambda event: (label, _text(str(event.get(key, ""))))


def _text(text: str) -> list[str]:
    """`text`'s first SHOWN_LINES lines, each safe for a terminal, then how much was left out."""
    shown = text.strip("\n").splitlines()
    cut = [one_line(line, WIDTH) for line in shown[:SHOWN_LINES]]
    if len(shown) > SHOWN_LINES:
        cut.append(f"… {len(shown) - SHOWN_LINES:,} more lines (crew log show --json has them all)")
    return cut


_SHOWN = {
    "start": _start,
    "prompt": _prompt,
    "tool_call": _call,
    "tool_result": _result,
    "native_tool": _native,
    "usage": _usage,
    "end": _end,
    "reply": _said("replied (kept up to its last call):"),
    "answer": _said("answered:"),
    "error": lambda event: (one_line(f"error: {event.get('message')}", WIDTH * 2), []),
    "session": lambda event: (f"session {event.get('session')}", []),
    "fallback": lambda event: (
        one_line(f"cannot answer ({event.get('reason')}); @{event.get('to')} takes over", WIDTH),
        [],
    ),
    "corrupt": lambda event: (one_line(f"line {event.get('line')} could not be read: {event.get('error')}"), []),
}
