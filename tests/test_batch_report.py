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
    answer="Added todo.md.\n\nIt says: - ship it",
    run="20260101-120000-abcdef",
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
    held, refused = row("g", "DELAYED"), row("h", "ENQUEUED")
    refused.refused = "its inputs and record in the batch database say 'py_pickle', not crew's JSON"
    assert report.state(held) == "held" and report.state(refused) == "failed"
    assert report.repo_record(refused)["error"] == refused.refused


def test_a_batch_exits_7_only_once_a_repository_failed_was_cancelled_or_skipped():
    running = [ROWS[0], ROWS[2], ROWS[3]]
    assert report.batch_status(running) == "running" and report.exit_code(running) == 0
    assert report.exit_code([ROWS[0], ROWS[2], ROWS[5]]) == 7
    skipped = row("s", "SUCCESS", finished("skipped", error="past --max-total-cost"))
    assert report.exit_code([ROWS[0], skipped]) == 7


def test_a_repository_whose_process_ended_is_interrupted_and_the_batch_says_how_to_go_on():
    stranded = row("c", "PENDING", phase={"step": "agent", "attempt": 1, "started": 90.0})
    stranded.interrupted = True
    rows = [ROWS[0], stranded, ROWS[3]]
    assert report.state(stranded) == "interrupted" and report.batch_status(rows) == "interrupted"
    assert report.exit_code(rows) == 0  # nothing failed: it goes on with resume
    said = report.summary("b1", rows)
    assert "batch b1: interrupted — `crew batch resume b1`" in said
    assert "  crew batch resume b1  # run the 2 not done or unchanged again" in said


def test_a_canary_that_failed_pauses_the_batch_and_one_that_passed_does_not():
    held = [row("x", "DELAYED"), row("y", "DELAYED")]
    assert report.batch_status([ROWS[0], *held]) == "running" and not report.paused([ROWS[0], *held])
    assert report.batch_status([ROWS[2], *held]) == "running"  # the canary still runs
    paused = [ROWS[0], ROWS[1], *held]
    assert report.paused(paused) and report.batch_status(paused) == "paused" and report.exit_code(paused) == 7
    assert report.headline("b1", paused) == "batch b1: paused, a canary did not pass (2 held) — `crew batch resume b1`"
    assert "crew batch resume b1 --failed  # run only the 1 failed again" in report.next_steps("b1", paused)


def test_the_next_steps_say_what_to_do_with_what_the_batch_made():
    steps = report.next_steps("b1", ROWS[:1])
    assert steps == [
        "crew batch diff b1 [REPO]  # what the agent changed, per repository",
        "cd REPO && crew apply batch-b1 claude  # take a change into your checkout, uncommitted",
        "cd REPO && crew worktrees clean batch-b1  # remove the batch's worktree and branch",
    ]
    url = Row("b1:u:1", SPEC, Repo("file:///r.git", url="file:///r.git", key="u"), 1, "SUCCESS", "e1", DONE, None, 0.0)
    assert report.next_steps("b1", [url])[1:] == ["git fetch URL crew/batch-b1/claude  # the branch pushed to each URL"]
    assert report.next_steps("b1", ROWS[2:4]) == ["crew batch status b1  # 2 still to finish"]


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
        "answer": "Added todo.md.\n\nIt says: - ship it",
        "run": "20260101-120000-abcdef",
        "checks": [],
        "pull": None,
    }
    assert record["next"][0] == "crew batch status b1  # 2 still to finish"
    assert record["repos"][1]["disarmed"] == [] and record["repos"][3]["disarmed"] == []  # nothing, or not yet
    broken = {**record, "repos": [{**record["repos"][0], "status": "fine"}]}
    assert not jsonschema.Draft202012Validator(SCHEMA).is_valid(broken)


def test_the_summary_table_says_each_repositorys_end_and_the_totals():
    lines = report.table(ROWS[:2])
    assert lines[0].split() == ["REPO", "STATUS", "CHANGES", "TRIES", "TIME", "RUN", "RESULT", "ANSWER"]
    assert lines[1].split() == [
        "a",
        "done",
        "2",
        "files",
        "+3",
        "-1",
        "1",
        "12.5s",
        "20260101-120000-abcdef",
        "crew/batch-b1/claude",
        COMMIT[:10],
        "Added",
        "todo.md.",
    ]
    assert lines[2].split()[:5] == ["b", "failed", "2", "12.5s", "the"] and lines[2].rstrip().endswith("down")
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


PROPOSED = {
    **DONE,
    "checks": [{"command": "pytest -q", "round": 2, "passed": True, "exit_code": 0, "output": "", "ms": 812.0}],
    "pull": {
        "url": "https://github.com/o/a/pull/7",
        "number": 7,
        "forge": "github",
        "opened": True,
        "draft": False,
        "limits": 1,
        "waited": 1.0,
    },
}


def test_a_pull_request_is_in_the_table_and_the_json_with_its_state_and_checks_when_asked():
    rows = [row("a", "SUCCESS", PROPOSED), ROWS[1]]
    record = report.batch_record("b1", rows)
    jsonschema.validate(record, SCHEMA)
    assert record["repos"][0]["pull"] == {**PROPOSED["pull"], "state": None, "checks": None}
    assert record["repos"][0]["checks"] == PROPOSED["checks"]
    assert "https://github.com/o/a/pull/7" in report.table(rows)[1]
    states = {"b1:a:1": {"state": "merged", "checks": "2 passed"}}
    asked = report.batch_record("b1", rows, states)
    jsonschema.validate(asked, SCHEMA)
    assert (asked["repos"][0]["pull"]["state"], asked["repos"][0]["pull"]["checks"]) == ("merged", "2 passed")
    assert report.table(rows, states)[1].endswith(
        "https://github.com/o/a/pull/7 merged, checks: 2 passed  Added todo.md."
    )
    assert "crew batch status b1  # each pull request's state and checks now" in report.next_steps("b1", rows)
