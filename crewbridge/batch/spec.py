"""What a batch is: one task ("@agent task"), its options, and the repositories it runs in, each a
local git repository or a git URL. Everything here is checked before anything starts, and a batch
is stored as plain data (`to_dict`) in each of its workflows' inputs."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crewbridge.base.mentions import parse_mentions
from crewbridge.base.options import PULL, RunOptions
from crewbridge.errors import UsageError
from crewbridge.system.git import Checkout

# A git URL: scheme://… (file, http, https, ssh, git), or scp's user@host:path.
_URL = re.compile(r"^(?:(?:file|https?|ssh|git(?:\+ssh)?)://\S+|[\w.-]+@[\w.-]+:\S+)$")
# A batch id goes into branch names (crew/batch-ID/agent) and workflow ids (ID:repo:generation).
_BATCH_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Repo:
    """One repository of a batch: a local one (`path`, its top folder) or one reached by `url`."""

    text: str  # as the person gave it
    url: str | None = None
    path: str | None = None
    key: str = ""  # the same repository gives the same key (a path into it, or the same URL)
    position: int = 0  # its place in the batch, as given

    @property
    def name(self) -> str:
        """Its last path component, without `.git`: what its clone and its lines are named after."""
        tail = (self.url or self.path or self.text).rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
        return tail.removesuffix(".git") or "repo"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def of(cls, data: dict[str, Any]) -> Repo:
        return cls(**data)


def repo_of(text: str, cwd: Path) -> Repo:
    """The repository `text` names (a URL, or a folder inside a local git repository, relative to
    `cwd`); a one-line UsageError naming it when it is neither."""
    stripped = text.strip()
    if _URL.match(stripped):
        url = stripped.rstrip("/")
        return Repo(text, url=url, key=_digest(url))
    folder = (cwd / stripped).resolve() if stripped else cwd / "\0"
    why = "no such folder" if not folder.is_dir() else ""
    if not why:
        try:
            checkout = Checkout.of(folder, "crew batch")
        except UsageError:
            why = "not inside a git repository"
        else:
            return Repo(text, path=str(checkout.top), key=_digest(str(checkout.common.resolve())))
    raise UsageError(
        f"REPO '{text}' is neither a git repository nor a git URL ({why}); give a repository's folder "
        "or a URL such as file:///srv/repo.git, https://host/repo.git or git@host:repo.git"
    )


def read_repos(given: Iterable[str], listed: str | None, cwd: Path) -> list[Repo]:
    """The repositories of the command line then of a --repos file's text (one per line, `#`
    comments, blank lines skipped), each once (the first naming of a repository counts)."""
    texts = list(given)
    for line in (listed or "").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            texts.append(line)
    if not texts:
        raise UsageError("no repositories given; name them after the task, or list them in a file with --repos FILE")
    found: dict[str, Repo] = {}
    for text in texts:
        repo = repo_of(text, cwd)
        found.setdefault(repo.key, dataclasses.replace(repo, position=len(found)))
    return list(found.values())


def repos_file_text(path: Path | None) -> str | None:
    """The text of a --repos file (`-`: standard input); a UsageError naming it when it cannot be read."""
    if path is None:
        return None
    try:
        return sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(
            f"--repos {path}: cannot read it ({why}); give a text file naming repositories, one a line"
        ) from None


def batch_id(given: str | None) -> str:
    """The batch's id: `given` (checked: it goes into branch names), or a new one from the time."""
    if given is None:
        from crewbridge.record.ids import new_run_id

        return new_run_id()
    if not _BATCH_ID.match(given) or ".." in given or given.endswith((".", ".lock")):
        raise UsageError(
            f"--id '{given}' cannot name a batch; use 1 to 64 letters, digits, '.', '_' or '-' "
            "(it goes into branch names: crew/batch-ID/AGENT)"
        )
    return given


@dataclass(frozen=True)
class BatchSpec:
    """One batch: its task, the agent that does it, and how (each repository's run options)."""

    batch: str
    task: str  # "@agent task", as given
    retries: int = 1  # tries after the first, each from a fresh worktree
    concurrency: int = 2  # repositories at once, across every worker
    max_total_cost: float | None = None  # dollars: no new repository starts past it
    worker_concurrency: int | None = None  # repositories at once on each worker (None: `concurrency`)
    canary: int = 0  # repositories run first; the others start once these are done or unchanged
    run: dict[str, Any] = field(default_factory=dict)  # RunOptions fields (per repository)
    pull: dict[str, Any] = field(default_factory=dict)  # --pr and how (RunOptions' PULL): the batch proposes itself

    def __post_init__(self) -> None:
        mentions = parse_mentions(self.task)[0]
        if len(mentions) != 1:
            raise UsageError(
                f"a batch runs one agent, and the task mentions {len(mentions)}; start it with one "
                '@agent, e.g. crew batch "@claude rename the flag" REPO…'
            )

    @property
    def agent(self) -> str:
        return parse_mentions(self.task)[0][0].agent

    @property
    def branch(self) -> str:
        return f"crew/{self.run_id}/{self.agent}"

    @property
    def run_id(self) -> str:
        """What crewbridge.work.worktrees calls the run its worktrees belong to."""
        return f"batch-{self.batch}"

    @property
    def proposes(self) -> bool:
        """Whether each repository's change is proposed as a pull request (--pr)."""
        return bool(self.pull.get("pr"))

    def options(self) -> RunOptions:
        """One repository's run options (the worktree is the batch's own, made beforehand)."""
        given = {name: value for name, value in self.run.items() if name in RunOptions.names() and name not in PULL}
        if given.get("checks") is not None:  # stored as a JSON list
            given["checks"] = tuple(given["checks"])
        return RunOptions().given(given)

    def message(self) -> str:
        """The commit message: the task's first line (its mention left out) and the batch id."""
        lines = parse_mentions(self.task)[1].strip().splitlines() or ["(no task)"]
        return f"{lines[0].strip()}\n\ncrew batch {self.batch}\n"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def stored(self) -> dict[str, Any]:
        """What the database keeps of it (JSON: a tuple comes back a list), to compare with."""
        return dict(json.loads(json.dumps(self.to_dict())))

    @classmethod
    def of(cls, data: dict[str, Any]) -> BatchSpec:
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:12]
