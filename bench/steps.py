"""Where a live tool turn's time goes inside crew, step by step: each step's functions are wrapped
with a timer (inclusive time, every thread), a chain of tool turns runs through the real CLI against
the mock model server (bench/bench_live.py's "streamed" replies), and each step's time is divided by
the number of tool turns. Nested steps are inside their parent's figure (validate is inside extract:
the extractor checks a call as its block closes). "hand-off" is the wait from the loop submitting a
call to a worker thread taking it, and from there to the tool's own thread running it.

    .venv/bin/python bench/steps.py [--cli claude] [--turns 5] [--runs 3] [--before ../before]

Each run is a fresh interpreter (bench.worker), so --before measures another checkout the same way.
Prints figures; asserts nothing."""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# step → the functions it times, as "module:Class.method" or "module:function"
STEPS = {
    "decode": ["crewbridge.providers.base:JsonLineDecoder.decode_object", "crewbridge.providers.base:parse_object"],
    "extract": ["crewbridge.toolkit.extract:Extractor.feed", "crewbridge.toolkit.extract:Extractor.end_message"],
    "validate": ["crewbridge.toolkit.registry:Tool.check"],
    "policy": ["crewbridge.work.policy:Policy.allowed", "crewbridge.work.policy:Policy.check"],
    "hooks": ["crewbridge.toolkit.hooks:Hooks.before", "crewbridge.toolkit.hooks:Hooks.after"],
    # the record written down (a checkout from --before that predates the record: its transcript)
    "transcript": ["crewbridge.record.transcript:Transcript.write", "crewbridge.transcript:Transcript.write"],
    "render": ["crewbridge.terminal.render:Renderer.progress"],
    "tool": ["crewbridge.toolkit.registry:ToolRegistry.call"],
    "stop": ["crewbridge.system.process:Child.send_line"],
}
ORDER = ["decode", "extract", "validate", "policy", "hooks", "transcript", "hand-off", "tool", "render", "write"]


class Clock:
    """Inclusive time per step, and the hand-off waits, in seconds."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = defaultdict(float)
        self.lock = threading.Lock()
        self.inside = threading.local()

    def add(self, step: str, seconds: float) -> None:
        with self.lock:
            self.spent[step] += seconds

    def wrap(self, step: str, func: Callable[..., Any]) -> Callable[..., Any]:
        clock = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            depth = getattr(clock.inside, step, 0)  # a step calling itself counts once
            setattr(clock.inside, step, depth + 1)
            started = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                setattr(clock.inside, step, depth)
                if depth == 0:
                    clock.add(step, time.perf_counter() - started)

        return timed


def instrument(clock: Clock) -> None:
    """Wrap every step's functions, and time the hand-offs to the worker and tool threads."""
    import importlib

    for step, targets in STEPS.items():
        for target in targets:
            module_name, _, path = target.partition(":")
            try:
                module = importlib.import_module(module_name)
            except ModuleNotFoundError:  # another checkout's name for the step
                continue
            owner: Any = module
            *outer, name = path.split(".")
            for part in outer:
                owner = getattr(owner, part)
            setattr(owner, name, clock.wrap(step, getattr(owner, name)))
            if owner is module and name == "parse_object":  # the module that took it by name
                # the live peer's read loop (a checkout from --before may have it in crewbridge.peer or live_process)
                for other in ("crewbridge.conversations.peer", "crewbridge.peer", "crewbridge.providers.live_process"):
                    if other in sys.modules and hasattr(sys.modules[other], name):
                        setattr(sys.modules[other], name, getattr(module, name))
    from crewbridge.engine import loop
    from crewbridge.toolkit import registry

    pool_submit = loop._DaemonPool.submit

    def submit(self: Any, job: Callable[[], Any]) -> Any:
        handed = time.perf_counter()
        return pool_submit(self, lambda: (clock.add("hand-off", time.perf_counter() - handed), job())[1])

    loop._DaemonPool.submit = submit  # type: ignore[method-assign]
    thread_start = registry.threading.Thread.start

    def start(self: Any) -> None:
        if self.name.startswith("tool-"):
            handed, target = time.perf_counter(), self._target
            self._target = lambda: (clock.add("hand-off", time.perf_counter() - handed), target())[1]
        thread_start(self)

    registry.threading.Thread.start = start  # type: ignore[method-assign]


def measure(cli: str, turns: int) -> dict[str, float]:
    """One run of `turns` tool turns: milliseconds per tool turn, by step."""
    from bench import bench_live
    from crewbridge.terminal.render import Renderer

    clock = Clock()
    instrument(clock)
    renderer = Renderer(output="text", agents=[cli], verbose=False)
    with renderer:
        bench_live.one_run(cli, True, turns, "streamed", also=renderer.progress)
    spent = dict(clock.spent)
    spent["write"] = spent.pop("stop", 0.0)  # every line sent: the stop, the tool results
    return {step: spent.get(step, 0.0) * 1000 / turns for step in ORDER}


def main() -> None:
    from bench.common import REPO, in_process

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", action="append", choices=["claude", "codex"])
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", type=Path, help="another checkout (with its .venv), measured the same way")
    args = parser.parse_args()
    sides = {"crew": REPO, **({"before": args.before.resolve()} if args.before else {})}
    print(f"ms per tool turn, medians of {args.runs} runs x {args.turns} turns (inclusive: validate is inside extract)")
    print(f"{'cli':7} {'side':7} " + " ".join(f"{step:>10}" for step in ORDER))
    for cli in args.cli or ["claude", "codex"]:
        got: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
        for _ in range(args.runs):
            for side, repo in sides.items():  # in rounds
                got[side].append(in_process(repo, "steps", cli, str(args.turns)))
        for side, runs in got.items():
            cells = [statistics.median(run[step] for run in runs) for step in ORDER]
            print(f"{cli:7} {side:7} " + " ".join(f"{ms:10.2f}" for ms in cells), flush=True)


if __name__ == "__main__":
    main()
