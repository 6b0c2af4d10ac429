"""Gemini CLI, exact: a new `gemini` process per turn (it takes no input while it runs), continued
with `--resume` from its own session file — which crew corrects after a stopped reply.

Gemini writes a session as JSON lines under ~/.gemini/tmp/<project>/chats/: the user message when
a turn starts, the model's message when its reply ends. Killed mid-reply, it has stored none of the
reply; finished before the stop landed (the race), it has stored all of it, tail included. Either
way crew appends to the file what the CLI itself appends when it rewinds (`{"$rewindTo": id}`, which
drops that message and everything after it) and the reply cut at its last tool block, so the next
turn resumes from the exact history.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from crewbridge.base import jsonio
from crewbridge.conversations import EXACT, ProcessConversation
from crewbridge.providers.gemini import session_file


class GeminiSessionConversation(ProcessConversation):
    def keep(self, kept: str, stopped: bool) -> str:
        message = self.history[-1][1]  # the message this reply answered
        history = super().keep(kept, stopped)  # stop() waited for the process to end: the file is still
        path = session_file(self.env, self.session_id) if stopped else None
        return EXACT if path is not None and cut_reply(path, message, kept) else history


def cut_reply(path: Path, message: str, kept: str) -> bool:
    """Make the session at `path` end with user `message` and the reply `kept`. False (and the file
    untouched) when it does not end with that message, or the reply used Gemini's own tools."""
    records = _records(path)
    last_user = max((i for i, record in enumerate(records) if record.get("type") == "user"), default=None)
    if last_user is None or _text(records[last_user].get("content")).strip() != message.strip():
        return False
    reply = [record for record in records[last_user + 1 :] if "id" in record]
    if any(record.get("toolCalls") for record in reply):
        return False  # dropping the reply would drop those calls and their results too
    lines = [{"$rewindTo": reply[0]["id"]}] if reply else []
    lines.append(
        {
            "id": str(uuid.uuid4()),
            "timestamp": datetime.now(timezone.utc).isoformat(),
            "type": "gemini",
            "content": kept,
        }
    )
    with path.open("a", encoding="utf-8") as file:
        file.writelines(json.dumps(line) + "\n" for line in lines)
    return True


def _records(path: Path) -> list[dict[str, Any]]:
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = jsonio.loads(line)
        except ValueError:  # not JSON, or nested too deeply (jsonio.TooDeep)
            continue  # Gemini skips lines it cannot read, too
        if isinstance(record, dict):
            records.append(record)
    return records


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""
