"""What a batch looks like: each repository's state, the progress a person watches (a line per
repository with its state and time, and a total bar, redrawn on a terminal; a line per change when
piped), the summary table, and the --json object (docs/schemas/batch.json)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from crewbridge.batch.store import Row

FINISHED = ("done", "unchanged", "failed", "cancelled", "skipped")
COMPLETE = ("done", "unchanged")  # what `crew batch resume` leaves as it is
INCOMPLETE = ("failed", "cancelled", "skipped")  # exit 7
EXIT_INCOMPLETE = 7  # some repository failed, was cancelled or skipped
ANSWER_WIDTH = 60  # characters of an answer's first line in the table


def state(row: Row) -> str:
    """queued, held (for the batch's canary), running, interrupted (its executor no longer runs),
    or how it ended: done, unchanged, failed, cancelled, skipped."""
    if row.refused is not None:
        return "failed"
    if row.status == "ENQUEUED":
        return "queued"
    if row.status == "DELAYED":
        return "held"
    if row.status == "PENDING":
        return "interrupted" if row.interrupted else "running"
    if row.status == "CANCELLED":
        return "cancelled"
    if row.status == "SUCCESS" and row.output is not None:
        return str(row.output["status"])
    return "failed"  # ERROR, MAX_RECOVERY_ATTEMPTS_EXCEEDED


def paused(rows: Sequence[Row]) -> bool:
    """Whether the batch waits for `crew batch resume`: repositories held for its canary, and a
    canary did not end done or unchanged."""
    states = [state(row) for row in rows]
    others = [s for s in states if s != "held"]
    return "held" in states and all(s in FINISHED for s in others) and any(s not in COMPLETE for s in others)


def elapsed(row: Row, now: float | None = None) -> float | None:
    """Seconds the repository took (or has taken so far); None before it started."""
    if row.output is not None and row.output.get("ended"):
        return float(row.output["ended"] - row.output["started"])
    if row.phase is not None:
        return (now or time.time()) - float(row.phase["started"])
    return None


def repo_record(row: Row, states: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, Any]:
    """One repository in --json; `states`: its pull request's state and checks now, by workflow."""
    out = row.output or {}
    pull = out.get("pull")
    if pull is not None:
        now = (states or {}).get(row.workflow, {})
        pull = {**pull, "state": now.get("state"), "checks": now.get("checks")}
    return {
        "repo": row.repo.text,
        "status": state(row),
        "branch": out.get("branch"),
        "commit": out.get("commit"),
        "changes": out.get("changes"),
        "usage": out.get("usage"),
        "attempts": out.get("attempts", 0),
        "error": row.refused or out.get("error") or (row.error if state(row) == "failed" else None),
        "elapsed": elapsed(row),
        "disarmed": out.get("disarmed", []),
        "answer": out.get("answer"),
        "run": out.get("run"),
        "checks": out.get("checks", []),
        "pull": pull,
    }


def batch_status(rows: Sequence[Row]) -> str:
    """running while any repository is queued or running; interrupted when one's executor no longer
    runs; paused when a canary failed; then done (every one done or unchanged), cancelled (some
    cancelled), or failed."""
    states = [state(row) for row in rows]
    if "interrupted" in states:
        return "interrupted"
    if paused(rows):
        return "paused"
    if any(s not in FINISHED for s in states):
        return "running"
    if all(s in COMPLETE for s in states):
        return "done"
    return "cancelled" if "cancelled" in states else "failed"


def batch_record(
    batch: str, rows: Sequence[Row], states: Mapping[str, Mapping[str, str]] | None = None
) -> dict[str, Any]:
    """The --json object of a batch (`states`: its pull requests' now, by workflow)."""
    return {
        "batch": batch,
        "status": batch_status(rows),
        "repos": [repo_record(row, states) for row in rows],
        "next": next_steps(batch, rows),
    }


def exit_code(rows: Sequence[Row]) -> int:
    """7 when a repository failed, was cancelled or skipped; else 0 (also while some still run)."""
    return EXIT_INCOMPLETE if any(state(row) in INCOMPLETE for row in rows) else 0


def headline(batch: str, rows: Sequence[Row]) -> str:
    """`batch ID: done`; an interrupted or paused batch says how it goes on."""
    status = batch_status(rows)
    if status == "interrupted":
        return f"batch {batch}: interrupted — `crew batch resume {batch}`"
    if status == "paused":
        held = sum(state(row) == "held" for row in rows)
        return f"batch {batch}: paused, a canary did not pass ({held} held) — `crew batch resume {batch}`"
    return f"batch {batch}: {status}"


def summary(batch: str, rows: Sequence[Row], states: Mapping[str, Mapping[str, str]] | None = None) -> list[str]:
    """What a person reads at the end (or of `crew batch status`, with its pull requests' `states`):
    the table, the batch's state, and the next steps."""
    steps = next_steps(batch, rows)
    lines = [*table(rows, states), headline(batch, rows)]
    return [*lines, *(["next:"] if steps else []), *(f"  {step}" for step in steps)]


def next_steps(batch: str, rows: Sequence[Row]) -> list[str]:
    """What to do with the batch now, as commands (each with what it does after a `#`)."""
    states = [state(row) for row in rows]
    steps = []
    status = batch_status(rows)
    if status == "running":
        steps.append(f"crew batch status {batch}  # {sum(s not in FINISHED for s in states)} still to finish")
    if status in ("interrupted", "paused") or any(s in INCOMPLETE for s in states):
        left = sum(s not in COMPLETE for s in states)
        steps.append(f"crew batch resume {batch}  # run the {left} not done or unchanged again")
        if "failed" in states and len(set(states) - set(COMPLETE)) > 1:
            steps.append(f"crew batch resume {batch} --failed  # run only the {states.count('failed')} failed again")
    done = [row for row in rows if state(row) == "done"]
    if any((row.output or {}).get("pull") for row in rows):
        steps.append(f"crew batch status {batch}  # each pull request's state and checks now")
    if done:
        agent = done[0].spec.agent
        steps.append(f"crew batch diff {batch} [REPO]  # what the agent changed, per repository")
        if any(row.repo.url is None for row in done):
            steps.append(
                f"cd REPO && crew apply batch-{batch} {agent}  # take a change into your checkout, uncommitted"
            )
            steps.append(f"cd REPO && crew worktrees clean batch-{batch}  # remove the batch's worktree and branch")
        if any(row.repo.url is not None for row in done):
            steps.append(f"git fetch URL crew/batch-{batch}/{agent}  # the branch pushed to each URL")
    return steps


def line(row: Row, now: float | None = None) -> tuple[str, ...]:
    """A repository's cells: repo, state (and where it is), changes, time."""
    status = state(row)
    if status == "running" and row.phase is not None:
        status = f"running: {row.phase['step']}" + (
            f" (try {row.phase['attempt']})" if row.phase["attempt"] > 1 else ""
        )
    changes = (row.output or {}).get("changes")
    files = changes and f"{changes['files']} file{'' if changes['files'] == 1 else 's'}"
    shown = f"{files} +{changes['added']} -{changes['removed']}" if changes and changes["files"] else ""
    seconds = elapsed(row, now)
    return row.repo.text, status, shown, "" if seconds is None else f"{seconds:.1f}s"


def table(rows: Sequence[Row], states: Mapping[str, Mapping[str, str]] | None = None) -> list[str]:
    """The summary: a line per repository (repo, status, changes, tries, time, run id, branch and
    commit or error (or its pull request: its address, its state and checks when `states` has them),
    the answer's first line) under a header, then the totals."""
    cells: list[tuple[str, ...]] = [("REPO", "STATUS", "CHANGES", "TRIES", "TIME", "RUN", "RESULT", "ANSWER")]
    for row in rows:
        record = repo_record(row, states)
        repo, status, changes, seconds = line(row)
        result = record["error"] or (f"{record['branch']} {record['commit'][:10]}" if record["commit"] else "")
        if record["pull"] is not None:
            pull = record["pull"]
            now = f" {pull['state']}, checks: {pull['checks']}" if pull["state"] else ""
            result = f"{pull['url']}{now}"
        cells.append(
            (
                repo,
                status,
                changes,
                str(record["attempts"]),
                seconds,
                record["run"] or "",
                result,
                _brief(record["answer"]),
            )
        )
    widths = [max(len(cell[i]) for cell in cells) for i in range(len(cells[0]))]
    if all(not cell[7] for cell in cells[1:]):  # no answer yet: the error (or branch) ends the line
        cells = [cell[:7] for cell in cells]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cell, widths, strict=False)) for cell in cells]
    return [text.rstrip() for text in lines] + [totals(rows)]


