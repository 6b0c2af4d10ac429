"""Figure 5: parallel agents. `@a @b @c task` against the slowest of the three run alone.

The agents are bench/fake_agent.py with a model's latency (a different one each) doing a real tool
round trip (crew:read_file, then the answer): the time is the model's, so what the figure shows is
what crew adds by running them together — one engine, one process, threads. A second row does the
same with three real claude CLIs against the mock; on a 2-core machine their start-up competes for
the CPU, so that row says more about the machine than about crew."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from crewbridge.providers.generic import GenericSpec

from bench.common import PYTHON, Row, Settings, installed, median, run_timed, scratch, spread
from bench.harness import claude_env
from crewbridge.bridge import Bridge
from crewbridge.config import AgentSpec, Config

TARGET = 1.15
FAKE = Path(__file__).with_name("fake_agent.py")
TASK = "what is in notes.txt?"


def fake_config(thinks: dict[str, float]) -> Config:
    config = Config(transcripts=False, plugins=False)
    for name, think in thinks.items():
        command = [PYTHON, "-S", str(FAKE), "--think", str(think)]
        config.providers[name] = GenericSpec(name=name, command=command)
        config.agents[name] = AgentSpec(id=name, provider=name)
    return config


def timed_run(bridge: Bridge, text: str) -> float:
    start = time.perf_counter()
    outcomes = bridge.run(text)
    seconds = time.perf_counter() - start
    for outcome in outcomes:
        if outcome.error is not None or outcome.result is None or not outcome.result.tool_calls:
            raise RuntimeError(f"@{outcome.agent} did not finish its tool round trip: {outcome.error}")
    return seconds


def compare(measure: Callable[[str], float], agents: list[str], runs: int) -> tuple[list[float], list[float], float]:
    """Each agent alone, then all together, `runs` rounds after a warm-up: (the times together,
    each over the slowest alone in its round, the slowest agent's median alone)."""
    together_text = " ".join(f"@{a}" for a in agents) + " "
    measure(together_text)
    alone: dict[str, list[float]] = {a: [] for a in agents}
    together, ratios = [], []
    for _ in range(runs):
        for agent in agents:
            alone[agent].append(measure(f"@{agent} "))
        together.append(measure(together_text))
        ratios.append(together[-1] / max(alone[a][-1] for a in agents))
    return together, ratios, max(median(times) for times in alone.values())


def run(settings: Settings) -> list[Row]:
    work = scratch("parallel")
    (work / "notes.txt").write_text("first line\nsecond line\n")
    scale = 0.5 if settings.quick else 1.0
    thinks = {"a": 0.4 * scale, "b": 0.6 * scale, "c": 0.8 * scale}
    bridge = Bridge(fake_config(thinks), work)
    together, ratios, slowest = compare(
        lambda mentions: timed_run(bridge, mentions + TASK), list(thinks), settings.repeats(5, 2)
    )
    latency = ", ".join(f"{a} {t:g} s" for a, t in thinks.items())
    row = Row(
        "5 parallel",
        "@a @b @c vs the slowest alone: fake CLIs, a tool round trip each (wall)",
        median(together),
        "s",
        slowest,
        median(ratios),
        TARGET,
        spread(ratios, "×"),
        f"model latency per turn: {latency}",
    )
    return [row] + ([real_claude(settings)] if settings.cli else [])


def real_claude(settings: Settings) -> Row:
    """`crew query` with three claude agents, each answering after ~0.75 s of model latency."""
    from mockserver import reply

    crew_command = str(installed() / "crew")
    with claude_env() as (mock, env, work):
        config = work / "bench-crew.yaml"
        config.write_text("agents:\n" + "".join(f"  {a}: {{provider: claude}}\n" for a in "abc"))

        def measure(mentions: str) -> float:
            answer = reply("Hello ", "from ", "the ", "mock.", delay=0.25)
            mock.script(*[answer] * mentions.count("@"))
            result = run_timed(
                [crew_command, "query", "--config", str(config), mentions + "say hello"], env=env, cwd=work
            )
            if result.returncode != 0:
                raise RuntimeError(
                    f"crew query {mentions}failed (exit {result.returncode}): "
                    f"{result.stderr.decode(errors='replace').strip()[-200:]}"
                )
            return result.wall

        together, ratios, slowest = compare(measure, ["a", "b", "c"], settings.repeats(3, 1))
    return Row(
        "5 parallel",
        "crew query @a @b @c vs the slowest alone: 3 real claude CLIs (wall)",
        median(together),
        "s",
        slowest,
        median(ratios),
        None,
        spread(ratios, "×"),
        "0.75 s of model latency each; three CLIs starting at once share the cores",
    )
