"""Figure 16: the check gate's cost beyond the check itself (crewbridge.engine.gate), per round: a round
that fails (the command run where the agent's commands run, in its sandbox, with its process group
ended after it; the `check` event; the message to the agent made from the output's end) and one that
passes, against the same command run bare (`/bin/sh -c CMD` from Python, no sandbox). The agent's
turn in between is not timed: a stand-in of the loop answers at once (it makes the file the check
looks for). Measured with crew's sandbox (bubblewrap where it works here) and with `--sandbox off`.
Goal: ≤ 50 ms a round."""

from __future__ import annotations

import functools
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import Row, Settings, median, paired, scratch, spread

CHECK = "test -f fixed || { echo 'not fixed yet'; exit 1; }"


@dataclass
class _Loop:
    """What the gate uses of an agent's loop: its name, tools' context, record and timeout; its
    answer to the gate's message comes at once (the fix)."""

    agent: str
    ctx: Any
    record: Any
    timeout: float | None = 300.0

    def converse(self, message: str) -> Any:
        (self.ctx.workdir / "fixed").write_text("yes\n")
        return "fixed"


def run(settings: Settings) -> list[Row]:
    from crewbridge.sandbox import Sandboxing
    from crewbridge.toolkit.registry import ToolContext

    rows = []
    sandboxing = Sandboxing()
    folder = scratch("gate")
    for level in ("auto", "off"):
        sandbox = sandboxing.commands(level, folder, "execute", network=False)
        mechanism = sandbox.mechanism.name if sandbox is not None else "none"
        gated = functools.partial(_gated, ToolContext(workdir=folder, sandbox=sandbox))
        ours, base, _ = paired(gated, functools.partial(_bare, folder), settings.repeats(21, 7))
        per_round = [(a - b) / 2 for a, b in zip(ours, base, strict=True)]
        rows.append(
            Row(
                "16 gate",
                f"the check gate beyond the check, a round (--sandbox {level}: {mechanism}; 2 rounds, fail then pass)",
                median(per_round) * 1000,
                "ms",
                median(base) / 2 * 1000,
                target=50,
                spread=spread(per_round, " ms", 1000),
                note=f"the check itself, bare: {median(base) / 2 * 1000:.1f} ms a round",
            )
        )
    return rows


def _gated(ctx: Any) -> float:
    """Seconds the gate takes for a check that fails, the agent's (instant) fix, and the check passing."""
    from crewbridge.base.options import RunOptions
    from crewbridge.base.usage import Budget
    from crewbridge.engine.context import Work
    from crewbridge.engine.gate import Gate
    from crewbridge.record.stream import Record

    (ctx.workdir / "fixed").unlink(missing_ok=True)
    loop = _Loop("bench", ctx, Record())
    work = Work("t", "execute", RunOptions(), Budget(None, None), loop.record)
    gate = Gate((CHECK,), 3, time.monotonic() + 300)
    start = time.perf_counter()
    _, failed = gate.through(loop, "answer", work)  # type: ignore[arg-type]
    took = time.perf_counter() - start
    if failed is not None or [run.passed for run in gate.runs] != [False, True]:
        raise RuntimeError(f"the gate did not fail then pass: {gate.runs}")
    return took


def _bare(folder: Path) -> float:
    """Seconds the same check takes run bare, failing then (the file made) passing."""
    (folder / "fixed").unlink(missing_ok=True)
    start = time.perf_counter()
    first = subprocess.run(["/bin/sh", "-c", CHECK], cwd=folder, capture_output=True)
    (folder / "fixed").write_text("yes\n")
    second = subprocess.run(["/bin/sh", "-c", CHECK], cwd=folder, capture_output=True)
    took = time.perf_counter() - start
    if (first.returncode, second.returncode) != (1, 0):
        raise RuntimeError("the bare check did not fail then pass")
    return took
