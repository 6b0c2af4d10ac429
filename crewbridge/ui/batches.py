"""Batches as `crew ui` shows them: each a table of repositories with their status, branch and pull
request, and its progress, read from `crew batch`'s own database through its own reading
(crewbridge.batch.store.Reader): SQLite in crew's state folder, or $CREW_BATCH_DB. The UI reads them
through the small `BatchSource` interface; without DBOS installed (the `batch` extra) there are none.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from crewbridge.base.extras import EXTRAS
from crewbridge.base.places import state_dir
from crewbridge.batch.database import DB_ENV
from crewbridge.batch.report import FINISHED, INCOMPLETE, state
from crewbridge.batch.store import Reader


@dataclass
class Repo:
    """One repository of a batch."""

    repo: str
    status: str  # queued | held | running | done | unchanged | failed | cancelled | skipped (crewbridge.batch.report)
    branch: str | None = None
    error: str | None = None
    run: str | None = None  # its run's id, once it ran
    pull: str | None = None  # its pull request's address (crew batch --pr)


@dataclass
class Batch:
    id: str
    task: str
    repos: list[Repo] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The batch for the page: its repositories, how many are in each state, how many ended and
        how many of those did not end well (failed, cancelled, skipped: `crew batch` exits 7)."""
        counts: dict[str, int] = {}
        for repo in self.repos:
            counts[repo.status] = counts.get(repo.status, 0) + 1
        return {
            "id": self.id,
            "task": self.task,
            "repos": [vars(repo) for repo in self.repos],
            "counts": counts,
            "finished": sum(repo.status in FINISHED for repo in self.repos),
            "incomplete": sum(repo.status in INCOMPLETE for repo in self.repos),
            "total": len(self.repos),
        }


class BatchSource(Protocol):
    """Where the UI reads batches from."""

    def batches(self) -> list[Batch]: ...

    def installed(self) -> bool: ...

    def close(self) -> None: ...


class CrewBatches:
    """`crew batch`'s batches, newest first, from its database (none while it has none)."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self._url = env.get(DB_ENV) or None
        self._file = state_dir(env) / "batch" / "batches.sqlite"  # crew batch's own default (its store)
        self._reader: Reader | None = None
        self._lock = threading.Lock()

    def installed(self) -> bool:
        """Whether crew batch can run here (its extra is installed)."""
        return EXTRAS["batch"].installed() is not None

    def batches(self) -> list[Batch]:
        with self._lock:
            if self._reader is None:
                if self._url is None and not self._file.is_file():
                    return []  # no batch ever ran here: nothing to open (nor to create)
                self._reader = Reader(self._url or f"sqlite:///{self._file}")
            try:
                rows = self._reader.rows()  # each batch's repositories in the order given
            except ImportError:
                return []  # DBOS is not installed (the batch extra): crew batch cannot have run here
        found: dict[str, Batch] = {}
        for row in rows:
            batch = found.setdefault(row.spec.batch, Batch(row.spec.batch, row.spec.task.splitlines()[0]))
            output = row.output or {}
            error = output.get("error") or row.error
            pull = (output.get("pull") or {}).get("url")
            batch.repos.append(Repo(row.repo.text, state(row), output.get("branch"), error, output.get("run"), pull))
        newest = {row.spec.batch: row.created for row in sorted(rows, key=lambda row: row.created)}
        return sorted(found.values(), key=lambda batch: -newest[batch.id])

    def close(self) -> None:
        with self._lock:
            if self._reader is not None:
                self._reader.close()
