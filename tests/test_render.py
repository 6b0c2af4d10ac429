"""What a person sees and what a script reads: live text on a terminal (what the extractor decided to
show: tests/test_extract.py), the answer alone when piped, tool lines, the status line, colours,
--json, --jsonl (their shapes: tests/test_outputs.py) and --verbose."""

from __future__ import annotations

import io
import json
import re
from dataclasses import replace

import pytest

from crewbridge import render
from crewbridge.api import Outcome
from crewbridge.config import load_config
from crewbridge.errors import ProviderError
from crewbridge.loop import CallRecord, Progress, RunResult
from crewbridge.process import Child
from crewbridge.registry import ToolResult
from crewbridge.render import Renderer, brief, one_line, summary
from crewbridge.sandbox.proxy import Refused
from ttys import Terminal as Pty
from ttys import close_terminals  # noqa: F401 - a fixture

ESC = "\x1b["


def block(name="crew:read_file", **data):
    return "```json\n" + json.dumps({"type": "tool_use", "name": name, "input": data}) + "\n```\n"


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self):
        return True


# -- the renderer -------------------------------------------------------------------------------


def said(agent, text, shown=None):
    """A text event: `text` as the model wrote it, `shown` (by default all of it) what a person sees."""
    return Progress("text", agent, text, shown=text if shown is None else shown)


def call(name="crew:read_file", result=None, **data):
    return CallRecord(name, data or {"path": "notes.txt"}, result or ToolResult(False))


def run_events(agent="claude"):
    """What the loop reports for: a reply that reads notes.txt (and goes on to invent its
    content), then the answer, streamed in two pieces."""
    done = call(result=ToolResult(True, data={"content": "the secret\nis 42\n"}, tool="read_file"))
    answer = RunResult(agent, "It says 42.", [done], {"input_tokens": 3}, "sess-1", 2)
    return [
        Progress("turn", agent, "1"),
        said(agent, "Let me read it.\n"),
        said(agent, block(path="notes.txt"), ""),
        Progress("call", agent, call=call()),
        said(agent, "It says 7.", ""),
        Progress("result", agent, call=done),
        Progress("turn", agent, "2"),
        said(agent, "It says "),
        said(agent, "42.\n"),
        Progress("answer", agent, "It says 42.", result=answer),
    ]


def outcome(agent="claude"):
    return Outcome(agent, result=run_events(agent)[-1].result)


def renderer(out=None, err=None, env=None, **options):
    return Renderer(
        out=out or io.StringIO(),
        err=err or io.StringIO(),
        env=env or {},
        agents=options.pop("agents", ["claude"]),
        **options,
    )


def test_piped_stdout_gets_the_answer_once_at_the_end_and_stderr_the_tool_lines():
    out, err = io.StringIO(), io.StringIO()
    with renderer(out, err) as r:
        for event in run_events():
            r.progress(event)
        assert out.getvalue() == ""  # nothing streamed into a pipe
        r.finish([outcome()])
    assert out.getvalue() == "It says 42.\n"
    assert err.getvalue() == "→ crew:read_file notes.txt\n  ✓ 2 lines\n"  # plain: no colour, no status


def test_on_a_terminal_the_text_streams_without_the_call_block_and_the_answer_is_not_repeated():
    out, err = Terminal(), Terminal()
    with renderer(out, err, env={"NO_COLOR": "1"}) as r:
        events = run_events()
        for event in events[:2]:
            r.progress(event)
        assert out.getvalue() == "Let me read it.\n"  # while the model is still writing
        for event in events[2:]:
            r.progress(event)
        r.finish([outcome()])
    assert out.getvalue() == "Let me read it.\nIt says 42.\n"
    assert "tool_use" not in out.getvalue() and "7" not in out.getvalue()
    assert "→ crew:read_file notes.txt\n  ✓ 2 lines\n" in err.getvalue()


def test_colours_only_on_a_terminal_and_never_with_no_color():
    for env, stream, coloured in (
        ({}, Terminal(), True),
        ({"NO_COLOR": "1"}, Terminal(), False),
        ({"TERM": "dumb"}, Terminal(), False),
        ({}, io.StringIO(), False),
    ):
        with renderer(err=stream, env=env) as r:
            for event in run_events():
                r.progress(event)
        assert (ESC in stream.getvalue()) is coloured, env
        assert "crew:read_file notes.txt" in stream.getvalue()


