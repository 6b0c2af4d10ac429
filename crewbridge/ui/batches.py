"""Batches as `crew ui` shows them: each a table of repositories with their status and branch, and
its progress.

`crew batch` (issue 34) keeps its own state (SQLite in crew's state folder, or Postgres) and will
say through its own module what each repository's task is doing; until that lands, the UI reads
batches through the small `BatchSource` interface below, and `TranscriptBatches` serves it from
crew's transcripts: the runs whose `start` event names a `batch` (with its `repo` and `branch`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from crewbridge.ui.runs import Runs


@dataclass
class Repo:
    """One repository of a batch."""

    repo: str
    status: str  # queued | running | done | failed | cancelled
    branch: str | None = None
    run_id: str | None = None


@dataclass
class Batch:
    id: str
    repos: list[Repo] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        finished = sum(repo.status in ("done", "failed", "cancelled") for repo in self.repos)
        return {
            "id": self.id,
            "repos": [vars(repo) for repo in self.repos],
            "finished": finished,
            "total": len(self.repos),
        }


class BatchSource(Protocol):
    """Where the UI reads batches from."""

    def batches(self) -> list[Batch]: ...


class TranscriptBatches:
    """Batches from the runs that name one in their transcripts, newest batch first."""

    def __init__(self, runs: Runs) -> None:
        self.runs = runs

    def batches(self) -> list[Batch]:
        found: dict[str, Batch] = {}
        for row in self.runs.rows():
            if row.batch is None:
                continue
            batch = found.setdefault(row.batch, Batch(row.batch))
            batch.repos.append(Repo(row.repo or row.cwd, row.status, row.branch, row.run_id))
        for batch in found.values():
            batch.repos.sort(key=lambda repo: repo.repo)
        return list(found.values())
