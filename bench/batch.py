"""crew batch's figures, with the real claude against the mock model server:

1. crew's own overhead per repository on SQLite: a batch of N local repositories (--concurrency 1,
   so the agents run one after another as in the baseline) minus N × one `crew execute --worktree`
   alone, divided by N (goal ≤ 100 ms per repository). Also the same difference with the agents'
   runs taken out (each run's transcript says how long it took): what crew adds around the CLIs,
   which the CLIs' own speed on a busy machine does not blur.
2. The speed-up of 2 workers over 1 on Postgres, each worker one repository at a time, the mock
   taking 2 s a turn (goal ≥ 1.8×). Needs Debian's postgresql (tests/pgserver.py starts one).

Each side of a figure is measured --rounds times, in the order A B B A (then again), so that a
load that rises or falls during the run weighs on both sides alike; the figures are of the sums.
The load average is printed before and after.

python bench/batch.py [--repos N] [--workers-repos M] [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import datetime
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


def agents_seconds(env: dict[str, str]) -> float:
    """Seconds the agents' runs took, by their transcripts (each from its start to its end); the
    transcripts are removed, for the next measure."""
    total = 0.0
    for path in (Path(env["XDG_STATE_HOME"]) / "crewbridge" / "runs").glob("*.jsonl"):
        events = [json.loads(line) for line in path.read_text().splitlines()]
        start, end = (datetime.fromisoformat(events[i]["time"]).timestamp() for i in (0, -1))
        total += end - start
        path.unlink()
    return total


def abba(rounds: int) -> list[str]:
    return ["a", "b", "b", "a"] * (rounds // 2) + ["a", "b"] * (rounds % 2)


def overhead(root: Path, count: int, rounds: int) -> dict[str, float]:
    """Seconds of the N single runs and of the batches (and of their agents' runs), summed over the rounds."""
    took = {"alone": 0.0, "batch": 0.0, "alone_agents": 0.0, "batch_agents": 0.0}
    with MockServer() as mock:
        mock.respond(responder(0.0))  # type: ignore[arg-type]
        env = cli_env("claude", mock.url, root / "home")
        repos = [make_repo(root / f"repo-{n}", {"notes.txt": f"repository {n}\n"}) for n in range(count)]
        timed(["execute", "--worktree", TASK], env, repos[0])  # warm: the CLI's first start, caches
        agents_seconds(env)
        for side in abba(rounds):
            requests = len(mock.requests)
            if side == "a":
                took["alone"] += sum(timed(["execute", "--worktree", TASK], env, repo) for repo in repos)
            else:
                took["batch"] += timed(["batch", "--concurrency", "1", TASK, *map(str, repos)], env, root)
            took[f"{'alone' if side == 'a' else 'batch'}_agents"] += agents_seconds(env)
            assert len(mock.requests) - requests == 2 * count, "a repository's run did not take its two turns"
    return took


def speedup(root: Path, count: int, rounds: int) -> dict[int, float]:
    """Seconds with 1 worker and with 2, summed over the rounds, each worker taking one repository at a time."""
    found = binaries()
    if found is None:
        raise SystemExit("Postgres is not installed (Debian's postgresql); the speed-up needs it")
    server = Postgres(found).start()
    took = {1: 0.0, 2: 0.0}
    try:
        with MockServer() as mock:
            mock.respond(responder(2.0))  # type: ignore[arg-type]
            repos = [make_repo(root / f"repo-{n}", {"notes.txt": f"{n}\n"}) for n in range(count)]
            for run, side in enumerate(abba(rounds)):
                workers = 1 if side == "a" else 2
                url = server.database()
                env = cli_env("claude", mock.url, root / "submit")
                submit = ["batch", "--detach", "--db", url, "--id", f"run{run}", "--concurrency", "2"]
                submit += ["--worker-concurrency", "1", TASK]
                timed([*submit, *map(str, repos)], env, root)
                start = time.perf_counter()
                procs = [
                    start_crew(
                        ["batch", "worker", "--db", url, "--until-idle"],
                        env=cli_env("claude", mock.url, root / f"worker-{run}-{n}"),
                        cwd=root,
                    )
                    for n in range(workers)
                ]
                for proc in procs:
                    proc.communicate(timeout=1800)
                    end_group(proc)
                took[workers] += time.perf_counter() - start
                assert all(git(repo, "branch", "--list", f"crew/batch-run{run}/*") for repo in repos), "not all done"
    finally:
        server.stop()
    return took


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=int, default=20, help="repositories of the overhead figure")
    parser.add_argument("--workers-repos", type=int, default=8, help="repositories of the speed-up figure")
    parser.add_argument("--rounds", type=int, default=2, help="times each side is measured (A B B A order)")
    parser.add_argument("--json", action="store_true", help="one JSON object per figure")
    options = parser.parse_args()
    require_cli("claude")
    root = Path(tempfile.mkdtemp(prefix="crew-bench-batch-"))
    before = load()
    try:
        spent = overhead(root / "overhead", options.repos, options.rounds)
        workers = speedup(root / "speedup", options.workers_repos, options.rounds)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    after = load()
    runs = options.repos * options.rounds
    per_repo = (spent["batch"] - spent["alone"]) / runs * 1000
    around = ((spent["batch"] - spent["batch_agents"]) - (spent["alone"] - spent["alone_agents"])) / runs * 1000
    rows = [
        {
            "figure": "batch overhead",
            "what": f"{options.repos} repositories × {options.rounds} rounds, SQLite, --concurrency 1",
            "batch_s": round(spent["batch"], 2),
            "alone_s": round(spent["alone"], 2),
            "ms_per_repo": round(per_repo, 1),
            "ms_per_repo_besides_agents": round(around, 1),
            "goal": "<= 100 ms",
        },
        {
            "figure": "batch workers",
            "what": f"{options.workers_repos} repositories × {options.rounds} rounds, Postgres, 2 s a turn",
            "one_worker_s": round(workers[1], 2),
            "two_workers_s": round(workers[2], 2),
            "speedup": round(workers[1] / workers[2], 2),
            "goal": ">= 1.8x",
        },
    ]
    if options.json:
        for row in rows:
            print(json.dumps({**row, "load_before": before, "load_after": after}))
        return
    print(f"crew: {' '.join(CREW)}; load average before {before}, after {after}")
    print(
        f"batch overhead: {spent['batch']:.2f} s for the batches of {options.repos} ({options.rounds} rounds), "
        f"{spent['alone']:.2f} s for as many crew execute --worktree alone: {per_repo:+.1f} ms per repository "
        f"(goal <= 100 ms); besides the agents' runs ({spent['batch_agents']:.2f} s and "
        f"{spent['alone_agents']:.2f} s): {around:+.1f} ms per repository"
    )
    print(
        f"batch workers: {workers[1]:.2f} s with 1 worker, {workers[2]:.2f} s with 2, over {options.workers_repos} "
        f"repositories at 2 s a turn ({options.rounds} rounds): {workers[1] / workers[2]:.2f}x (goal >= 1.8x)"
    )


if __name__ == "__main__":
    main()