def test_several_agents_are_labelled_and_their_answers_come_in_mention_order_when_piped():
    out, err = io.StringIO(), io.StringIO()
    with renderer(out, err, agents=["claude", "gemini"]) as r:
        for event in run_events("gemini") + run_events("claude"):
            r.progress(event)
        r.finish([outcome("claude"), outcome("gemini")])
    assert out.getvalue() == "── @claude ──\nIt says 42.\n── @gemini ──\nIt says 42.\n"
    lines = err.getvalue().splitlines()
    assert lines == [
        "@gemini → crew:read_file notes.txt",
        "@gemini   ✓ 2 lines",
        "@claude → crew:read_file notes.txt",
        "@claude   ✓ 2 lines",
    ]


def test_several_agents_on_a_terminal_show_each_answer_as_it_comes_not_interleaved():
    out = Terminal()
    with renderer(out, agents=["claude", "gemini"], env={"NO_COLOR": "1"}) as r:
        for event in run_events("gemini"):
            r.progress(event)
        assert out.getvalue() == "── @gemini ──\nIt says 42.\n"
        for event in run_events("claude"):
            r.progress(event)
        r.finish([outcome("claude"), outcome("gemini")])
    assert out.getvalue() == "── @gemini ──\nIt says 42.\n── @claude ──\nIt says 42.\n"


def test_a_result_that_does_not_follow_its_call_names_it_and_a_failure_says_why():
    err = io.StringIO()
    ok = call(result=ToolResult(True, data={"entries": ["a", "b", "c"]}), name="crew:list_files", path=".")
    bad = call(result=ToolResult(False, error="no file 'x.txt'\nlook with crew:list_files"), path="x.txt")
    with renderer(err=err) as r:
        listed = call("crew:list_files", path=".")
        for event in [
            Progress("turn", "claude", "1"),
            Progress("call", "claude", call=listed),
            Progress("call", "claude", call=call(path="x.txt")),
            Progress("result", "claude", call=ok),
            Progress("result", "claude", call=bad),
        ]:
            r.progress(event)
    assert err.getvalue().splitlines() == [
        "→ crew:list_files .",
        "→ crew:read_file x.txt",
        "  ✓ crew:list_files .: 3 entries",
        "  ✗ crew:read_file x.txt: no file 'x.txt'\\nlook with crew:list_files",
    ]


def test_model_text_cannot_drive_the_terminal_but_reaches_a_pipe_as_written():
    text = "red \x1b[31mtext\x1b]0;title\x07 and \x9b2J\r\n"
    shown = {}
    for name, out in (("terminal", Terminal()), ("pipe", io.StringIO())):
        with renderer(out) as r:
            r.progress(Progress("turn", "claude", "1"))
            r.progress(said("claude", text))
            result = RunResult("claude", text.strip(), [], {}, None, 1)
            r.progress(Progress("answer", "claude", text.strip(), result=result))
            r.finish([Outcome("claude", result=result)])
        shown[name] = out.getvalue()
    assert shown["terminal"] == "red \\x1b[31mtext\\x1b]0;title\\x07 and \\x9b2J\n"
    assert shown["pipe"] == text.strip() + "\n"


def test_a_character_split_between_two_events_is_shown_whole():
    out, jsonl = Terminal(), io.StringIO()
    with renderer(out) as r, renderer(jsonl, output="jsonl") as j:
        for event in (Progress("turn", "claude", "1"), said("claude", "smile \ud83d"), said("claude", "\ude00!\n")):
            r.progress(event)
            j.progress(event)
        result = RunResult("claude", "smile \ud83d\ude00!", [], {}, None, 1)
        r.progress(Progress("answer", "claude", result.answer, result=result))
        r.finish([Outcome("claude", result=result)])
    assert out.getvalue() == "smile 😀!\n"
    lines = jsonl.getvalue().splitlines()
    assert json.loads(lines[1])["text"] == "smile \ud83d" and lines[1].isascii()  # valid JSON, escaped


