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


def reply(prompt: str) -> str:
    latest = prompt.rsplit("[new message]", 1)[-1]
    if "[crew tool results]" in latest:
        return answer(latest)
    task = latest.rsplit("[task]", 1)[-1].strip()
    prefix = re.search(r'"name": ?"(\w+):read_file"', prompt) or re.search(r"(\w+):read_file", prompt)
    tool = prefix.group(1) if prefix else "crew"
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


def answer(message: str) -> str:
    out = []
    for name, raw_input, _fence, envelope in RESULT.findall(message):
        result = json.loads(envelope.split("\n", 1)[0])
        target = json.loads(raw_input).get("path", ".")
        if not result["success"]:
            out.append(f"I could not use {name} on {target}: {result['error']}")
        elif isinstance(result["data"], dict) and "content" in result["data"]:
            lines = [line for line in str(result["data"]["content"]).splitlines() if line.strip()]
            out.append(
                f"{target} has {len(lines)} non-empty lines. It begins:\n"
                + "\n".join("  " + line for line in lines[:3])
            )
        else:
            out.append(f"{name} on {target} returned:\n{json.dumps(result['data'], indent=1)[:600]}")
    return "\n\n".join(out or ["The tool results were empty."]) + "\n"


def main() -> None:
    text = reply(sys.stdin.read())
    for line in text.splitlines(keepends=True):  # stream it, as a real CLI would
        sys.stdout.write(line)
        sys.stdout.flush()
        time.sleep(0.01)


if __name__ == "__main__":
    main()
