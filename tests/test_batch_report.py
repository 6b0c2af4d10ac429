"""What a person and a program see of a batch: each repository's state, the progress (redrawn on a
terminal, a line per change when piped), the summary table, and the --json object, which
docs/schemas/batch.json describes."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import jsonschema

from crewbridge.batch import report
from crewbridge.batch.spec import BatchSpec, Repo
from crewbridge.batch.store import Row

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "docs" / "schemas" / "batch.json").read_text())
SPEC = BatchSpec("b1", "@claude add todo.md")
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def row(name: str, status: str, output: dict[str, Any] | None = None, phase: dict[str, Any] | None = None) -> Row:
    return Row(f"b1:{name}:1", SPEC, Repo(name, path=f"/r/{name}", key=name), 1, status, "e1", output, None, 0.0, phase)


def finished(status: str, **fields: Any) -> dict[str, Any]:
    out = {"repo": "x", "status": status, "branch": None, "commit": None, "changes": None, "usage": None}
    return {**out, "attempts": 1, "error": None, "started": 100.0, "ended": 112.5, **fields}


DONE = finished(
    "done",
    branch="crew/batch-b1/claude",
    commit=COMMIT,
    changes={"files": 2, "added": 3, "removed": 1},
    usage={"input_tokens": 10, "output_tokens": 5, "cached_tokens": 0, "cost_usd": 0.01},
    disarmed=[{"path": "vendor/.git", "what": "a new repository", "done": "moved to /q/1/vendor.git", "attempt": 1}],
)
ROWS = [
    row("a", "SUCCESS", DONE),
    row("b", "SUCCESS", finished("failed", attempts=2, error="the model is down")),
    row("c", "PENDING", phase={"step": "agent", "attempt": 2, "started": 90.0}),
    row("d", "ENQUEUED"),
    row("e", "ERROR"),
    row("f", "CANCELLED"),
]


def test_each_state_of_dbos_is_a_repositorys():
    assert [report.state(r) for r in ROWS] == ["done", "failed", "running", "queued", "failed", "cancelled"]
    assert report.batch_status(ROWS) == "running"
    assert report.batch_status(ROWS[:2]) == "failed" and report.exit_code(ROWS[:2]) == 7
    assert report.batch_status([ROWS[0], ROWS[5]]) == "cancelled"
    assert report.batch_status(ROWS[:1]) == "done" and report.exit_code(ROWS[:1]) == 0


def test_the_json_object_is_what_its_schema_says():
    record = report.batch_record("b1", ROWS)
    jsonschema.validate(record, SCHEMA)
    assert record["repos"][0] == {
        "repo": "a",
        "status": "done",
        "branch": "crew/batch-b1/claude",
        "commit": COMMIT,
        "changes": {"files": 2, "added": 3, "removed": 1},
        "usage": DONE["usage"],
        "attempts": 1,
        "error": None,
        "elapsed": 12.5,
        "disarmed": DONE["disarmed"],
    }
    assert record["repos"][1]["disarmed"] == [] and record["repos"][3]["disarmed"] == []  # nothing, or not yet
    broken = {**record, "repos": [{**record["repos"][0], "status": "fine"}]}
    assert not jsonschema.Draft202012Validator(SCHEMA).is_valid(broken)


def test_the_summary_table_says_each_repositorys_end_and_the_totals():
    lines = report.table(ROWS[:2])
    assert lines[0].split() == ["REPO", "STATUS", "CHANGES", "TRIES", "TIME", "RESULT"]
    assert lines[1].split() == [
        "a",
        "done",
        "2",
        "files",
        "+3",
        "-1",
        "1",
        "12.5s",
        "crew/batch-b1/claude",
        COMMIT[:10],
    ]
    assert lines[2].split()[:5] == ["b", "failed", "2", "12.5s", "the"] and lines[2].endswith("the model is down")
    assert lines[-1] == "2 repositories: 1 done, 1 failed; $0.0100"


def test_piped_progress_is_a_line_each_time_a_repository_changes():
    out = io.StringIO()
    progress = report.Progress(out, terminal=False)
    progress.update([row("a", "ENQUEUED")])
    progress.update([row("a", "ENQUEUED")])
    progress.update([row("a", "PENDING", phase={"step": "agent", "attempt": 1, "started": 0.0})])
    progress.update([row("a", "SUCCESS", DONE)])
    assert out.getvalue() == "crew: a queued\ncrew: a running: agent\ncrew: a done 2 files +3 -1\n"


def test_terminal_progress_redraws_its_lines_and_a_total_bar():
    out = io.StringIO()
    progress = report.Progress(out, terminal=True, width=10)
    progress.update(ROWS[:4])
    progress.update(ROWS[:4])
    first, second = out.getvalue().split("\x1b[5F")  # up over the 4 repositories and the bar
    assert first.count("\x1b[2K") == 5 and "running: agent (try 2)" in first
    assert "[#####.....] 2/4  4 repositories: 1 done, 1 failed, 1 running, 1 queued; $0.0100" in second