def test_an_answer_whose_halves_arrived_apart_is_written_whole_when_piped():
    out = io.StringIO()
    with renderer(out) as r:
        r.finish([Outcome("claude", result=RunResult("claude", "ok \ud83d\ude00 and \udc00", [], {}, None, 1))])
    assert out.getvalue() == "ok 😀 and \ufffd\n"


def test_a_stream_that_cannot_show_unicode_gets_ascii_symbols_and_escapes():
    class Ascii(Terminal):
        encoding = "ascii"

    out, err = Ascii(), Ascii()
    with renderer(out, err, env={"NO_COLOR": "1"}) as r:
        r.progress(Progress("turn", "claude", "1"))
        r.progress(said("claude", "café\n"))
        r.progress(Progress("call", "claude", call=call(path="naïve.txt")))
        r.progress(Progress("result", "claude", call=call(result=ToolResult(False, error="no file 'naïve.txt'"))))
    assert out.getvalue() == "caf\\xe9\n"
    assert err.getvalue() == "-> crew:read_file na\\xefve.txt\n  x no file 'na\\xefve.txt'\n"


def test_tool_lines_escape_what_the_model_wrote_in_a_call():
    err = io.StringIO()
    with renderer(err=err) as r:
        r.progress(Progress("call", "claude", call=call(path="\x1b[2Jevil", mode="\x9b")))
    assert err.getvalue() == "→ crew:read_file \\x1b[2Jevil \\x9b\n"


def test_an_error_goes_to_stderr_named_by_agent_when_several_run():
    out, err = io.StringIO(), io.StringIO()
    with renderer(out, err, agents=["claude", "gemini"]) as r:
        r.finish([outcome("claude"), Outcome("gemini", error=ProviderError("gemini exited with status 41"))])
    assert "crew: error: @gemini: gemini exited with status 41\n" in err.getvalue()
    assert out.getvalue() == "── @claude ──\nIt says 42.\n"


def test_the_status_line_shows_on_a_terminal_while_waiting_and_is_cleared_before_output(monkeypatch):
    monkeypatch.setattr(render, "STATUS_IDLE", 0)
    out, err = Terminal(), Terminal()
    with renderer(out, err, env={"NO_COLOR": "1"}) as r:
        r.progress(Progress("turn", "claude", "1"))
        r.draw_status(0)
        assert err.getvalue().startswith("\r\x1b[2K⠋ @claude waiting for the model")
        r.progress(Progress("call", "claude", call=call()))
        r.draw_status(1)  # a tool is running: the status line names it
        assert err.getvalue().endswith("\r\x1b[2K⠙ @claude running crew:read_file 0s\r")
        r.progress(Progress("result", "claude", call=call(result=ToolResult(True, "a"))))
        r.draw_status(2)  # its result came: the agent waits for the model again
        assert err.getvalue().endswith("\r\x1b[2K⠹ @claude waiting for the model 0s\r")
        r.progress(Progress("answer", "claude", "x", result=RunResult("claude", "x", [], {}, None, 1)))
        r.draw_status(3)  # nobody works any more: the line is wiped, and stays so
        end = len(err.getvalue())
        assert err.getvalue().endswith("\r\x1b[2K")
        r.draw_status(4)
    assert err.getvalue()[end:] == ""
    assert "\r\x1b[2K→ crew:read_file notes.txt" in err.getvalue()  # the status was wiped first


def test_an_approval_question_wipes_the_status_line_of_a_running_tool_before_it_asks(monkeypatch):
    from crewbridge.approval import Question, TerminalChannel

    monkeypatch.setattr(render, "STATUS_IDLE", 0)
    pty = Pty("y")
    with Renderer(out=io.StringIO(), err=pty.stderr, env={"NO_COLOR": "1"}) as r:
        r.progress(Progress("turn", "claude", "1"))
        r.progress(Progress("call", "claude", call=call("crew:run_command", command="make")))
        r.draw_status(0)
        asked = Question("claude", "run_command", {"command": "make"})
        assert TerminalChannel(pty.stdin, pty.stderr).ask(asked, None) == "yes"
    shown = pty.read("[y/N/a=always] ")
    status = shown.index("@claude running crew:run_command")
    question = shown.index("@claude wants to run")
    assert "\r\x1b[2K" in shown[status:question]  # wiped first: the question has its line to itself


