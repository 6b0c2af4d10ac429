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
        mentions.append(_mention(match))
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
    match = _MENTION.fullmatch(text if text.startswith("@") else "@" + text)
    if match is None:
        raise UsageError(f"'{text}' is not one agent mention; write e.g. crew chat @claude or @claude:haiku")
    return _mention(match)


def _mention(match: re.Match[str]) -> Mention:
    agent, model = match.group(1), match.group(2)
    if model is not None:
        # No example model: which names a CLI takes is its own (@gemini:sonnet would be wrong)
        refuse_option(
            f"the model in '@{agent}:{model}'",
            model,
            f"name one of its CLI's models after the colon (@{agent}:MODEL) or leave it out",
        )
    return Mention(agent, model)


def refuse_option(what: str, value: str, fix: str) -> None:
    """UsageError when `value`, passed to a CLI as an argument, would be read as an option."""
    if value.startswith("-"):
        raise UsageError(f"{what} starts with '-', so the CLI would read it as an option; {fix}")
