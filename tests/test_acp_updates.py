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
    assert started.title == "Run `/bin/bash -lc 'make'`"
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
        (ATTACK, "Run `ls -la⟨220 spaces⟩; echo owned > pwned.txt`"),
        ("ls\necho owned > pwned.txt", "Run `ls\\necho owned > pwned.txt`"),
        ("ls \x1b[8m; echo owned\x1b[0m", "Run `ls \\x1b[8m; echo owned\\x1b[0m`"),
        ("echo safe #\u202e;\techo owned\u200b", "Run `echo safe #\\u202e;\\techo owned\\u200b`"),
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
    heading = f"Run `{command}`"
    assert shown["title"] == heading[:TITLE] + f"… ({len(heading) - TITLE} more characters)"
    [body] = shown["content"]
    assert body["content"]["text"] == '{"command": "' + command + '"}'
    assert shown["rawInput"] == {"command": command}


def test_a_tool_calls_title_is_drawn_the_same_when_it_starts():
    updates = Updates(Path("/project"), run="r1")
    [started] = updates.of(ev.Call(agent="claude", call="c1", name="crew:run_command", input={"command": ATTACK}))
    assert started.title == "Run `ls -la⟨220 spaces⟩; echo owned > pwned.txt`"
    asked = updates.asked(Question("claude", "run_command", {"command": ATTACK}, call="c1"))
    assert asked.tool_call_id == started.tool_call_id == "r1:c1"  # the question is about that very call


@pytest.mark.parametrize(
    ("name", "data", "title"),
    [
        ("crew:read_file", {"path": "notes.txt"}, "Read notes.txt"),
        ("crew:edit_file", {"path": "greet.py", "old_string": "a", "new_string": "b"}, "Edit greet.py"),
        ("crew:write_file", {"path": "new.py", "content": "x"}, "Write new.py"),
        ("crew:list_files", {"path": "src"}, "List src"),
        ("crew:grep", {"pattern": "TODO", "path": "src"}, "Search for `TODO` in src"),
        ("crew:run_command", {"command": "ls -la"}, "Run `ls -la`"),
        ("native:Read", {"file_path": "/project/notes.txt"}, "Read notes.txt"),
        ("native:Edit", {"file_path": "/project/greet.py", "old_string": "a", "new_string": "b"}, "Edit greet.py"),
        ("native:Write", {"file_path": "/elsewhere/x.py", "content": "x"}, "Write /elsewhere/x.py"),
        ("native:Bash", {"command": "ls -la", "description": "list"}, "Run `ls -la`"),
        ("native:Glob", {"pattern": "*.py"}, "Search for `*.py`"),
        ("native:WebFetch", {"url": "https://example.com", "prompt": "sum"}, "Fetch https://example.com"),
        ("native:read_file", {"absolute_path": "/project/a.md"}, "Read a.md"),
        ("native:replace", {"file_path": "a.py", "old_string": "x", "new_string": "y"}, "Edit a.py"),
        ("native:run_shell_command", {"command": "make"}, "Run `make`"),
        ("native:google_web_search", {"query": "crew"}, "Search the web for `crew`"),
        ("native:exec_command", {"command": ["git", "status"]}, "Run `git status`"),
        ("native:apply_patch", {"changes": [{"path": "/project/a.py"}, {"path": "b.py"}]}, "Edit a.py, b.py"),
        ("native:mcp__vault__get", {"key": "x"}, 'mcp__vault__get {"key": "x"}'),
    ],
)
def test_a_tool_calls_title_says_in_words_what_it_does(name: str, data: dict, title: str) -> None:
    [started] = Updates(Path("/project"), run="r1").of(ev.Call(agent="a", call="c1", name=name, input=data))
    assert started.title == title


