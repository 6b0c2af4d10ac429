"""Figure 17: pull requests for many repositories against the stand-in of GitHub's REST API
(tests/forgeserver.py: no forge is reachable here) with a secondary rate limit every 10th request
(403, Retry-After: 1 s), as crew batch --pr makes them: two worker processes, each two repositories at
once, sharing the forges' pace in one SQLite batch database (crewbridge.batch.database.Paced), each
repository's branch pushed to its origin (a bare repository behind https://github.com/o/… through
url.<base>.insteadOf) and its pull request opened (crewbridge.system.forge.propose: looked for, made,
labelled). Goal: every repository one pull request, none duplicated, each limit waited out once
(as many waits as limits met, and no request while a wait was not over)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from bench.common import REPO, Row, Settings, scratch

if TYPE_CHECKING:
    from crewbridge.system.forge import Pace

TOKEN = "bench-t0ken"
BRANCH = "crew/batch-bench/claude"
WORKERS, AT_ONCE = 2, 2


def run(settings: Settings) -> list[Row]:
    from forgeserver import ForgeServer

    count = 10 if settings.quick else 50
    folder = scratch(f"pulls-{count}")
    bares, checkouts = _repositories(folder, count)
    env = {**os.environ, "HOME": str(folder / "home"), "GH_TOKEN": TOKEN, "GIT_TERMINAL_PROMPT": "0"}
    with ForgeServer(bares, token=TOKEN, limit_every=10, retry_after=1) as forge:
        env["GITHUB_API_URL"] = forge.url
        database = folder / "batches.sqlite"
        shares = [checkouts[n::WORKERS] for n in range(WORKERS)]
        start = time.perf_counter()
        workers = [
            subprocess.Popen(
                [sys.executable, "-m", "bench.pulls", str(database), *map(str, share)],
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE,
                text=True,
            )
            for share in shares
        ]
        made = [json.loads(line) for worker in workers for line in worker.communicate(timeout=1200)[0].splitlines()]
        wall = time.perf_counter() - start
        if any(worker.returncode for worker in workers):
            raise RuntimeError("a worker of the pulls figure failed")
        pulls = {name: forge.of(name) for name in bares}
        limits, early, requests = forge.limits, forge.early, len(forge.requests)
    duplicated = sum(len(found) - 1 for found in pulls.values() if len(found) > 1)
    missing = sum(1 for found in pulls.values() if not found)
    waits = sum(one["limits"] for one in made)
    what = f"{count} repositories, {WORKERS} workers × {AT_ONCE} at once, a secondary limit every 10th request"
    return [
        Row(
            "17 pulls",
            f"pull requests for {what}: wall time",
            wall,
            "s",
            note=f"{count - missing} opened; {requests} requests, {limits} limits of 1 s waited out",
        ),
        Row("17 pulls", f"pull requests duplicated or missing ({what})", duplicated + missing, target=0),
        Row(
            "17 pulls",
            f"limits not waited out exactly once: |waits - limits| + requests during a wait ({what})",
            abs(waits - limits) + early,
            target=0,
            note=f"{limits} limits met, {waits} waits, {early} requests during a wait",
        ),
    ]


def _repositories(folder: Path, count: int) -> tuple[dict[str, Path], list[Path]]:
    """`count` bare repositories o/repo-N behind https://github.com/ (the HOME's insteadOf), and a
    checkout of each, its origin that URL, with a commit on the batch's branch to propose."""
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@b", "-c", "init.defaultBranch=main"]
    home = folder / "home"
    home.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            *git,
            "config",
            "--file",
            str(home / ".gitconfig"),
            f"url.file://{folder}/forge/.insteadOf",
            "https://github.com/",
        ],
        check=True,
    )
    bares, checkouts = {}, []
    for n in range(count):
        work = folder / "work" / f"repo-{n}"
        bare = folder / "forge" / "o" / f"repo-{n}.git"
        if not bare.is_dir():
            work.mkdir(parents=True)
            (work / "notes.txt").write_text(f"repository {n}\n")
            for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "start"]):
                subprocess.run([*git, *args], cwd=work, check=True)
            subprocess.run([*git, "clone", "-q", "--bare", str(work), str(bare)], check=True)
            subprocess.run(
                [*git, "remote", "add", "origin", f"https://github.com/o/repo-{n}.git"], cwd=work, check=True
            )
            (work / "todo.md").write_text("- ship it\n")
            for args in (
                ["checkout", "-qb", BRANCH],
                ["add", "-A"],
                ["commit", "-qm", "add todo.md"],
                ["checkout", "-q", "main"],
            ):
                subprocess.run([*git, *args], cwd=work, check=True)
        bares[f"o/repo-{n}"] = bare
        checkouts.append(work)
    return bares, checkouts


def _propose(pace: Pace, checkout: Path) -> dict[str, int]:
    """One repository's branch pushed to its origin and proposed, as crew batch's pull step does."""
    from crewbridge.system.forge import Client, Proposal, forge_of, propose, remote_of
    from crewbridge.system.git import Checkout
    from crewbridge.work.pulls import base_branch, push, remote_url

    found = Checkout.of(checkout, "bench")
    push(found, "origin", found.text(["rev-parse", BRANCH]), BRANCH)
    remote = remote_of(remote_url(found))
    client = Client(forge_of(remote), pace)
    pull = propose(
        client, remote, Proposal(BRANCH, base_branch(found, "origin"), "add todo.md", "Body.", labels=("bot",))
    )
    return {"number": pull.number, "opened": pull.opened, "limits": len(client.waits)}


def _work(args: list[str]) -> None:
    """A worker: its share of the repositories, AT_ONCE at a time, with one pace for the process (as
    each batch worker has); one JSON line each."""
    from crewbridge.batch.database import Side

    pace = Side.of(f"sqlite:///{args[0]}").pace()
    with ThreadPoolExecutor(AT_ONCE) as pool:
        for made in pool.map(lambda checkout: _propose(pace, checkout), [Path(arg) for arg in args[1:]]):
            print(json.dumps(made), flush=True)


if __name__ == "__main__":
    _work(sys.argv[1:])
