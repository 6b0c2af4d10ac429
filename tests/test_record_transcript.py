"""The record written down (crewbridge.record.transcript): one file per run, each event on disk as
it happens, private, redacted and bounded; read back typed, a line that cannot be read reported and
the rest read; a transcript crew wrote before the record (version 0) read as the events it stands for."""

import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from crewbridge.base.jsonio import MAX_DEPTH
from crewbridge.errors import CrewError, UsageError
from crewbridge.record import events as ev
from crewbridge.record.index import Runs
from crewbridge.record.stream import Record, now
from crewbridge.record.transcript import MAX_RECORD, MAX_TEXT, Transcript, find_run, read_path, read_run, runs_dir
from crewbridge.work.sessions import priors

FIXTURES = Path(__file__).parent / "fixtures"
SECRET = "s3cr3t-value-1234"
ENV = {
    "ANTHROPIC_API_KEY": SECRET,
    "GITHUB_TOKEN": "tok-abcdef",
    "DB_PASSWORD": "hunter22",
    "SHORT_KEY": "dummy",
    "HOME": "/home/someone",
    "EDITOR": "vim-editor",
}


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state" / "crewbridge" / "runs"


def kept(env=None, **start) -> Record:
    """A run's record written down in its transcript, its `start` emitted."""
    record = Record()
    record.keep(Transcript.create(record.run, env=env))
    record.emit(ev.Start(run=record.run, at=now(), pid=os.getpid(), cwd=os.getcwd(), **start))
    return record


def lines(record: Record) -> list[dict]:
    return [json.loads(line) for line in record.transcript.path.read_text().splitlines()]


def test_a_run_is_a_jsonl_file_named_by_its_id_under_the_user_state_dir(state):
    record = kept(command="query", mode="query", agents=["claude"], task="what is in notes.txt?")
    assert record.transcript.path == state / f"{record.run}.jsonl" and state == runs_dir()
    first = lines(record)[0]
    assert (first["kind"], first["run"]) == ("start", record.run)
    assert read_run(record.run)[0].v == ev.VERSION
    assert (first["command"], first["agents"], first["task"]) == ("query", ["claude"], "what is in notes.txt?")
    assert {"t", "at", "pid", "cwd"} <= set(first)


def test_a_run_id_already_written_down_is_not_written_over(state):
    record = kept()
    with pytest.raises(CrewError, match=r"cannot write the run transcript in .*; set XDG_STATE_HOME"):
        Transcript.create(record.run)
    assert lines(record)[0]["run"] == record.run