def test_the_status_line_shows_the_runs_tokens_so_far(monkeypatch):
    from crewbridge.usage import Tally

    monkeypatch.setattr(render, "STATUS_IDLE", 0)
    out, err = Terminal(), Terminal()
    with renderer(out, err, env={"NO_COLOR": "1"}) as r:
        r.progress(Progress("turn", "claude", "2"))
        r.progress(Progress("usage", "claude", usage=Tally(12000, 345)))
        r.draw_status(0)
        assert "@claude waiting for the model (turn 2) 0s, 12,345 tokens" in err.getvalue()
    assert out.getvalue() == ""  # usage is not shown as output


def test_jsonl_reports_usage_and_a_fallback_and_json_says_the_fallback_on_stderr():
    from crewbridge.usage import Tally

    out = io.StringIO()
    with renderer(out, output="jsonl") as r:
        r.progress(Progress("usage", "claude", usage=Tally(10, 2, 4, 0.5)))
        r.progress(Progress("fallback", "claude", "@claude cannot answer (rate limited); @gemini takes over"))
    assert [json.loads(line) for line in out.getvalue().splitlines()] == [
        {
            "type": "usage",
            "agent": "claude",
            "input_tokens": 10,
            "output_tokens": 2,
            "cached_tokens": 4,
            "cost_usd": 0.5,
        },
        {"type": "fallback", "agent": "claude", "text": "@claude cannot answer (rate limited); @gemini takes over"},
    ]
    out, err = io.StringIO(), io.StringIO()
    with renderer(out, err, output="json") as r:
        r.progress(Progress("fallback", "claude", "@claude cannot answer (rate limited); @gemini takes over"))
        r.finish([Outcome("gemini", result=RunResult("gemini", "ok", [], {}, None, 1), fell_back_from="claude")])
    assert err.getvalue() == "crew: @claude cannot answer (rate limited); @gemini takes over\n"
    assert json.loads(out.getvalue())["results"][0]["fell_back_from"] == "claude"


def test_no_status_line_and_no_control_sequences_when_stderr_is_piped(monkeypatch):
    monkeypatch.setattr(render, "STATUS_IDLE", 0)
    err = io.StringIO()
    with renderer(Terminal(), err) as r:
        assert r._ticker is None
        r.progress(Progress("turn", "claude", "1"))
        r.draw_status(0)
        r.progress(Progress("call", "claude", call=call()))
    assert err.getvalue() == "→ crew:read_file notes.txt\n"


def test_json_prints_one_object_with_the_answer_and_the_calls():
    out = io.StringIO()
    with renderer(out, output="json") as r:
        for event in run_events():
            r.progress(event)
        r.finish([replace(outcome(), run="20261124-212703-20349b")])
    obj = json.loads(out.getvalue())
    assert obj["run"] == "20261124-212703-20349b"
    assert obj["results"] == [
        {
            "agent": "claude",
            "answer": "It says 42.",
            "usage": {"input_tokens": 3},
            "session": "sess-1",
            "turns": 2,
            "needed_approval": [],
            "error": None,
            "fell_back_from": None,
            "tool_calls": [{"name": "crew:read_file", "input": {"path": "notes.txt"}, "success": True, "error": None}],
        }
    ]


def test_json_with_several_agents_and_a_failure():
    out = io.StringIO()
    with renderer(out, output="json", agents=["claude", "gemini"]) as r:
        r.finish([outcome("claude"), Outcome("gemini", error=ProviderError("boom"))])
    obj = json.loads(out.getvalue())
    assert [res["agent"] for res in obj["results"]] == ["claude", "gemini"]
    assert obj["results"][1] == {
        "agent": "gemini",
        "answer": None,
        "error": "boom",
        "exit_code": 3,
        "fell_back_from": None,
    }