def test_a_permission_for_crews_edit_carries_the_diff_its_result_shows(tmp_path: Path) -> None:
    from crewbridge.tools import files

    from crewbridge.toolkit.registry import ToolContext

    (tmp_path / "greet.py").write_text("def greet():\n    return 'hi'\n")
    edit = {"path": "greet.py", "old_string": "'hi'", "new_string": "'hello'"}
    updates = Updates(tmp_path, run="r1")
    updates.of(ev.Call(agent="claude", call="c1", name="crew:edit_file", input=edit))
    asked = updates.asked(Question("claude", "edit_file", edit, call="c1"))
    [diff] = asked.content
    context = ToolContext(workdir=tmp_path)
    files.edit_file(context, **edit)  # the tool itself, as it runs once allowed
    change = context.change
    assert change is not None and (diff.type, diff.path) == ("diff", change.path) == (
        "diff",
        str(tmp_path / "greet.py"),
    )
    assert (
        (diff.old_text, diff.new_text)
        == (change.old, change.new)
        == (
            "def greet():\n    return 'hi'\n",
            "def greet():\n    return 'hello'\n",
        )
    )
    write = {"path": "sub/new.txt", "content": "new\n"}  # its folder is made by the write
    [made] = updates.asked(Question("claude", "write_file", write)).content
    assert (made.path, made.old_text, made.new_text) == (str(tmp_path / "sub/new.txt"), None, "new\n")
    outside = updates.asked(Question("claude", "write_file", {"path": "/etc/x", "content": "x"}))
    assert outside.content is None  # a path the tool refuses: no diff, its result will say why


def test_a_permission_for_the_clis_own_edit_carries_the_diff_its_start_and_end_show(tmp_path: Path) -> None:
    edit = {
        "file_path": "a.py",
        "edits": [{"old_string": "x", "new_string": "y"}, {"old_string": "1", "new_string": "2"}],
    }
    updates = Updates(tmp_path, run="r1")
    [started] = updates.of(own_call("c1", "native:MultiEdit", edit))
    asked = updates.asked(Question("claude", "native:MultiEdit", edit, call="c1"))
    [ended] = updates.of(ev.Result(agent="claude", call="c1", name="native:MultiEdit", success=True))
    assert asked.content == started.content == ended.content
    assert [(d.old_text, d.new_text) for d in asked.content] == [("x", "y"), ("1", "2")]


def test_codexs_patch_is_asked_about_with_each_file_and_hunk(tmp_path: Path) -> None:
    patch = {
        "changes": [
            {"path": "new.txt", "kind": {"type": "add"}, "diff": "made\n"},
            {"path": "old.txt", "kind": {"type": "delete"}, "diff": ""},
            {"path": "a.py", "kind": {"type": "update"}, "diff": "@@ -1,2 +1,2 @@\n a\n-b\n+c\n@@ -9 +9 @@\n-y\n+z\n"},
        ]
    }
    updates = Updates(tmp_path, run="r1")
    updates.of(own_call("c1", "native:apply_patch", patch))
    content = updates.asked(Question("codex", "native:apply_patch", patch, call="c1")).content
    shown = [(c.path, c.old_text, c.new_text) if c.type == "diff" else c.content.text for c in content]
    assert shown == [
        (str(tmp_path / "new.txt"), None, "made\n"),
        f"Delete {tmp_path / 'old.txt'}",
        (str(tmp_path / "a.py"), "a\nb\n", "a\nc\n"),
        (str(tmp_path / "a.py"), "y\n", "z\n"),
    ]


def test_a_finished_calls_raw_output_is_the_text_the_model_was_given(tmp_path: Path) -> None:
    read = {"path": "notes.txt", "start_line": 1, "end_line": 1, "total_lines": 1, "content": "one\n"}
    _, ended, _, failed = shown(
        tmp_path,
        ev.Call(agent="claude", call="c1", name="crew:read_file", input={"path": "notes.txt"}),
        ev.Result(agent="claude", call="c1", name="crew:read_file", success=True, data=read, metadata={"tool": "x"}),
        ev.Call(agent="claude", call="c2", name="crew:run_command", input={"command": "false"}),
        ev.Result(agent="claude", call="c2", name="crew:run_command", success=False, error="exit code 1"),
    )
    assert (ended.raw_output, failed.raw_output) == ("one\n", "exit code 1")


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
