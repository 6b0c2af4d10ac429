"""What the editor is shown of a run's record (crewbridge/acp/updates.py): the CLI's own tool calls
— started by their record id, finished by their result (or by crew's refusal), a write shown as the
diff its input asked for — and a permission request that hides no part of the call (the title of
`ls -la` + 220 spaces + `; echo owned > pwned.txt` was cut at 200 characters with no sign, and the
editor allowed it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crewbridge.acp.updates import TITLE, Updates
from crewbridge.record import events as ev
from crewbridge.system.approval import Question


def own_call(call: str, name: str, data: dict) -> ev.Call:
    return ev.Call(agent="claude", call=call, name=name, input=data, via="own", ref=f"toolu_{call}")


def shown(tmp_path: Path, *events: ev.Event) -> list:
    updates = Updates(tmp_path, run="r1")
    return [update for event in events for update in updates.of(event)]


def test_a_command_the_cli_ran_unasked_starts_and_ends_with_its_output(tmp_path: Path) -> None:
    started, ended = shown(
        tmp_path,
        own_call("c1", "native:exec_command", {"command": "/bin/bash -lc 'make'"}),
        ev.Decision(agent="claude", call="c1", decision="allowed", by="cli"),
        ev.Result(agent="claude", call="c1", name="native:exec_command", success=True, data={"output": "built\n"}),
    )
    assert (started.tool_call_id, started.status, started.kind) == ("r1:c1", "in_progress", "execute")
    assert started.title == "native:exec_command /bin/bash -lc 'make'"
    assert (ended.tool_call_id, ended.status) == ("r1:c1", "completed")
    assert ended.content[0].content.text == "built\n"


def test_the_clis_own_write_ends_with_the_diff_it_asked_for_and_a_failure_with_its_error(tmp_path: Path) -> None:
    write = {"file_path": "w.txt", "content": "written\n"}
    _, ended, _, failed = shown(
        tmp_path,
        own_call("c1", "native:Write", write),
        ev.Result(agent="claude", call="c1", name="native:Write", success=True, data={"output": "File created"}),
        own_call("c2", "native:Bash", {"command": "false"}),
        ev.Result(agent="claude", call="c2", name="native:Bash", success=False, error="Exit code 1"),
    )
    assert ended.status == "completed" and ended.content[0].type == "diff"
    assert (ended.content[0].path, ended.content[0].new_text) == (str(tmp_path / "w.txt"), "written\n")
    assert (failed.tool_call_id, failed.status, failed.content[0].content.text) == ("r1:c2", "failed", "Exit code 1")


def test_a_call_crew_refused_ends_at_the_refusal_and_its_result_changes_nothing(tmp_path: Path) -> None:
    updates = shown(
        tmp_path,
        own_call("c1", "native:Bash", {"command": "rm x"}),
        ev.Decision(agent="claude", call="c1", decision="refused", reason="crew's policy does not allow Bash"),
        ev.Result(agent="claude", call="c1", name="native:Bash", success=False, error="crew's policy does not allow"),
    )
    assert [u.status for u in updates] == ["in_progress", "failed"]
    assert updates[1].content[0].content.text == "crew's policy does not allow Bash"


ATTACK = "ls -la" + " " * 220 + "; echo owned > pwned.txt"


def asked(command: str) -> dict:
    update = Updates(Path("/project")).asked(Question("claude", "run_command", {"command": command}))
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
    updates = Updates(Path("/project"), run="r1")
    [started] = updates.of(ev.Call(agent="claude", call="c1", name="crew:run_command", input={"command": ATTACK}))
    assert started.title == "run_command ls -la⟨220 spaces⟩; echo owned > pwned.txt"
    asked = updates.asked(Question("claude", "run_command", {"command": ATTACK}, call="c1"))
    assert asked.tool_call_id == started.tool_call_id == "r1:c1"  # the question is about that very call


def test_each_run_of_the_check_is_a_finished_command_with_its_output_and_a_pull_request_a_line(tmp_path: Path) -> None:
    failed, passed, pull = shown(
        tmp_path,
        ev.Check(
            agent="claude", command="pytest -q", round=1, rounds=3, passed=False, exit_code=1, output="1 failed\n"
        ),
        ev.Check(agent="claude", command="pytest -q", round=2, rounds=3, passed=True, exit_code=0),
        ev.Pull(agent="claude", url="https://github.com/o/r/pull/7", number=7, branch="crew/x/claude", forge="github"),
    )
    assert (failed.tool_call_id, failed.kind, failed.status) == ("r1:check-1", "execute", "failed")
    assert failed.title == "check 1/3: pytest -q (failed, exit status 1)"
    assert failed.content[0].content.text == "1 failed\n" and failed.raw_output == {"exit_code": 1, "passed": False}
    assert (passed.tool_call_id, passed.status, passed.content) == ("r1:check-2", "completed", None)
    assert pull.content.text == "\n_crew: pull request opened: https://github.com/o/r/pull/7_\n"


def test_a_replay_gives_each_result_to_its_own_call_though_they_ended_in_another_order(tmp_path):
    """Issue 40: two read_file calls at once were replayed as a.txt ← "B TEXT" and b.txt ← "A TEXT"
    (results were matched by the tool's name): the record's call ids keep them apart."""
    from crewbridge.acp.updates import replayed

    events = [
        ev.Start(run="r1", task="read both"),
        ev.Call(agent="claude", call="c1", name="crew:read_file", input={"path": "a.txt"}),
        ev.Call(agent="claude", call="c2", name="crew:read_file", input={"path": "b.txt"}),
        ev.Result(agent="claude", call="c2", name="crew:read_file", success=True, data={"content": "B TEXT"}),
        ev.Result(agent="claude", call="c1", name="crew:read_file", success=True, data={"content": "A TEXT"}),
    ]
    shown = [update.model_dump(by_alias=True, exclude_none=True) for update in replayed(events, tmp_path)]
    started = {u["toolCallId"]: u["rawInput"]["path"] for u in shown if u.get("sessionUpdate") == "tool_call"}
    finished = {
        u["toolCallId"]: u["content"][0]["content"]["text"]
        for u in shown
        if u.get("sessionUpdate") == "tool_call_update"
    }
    assert {started[call]: text for call, text in finished.items()} == {"a.txt": "A TEXT", "b.txt": "B TEXT"}