def test_jsonl_is_the_event_stream_one_object_per_line():
    out, err = io.StringIO(), io.StringIO()
    with renderer(out, err, output="jsonl") as r:
        for event in run_events():
            r.progress(event)
        r.finish([outcome(), Outcome("claude", error=ProviderError("late failure"))])
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["type"] for e in events] == [
        "turn",
        "text",
        "text",
        "call",
        "text",
        "result",
        "turn",
        "text",
        "text",
        "answer",
        "error",
    ]
    assert all(e["agent"] == "claude" for e in events)
    assert events[0] == {"type": "turn", "agent": "claude", "turn": 1}
    assert events[2]["text"] == block(path="notes.txt")  # the raw stream, blocks included
    assert events[3] == {"type": "call", "agent": "claude", "name": "crew:read_file", "input": {"path": "notes.txt"}}
    assert events[5]["result"]["success"] is True and events[5]["result"]["data"]["content"] == "the secret\nis 42\n"
    assert events[9]["answer"] == "It says 42." and events[9]["session"] == "sess-1" and events[9]["turns"] == 2
    assert events[10] == {"type": "error", "agent": "claude", "error": "late failure", "exit_code": 3}
    assert "→" not in err.getvalue()  # no person-facing lines in a script's stream


ROUND = {
    "round": 1,
    "rounds": 3,
    "verdict": "changes",
    "called": True,
    "disputed": [],
    "findings": [
        {"path": "notes.txt", "line": 1, "severity": "high", "message": "Tuesday,\nnot Friday"},
        {"path": "", "line": 0, "severity": "low", "message": "say who approved it"},
    ],
}


def reviewed(error=None):
    """The writer's outcome after a review of two rounds."""
    from crewbridge.verdict import Finding, Review, Verdict

    review = Review("gemini", 2, Verdict("changes", [Finding("notes.txt", 1, "high", "Tuesday")]))
    return Outcome("claude", result=run_events()[-1].result, error=error, review=review)


def test_a_review_round_is_a_few_lines_on_stderr_and_an_event_for_scripts():
    err = io.StringIO()
    with renderer(err=err, agents=["claude", "gemini"]) as r:
        r.progress(Progress("review", "gemini", "changes", data=ROUND))
        r.progress(
            Progress("review", "gemini", "approve", data={**ROUND, "round": 2, "verdict": "approve", "findings": []})
        )
    assert err.getvalue() == (
        "crew: review 1 of 3 by @gemini: asks for changes\n"
        "  1. [high] notes.txt:1: Tuesday,\\nnot Friday\n"
        "  2. [low] (no file): say who approved it\n"
        "crew: review 2 of 3 by @gemini: approved\n"
    )
    out = io.StringIO()
    with renderer(out, output="jsonl") as r:
        r.progress(Progress("review", "gemini", "changes", data=ROUND))
    assert json.loads(out.getvalue()) == {"type": "review", "agent": "gemini", **ROUND}


def test_a_review_not_approved_shows_the_answer_then_the_error_and_json_holds_both():
    from crewbridge.errors import ReviewNotApproved

    out, err = io.StringIO(), io.StringIO()
    with renderer(out, err, agents=["claude"]) as r:
        r.finish([reviewed(ReviewNotApproved("@claude's change was not approved by @gemini"))])
    assert (
        out.getvalue() == "It says 42.\n"
        and err.getvalue() == "crew: error: @claude's change was not approved by @gemini\n"
    )
    out = io.StringIO()
    with renderer(out, output="json") as r:
        r.finish([reviewed(ReviewNotApproved("@claude's change was not approved by @gemini"))])
    [obj] = json.loads(out.getvalue())["results"]
    assert (obj["answer"], obj["error"], obj["exit_code"]) == (
        "It says 42.",
        "@claude's change was not approved by @gemini",
        6,
    )
    assert obj["review"] == {
        "reviewer": "gemini",
        "rounds": 2,
        "verdict": "changes",
        "disputed": [],
        "findings": [{"path": "notes.txt", "line": 1, "severity": "high", "message": "Tuesday"}],
    }


def placed(tmp_path, agent="claude", changes=()):
    from crewbridge.git import Checkout
    from crewbridge.worktrees import Worktree

    path = tmp_path / "wt" / agent
    worktree = Worktree(
        "20260101-120000-abc123",
        agent,
        path,
        f"crew/20260101-120000-abc123/{agent}",
        "f00d",
        Checkout(path, path, path),
    )
    return Outcome(agent, result=run_events(agent)[-1].result, worktree=worktree, changes=list(changes))


