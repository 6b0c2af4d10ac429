"""crewbridge.acp.session: an editor's session is crew's runs, found again by the runs index
(crewbridge.record.index) — listed by the folder they worked in, links and all."""

from __future__ import annotations

import os
from pathlib import Path

from crewbridge.acp.session import COMMAND, runs_of, sessions
from crewbridge.record import events as ev
from crewbridge.record.stream import Record, now
from crewbridge.record.transcript import Transcript


def prompted(session: str, cwd: Path, task: str) -> str:
    """A prompt's run of `session`, written down as crew acp writes one."""
    record = Record()
    record.keep(Transcript.create(record.run))
    parent = ev.Parent(session=session)
    record.emit(ev.Start(run=record.run, at=now(), command=COMMAND, task=task, cwd=str(cwd), parent=parent))
    record.end("done")
    return record.run


def test_a_sessions_runs_are_found_by_its_id_oldest_first(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    first = prompted("s1", tmp_path, "read the notes")
    prompted("s2", tmp_path, "another session")
    second = prompted("s1", tmp_path, "and fix them")
    assert [row.run_id for row in runs_of("s1")] == [first, second]


def test_a_session_is_listed_when_its_folder_is_named_through_a_link(tmp_path, monkeypatch):
    """Issue 40: session/list with a cwd missed the sessions under a symlinked folder (the runs
    keep their folder resolved; the editor may name it through a link)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    real = tmp_path / "projects" / "app"
    real.mkdir(parents=True)
    os.symlink(real, tmp_path / "app")
    prompted("s1", real.resolve(), "read the notes")
    prompted("s2", tmp_path, "elsewhere")
    listed = sessions(str(tmp_path / "app"))
    assert [(info.session_id, info.title) for info in listed] == [("s1", "read the notes")]
    assert [info.session_id for info in sessions(str(real))] == ["s1"]
    assert sorted(info.session_id for info in sessions()) == ["s1", "s2"]
