"""crewbridge.ui.runs: the runs `crew ui` lists, from transcript files as crew writes them: status
from the end event or the process behind the run (a reused pid is not the run), the row kept while
the file does not change, events read whole lines at a time."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

from crewbridge.ui.runs import Runs, alive, read_events
from runfiles import write_run


def test_the_status_comes_from_the_end_event(tmp_path):
    for suffix, end in (("aaa111", "ok"), ("bbb222", "failed"), ("ccc333", "error"), ("ddd444", "interrupted")):
        write_run(tmp_path, f"20250101-000000-{suffix}", end=end)
    write_run(tmp_path, "20250101-000000-eee555", end="cancelled")
    assert [row.status for row in Runs(tmp_path).rows()] == ["cancelled", "cancelled", "failed", "failed", "done"]


def test_a_run_without_an_end_runs_while_its_process_lives(tmp_path):
    now = datetime.now(timezone.utc).isoformat()
    write_run(tmp_path, "20250101-000000-aaa111", end=None, started=now)  # this very process, started before
    write_run(tmp_path, "20250101-000000-bbb222", end=None, pid=(1 << 22) + 1, started=now)  # no such process
    assert {row.run_id[-6:]: row.status for row in Runs(tmp_path).rows()} == {"aaa111": "running", "bbb222": "failed"}


def test_a_pid_given_to_another_process_since_is_not_the_run():
    now = datetime.now(timezone.utc)
    assert alive(os.getpid(), now.isoformat())
    assert not alive(os.getpid(), (now - timedelta(days=3650)).isoformat())  # this process began after that run
    assert not alive((1 << 22) + 1, now.isoformat())


def test_a_row_is_read_again_only_when_its_file_changed(tmp_path, monkeypatch):
    import crewbridge.ui.runs as runs_module

    for number in range(5):
        write_run(tmp_path, f"20250101-00000{number}-abc123")
    runs = Runs(tmp_path)
    read: list[Path] = []
    summary = runs_module.summary
    monkeypatch.setattr(runs_module, "summary", lambda path: (read.append(path), summary(path))[1])
    runs.rows()
    runs.rows()
    assert len(read) == 5
    with (tmp_path / "20250101-000003-abc123.jsonl").open("a") as handle:
        handle.write('{"kind": "late"}\n')
    runs.rows()
    assert [path.name for path in read[5:]] == ["20250101-000003-abc123.jsonl"]


def test_only_run_files_are_runs(tmp_path):
    write_run(tmp_path, "20250101-000000-abc123")
    (tmp_path / "notes.jsonl").write_text("{}\n")
    (tmp_path / "20250101-000000-abc123.jsonl.tmp").write_text("{}\n")
    runs = Runs(tmp_path)
    assert [row.run_id for row in runs.rows()] == ["20250101-000000-abc123"]
    assert runs.path("../20250101-000000-abc123") is None and runs.path("20250101-000000-abc12") is None
    assert Runs(tmp_path / "missing").rows() == []


def test_events_are_read_whole_lines_from_an_offset(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_bytes(b'{"kind": "start"}\n{"kind": "tool_call"}\n{"kind": "tool_re')
    events, offset = read_events(path, 0)
    assert [event["kind"] for _, event in events] == ["start", "tool_call"] and offset == events[-1][0]
    with path.open("ab") as handle:
        handle.write(b'sult"}\nnot json\n[1]\n{"kind": "end"}\n')
    events, offset = read_events(path, offset)
    assert [event["kind"] for _, event in events] == ["tool_result", "end"] and offset == path.stat().st_size


def test_finished_rows_are_kept_between_starts_and_read_again_only_when_changed(tmp_path, monkeypatch):
    import crewbridge.ui.runs as runs_module

    runs_dir, index = tmp_path / "runs", tmp_path / "ui-index.json"
    for number in range(3):
        write_run(runs_dir, f"20250101-00000{number}-abc123")
    write_run(runs_dir, "20250101-000009-abc123", end=None, started=datetime.now(timezone.utc).isoformat())
    first = Runs(runs_dir, index).rows()
    assert index.stat().st_mode & 0o777 == 0o600
    read: list[str] = []
    summary = runs_module.summary
    monkeypatch.setattr(runs_module, "summary", lambda path: (read.append(path.name), summary(path))[1])
    assert [vars(row) for row in Runs(runs_dir, index).rows()] == [vars(row) for row in first]
    assert read == ["20250101-000009-abc123.jsonl"]  # only the running one: the others come from the index
    with (runs_dir / "20250101-000001-abc123.jsonl").open("a") as handle:
        handle.write('{"kind": "late"}\n')
    (runs_dir / "20250101-000002-abc123.jsonl").unlink()
    read.clear()
    assert [row.run_id[-13:-7] for row in Runs(runs_dir, index).rows()] == ["000009", "000001", "000000"]
    assert sorted(read) == ["20250101-000001-abc123.jsonl", "20250101-000009-abc123.jsonl"]
    assert "000002" not in index.read_text()  # the deleted run left the index too


def test_an_index_that_cannot_be_read_is_read_anew(tmp_path):
    write_run(tmp_path / "runs", "20250101-000000-abc123")
    for broken in ("not json", '{"format": 1, "rows": {"x": [1]}}', '{"format": 999, "rows": {}}', "[]"):
        (tmp_path / "ui-index.json").write_text(broken)
        assert [row.status for row in Runs(tmp_path / "runs", tmp_path / "ui-index.json").rows()] == ["done"]