def test_a_warning_about_the_run_is_a_crew_line_on_stderr_also_with_json():
    for output in ("text", "json"):
        out, err = io.StringIO(), io.StringIO()
        with renderer(out, err, output=output, agents=["claude", "gemini"]) as r:
            r.progress(Progress("warning", "claude", "your checkout has uncommitted changes (1 file)"))
        assert (out.getvalue(), err.getvalue()) == ("", "crew: your checkout has uncommitted changes (1 file)\n")


def test_after_a_worktree_run_each_agent_says_what_it_changed_and_where(tmp_path):
    from crewbridge.git import Change

    edits = [Change("notes.txt", "modified", 1, 1), Change("todo.md", "added", 2, 0)]
    out, err = io.StringIO(), io.StringIO()
    with renderer(out, err, agents=["claude", "gemini"]) as r:
        r.finish([placed(tmp_path, "claude", edits), placed(tmp_path, "gemini")])
    assert err.getvalue() == (
        f"crew: @claude: 2 files changed, +3 -1, on branch crew/20260101-120000-abc123/claude in {tmp_path}/wt/claude\n"
        "  M notes.txt +1 -1\n  A todo.md +2 -0\n"
        f"crew: @gemini: no changes, on branch crew/20260101-120000-abc123/gemini in {tmp_path}/wt/gemini\n"
        "crew: take an agent's changes into your checkout with `crew apply 20260101-120000-abc123 AGENT`; "
        "`crew worktrees clean 20260101-120000-abc123` removes the worktrees\n"
    )
    out = io.StringIO()
    with renderer(out, output="json") as r:
        r.finish([placed(tmp_path, "claude", edits)])
    [obj] = json.loads(out.getvalue())["results"]
    assert (obj["agent"], obj["run_id"], obj["branch"], obj["worktree"], obj["base"]) == (
        "claude",
        "20260101-120000-abc123",
        "crew/20260101-120000-abc123/claude",
        f"{tmp_path}/wt/claude",
        "f00d",
    )
    assert obj["changes"][1] == {"path": "todo.md", "status": "added", "added": 2, "removed": 0}
    out = io.StringIO()
    with renderer(out, output="jsonl") as r:
        r.finish([placed(tmp_path, "claude", edits)])
    event = json.loads(out.getvalue())
    assert event["type"] == "worktree" and event["branch"] == "crew/20260101-120000-abc123/claude"


def test_verbose_shows_the_command_and_every_raw_line_on_stderr(tmp_path):
    err = io.StringIO()
    with renderer(err=err, verbose=True):
        child = Child(["sh", "-c", 'read x; echo "got $x"; echo second'], cwd=tmp_path, stdin="hello\n")
        assert list(child.lines()) == ["got hello", "second"]
        child.close()
    lines = err.getvalue().splitlines()
    assert re.fullmatch(r"sh\[\d+\] \$ sh -c 'read x; echo \"got \$x\"; echo second'", lines[0])
    assert [line.split("] ", 1)[1] for line in lines[1:]] == ["< hello\\n", "> got hello", "> second"]
    child = Child(["sh", "-c", "echo quiet"], cwd=tmp_path)  # after the renderer closed: no trace
    list(child.lines())
    child.close()
    assert len(err.getvalue().splitlines()) == 4


def test_verbose_shows_a_long_command_whole_and_cuts_a_long_line_saying_how_much(tmp_path):
    err = io.StringIO()
    long = "x" * (render.TRACE_CHARS * 3)
    with renderer(err=err, verbose=True):
        child = Child(["sh", "-c", f"echo {long}; echo done"], cwd=tmp_path)
        assert list(child.lines()) == [long, "done"]
        child.close()
    command, read, done = err.getvalue().splitlines()
    assert command.endswith(f"$ sh -c 'echo {long}; echo done'")  # whole: a person can run it again
    traced = read.split("> ")[0] + "> " + long  # the line as logged: `sh[PGID] > xxx…`
    cut = render.TRACE_CHARS
    assert read == f"{traced[:cut]}… ({len(traced) - cut:,} more characters)"
    assert done.endswith("> done")


