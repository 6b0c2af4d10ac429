"""Figure 12: what the command rules cost (crewbridge.work.policy.command_problem under
`deny_commands: ["rm *"]`) on a 128 KB command line — the most one argument can hold — of each
shape that made the reading slow or quadratic before (`"env " * 32000` took 115 s of CPU): the
time to decide it (read it and allow it, or refuse it), wall and CPU (the process's own time, the
steadier on a shared machine). Target: under 50 ms."""

from __future__ import annotations

import time

from bench.common import Row, Settings, median, spread

TARGET_MS = 50.0
SIZE = 128_000
SHAPES = {  # name → (one unit, what it is)
    "env " * (SIZE // 4): "`env ` × 32,000 (wrappers in wrappers)",
    "ls;" * (SIZE // 3): "`ls;` × 42,666 (simple commands)",
    ("ls " + "abcdefghijklmnopqrstuvwxyz012345 " * 4095)[:SIZE]: "4,096 words of 32 characters (the most crew reads)",
    "echo " + "\\\\" * (SIZE // 2 - 3): "one word of 128,000 backslashes",
    "echo " + "*" * (SIZE - 5): "one glob of 128,000 characters",
    "cat > f <<'EOF'\n" + ("x" * 79 + "\n") * (SIZE // 80 - 1) + "EOF\n": "a here-document of 1,599 lines",
    "strace " + "a " * (SIZE // 2 - 4): "`strace` and 64,000 words",
}


def run(settings: Settings) -> list[Row]:
    from crewbridge.work.policy import command_problem

    command_problem("ls", ["rm *"])  # the grammar loads once per process: not what is measured
    rows = []
    for line, what in SHAPES.items():
        walls: list[float] = []
        cpus: list[float] = []
        for _ in range(settings.repeats(15, 5)):
            wall, cpu = time.perf_counter(), time.process_time()
            problem = command_problem(line, ["rm *"])
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        decided = "allowed" if problem is None else "refused: " + problem.reason.split(": ", 1)[-1][:60]
        rows.append(
            Row(
                "12 commands",
                f"decide a {len(line.encode()) // 1000} KB line: {what}",
                median(cpus) * 1000,
                "ms CPU",
                target=TARGET_MS,
                spread=spread(cpus, " ms", 1000),
                note=f"wall {median(walls) * 1000:.1f} ms ({spread(walls, ' ms', 1000)}); {decided}",
            )
        )
    return rows
