"""A scripted stand-in for a model, for the offline demo. It reads the prompt on stdin and answers
in the protocol a real model follows: a fenced crew tool call when it needs a file, then — once the
results come back — an answer built from them. It is honest: it never invents a tool result."""

from __future__ import annotations

import json
import re
import sys
import time

FILE = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.[A-Za-z0-9]{1,8})\b")
RESULT = re.compile(r"^Result of (\S+) (\{[^\n]*\}):\n(`{3,})json\n(.*?)\n\3$", re.M | re.S)  # input: one line


PAGES = 6  # parts of one long file the demo reads before it answers from what it has


def reply(prompt: str) -> str:
    latest = prompt.rsplit("[new message]", 1)[-1]
    prefix = re.search(r'"name": ?"(\w+):read_file"', prompt) or re.search(r"(\w+):read_file", prompt)
    tool = prefix.group(1) if prefix else "crew"
    if "[crew tool results]" in latest:
        return read_on(prompt, latest, tool) or answer(prompt, latest)
    task = latest.rsplit("[task]", 1)[-1].strip()
    names = FILE.findall(task)
    if names:
        calls = [{"type": "tool_use", "name": f"{tool}:read_file", "input": {"path": n}} for n in names]
        body = calls[0] if len(calls) == 1 else calls
        return f"I'll read {', '.join(names)} with the crew tool.\n```json\n{json.dumps(body)}\n```\n"
    if re.search(r"\b(files?|list|directory|folder)\b", task, re.I):
        call = {"type": "tool_use", "name": f"{tool}:list_files", "input": {}}
        return f"Let me list the files.\n```json\n{json.dumps(call)}\n```\n"
    return (
        "I am crew's offline demo model. Ask me about a file, e.g. "
        '`crew query "@demo what is in README.md?"`, and I will read it with crew:read_file.\n'
    )


def read_on(prompt: str, latest: str, tool: str) -> str:
    """The calls for the next part of each file the latest results left unfinished ("" for none),
    up to PAGES parts of a file."""
    pages = _pages(prompt)
    unfinished: dict[str, int] = {}  # path → the line to read on from
    for _name, raw_input, _fence, envelope in RESULT.findall(latest):
        data = json.loads(envelope.split("\n", 1)[0]).get("data")
        target = json.loads(raw_input).get("path", ".")
        if isinstance(data, dict) and data.get("next_offset") and len(pages.get(target, {})) < PAGES:
            unfinished[target] = int(data["next_offset"])
    if not unfinished:
        return ""
    calls = [
        {"type": "tool_use", "name": f"{tool}:read_file", "input": {"path": path, "offset": offset}}
        for path, offset in unfinished.items()
    ]
    body = calls[0] if len(calls) == 1 else calls
    names = ", ".join(unfinished)
    return f"{names} goes on; I'll read the next part.\n```json\n{json.dumps(body)}\n```\n"


def answer(prompt: str, latest: str) -> str:
    """What the latest results say; a file read in parts is counted over every part read."""
    pages = _pages(prompt)
    out = []
    for name, raw_input, _fence, envelope in RESULT.findall(latest):
        result = json.loads(envelope.split("\n", 1)[0])
        target = json.loads(raw_input).get("path", ".")
        if not result["success"]:
            out.append(f"I could not use {name} on {target}: {result['error']}")
        elif isinstance(result["data"], dict) and "content" in result["data"]:
            out.append(_counted(target, pages[target], result["data"].get("total_lines")))
        else:
            out.append(f"{name} on {target} returned:\n{json.dumps(result['data'], indent=1)[:600]}")
    return "\n\n".join(out or ["The tool results were empty."]) + "\n"


def _counted(target: str, parts: dict[int, str], total: int | None) -> str:
    """The non-empty lines of the parts of `target` read, saying which lines they were when not all."""
    lines = [line for start in sorted(parts) for line in parts[start].splitlines()]
    filled = [line for line in lines if line.strip()]
    first = min(parts)
    read = len(lines)
    if first == 1 and (total is None or read >= total):
        said = f"{target} has {_count(len(filled), 'non-empty line')} ({_count(read, 'line')} in all)."
    else:
        said = (
            f"I read lines {first}-{first + read - 1} of {target}'s {total}: {len(filled)} of them are "
            "not empty (I did not read the rest)."
        )
    return f"{said} It begins:\n" + "\n".join("  " + line for line in filled[:3])


def _pages(prompt: str) -> dict[str, dict[int, str]]:
    """Every part of a file read_file returned in the conversation: path → first line → content."""
    pages: dict[str, dict[int, str]] = {}
    for _name, raw_input, _fence, envelope in RESULT.findall(prompt):
        data = json.loads(envelope.split("\n", 1)[0]).get("data")
        if isinstance(data, dict) and isinstance(data.get("content"), str):
            target = json.loads(raw_input).get("path", ".")
            pages.setdefault(target, {})[int(data.get("start_line") or 1)] = data["content"]
    return pages


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def main() -> None:
    text = reply(sys.stdin.read())
    for line in text.splitlines(keepends=True):  # stream it, as a real CLI would
        sys.stdout.write(line)
        sys.stdout.flush()
        time.sleep(0.01)


if __name__ == "__main__":
    main()
