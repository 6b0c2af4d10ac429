"""Figure 11: what the git guard costs (crewbridge.system.gitguard): the snapshot an execute run takes
before its agent starts (`Watch`: a walk of the working directory for `.git` entries and
.gitattributes files, the watched files' bytes, the index's gitlinks), and the check after it
(`disarm`: the same again, compared), on a git repository of many files in many folders, when the
run left nothing to disarm; and the snapshot of what an agent changed (crewbridge.system.git: every file
read by crew itself, so that no filter or fsmonitor the folder names runs). The run's own time (a
CLI start is ~0.2-1.3 s) is what these compare with."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from bench.common import Row, Settings, median, scratch, spread


def run(settings: Settings) -> list[Row]:
    from crewbridge.system.gitguard import Watch

    folders, files = (200, 10) if settings.quick else (2000, 10)
    repo = _repository(folders, files)
    snapshots: list[float] = []
    checks: list[float] = []
    for _ in range(settings.repeats(9, 3)):
        start = time.perf_counter()
        watch = Watch(repo)
        snapshots.append(time.perf_counter() - start)
        start = time.perf_counter()
        found = watch.disarm()
        checks.append(time.perf_counter() - start)
        if found:
            raise RuntimeError(f"an untouched repository had something to disarm: {found}")
    from crewbridge.system.git import Checkout

    checkout = Checkout.of(repo, "bench")
    trees: list[float] = []
    for _ in range(settings.repeats(9, 3)):
        start = time.perf_counter()
        checkout.snapshot()
        trees.append(time.perf_counter() - start)
    what = f"a repository of {folders * files:,} files in {folders:,} folders"
    return [
        Row(
            "11 gitguard",
            f"snapshot before a run, {what}",
            median(snapshots) * 1000,
            "ms",
            spread=spread(snapshots, " ms", 1000),
        ),
        Row(
            "11 gitguard",
            f"check after a run (nothing left), {what}",
            median(checks) * 1000,
            "ms",
            spread=spread(checks, " ms", 1000),
        ),
        Row(
            "11 gitguard",
            f"what an agent changed: the snapshot (every file read by crew, no filter run), {what}",
            median(trees) * 1000,
            "ms",
            spread=spread(trees, " ms", 1000),
        ),
    ]


def _repository(folders: int, files: int) -> Path:
    """A committed repository of `folders` × `files` small files (kept between runs)."""
    repo = scratch(f"gitguard-{folders}x{files}")
    if (repo / ".git").is_dir():
        return repo
    for n in range(folders):
        folder = repo / f"pkg{n // 50}" / f"mod{n}"
        folder.mkdir(parents=True, exist_ok=True)
        for m in range(files):
            (folder / f"file{m}.py").write_text(f"x = {m}\n")
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@b"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "files"]):
        subprocess.run([*git, *args], cwd=repo, check=True, env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
    return repo