def _brief(answer: str | None) -> str:
    """An answer's first line, at most ANSWER_WIDTH characters."""
    first = next((text.strip() for text in (answer or "").splitlines() if text.strip()), "")
    return first if len(first) <= ANSWER_WIDTH else first[: ANSWER_WIDTH - 1] + "…"


def totals(rows: Sequence[Row]) -> str:
    """`3 repositories: 2 done, 1 failed; $0.0123`."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[state(row)] = counts.get(state(row), 0) + 1
    cost = sum(((row.output or {}).get("usage") or {}).get("cost_usd") or 0.0 for row in rows)
    said = ", ".join(f"{n} {name}" for name, n in counts.items())
    return f"{len(rows)} repositor{'y' if len(rows) == 1 else 'ies'}: {said}" + (f"; ${cost:.4f}" if cost else "")


class Progress:
    """The batch as it goes, on `stream`: on a terminal, a line per repository and a total bar,
    redrawn in place; otherwise a line each time a repository's state changes."""

    def __init__(self, stream: TextIO, terminal: bool, width: int = 30) -> None:
        self.stream, self.terminal, self.width = stream, terminal, width
        self._drawn = 0  # lines drawn last time (terminal)
        self._said: dict[str, str] = {}  # workflow → the state last said (piped)

    def update(self, rows: Sequence[Row]) -> None:
        if self.terminal:
            self._draw(rows)
        else:
            for row in rows:
                said = " ".join(cell for cell in line(row)[:3] if cell)
                if self._said.get(row.workflow) != said:
                    self._said[row.workflow] = said
                    self.stream.write(f"crew: {said}\n")
        self.stream.flush()

    def _draw(self, rows: Sequence[Row]) -> None:
        now = time.time()
        cells = [line(row, now) for row in rows]
        width = max((len(cell[0]) for cell in cells), default=0)
        lines = [
            f"{repo:<{width}}  {status:<22} {seconds:>7}  {changes}".rstrip()
            for repo, status, changes, seconds in cells
        ]
        finished = sum(state(row) in FINISHED for row in rows)
        filled = self.width * finished // max(len(rows), 1)
        lines.append(f"[{'#' * filled}{'.' * (self.width - filled)}] {finished}/{len(rows)}  {totals(rows)}")
        up = f"\x1b[{self._drawn}F" if self._drawn else ""
        self.stream.write(up + "".join(f"\x1b[2K{text}\n" for text in lines))
        self._drawn = len(lines)
