"""`@agent` and `@agent:model` mentions at the start of a task."""

from __future__ import annotations

import re
from dataclasses import dataclass

from crewbridge.errors import UsageError

# Mentions lead the task: "@claude @gemini:flash explain x". A word in the middle ("mail bob@x.io",
# "@types/node") is task text, never a mention.
_MENTION = re.compile(r"@([A-Za-z][\w-]*)(?::([\w.\-/\[\]]+))?(?=\s|$)")


@dataclass(frozen=True)
class Mention:
    agent: str
    model: str | None = None


def parse_mentions(text: str) -> tuple[list[Mention], str]:
    """The leading mentions and the task that follows them."""
    mentions: list[Mention] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        match = _MENTION.match(text, pos)
        if not match:
            break
        mentions.append(Mention(match.group(1), match.group(2)))
        pos = match.end()
    task = text[pos:].strip()
    if not mentions:
        raise UsageError(
            'no agent mentioned; start the task with one, e.g. crew query "@claude what does '
            'notes.txt say?" (crew agents list shows the configured agents)'
        )
    if not task:
        raise UsageError(f"no task after {' '.join('@' + m.agent for m in mentions)}; write what the agent should do")
    return mentions, task


def parse_agent(text: str) -> Mention:
    """One agent: `@claude` or `@claude:model` (the @ may be left out), as `crew chat` takes it."""
    spec = text if text.startswith("@") else "@" + text
    try:
        mentions, rest = parse_mentions(spec + " -")  # a stand-in task: only the mention is wanted
    except UsageError:
        mentions, rest = [], ""
    if len(mentions) != 1 or rest != "-":
        raise UsageError(f"'{text}' is not one agent mention; write e.g. crew chat @claude or @claude:haiku")
    return mentions[0]
