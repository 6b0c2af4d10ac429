"""What a person sees and what a script reads: live text on a terminal (what the extractor decided to
show: tests/test_toolkit_extract.py), the answer alone when piped, tool lines, the status line, colours,
--json, --jsonl (their shapes: tests/test_engine_outputs.py) and --verbose."""

from __future__ import annotations

import io
import json
import re
from dataclasses import replace

import pytest

from crewbridge.api import Outcome
from crewbridge.config import load_config
from crewbridge.engine.loop import CallRecord, RunResult
from crewbridge.errors import ProviderError
from crewbridge.record import events as ev
from crewbridge.system.process import Child
from crewbridge.terminal import render
from crewbridge.terminal.render import Renderer, brief, one_line, summary
from crewbridge.toolkit.registry import ToolResult
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
    return ev.Text(agent=agent, text=text, shown=shown)


def turn(agent, number):
    return ev.Turn(agent=agent, turn=number)


def called(agent="claude", id_="c1", name="crew:read_file", **data):
    """A call's start in the record."""
    return ev.Call(agent=agent, call=id_, name=name, input=data or {"path": "notes.txt"})


def answered(agent="claude", id_="c1", result=None, name="crew:read_file"):
    """A call's result in the record, from crew's envelope."""
    result = result or ToolResult(False)
    envelope = result.to_dict()
    return ev.Result(
        agent=agent,
        call=id_,
        name=name,
        success=result.success,
        data=envelope["data"],
        error=result.error,
        metadata=envelope["metadata"],
    )


def run_result(agent="claude"):
    done = ToolResult(True, data={"content": "the secret\nis 42\n"}, tool="read_file")
    record = CallRecord("crew:read_file", {"path": "notes.txt"}, done, "c1")
    return RunResult(agent, "It says 42.", [record], {"input_tokens": 3}, "sess-1", 2)


def run_events(agent="claude"):
    """What the record has of: a reply that reads notes.txt (and goes on to invent its content),
    then the answer, streamed in two pieces."""
    result = run_result(agent)
    return [
        turn(agent, 1),
        said(agent, "Let me read it.\n"),
        said(agent, block(path="notes.txt"), ""),
        called(agent),
        said(agent, "It says 7.", ""),
        answered(agent, result=result.tool_calls[0].result),
        turn(agent, 2),
        said(agent, "It says "),
        said(agent, "42.\n"),
        ev.Answer(agent=agent, text="It says 42.", turns=2, session="sess-1", calls=["c1"]),
    ]


