"""crew batch's figures, with the real claude against the mock model server:

1. crew's own overhead per repository on SQLite: a batch of N local repositories (--concurrency 1,
   so the agents run one after another as in the baseline) minus N × one `crew execute --worktree`
   alone, divided by N (goal ≤ 100 ms per repository).
2. The speed-up of 2 workers over 1 on Postgres, each worker one repository at a time, the mock
   taking 2 s a turn (goal ≥ 1.8×). Needs Debian's postgresql (tests/pgserver.py starts one).

python bench/batch.py [--repos N] [--workers-repos M]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from clienv import cli_env, require_cli  # noqa: E402
from crewcli import CREW, end_group, start_crew, tool_block  # noqa: E402
from gitrepo import git, make_repo  # noqa: E402
from mockserver import MockServer, Request  # noqa: E402
from pgserver import Postgres, binaries  # noqa: E402

TASK = "@claude add todo.md"
WRITE = tool_block("crew:write_file", path="todo.md", content="- ship it\n")


def responder(turn: float) -> object:
    def answer(request: Request) -> str:
        time.sleep(turn)
        return "Done." if '"success": true' in request.text() else WRITE

    return answer


def timed(args: list[str], env: dict[str, str], cwd: Path) -> float:
    """Seconds `crew ARGS` took (it must succeed)."""
    start = time.perf_counter()
    proc = start_crew(args, env=env, cwd=cwd)
    try:
        _, err = proc.communicate(timeout=1800)
    finally:
        end_group(proc)
    if proc.returncode != 0:
        raise SystemExit(f"crew {' '.join(args[:3])} failed ({proc.returncode}): {err[-2000:]}")
    return time.perf_counter() - start


def overhead(root: Path, count: int) -> tuple[float, float]:
    """(the batch's seconds, N single runs' seconds)."""
    with MockServer() as mock:
        mock.respond(responder(0.0))  # type: ignore[arg-type]
        env = cli_env("claude", mock.url, root / "home")
        repos = [make_repo(root / f"single-{n}", {"notes.txt": f"repository {n}\n"}) for n in range(count)]
        timed(["execute", "--worktree", TASK], env, repos[0])  # warm: the CLI's first start, caches
        alone = sum(timed(["execute", "--worktree", TASK], env, repo) for repo in repos)
        batch = [make_repo(root / f"batch-{n}", {"notes.txt": f"repository {n}\n"}) for n in range(count)]
        whole = timed(["batch", "--concurrency", "1", TASK, *map(str, batch)], env, root)
        assert len(mock.requests) == 2 * (2 * count + 1), len(mock.requests)
    return whole, alone


def speedup(root: Path, count: int) -> tuple[float, float]:
    """(seconds with 1 worker, seconds with 2), each worker taking one repository at a time."""
    found = binaries()
    if found is None:
        raise SystemExit("Postgres is not installed (Debian's postgresql); the speed-up needs it")
    server = Postgres(found).start()
    try:
        times = []
        for workers in (1, 2):
            with MockServer() as mock:
                mock.respond(responder(2.0))  # type: ignore[arg-type]
                url = server.database()
                repos = [make_repo(root / f"w{workers}-{n}", {"notes.txt": f"{n}\n"}) for n in range(count)]
                env = cli_env("claude", mock.url, root / "submit")
                timed(["batch", "--detach", "--db", url, "--concurrency", "2", TASK, *map(str, repos)], env, root)
                start = time.perf_counter()
                procs = [
                    start_crew(
                        ["batch", "worker", "--db", url, "--until-idle", "--concurrency", "1"],
                        env=cli_env("claude", mock.url, root / f"worker-{workers}-{n}"),
                        cwd=root,
                    )
                    for n in range(workers)
                ]
                for proc in procs:
                    proc.communicate(timeout=1800)
                    end_group(proc)
                times.append(time.perf_counter() - start)
                branches = [git(repo, "branch", "--list", "crew/batch-*") for repo in repos]
                assert all(branches), "a repository was not done"
        return times[0], times[1]
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=int, default=20, help="repositories of the overhead figure")
    parser.add_argument("--workers-repos", type=int, default=8, help="repositories of the speed-up figure")
    parser.add_argument("--json", action="store_true", help="one JSON object per figure")
    options = parser.parse_args()
    require_cli("claude")
    root = Path(tempfile.mkdtemp(prefix="crew-bench-batch-"))
    try:
        whole, alone = overhead(root / "overhead", options.repos)
        one, two = speedup(root / "speedup", options.workers_repos)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    per_repo = (whole - alone) / options.repos * 1000
    rows = [
        {
            "figure": "batch overhead",
            "what": f"{options.repos} repositories, SQLite, --concurrency 1",
            "batch_s": round(whole, 2),
            "alone_s": round(alone, 2),
            "ms_per_repo": round(per_repo, 1),
            "goal": "<= 100 ms",
        },
        {
            "figure": "batch workers",
            "what": f"{options.workers_repos} repositories, Postgres, 2 s a turn",
            "one_worker_s": round(one, 2),
            "two_workers_s": round(two, 2),
            "speedup": round(one / two, 2),
            "goal": ">= 1.8x",
        },
    ]
    if options.json:
        for row in rows:
            print(json.dumps(row))
        return
    print(f"crew: {' '.join(CREW)}")
    print(
        f"batch overhead: {whole:.2f} s for the batch of {options.repos}, {alone:.2f} s for {options.repos} "
        f"crew execute --worktree alone: {per_repo:+.1f} ms per repository (goal <= 100 ms)"
    )
    print(
        f"batch workers: {one:.2f} s with 1 worker, {two:.2f} s with 2, over {options.workers_repos} repositories "
        f"at 2 s a turn: {one / two:.2f}x (goal >= 1.8x)"
    )


if __name__ == "__main__":
    main()
