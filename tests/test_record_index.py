"""The runs index (crewbridge.record.index): one row per run from its transcript's first and last
events, the one status rule, newest first, kept in index.json while the transcripts are unchanged."""

import json
import os
import stat
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from crewbridge.record import events as ev
from crewbridge.record.index import INDEX_NAME, Reader, Runs, alive, read_from, row_of
from crewbridge.record.stream import Record, now
from crewbridge.record.transcript import Transcript


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state" / "crewbridge" / "runs"


def started(run: str | None = None, pid: int | None = None, at: str | None = None, **start) -> Record:
    record = Record(run)
    record.keep(Transcript.create(record.run))
    fields = {"command": "query", "mode": "query", "agents": ["claude"], "task": "a task", "cwd": "/w", **start}
    record.emit(ev.Start(run=record.run, at=at or now(), pid=os.getpid() if pid is None else pid, **fields))
    return record


def finished(run: str | None = None, status: str = "done", **start) -> Record:
    record = started(run, **start)
    record.emit(ev.Turn(agent="claude", turn=1))
    record.emit(ev.Call(agent="claude", call=record.next_call(), name="crew:read_file"))
    record.emit(ev.Usage(agent="claude", turn=1, input_tokens=11, output_tokens=7, cost_usd=0.001))
    record.end(status)
    return record


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait()
    return child.pid


def test_a_row_has_what_every_list_shows(state):
    parent = ev.Parent(batch="b-1", repo="/repos/a")
    record = finished(
        command="execute", mode="execute", agents=["claude", "gemini"], models={"claude": "opus", "gemini": None}
    )
    nested = finished(parent=parent, resumed_from=record.run, task="first line\nsecond")
    row = Runs().row(nested.run)
    assert (row.run_id, row.status, row.calls, row.errors, row.tokens, row.cost) == (
        nested.run,
        "done",
        1,
        0,
        18,
        0.001,
    )
    assert (row.parent, row.resumed_from, row.cwd, row.pid) == (
        {"batch": "b-1", "repo": "/repos/a"},
        record.run,
        "/w",
        os.getpid(),
    )
    assert row.usage == {
        "claude": {"turns": 1, "input_tokens": 11, "output_tokens": 7, "cached_tokens": 0, "cost_usd": 0.001}
    }
    assert row.seconds is not None and row.seconds >= 0 and row.started.endswith("+00:00")
    first = Runs().row(record.run)
    assert (first.command, first.mode, first.agents, first.models) == (
        "execute",
        "execute",
        ["claude", "gemini"],
        {"claude": "opus"},  # an agent with no model named has none
    )
    assert "pid" not in row.to_dict() and row.to_dict()["parent"] == {"batch": "b-1", "repo": "/repos/a"}


@pytest.mark.parametrize("status", ev.ENDED)
def test_an_ended_run_has_the_status_its_end_says(status):
    record = finished(status=status)
    assert Runs().row(record.run).status == status


def test_a_run_without_an_end_is_running_while_its_process_lives_then_unfinished():
    running = started()
    assert Runs(index=None).row(running.run).status == "running"
    gone = started(pid=dead_pid())
    assert Runs(index=None).row(gone.run).status == "unfinished"
    before = (datetime.now(timezone.utc) - timedelta(days=400)).isoformat()  # this process began after it
    reused = started(at=before)
    assert Runs(index=None).row(reused.run).status == "unfinished"
    unnamed = started(pid=0)
    assert Runs(index=None).row(unnamed.run).status == "unfinished"


def test_a_running_run_that_asked_a_person_and_waits_is_waiting():
    record = started()
    record.emit(ev.Ask(agent="claude", call="c1", name="crew:write_file", input={"path": "a"}))
    assert Runs(index=None).row(record.run).status == "waiting"
    record.emit(ev.Approval(agent="claude", call="c1", name="crew:write_file", answer="yes", source="browser"))
    assert Runs(index=None).row(record.run).status == "running"


def test_alive_tells_a_process_that_began_after_the_run_from_the_runs_own():
    assert alive(os.getpid(), now())
    assert not alive(os.getpid(), "2000-01-01T00:00:00+00:00")
    assert not alive(dead_pid(), now())
    assert alive(os.getpid(), "not a time")  # an unreadable time cannot tell: the process lives


def test_the_rows_are_newest_first_and_since_leaves_out_older_runs(state):
    for n in range(3):
        finished(f"2030010{n + 1}-120000-00000{n}", task=f"task {n}")
    runs = Runs()
    assert [row.task for row in runs.rows()] == ["task 2", "task 1", "task 0"]
    since = datetime(2030, 1, 2, 11, tzinfo=timezone.utc)
    assert [row.task for row in runs.rows(since)] == ["task 2", "task 1"]
    assert Runs(state.parent / "nowhere").rows() == []


def test_only_files_named_as_runs_are_rows(state):
    finished("20300101-120000-000001")
    (state / "notes.jsonl").write_text("{}\n")
    (state / "20300101-120000-000002.jsonl.tmp").write_text("{}\n")
    assert [row.run_id for row in Runs().rows()] == ["20300101-120000-000001"]