def outcome(agent="claude"):
    return Outcome(agent, result=run_result(agent))


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
    ok = answered(id_="c1", result=ToolResult(True, data={"entries": ["a", "b", "c"]}), name="crew:list_files")
    bad = answered(id_="c2", result=ToolResult(False, error="no file 'x.txt'\nlook with crew:list_files"))
    with renderer(err=err) as r:
        for event in [
            turn("claude", 1),
            called(id_="c1", name="crew:list_files", path="."),
            called(id_="c2", path="x.txt"),
            ok,
            bad,
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
            r.progress(turn("claude", 1))
            r.progress(said("claude", text))
            result = RunResult("claude", text.strip(), [], {}, None, 1)
            r.progress(ev.Answer(agent="claude", text=text.strip()))
            r.finish([Outcome("claude", result=result)])
        shown[name] = out.getvalue()
    assert shown["terminal"] == "red \\x1b[31mtext\\x1b]0;title\\x07 and \\x9b2J\n"
    assert shown["pipe"] == text.strip() + "\n"


def test_a_character_split_between_two_events_is_shown_whole():
    out, jsonl = Terminal(), io.StringIO()
    with renderer(out) as r, renderer(jsonl, output="jsonl") as j:
        for event in (turn("claude", 1), said("claude", "smile \ud83d"), said("claude", "\ude00!\n")):
            r.progress(event)
            j.progress(event)
        result = RunResult("claude", "smile \ud83d\ude00!", [], {}, None, 1)
        r.progress(ev.Answer(agent="claude", text=result.answer))
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
        r.progress(turn("claude", 1))
        r.progress(said("claude", "café\n"))
        r.progress(called(path="naïve.txt"))
        r.progress(answered(result=ToolResult(False, error="no file 'naïve.txt'")))
    assert out.getvalue() == "caf\\xe9\n"
    assert err.getvalue() == "-> crew:read_file na\\xefve.txt\n  x no file 'na\\xefve.txt'\n"


def test_tool_lines_escape_what_the_model_wrote_in_a_call():
    err = io.StringIO()
    with renderer(err=err) as r:
        r.progress(called(path="\x1b[2Jevil", mode="\x9b"))
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
        r.progress(turn("claude", 1))
        r.draw_status(0)
        assert err.getvalue().startswith("\r\x1b[2K⠋ @claude waiting for the model")
        r.progress(called())
        r.draw_status(1)  # a tool is running: the status line names it
        assert err.getvalue().endswith("\r\x1b[2K⠙ @claude running crew:read_file 0s\r")
        r.progress(answered(result=ToolResult(True, "a")))
        r.draw_status(2)  # its result came: the agent waits for the model again
        assert err.getvalue().endswith("\r\x1b[2K⠹ @claude waiting for the model 0s\r")
        r.progress(ev.Answer(agent="claude", text="x"))
        r.draw_status(3)  # nobody works any more: the line is wiped, and stays so
        end = len(err.getvalue())
        assert err.getvalue().endswith("\r\x1b[2K")
        r.draw_status(4)
    assert err.getvalue()[end:] == ""
    assert "\r\x1b[2K→ crew:read_file notes.txt" in err.getvalue()  # the status was wiped first


def test_an_approval_question_wipes_the_status_line_of_a_running_tool_before_it_asks(monkeypatch):
    from crewbridge.system.approval import Question, TerminalChannel

    monkeypatch.setattr(render, "STATUS_IDLE", 0)
    pty = Pty("y")
    with Renderer(out=io.StringIO(), err=pty.stderr, env={"NO_COLOR": "1"}) as r:
        r.progress(turn("claude", 1))
        r.progress(called(name="crew:run_command", command="make"))
        r.draw_status(0)
        asked = Question("claude", "run_command", {"command": "make"})
        assert TerminalChannel(pty.stdin, pty.stderr).ask(asked, None) == "yes"
    shown = pty.read("[y/N/a=always] ")
    status = shown.index("@claude running crew:run_command")
    question = shown.index("@claude wants to run")
    assert "\r\x1b[2K" in shown[status:question]  # wiped first: the question has its line to itself


def test_the_status_line_shows_the_runs_tokens_so_far(monkeypatch):
    monkeypatch.setattr(render, "STATUS_IDLE", 0)
    out, err = Terminal(), Terminal()
    with renderer(out, err, env={"NO_COLOR": "1"}) as r:
        r.progress(turn("claude", 2))
        r.progress(ev.Usage(agent="claude", input_tokens=12000, output_tokens=300))  # each report's share:
        r.progress(ev.Usage(agent="claude", output_tokens=45))  # the run's tokens are their sum
        r.draw_status(0)
        assert "@claude waiting for the model (turn 2) 0s, 12,345 tokens" in err.getvalue()
    assert out.getvalue() == ""  # usage is not shown as output


def test_jsonl_reports_usage_and_a_fallback_and_json_says_the_fallback_on_stderr():
    out = io.StringIO()
    fallback = ev.Fallback(agent="claude", to="gemini", reason="rate limited", message="429", t=12.5)
    with renderer(out, output="jsonl") as r:
        r.progress(ev.Usage(agent="claude", turn=1, input_tokens=10, output_tokens=2, cached_tokens=4, cost_usd=0.5))
        r.progress(fallback)
    assert [json.loads(line) for line in out.getvalue().splitlines()] == [
        {
            "kind": "usage",
            "agent": "claude",
            "turn": 1,
            "input_tokens": 10,
            "output_tokens": 2,
            "cached_tokens": 4,
            "cost_usd": 0.5,
        },
        {"kind": "fallback", "t": 12.5, "agent": "claude", "to": "gemini", "reason": "rate limited", "message": "429"},
    ]
    out, err = io.StringIO(), io.StringIO()
    with renderer(out, err, output="json") as r:
        r.progress(fallback)
        r.finish([Outcome("gemini", result=RunResult("gemini", "ok", [], {}, None, 1), fell_back_from="claude")])
    assert err.getvalue() == "crew: @claude cannot answer (rate limited); @gemini takes over\n"
    assert json.loads(out.getvalue())["results"][0]["fell_back_from"] == "claude"


def test_no_status_line_and_no_control_sequences_when_stderr_is_piped(monkeypatch):
    monkeypatch.setattr(render, "STATUS_IDLE", 0)
    err = io.StringIO()
    with renderer(Terminal(), err) as r:
        assert r._ticker is None
        r.progress(turn("claude", 1))
        r.draw_status(0)
        r.progress(called())
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


def test_jsonl_is_the_runs_record_one_event_per_line_as_it_is():
    out, err = io.StringIO(), io.StringIO()
    with renderer(out, err, output="jsonl") as r:
        for event in run_events():
            r.progress(event)
        r.progress(ev.Error(agent="claude", message="late failure", exit_code=3))
        r.finish([outcome(), Outcome("claude", error=ProviderError("late failure"))])  # recorded: not again
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["kind"] for e in events] == [
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
    assert events == [
        ev.to_builtins(event)
        for event in [*run_events(), ev.Error(agent="claude", message="late failure", exit_code=3)]
    ]
    assert events[0] == {"kind": "turn", "agent": "claude", "turn": 1}
    assert events[2]["text"] == block(path="notes.txt") and events[2]["shown"] == ""  # the raw stream, blocks included
    assert events[3] == {
        "kind": "call",
        "agent": "claude",
        "call": "c1",
        "name": "crew:read_file",
        "input": {"path": "notes.txt"},
    }
    assert events[5]["call"] == "c1" and events[5]["data"]["content"] == "the secret\nis 42\n"
    assert events[9] == {
        "kind": "answer",
        "agent": "claude",
        "text": "It says 42.",
        "turns": 2,
        "session": "sess-1",
        "calls": ["c1"],
    }
    assert "→" not in err.getvalue()  # no person-facing lines in a script's stream


def test_jsonl_says_an_error_the_record_did_not_have_once():
    out = io.StringIO()
    with renderer(out, output="jsonl") as r:
        r.failed("claude", ProviderError("the reply was cut"))  # crew chat's reply that failed
    assert json.loads(out.getvalue()) == {
        "kind": "error",
        "agent": "claude",
        "message": "the reply was cut",
        "exit_code": 3,
    }


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
    from crewbridge.toolkit.verdict import Finding, Review, Verdict

    review = Review("gemini", 2, Verdict("changes", [Finding("notes.txt", 1, "high", "Tuesday")]))
    return Outcome("claude", result=run_result(), error=error, review=review)


def test_a_review_round_is_a_few_lines_on_stderr_and_an_event_for_scripts():
    err = io.StringIO()
    with renderer(err=err, agents=["claude", "gemini"]) as r:
        r.progress(ev.Review(agent="gemini", **ROUND))
        r.progress(ev.Review(agent="gemini", **{**ROUND, "round": 2, "verdict": "approve", "findings": []}))
    assert err.getvalue() == (
        "crew: review 1 of 3 by @gemini: asks for changes\n"
        "  1. [high] notes.txt:1: Tuesday,\\nnot Friday\n"
        "  2. [low] (no file): say who approved it\n"
        "crew: review 2 of 3 by @gemini: approved\n"
    )
    out = io.StringIO()
    with renderer(out, output="jsonl") as r:
        r.progress(ev.Review(agent="gemini", **ROUND))
    assert json.loads(out.getvalue()) == {
        "kind": "review",
        "agent": "gemini",
        **{k: v for k, v in ROUND.items() if k not in ("called", "disputed")},
    }


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
    from crewbridge.system.git import Checkout
    from crewbridge.work.worktrees import Worktree

    path = tmp_path / "wt" / agent
    worktree = Worktree(
        "20260101-120000-abc123",
        agent,
        path,
        f"crew/20260101-120000-abc123/{agent}",
        "f00d",
        Checkout(path, path, path),
    )
    return Outcome(agent, result=run_result(agent), worktree=worktree, changes=list(changes))


def test_a_warning_about_the_run_is_a_crew_line_on_stderr_also_with_json():
    for output in ("text", "json"):
        out, err = io.StringIO(), io.StringIO()
        with renderer(out, err, output=output, agents=["claude", "gemini"]) as r:
            r.progress(
                ev.Notice(agent="claude", text="your checkout has uncommitted changes (1 file)", about="warning")
            )
        assert (out.getvalue(), err.getvalue()) == ("", "crew: your checkout has uncommitted changes (1 file)\n")


def test_after_a_worktree_run_each_agent_says_what_it_changed_and_where(tmp_path):
    from crewbridge.system.git import Change

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
    out, err = io.StringIO(), io.StringIO()
    with renderer(out, err, output="jsonl") as r:
        r.progress(
            ev.Worktree(
                agent="claude",
                worktree=f"{tmp_path}/wt/claude",
                branch="crew/20260101-120000-abc123/claude",
                base="f00d",
                changes=[change.to_dict() for change in edits],
            )
        )
        r.finish([placed(tmp_path, "claude", edits)])  # the record's worktree event said it: not again
    [event] = [json.loads(line) for line in out.getvalue().splitlines()]
    assert event["kind"] == "worktree" and event["branch"] == "crew/20260101-120000-abc123/claude"
    assert event["changes"][1]["path"] == "todo.md" and err.getvalue() == ""


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
        r.progress(called(id_="c1", name="crew:run_command", command="make"))
        r.progress(answered(id_="c1", result=killed, name="crew:run_command"))
        r.progress(called(id_="c2", name="crew:run_command", command="ls"))
        r.progress(answered(id_="c2", result=ToolResult(True, {"exit_code": 1}), name="crew:run_command"))
        r.progress(answered(id_="c3", result=ToolResult(True, {"exit_code": 0}), name="crew:run_command"))
    assert err.getvalue() == (
        "→ crew:run_command make\n  ✗ killed by SIGKILL, 1 line\n→ crew:run_command ls\n  ✓ exit 1, 0 lines\n"
        "  ✓ exit 0, 0 lines\n"  # a result whose call the record did not have: named by nothing
    )


def test_a_truncated_result_says_so():
    assert summary({"content": "a\n"}, truncated=True) == "1 line (truncated)"


def test_the_clis_own_calls_take_a_line_at_crews_decision_or_if_it_was_not_asked_at_their_result():
    def own(id_, command, decision, by="policy", reason=None, success=True, error=None):
        name = "native:exec_command"
        return [
            ev.Call(agent="codex", call=id_, name=name, input={"command": command}, via="own", ref=f"item_{id_}"),
            ev.Decision(agent="codex", call=id_, decision=decision, by=by, reason=reason),
            ev.Result(agent="codex", call=id_, name=name, success=success, error=error, data={"output": "built"}),
        ]

    err = io.StringIO()
    with renderer(err=err, env={"NO_COLOR": "1"}, agents=["codex"]) as r:
        for event in [
            *own("c1", "make", "allowed"),
            *own("c2", "rm x", "refused", reason="no rm", success=False, error="codex: declined"),
            *own("c3", "make", "allowed", by="cli"),
            *own("c4", "false", "allowed", by="cli", success=False, error="codex: failed"),
        ]:
            r.progress(event)
    assert err.getvalue().splitlines() == [
        "  native:exec_command make: allowed",
        "  native:exec_command rm x: refused, no rm",
        "  native:exec_command make: ran (crew was not asked: the CLI's own rules)",
        "  native:exec_command false: failed, codex: failed (crew was not asked: the CLI's own rules)",
    ]


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
    assert [e["kind"] for e in events if e["kind"] not in ("text", "notice")] == [
        "start",
        "part",
        "turn",
        "call",
        "decision",
        "result",
        "reply",
        "turn",
        "answer",
        "end",
    ]
    assert events[0]["run"] and events[-1]["status"] == "done"  # the run's id first: what --resume takes
    answer = next(e for e in events if e["kind"] == "answer")
    assert answer["text"].startswith("notes.txt has 2 non-empty lines") and result.stderr == ""


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
    assert len(commands) == 2 and all(line.endswith(" -m crewbridge.base.demo") for line in commands)
    assert result.stdout == "notes.txt has 2 non-empty lines (2 lines in all). It begins:\n  alpha\n  beta\n"


def test_a_refused_connection_is_a_line_on_stderr_with_verbose_and_an_event_with_jsonl():
    event = ev.Egress(
        agent="claude",
        host="169.254.169.254",
        port=80,
        why="not in the allow-list",
        process="pid 7: curl http://169.254.169.254/",
    )
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
    assert json.loads(out.getvalue()) == {
        "kind": "egress",
        "agent": "claude",
        "host": "169.254.169.254",
        "port": 80,
        "why": "not in the allow-list",
        "process": "pid 7: curl http://169.254.169.254/",
    }


def test_a_check_is_one_line_on_stderr_with_the_end_of_a_failures_output_and_json_has_each_run():
    failed = ev.Check(agent="claude", command="pytest -q", round=1, rounds=3, passed=False, exit_code=1, ms=1234.0)
    failed.output = "".join(f"line {n}\n" for n in range(1, 9)) + "1 failed\n"
    passed = ev.Check(agent="claude", command="pytest -q", round=2, rounds=3, passed=True, exit_code=0, ms=80.0)
    out, err = io.StringIO(), io.StringIO()
    with renderer(out, err, output="json") as r:  # what crew did besides the agent: on stderr with --json too
        r.progress(failed)
        r.progress(passed)
        r.finish([Outcome("claude", result=run_result(), checks=[failed, passed])])
    assert err.getvalue() == (
        "crew: @claude: check 1/3 failed, exit status 1: pytest -q (1.23s)\n"
        "  line 5\n  line 6\n  line 7\n  line 8\n  1 failed\n"
        "crew: @claude: check 2/3 passed: pytest -q (0.08s)\n"
    )
    [result] = json.loads(out.getvalue())["results"]
    assert result["checks"][0] == {
        "command": "pytest -q",
        "round": 1,
        "passed": False,
        "exit_code": 1,
        "output": failed.output,
        "ms": 1234.0,
    }
    assert [c["passed"] for c in result["checks"]] == [False, True]


def test_a_pull_request_is_a_crew_line_with_its_address():
    err = io.StringIO()
    with renderer(err=err) as r:
        r.progress(
            ev.Pull(
                agent="claude", url="https://github.com/o/r/pull/7", number=7, branch="crew/x/claude", forge="github"
            )
        )
        r.progress(
            ev.Pull(
                agent="claude",
                url="https://gitlab.com/g/r/-/merge_requests/2",
                number=2,
                branch="b",
                forge="gitlab",
                opened=False,
                draft=True,
            )
        )
    assert err.getvalue() == (
        "crew: pull request opened: https://github.com/o/r/pull/7 (crew/x/claude)\n"
        "crew: draft merge request updated: https://gitlab.com/g/r/-/merge_requests/2 (b)\n"
    )
