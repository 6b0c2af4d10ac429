"""Figure 3c: launch. From `crew query "@claude …"`'s start to the moment it executes claude, against
a bare Python launcher's (bench/launcher.py: `subprocess.Popen(["claude", …])` and nothing else),
both with the Python of a venv where crew is installed as users install it. The `claude` first on
PATH is a bash script that notes the wall clock ($EPOCHREALTIME, no fork) as it starts and exits:
bash's own start is on both sides alike. It writes the note in a data folder of claude's state
folder, which claude may write inside crew's sandbox too (crewbridge.sandbox: where crew runs a CLI
in bubblewrap, its start, and the view of its state folder, are inside the figure). Timed in
rounds, the order rotated."""

from __future__ import annotations

import os
import time
from pathlib import Path

from bench.common import Row, Settings, installed, interleaved, median, run_timed, scratch, side_rows
from bench.harness import claude_env

TARGET = 2.0
FAKE = '#!/bin/bash\nprintf "%s\\n" "$EPOCHREALTIME" >> "$BENCH_LAUNCH_STAMPS"\n'


def run(settings: Settings) -> list[Row]:
    folder = scratch("launch")
    fake = folder / "bin" / "claude"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(FAKE)
    fake.chmod(0o755)
    with claude_env() as (_mock, env, work):
        stamps = Path(env["HOME"]) / ".claude" / "debug" / "launch-stamps.txt"
        stamps.parent.mkdir(parents=True, exist_ok=True)
        env = {**env, "PATH": f"{fake.parent}{os.pathsep}{env['PATH']}", "BENCH_LAUNCH_STAMPS": str(stamps)}

        def until_exec(argv: list[str]) -> float:
            stamps.write_text("")
            started = time.time()
            run_timed(argv, env=env, cwd=work)  # crew then fails: its claude said nothing
            first = stamps.read_text().split()
            if not first:
                raise RuntimeError(f"{' '.join(argv)} did not start claude")
            return float(first[0]) - started

        launcher = [str(installed() / "python"), str(Path(__file__).with_name("launcher.py")), "-p", "hi"]
        measures = {"python": lambda: until_exec(launcher)}
        for side, repo in settings.sides().items():
            crew = [str(installed(repo) / "crew"), "query", "@claude hi"]
            measures[side] = lambda crew=crew: until_exec(crew)  # type: ignore[misc]
        values = interleaved(measures, settings.repeats(21, 7))
    return side_rows(
        "3 launch",
        "crew query's start to claude's exec vs a bare Python launcher's (wall)",
        values,
        "python",
        unit="ms",
        scale=1000,
        target=TARGET,
        note=f"the launcher: {median(values['python']) * 1000:.1f} ms",
    )
