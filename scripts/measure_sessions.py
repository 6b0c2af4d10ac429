"""Issue 17's measurements: the wall time of a fresh `crew query` against one that continues the last
run (`--continue`), for the real claude, gemini and codex against the tests' mock model server; and
the time `crew log --since 7d --by agent` takes over many recorded runs.

    PATH="$PWD/node_modules/.bin:$PATH" .venv/bin/python scripts/measure_sessions.py [RUNS] [LOGGED]
"""

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from clienv import cli_env
from crewcli import CREW
from mockserver import MockServer

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
LOGGED = int(sys.argv[2]) if len(sys.argv) > 2 else 1000


def timed(args, env, cwd):
    start = time.perf_counter()
    done = subprocess.run([*CREW, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return time.perf_counter() - start


base = Path(tempfile.mkdtemp(prefix="crew-measure-"))
try:
    for cli in ("claude", "gemini", "codex"):
        work = base / cli
        work.mkdir()
        with MockServer() as mock:
            env = cli_env(cli, mock.url, base / f"home-{cli}")
            mock.script(*["ok"] * (4 * RUNS))
            fresh, resumed = [], []
            for _ in range(RUNS):
                fresh.append(timed(["query", f"@{cli} hi"], env, work))
                resumed.append(timed(["query", "--continue", f"@{cli} and then?"], env, work))
        f, r = statistics.median(fresh), statistics.median(resumed)
        print(f"{cli:7} fresh {f:.2f} s  --continue {r:.2f} s  ({r / f:.2f}x, median of {RUNS})")
    runs = base / "state" / "crewbridge" / "runs"
    runs.mkdir(parents=True)
    for n in range(LOGGED):
        usage = {"turns": 2, "input_tokens": 1000, "output_tokens": 50, "cached_tokens": 600, "cost_usd": 0.01}
        lines = [
            {"kind": "start", "time": "2026-01-01T00:00:00.000+00:00", "task": "t", "command": "query"},
            {"kind": "end", "status": "ok", "tool_calls": 1, "usage": {"claude": usage}},
        ]
        run_id = time.strftime("%Y%m%d-%H%M%S-", time.gmtime(time.time() - n)) + f"{n % 4096:03x}000"
        (runs / f"{run_id}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    env = {**cli_env("claude", "http://127.0.0.1:9", base / "home-log"), "XDG_STATE_HOME": str(base / "state")}
    times = [timed(["log", "--since", "7d", "--by", "agent"], env, base) for _ in range(RUNS)]
    summed = subprocess.run(
        [*CREW, "log", "--since", "7d", "--by", "agent", "--json"],
        cwd=base,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert json.loads(summed)["runs"] == LOGGED, summed
    print(f"crew log --since 7d --by agent over {LOGGED} runs: {statistics.median(times):.2f} s (median of {RUNS})")
finally:
    shutil.rmtree(base)
