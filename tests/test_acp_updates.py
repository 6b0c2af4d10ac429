"""crewbridge.acp.updates: what the editor is shown of a tool call, and of a permission request about
one, hides no part of it (the title of `ls -la` + 220 spaces + `; echo owned > pwned.txt` was cut
at 200 characters with no sign, and the editor allowed it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crewbridge.acp.updates import TITLE, Updates

ATTACK = "ls -la" + " " * 220 + "; echo owned > pwned.txt"


def asked(command: str) -> dict:
    update, started = Updates(Path("/project")).asked("claude", "run_command", {"command": command})
    assert started is not None  # not shown before: started now
    return update.model_dump(by_alias=True, exclude_none=True)


@pytest.mark.parametrize(
    ("command", "title"),
    [
        (ATTACK, "run_command ls -la⟨220 spaces⟩; echo owned > pwned.txt"),
        ("ls\necho owned > pwned.txt", "run_command ls\\necho owned > pwned.txt"),
        ("ls \x1b[8m; echo owned\x1b[0m", "run_command ls \\x1b[8m; echo owned\\x1b[0m"),
        ("echo safe #\u202e;\techo owned\u200b", "run_command echo safe #\\u202e;\\techo owned\\u200b"),
    ],
)
def test_a_permission_request_titles_the_whole_command_with_nothing_hidden(command, title):
    shown = asked(command)
    assert shown["title"] == title and shown["status"] == "pending"
    assert shown["rawInput"] == {"command": command}  # the input itself, as given
    assert "content" not in shown  # the title says it all


def test_a_command_too_long_for_a_title_says_so_and_the_body_holds_it_whole():
    command = "echo " + "a" * 300 + "; echo owned > pwned.txt"
    shown = asked(command)
    assert len(shown["title"]) <= TITLE + len("… (999 more characters)")
    assert shown["title"] == ("run_command " + command)[:TITLE] + "… (141 more characters)"
    [body] = shown["content"]
    assert body["content"]["text"] == '{"command": "' + command + '"}'
    assert shown["rawInput"] == {"command": command}


def test_a_tool_calls_title_is_drawn_the_same_when_it_starts():
    started = Updates(Path("/project")).start("claude", "crew:run_command", {"command": ATTACK})
    assert started.title == "run_command ls -la⟨220 spaces⟩; echo owned > pwned.txt"