def test_verbose_shows_where_a_bug_in_crew_is_and_nothing_for_crews_own_errors():
    def crash():
        raise KeyError("size")

    def refuse():
        raise ProviderError("claude refused")

    shown = {}
    for verbose, fail in ((True, crash), (False, crash), (True, refuse)):
        err = io.StringIO()
        with pytest.raises((KeyError, ProviderError)), renderer(err=err, verbose=verbose):
            fail()
        shown[verbose, fail.__name__] = err.getvalue()
    assert "Traceback (most recent call last)" in shown[True, "crash"] and "in crash" in shown[True, "crash"]
    assert "KeyError: 'size'" in shown[True, "crash"]
    assert shown[False, "crash"] == "" and shown[True, "refuse"] == ""


@pytest.mark.slow
def test_a_reader_that_left_stdout_does_not_end_the_run(tmp_path, monkeypatch):
    from crewbridge.bridge import Bridge

    class Gone(io.StringIO):  # `crew query … | head -0`
        def write(self, text):
            raise BrokenPipeError

    (tmp_path / "notes.txt").write_text("alpha\nbeta\n")
    monkeypatch.chdir(tmp_path)
    err = io.StringIO()
    with renderer(Gone(), err, agents=["demo"]) as r:
        outcomes = Bridge(load_config(None, tmp_path), tmp_path).run(
            "@demo what is in notes.txt?", on_progress=r.progress
        )
        r.finish(outcomes)
    [done] = outcomes
    assert done.error is None and done.result.answer.startswith("notes.txt has 2 non-empty lines")
    assert err.getvalue() == "→ crew:read_file notes.txt\n  ✓ 2 lines\n"  # crew's own lines still come


@pytest.mark.slow
def test_the_demo_agent_round_trip_as_a_person_sees_it(tmp_path, monkeypatch):
    from crewbridge.bridge import Bridge

    (tmp_path / "notes.txt").write_text("alpha\nbeta\n")
    monkeypatch.chdir(tmp_path)
    out, err = Terminal(), Terminal()
    with Renderer(out=out, err=err, env={}, agents=["demo"]) as r:
        outcomes = Bridge(load_config(None, tmp_path), tmp_path).run(
            "@demo what is in notes.txt?", on_progress=r.progress
        )
        r.finish(outcomes)
    assert out.getvalue() == (
        "I'll read notes.txt with the crew tool.\n"
        "notes.txt has 2 non-empty lines (2 lines in all). It begins:\n  alpha\n  beta\n"
    )
    assert re.sub(r"\x1b\[[\d;]*[mK]|\r", "", err.getvalue()) == "→ crew:read_file notes.txt\n  ✓ 2 lines\n"


# -- summaries ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data, text",
    [
        ({"content": "a\nb\nc\n", "total_lines": 3}, "3 lines"),
        ({"content": "a\n", "total_lines": 300, "next_offset": 2}, "1 line of 300"),
        ({"entries": ["a"]}, "1 entry"),
        ({"matches": ["a:1:x", "b:2:y"], "files_searched": 4}, "2 matches"),
        ({"exit_code": 2, "output": "error: x\n"}, "exit 2, 1 line"),
        ({"exit_code": -9, "output": ""}, "killed by SIGKILL, 0 lines"),
        ({"exit_code": -99, "output": "x"}, "killed by signal 99, 1 line"),
        ({"path": "a.py", "bytes": 12, "created": True}, "created a.py, 12 bytes"),
        ({"path": "a.py", "line": 4}, "edited a.py at line 4"),
        ({"name": "crew:grep", "read_only": True}, "done"),
        ([1, 2], "2 items"),
        ("one\ntwo", "2 lines"),
        (None, "done"),
        (7, "7"),
    ],
)
def test_a_result_is_summed_up_in_a_few_words(data, text):
    assert summary(data) == text


def test_a_command_a_signal_ended_is_a_failure_on_its_result_line(monkeypatch):
    monkeypatch.setattr(render, "STATUS_IDLE", 0)
    err = io.StringIO()
    killed = ToolResult(True, {"exit_code": -9, "output": "half\n"})
    with renderer(Terminal(), err) as r:
        r.progress(Progress("call", "claude", call=call("crew:run_command", command="make")))
        r.progress(Progress("result", "claude", call=call("crew:run_command", killed, command="make")))
        r.progress(
            Progress(
                "result", "claude", call=call("crew:run_command", ToolResult(True, {"exit_code": 1}), command="ls")
            )
        )
    assert err.getvalue() == (
        "→ crew:run_command make\n  ✗ killed by SIGKILL, 1 line\n  ✓ crew:run_command ls: exit 1, 0 lines\n"
    )