def test_an_unwritable_state_folder_is_a_clear_error(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(CrewError, match=r"cannot write the run transcript in .*file/runs.*set XDG_STATE_HOME"):
        Transcript.create("20250101-000000-abc123", tmp_path / "file" / "runs")


def test_every_event_is_on_disk_as_soon_as_it_is_written():
    record = kept()
    record.emit(ev.Call(agent="claude", call="c1", name="crew:read_file", input={"path": "a"}))
    assert [e["kind"] for e in lines(record)] == ["start", "call"]  # before the end
    record.emit(ev.Result(agent="claude", call="c1", name="crew:read_file", success=True, data="A"))
    assert (lines(record)[-1]["call"], lines(record)[-1]["data"]) == ("c1", "A")


def test_transcripts_are_private_to_the_user(state):
    record = kept()
    assert stat.S_IMODE(record.transcript.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(state.stat().st_mode) == 0o700


def test_secrets_are_redacted_before_they_reach_the_disk():
    record = kept(env=ENV, task=f"crew query --key={SECRET}")
    output = f"export ANTHROPIC_API_KEY={SECRET}\ntoken tok-abcdef, pw hunter22"
    record.emit(ev.Result(call="c1", name="crew:run_command", success=True, data={"output": output, SECRET: ["dummy"]}))
    record.end("done")
    text = record.transcript.path.read_text()
    assert SECRET not in text and "tok-abcdef" not in text and "hunter22" not in text
    data = lines(record)[1]["data"]
    assert data["output"] == (
        "export ANTHROPIC_API_KEY=[REDACTED:ANTHROPIC_API_KEY]\n"
        "token [REDACTED:GITHUB_TOKEN], pw [REDACTED:DB_PASSWORD]"
    )
    assert data["[REDACTED:ANTHROPIC_API_KEY]"] == ["dummy"]  # short values stay
    assert lines(record)[0]["task"] == "crew query --key=[REDACTED:ANTHROPIC_API_KEY]"


def test_the_values_crew_gives_its_clis_are_redacted_whatever_their_names(state):
    transcript = Transcript.create(
        "20250101-000000-abc123", state, env={}, secrets={"REGION_URL": "https://in.example/x9"}
    )
    transcript.write(ev.Text(text="the endpoint is https://in.example/x9"))
    transcript.close()
    assert "in.example" not in (state / "20250101-000000-abc123.jsonl").read_text()


def test_parallel_writers_never_mix_their_lines():
    record = kept()

    def agent(name: str) -> None:
        for i in range(200):
            record.emit(ev.Text(agent=name, text=f"{name} line {i} " + "x" * 500))

    threads = [threading.Thread(target=agent, args=(f"agent{n}",)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    record.end("done")
    events = lines(record)  # every line parses
    assert len(events) == 2 + 6 * 200
    assert all(sum(1 for e in events if e.get("agent") == f"agent{n}") == 200 for n in range(6))


@pytest.mark.slow
def test_a_run_that_dies_loses_nothing_it_wrote_and_shows_as_unfinished():
    script = (
        "import os\n"
        "from crewbridge.record import events as ev\n"
        "from crewbridge.record.stream import Record, now\n"
        "from crewbridge.record.transcript import Transcript\n"
        "r = Record()\n"
        "r.keep(Transcript.create(r.run))\n"
        "r.emit(ev.Start(run=r.run, at=now(), pid=os.getpid(), command='query'))\n"
        "for i in range(50):\n"
        "    r.emit(ev.Call(call=r.next_call(), name=f'call{i}'))\n"
        "os.kill(os.getpid(), 9)\n"
    )
    subprocess.run([sys.executable, "-c", script], env=os.environ, check=False, start_new_session=True)
    (run,) = Runs().rows()
    assert (run.status, run.seconds, run.command) == ("unfinished", None, "query")
    assert [e.name for e in read_run(run.run_id)[1:]] == [f"call{i}" for i in range(50)]


# --- one record is bounded ------------------------------------------------------------------------


def test_a_100_mb_argument_is_stored_cut_with_its_size_and_reads_back():
    record = kept()
    record.emit(
        ev.Call(agent="a", call="c1", name="crew:write_file", input={"path": "a", "content": "x" * 100_000_000})
    )
    record.end("done")
    assert record.transcript.path.stat().st_size < MAX_RECORD + 1000
    [_, call, end] = read_run(record.run)
    assert call.input["content"] == (
        "x" * MAX_TEXT + f"…[crew cut this text: 100,000,000 characters in all, the first {MAX_TEXT:,} kept]"
    )
    assert (call.input["path"], end.kind, end.calls) == ("a", "end", 1)
    assert Runs().rows()[0].calls == 1


def test_a_secret_across_the_cut_is_redacted_not_kept_in_part():
    record = kept(env=ENV)
    record.emit(ev.Result(call="c1", name="x", success=True, data="y" * (MAX_TEXT - 5) + SECRET + "z" * MAX_TEXT))
    record.end("done")
    assert SECRET[:5].encode() not in record.transcript.path.read_bytes()
    assert lines(record)[1]["data"].startswith("y" * (MAX_TEXT - 5) + "[REDA")


@pytest.mark.slow
def test_a_record_of_many_strings_each_under_the_limit_leaves_its_largest_fields_out():
    data = ["m" * 100_000] * 100
    record = kept()
    record.emit(ev.Result(agent="a", call="c7", name="crew:grep", success=True, data=data, error="kept"))
    record.end("done")
    line = lines(record)[1]
    assert len(json.dumps(line)) < MAX_RECORD
    size = len(json.dumps(data))
    assert line["data"] == {"cut": f"crew left this field out: {size:,} bytes made the record too large"}
    assert (line["kind"], line["agent"], line["call"], line["name"], line["error"]) == (
        "result",
        "a",
        "c7",
        "crew:grep",
        "kept",
    )
    assert read_run(record.run)[1].call == "c7"  # it still reads as the call's result


def test_nesting_past_the_limit_is_stored_as_a_note():
    deep: list = []
    for _ in range(500):  # deeper than crew reads from a CLI (jsonio.MAX_DEPTH), as deep as json.loads reads
        deep = [deep]
    record = kept()
    record.emit(ev.Call(call="c1", name="x", input=deep))
    record.end("done")
    line = lines(record)[1]  # the record's own object is the first level
    note = f"[crew left this out: nested more than {MAX_DEPTH} levels deep]"
    assert json.dumps(line["input"]) == "[" * (MAX_DEPTH - 2) + json.dumps([note]) + "]" * (MAX_DEPTH - 2)


def test_text_that_is_not_utf8_is_written_escaped_and_reads_back_the_same():
    record = kept()
    record.emit(ev.Call(call="c1", name="x", input={"path": "caf\udce9.txt", "pair": "\ud83d"}))
    record.end("done")
    raw = record.transcript.path.read_bytes()
    raw.decode("utf-8")  # the file is UTF-8
    assert b'"caf\\udce9.txt"' in raw
    assert read_run(record.run)[1].input == {"path": "caf\udce9.txt", "pair": "\ud83d"}


def test_values_that_are_not_json_are_recorded_as_their_text(tmp_path):
    record = kept()
    data = {"where": tmp_path, "exc": ValueError("boom"), "pair": (1, 2)}
    record.emit(ev.Result(call="c1", name="x", success=False, data=data))
    record.end("done")
    assert lines(record)[1]["data"] == {"where": str(tmp_path), "exc": "boom", "pair": [1, 2]}


# --- read back -------------------------------------------------------------------------------------


def make_runs(count: int) -> list[str]:
    ids = []
    for n in range(count):
        record = kept(command="query", task=f"task {n}")
        record.emit(ev.Call(call=record.next_call(), name="x"))
        record.end("done")
        ids.append(record.run)
    return ids


def test_read_run_gives_the_typed_events_by_id_prefix_or_last():
    (run_id,) = make_runs(1)
    events = read_run(run_id)
    assert [type(e) for e in events] == [ev.Start, ev.Call, ev.End]
    assert (events[0].run, events[0].task, events[1].call, events[2].status) == (run_id, "task 0", "c1", "done")
    assert read_run(run_id[:17]) == events == read_run("last")


def test_a_line_longer_than_any_record_is_skipped_and_the_rest_is_read(state):
    (run_id,) = make_runs(1)
    path = state / f"{run_id}.jsonl"
    first, *rest = path.read_bytes().splitlines(keepends=True)
    huge = b'{"kind": "call", "call": "c9", "name": "x", "input": "' + b"h" * (MAX_RECORD * 2) + b'"}\n'
    path.write_bytes(first + huge + b"".join(rest))
    events = read_run(run_id)
    assert [e.kind for e in events] == ["start", "unreadable", "call", "end"]
    assert events[1].line == 2
    assert events[1].error == f"a record of {len(huge):,} bytes, more than crew writes; not read"
    assert Runs().rows()[0].status == "done"


@pytest.mark.parametrize(
    "line",
    [
        b"[" * 5000 + b"]" * 5000,
        b"[1, 2]",
        b"\xff\xfe",
        b'{"kind": "no such kind", "t": 1}',
        b'{"kind": "call", "name": "x"}',  # a call without its id
        b'{"kind": "usage", "input_tokens": "many"}',
    ],
)
def test_a_line_that_is_not_an_event_is_reported_and_the_rest_is_read(state, line):
    (run_id,) = make_runs(1)
    path = state / f"{run_id}.jsonl"
    first, *rest = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(first + line + b"\n" + b"".join(rest))
    events = read_run(run_id)
    assert [e.kind for e in events] == ["start", "unreadable", "call", "end"]
    assert events[1].line == 2 and events[1].error


def test_read_run_reports_a_half_written_last_line(state):
    (run_id,) = make_runs(1)
    with open(state / f"{run_id}.jsonl", "a") as handle:
        handle.write('{"kind": "call", "ca')
    assert read_run(run_id)[-1] == ev.Unreadable(
        line=4,
        text='{"kind": "call", "ca',
        error="Unterminated string starting at: line 1 column 18 (char 17)",
    )


def test_read_run_errors_name_the_problem_and_the_next_step(state):
    with pytest.raises(UsageError, match="no runs recorded yet"):
        read_run("last")
    ids = make_runs(2)
    with pytest.raises(UsageError, match=r"run 'ffff' not found in .*; `crew log` lists runs"):
        read_run("ffff")
    common = os.path.commonprefix(ids)  # noqa: RUF071 - the ids' common characters: they are not paths
    with pytest.raises(UsageError, match=f"run id '{common}' matches 2 runs"):
        read_run(common)


@pytest.mark.parametrize("bad", ["../../etc/passwd", "/etc/passwd", "x.jsonl", ""])
def test_read_run_refuses_anything_but_a_run_id(bad):
    make_runs(1)
    with pytest.raises(UsageError, match="is not valid; `crew log` lists runs"):
        read_run(bad)


def test_find_run_names_only_files_that_are_runs(state):
    (run_id,) = make_runs(1)
    (state / "notes.jsonl").write_text("{}\n")
    (state / f"{run_id}.jsonl.bak").write_text("{}\n")
    assert find_run("last") == state / f"{run_id}.jsonl"


# --- a transcript crew wrote before the record (version 0) ----------------------------------------

V0 = FIXTURES / "transcript_v0.jsonl"  # kinds tool_call, tool_result, native_tool, prompt …; no ids


def test_a_version_0_transcript_reads_as_the_events_it_stands_for():
    events = read_path(V0)
    start = events[0]
    assert isinstance(start, ev.Start) and start.v == 0
    assert (start.run, start.command, start.mode, start.agents, start.models, start.cwd, start.pid) == (
        "20250601-100000-07b3c1",
        "query",
        "query",
        ["claude"],
        {"claude": "sonnet"},
        "/home/someone/project",
        4242,
    )
    assert [e.kind for e in events] == [
        "start",
        "turn",
        "session",
        "call",
        "call",
        "result",
        "result",
        "call",
        "decision",
        "approval",
        "reply",
        "usage",
        "session",  # the session's totals the usage record reported
        "turn",
        "answer",
        "usage",
        "end",
    ]
    assert [e.t for e in events[:3]] == [0.2, 1377.4, 1878.0]  # its `ms`
    assert all(e.agent == "claude" for e in events[1:-1])
    reply, answer = (next(e for e in events if isinstance(e, kind)) for kind in (ev.Reply, ev.Answer))
    assert (reply.turn, answer.turns) == (1, 2)  # the turns version 0 left to their prompts


def test_a_version_0_call_gets_an_id_its_result_and_decision_carry():
    events = read_path(V0)
    calls = [e for e in events if isinstance(e, ev.Call)]
    results = [e for e in events if isinstance(e, ev.Result)]
    assert [(c.call, c.name, c.input, c.via) for c in calls] == [
        ("c1", "crew:read_file", {"path": "a.txt"}, "text"),
        ("c2", "crew:read_file", {"path": "b.txt"}, "text"),
        ("c3", "native:Bash", {"command": "rm -rf build"}, "own"),  # named as the live record names it
    ]
    assert [(r.call, r.success, r.data, r.metadata["tool"]) for r in results] == [
        ("c1", True, "A TEXT", "read_file"),  # the oldest open call of its agent and tool
        ("c2", True, "B TEXT", "read_file"),
    ]
    (decision,) = [e for e in events if isinstance(e, ev.Decision)]
    assert (decision.call, decision.decision, decision.reason) == (
        "c3",
        "refused",
        "crew does not allow Bash for query mode",
    )


def test_a_version_0_end_has_the_one_set_of_status_words(tmp_path):
    end = read_path(V0)[-1]
    assert isinstance(end, ev.End)
    assert (end.status, end.calls, end.errors, end.t) == ("done", 2, 0, 3977.2)  # "ok"
    assert end.usage["claude"]["input_tokens"] == 2600
    for old, new in [("ok", "done"), ("interrupted", "cancelled"), ("cancelled", "cancelled"), ("error", "failed")]:
        path = tmp_path / f"{old}.jsonl"
        path.write_text(V0.read_text().replace('"status": "ok"', f'"status": "{old}"'))
        assert read_path(path)[-1].status == new
        assert new in ev.STATUSES


def test_a_version_0_usage_stays_per_turn_and_its_totals_resume_the_session(state):
    usage = [e for e in read_path(V0) if isinstance(e, ev.Usage)]
    assert [(u.turn, u.input_tokens, u.output_tokens, u.cost_usd) for u in usage] == [
        (1, 1200, 80, 0.012),
        (2, 1400, 40, 0.008),
    ]
    state.mkdir(parents=True)
    shutil.copy(V0, state / "20250601-100000-07b3c1.jsonl")
    prior = priors("20250601-100000-07b3c1")["claude"]
    assert prior.session_id == "0b9e7c1e-5f1a-4c1b-9d55-3f1f2a0c9e11"
    assert prior.reported is not None and prior.reported.input_tokens == 1200  # the CLI's totals
    assert [role for role, _ in prior.history] == ["user", "assistant", "user", "assistant"]
    assert prior.history[-1][1] == "a.txt says A TEXT; b.txt says B TEXT."


def test_a_version_0_run_is_a_row_of_the_index(state):
    state.mkdir(parents=True)
    shutil.copy(V0, state / "20250601-100000-07b3c1.jsonl")
    (row,) = Runs().rows()
    assert (row.run_id, row.status, row.calls, row.tokens, row.cost, row.seconds, row.task) == (
        "20250601-100000-07b3c1",
        "done",
        2,
        2720,
        0.02,
        3.9772,
        "what do a.txt and b.txt say?",
    )


def test_a_version_0_line_that_cannot_be_read_is_reported_like_any_other(tmp_path):
    path = tmp_path / "v0.jsonl"
    old = V0.read_text().splitlines(keepends=True)
    path.write_text(old[0] + '{"kind": "tool_call", "agent": "claude", "name": \n' + "".join(old[1:]))
    events = read_path(path)
    assert [e.kind for e in events[:3]] == ["start", "unreadable", "turn"] and events[1].line == 2


def test_the_other_version_0_kinds_read_as_their_events(tmp_path):
    start = V0.read_text().splitlines()[0]
    old = [
        {"kind": "worktree", "agent": "claude", "worktree": "/w/.crew/a", "branch": "crew/a", "base": "abc123"},
        {"kind": "fallback", "agent": "claude", "to": "gemini", "reason": "rate limit", "message": "429"},
        {"kind": "resume", "agent": "claude", "run": "20250501-000000-aaaaaa", "how": "replay", "session": "s"},
        {"kind": "review", "agent": "gemini", "round": 1, "rounds": 2, "verdict": "approve", "findings": []},
        {"kind": "cancel", "source": "browser"},
        {"kind": "disarmed", "agent": "claude", "found": [{"path": ".git/hooks/pre-commit", "what": "hook"}]},
        {"kind": "budget", "agent": "claude", "turn": 2, "reason": "$1.00 of max_cost $1.00"},
    ]
    path = tmp_path / "v0.jsonl"
    path.write_text(start + "\n" + "".join(json.dumps(line) + "\n" for line in old))
    worktree, fallback, resume, review, cancel, disarmed, budget = read_path(path)[1:]
    assert (worktree.worktree, worktree.branch, worktree.base) == ("/w/.crew/a", "crew/a", "abc123")
    assert (fallback.agent, fallback.to, fallback.reason) == ("claude", "gemini", "rate limit")
    assert (resume.of, resume.how, resume.session) == ("20250501-000000-aaaaaa", "replay", "s")
    assert (review.round, review.rounds, review.verdict) == (1, 2, "approve")
    assert (cancel.kind, cancel.source) == ("cancel", "browser")
    assert disarmed.found == [{"path": ".git/hooks/pre-commit", "what": "hook"}]
    assert (budget.kind, budget.about, budget.text) == ("notice", "budget", "$1.00 of max_cost $1.00")