def test_latest_is_the_newest_run_in_a_folder_by_one_of_the_commands(state):
    finished("20300101-120000-000001", cwd="/a", command="query")
    finished("20300101-120000-000002", cwd="/a", command="mcp")
    finished("20300101-120000-000003", cwd="/b", command="query")
    runs = Runs()
    assert runs.latest("/a", ("query", "execute", "chat")).run_id == "20300101-120000-000001"
    assert runs.latest("/a", ("mcp",)).run_id == "20300101-120000-000002"
    assert runs.latest("/c", ("query",)) is None


def test_the_finished_rows_are_kept_in_a_private_index_and_read_from_it(state):
    finished("20300101-120000-000001", task="kept")
    running = started("20300101-120000-000002", task="still going")
    Runs().rows()
    index = state.parent / INDEX_NAME
    assert stat.S_IMODE(index.stat().st_mode) == 0o600
    kept = json.loads(index.read_text())["rows"]
    assert list(kept) == ["20300101-120000-000001"]  # a running row is read anew each time
    kept["20300101-120000-000001"][2]["task"] = "from the index"
    index.write_text(json.dumps({"format": 2, "rows": kept}))
    rows = {row.run_id: row for row in Runs().rows()}
    assert rows["20300101-120000-000001"].task == "from the index"  # its file is unchanged: not read again
    assert rows[running.run].status == "running"


def test_a_row_is_read_again_once_its_transcript_changed(state):
    record = started("20300101-120000-000001", task="going")
    runs = Runs()
    assert runs.row(record.run).status == "running"
    record.end("done")
    assert runs.row(record.run).status == "done"
    index = state.parent / INDEX_NAME
    runs.rows()
    path = state / f"{record.run}.jsonl"
    assert b'"task": "going"' in path.read_bytes()
    path.write_bytes(path.read_bytes().replace(b'"task": "going"', b'"task": "moved"'))
    os.utime(path, ns=(1, 1))  # the same size: its time tells
    assert Runs().row(record.run).task == "moved" and index.exists()


def test_a_deleted_transcript_leaves_the_index(state):
    finished("20300101-120000-000001")
    finished("20300101-120000-000002")
    Runs().rows()
    (state / "20300101-120000-000001.jsonl").unlink()
    assert [row.run_id for row in Runs().rows()] == ["20300101-120000-000002"]
    assert list(json.loads((state.parent / INDEX_NAME).read_text())["rows"]) == ["20300101-120000-000002"]


@pytest.mark.parametrize("index", [b"not json", b'{"format": 1, "rows": {}}', b'{"format": 2, "rows": {"x": 1}}'])
def test_an_index_this_crew_cannot_read_is_made_anew(state, index):
    finished("20300101-120000-000001", task="read anew")
    (state.parent / INDEX_NAME).write_bytes(index)
    assert [row.task for row in Runs().rows()] == ["read anew"]
    assert json.loads((state.parent / INDEX_NAME).read_text())["format"] == 2


def test_an_unwritable_index_only_means_the_runs_are_read_anew(state, tmp_path):
    finished("20300101-120000-000001")
    assert [row.run_id for row in Runs(index=tmp_path / "no" / "such" / "index.json").rows()] == [
        "20300101-120000-000001"
    ]


def test_a_row_of_a_transcript_whose_start_cannot_be_read_still_names_its_run(state):
    record = finished("20300101-120000-000001")
    path = state / f"{record.run}.jsonl"
    path.write_bytes(b"not json\n" + path.read_bytes().split(b"\n", 1)[1])
    row = row_of(path)
    assert (row.run_id, row.status, row.calls) == ("20300101-120000-000001", "done", 1)


def test_rows_match_an_agent_a_status_or_words(state):
    row = Runs().row(finished(task="Fix the parser", agents=["claude", "codex"]).run)
    assert row.matches(agent="codex") and not row.matches(agent="gemini")
    assert row.matches(status="done") and not row.matches(status="failed")
    assert row.matches(text="parser") and row.matches(text=row.run_id[:8]) and not row.matches(text="nothing")


def test_the_live_runs_are_those_last_seen_running(state):
    runs = Runs()
    going = started("20300101-120000-000001")
    finished("20300101-120000-000002")
    runs.rows()
    assert runs.live() == [going.run]


def test_read_from_gives_whole_events_from_an_offset_and_waits_for_a_line_being_written(state):
    record = started("20300101-120000-000001")
    path = state / f"{record.run}.jsonl"
    reader = Reader()
    found, offset = read_from(path, 0, reader)
    assert [event.kind for _, event in found] == ["start"] and offset == path.stat().st_size
    with path.open("ab") as handle:
        handle.write(b'{"kind": "text", "agent": "claude", "te')
    assert read_from(path, offset, reader) == ([], offset)  # half a line: not yet
    with path.open("ab") as handle:
        handle.write(b'xt": "hi"}\n')
    found, after = read_from(path, offset, reader)
    assert [(event.kind, event.text) for _, event in found] == [("text", "hi")]
    assert found[0][0] == after == path.stat().st_size