def test_a_truncated_result_says_so():
    assert summary({"content": "a\n"}, truncated=True) == "1 line (truncated)"


def test_a_call_input_is_shown_briefly():
    assert brief({"path": "notes.txt"}) == "notes.txt"
    assert brief({"pattern": "TODO", "path": "src"}) == "TODO src"
    assert brief({"path": "a.md", "content": "x" * 500}) == "a.md (500 characters)"
    assert brief({"path": "a", "offset": 3, "flags": ["i"]}) == 'a offset=3 flags=["i"]'
    assert brief({}) == "" and brief(None) == ""
    assert brief({"command": "y" * 300}, width=20) == "(300 characters)"
    assert len(brief({"command": "z " * 25}, width=20)) == 20


def test_one_line_escapes_and_cuts():
    assert one_line("a\nb\tc\x1b") == "a\\nb\\tc\\x1b"
    assert one_line("abcdef", 4) == "abc…"


# -- the command line ---------------------------------------------------------------------------


@pytest.fixture
def crew(tmp_path, monkeypatch):
    """crew(*args) → click's result of `crew ARGS` in a scratch directory holding notes.txt."""
    from click.testing import CliRunner

    from crewbridge.cli import cli

    (tmp_path / "notes.txt").write_text("alpha\nbeta\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return lambda *args: CliRunner().invoke(cli, list(args), input="")


@pytest.mark.slow
def test_the_query_command_streams_jsonl_events_for_scripts(crew):
    result = crew("query", "--jsonl", "@demo what is in notes.txt?")
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e["type"] for e in events if e["type"] not in ("text",)] == ["turn", "call", "result", "turn", "answer"]
    assert events[-1]["answer"].startswith("notes.txt has 2 non-empty lines") and result.stderr == ""


@pytest.mark.slow
def test_the_query_command_prints_one_json_object(crew):
    result = crew("query", "--json", "@demo what is in notes.txt?")
    [obj] = json.loads(result.stdout)["results"]
    assert obj["agent"] == "demo" and obj["error"] is None and obj["turns"] == 2
    assert obj["tool_calls"] == [
        {"name": "crew:read_file", "input": {"path": "notes.txt"}, "success": True, "error": None}
    ]


def test_json_and_jsonl_together_are_refused(crew):
    result = crew("query", "--json", "--jsonl", "@demo hi")
    assert "--json and --jsonl were both given; choose one" in str(result.exception)


@pytest.mark.slow
def test_verbose_shows_the_exact_command_crew_ran(crew):
    result = crew("query", "-v", "@demo what is in notes.txt?")
    commands = [line for line in result.stderr.splitlines() if "] $ " in line]
    assert len(commands) == 2 and all(line.endswith(" -m crewbridge.demo") for line in commands)
    assert result.stdout == "notes.txt has 2 non-empty lines (2 lines in all). It begins:\n  alpha\n  beta\n"


def test_a_refused_connection_is_a_line_on_stderr_with_verbose_and_an_event_with_jsonl():
    refused = Refused("169.254.169.254", 80, "not in the allow-list", "pid 7: curl http://169.254.169.254/")
    event = Progress("egress", "claude", refused.text(), data={**refused.to_dict(), "text": refused.text()})
    quiet, loud, out = io.StringIO(), io.StringIO(), io.StringIO()
    with renderer(err=quiet) as r:
        r.progress(event)
    with renderer(err=loud, verbose=True) as r:
        r.progress(event)
    with renderer(out=out, output="jsonl") as r:
        r.progress(event)
    assert quiet.getvalue() == ""
    assert loud.getvalue() == (
        "crew: @claude: network: refused 169.254.169.254:80 (by pid 7: curl http://169.254.169.254/): "
        "not in the allow-list\n"
    )
    assert json.loads(out.getvalue()) == {"type": "egress", "agent": "claude", **event.data}
