"""What crew adds per tool turn, live (one CLI process for the whole conversation) against a fresh CLI
process per turn (CREW_LIVE=0), for claude and codex against the mock model server.

Each reply is prose and a crew:read_file block, mostly followed by an invented tail. The figure per
tool turn is the time from the moment the model's part is over (the tail that makes the loop stop
the reply, or the block when nothing follows) to the moment the next reply's first text reaches the
loop, less the model's own time to that first chunk (the mock's, measured with a direct request:
about a millisecond). It holds stopping, running the tool, correcting the history, sending the
result, and the CLI's own work to build its next request (see "clean", where crew has nothing to
correct); it is split into crew's part (from the stop to the next message handed to the CLI) and the
CLI's (from there to the next reply's first text, less the model's time). Shapes: "clean" (the reply
ends at its block), "streamed" (the tail comes 50 ms after the block: the stop lands mid-reply) and
"burst" (the whole reply in one chunk: it has usually finished before the stop lands). Prints
figures; asserts nothing.

    .venv/bin/python bench/bench_live.py [--turns 6] [--runs 3] [--cli claude --cli codex]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from crewbridge.providers.base import Turn  # noqa: E402
from crewbridge.tools import builtin_registry  # noqa: E402

from bench.harness import reporting  # noqa: E402
from clienv import cli_env  # noqa: E402
from crewbridge import providers  # noqa: E402
from crewbridge.config import AgentSpec  # noqa: E402
from crewbridge.conversations import new_conversation  # noqa: E402
from crewbridge.engine.loop import AgentLoop  # noqa: E402
from crewbridge.work.policy import Policy  # noqa: E402
from mockserver import MockServer, reply  # noqa: E402

TAIL = "INVENTED: the file says 7."
BLOCK = '```json\n{"type": "tool_use", "name": "crew:read_file", "input": {"path": "notes.txt"}}\n```\n'
# name → (chunks, seconds between them, the text at which the model's part of the turn is over)
SHAPES = {
    "clean": (["Reading.\n" + BLOCK], 0.0, BLOCK),  # ends at its block: nothing to stop
    "streamed": (["Reading.\n" + BLOCK, TAIL, " More."], 0.05, TAIL),  # the stop lands mid-reply
    "burst": (["Reading.\n" + BLOCK + TAIL], 0.0, TAIL),  # it has all arrived before the stop lands
}


def model_time(mock: MockServer) -> float:
    """The mock model's own time to the first text chunk of a reply, in seconds (a direct request)."""
    mock.script("x")
    connection = http.client.HTTPConnection("127.0.0.1", mock.port)
    started = time.monotonic()
    connection.request(
        "POST",
        "/v1/messages",
        json.dumps({"model": "m", "stream": True, "messages": []}),
        {"Content-Type": "application/json"},
    )
    response = connection.getresponse()
    while b"content_block_delta" not in response.readline():
        pass
    elapsed = time.monotonic() - started
    connection.close()
    mock.requests.clear()
    return elapsed


def one_run(
    cli: str, live: bool, turns: int, shape: str, also: Callable[[Any], None] | None = None
) -> tuple[list[float], list[float], list[float]]:
    """Per tool turn, in milliseconds: what crew and the CLI added between the stop and the next
    reply; of that, the time crew spent putting the history right (Conversation.keep); and crew's
    whole part, from the stop to handing the CLI the next message (stop, tool, history, send).
    `also` gets every event the loop reports too (a Renderer, to time it)."""
    with MockServer() as mock, tempfile.TemporaryDirectory() as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        work.mkdir()
        (work / "notes.txt").write_text("the secret is 42")
        chunks, delay, marker = SHAPES[shape]
        ttfc = model_time(mock)
        mock.script(*[reply(*chunks, delay=delay) for _ in range(turns)], "Done.")
        stops: list[float] = []
        firsts: list[float] = []
        seen_turn = [0]

        def progress(event: Any) -> None:  # an event of the record (a Progress before it, --before)
            if also is not None:
                also(event)
            if event.kind == "turn":
                turn = getattr(event, "turn", None)
                seen_turn[0] = turn if isinstance(turn, int) else int(event.text)
            elif event.kind == "text":
                if len(firsts) < seen_turn[0]:
                    firsts.append(time.monotonic())
                if marker in event.text and len(stops) < seen_turn[0]:
                    stops.append(time.monotonic())

        env = {**cli_env(cli, mock.url, home), "CREW_LIVE": "1" if live else "0"}
        conversation = new_conversation(providers.load(cli), Turn(prompt=""), cwd=work, env=env)
        keeps: list[float] = []
        keep = conversation.keep

        def timed_keep(kept: str, stopped: bool) -> str:
            started = time.monotonic()
            history = keep(kept, stopped)
            keeps.append((time.monotonic() - started) * 1000)
            return history

        conversation.keep = timed_keep  # type: ignore[method-assign]
        sends: list[float] = []
        send = conversation.send

        def timed_send(message: str, deadline: float | None):  # type: ignore[no-untyped-def]
            sends.append(time.monotonic())
            return send(message, deadline)

        conversation.send = timed_send  # type: ignore[method-assign]
        loop = AgentLoop(
            cli,
            conversation,
            builtin_registry(),
            Policy(AgentSpec(cli, cli), "query"),
            workdir=work,
            timeout=120,
            max_turns=turns + 1,
            **reporting(progress),
        )
        result = loop.run("what does notes.txt say?")
        assert result.answer == "Done.", result.answer
        return (
            [(firsts[k + 1] - stops[k] - ttfc) * 1000 for k in range(turns)],
            keeps,
            [(sends[k + 1] - stops[k]) * 1000 for k in range(turns)],
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=6, help="tool turns per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cli", action="append", choices=["claude", "codex", "gemini"])
    args = parser.parse_args()
    print(
        f"per tool turn, ms ({args.runs} runs x {args.turns} turns), medians but min and max; of the "
        "median: 'crew' from the stop to the next message sent (of which 'keep': putting the "
        "history right), 'cli' from there to the next reply's first text, less the model's own time"
    )
    print(f"{'cli':7} {'shape':9} {'mode':9} {'median':>7} {'min':>7} {'max':>7} {'crew':>7} {'keep':>7} {'cli':>7}")
    for cli in args.cli or ["claude", "codex"]:
        for shape in SHAPES:
            for live in (True, False):
                runs = [one_run(cli, live, args.turns, shape) for _ in range(args.runs)]
                gaps = [ms for run in runs for ms in run[0]]
                keeps = [ms for run in runs for ms in run[1]]
                crews = [ms for run in runs for ms in run[2]]
                clis = [gap - crew for run in runs for gap, crew in zip(run[0], run[2], strict=True)]
                mode = "live" if live else "per-turn"
                print(
                    f"{cli:7} {shape:9} {mode:9} {statistics.median(gaps):7.1f} {min(gaps):7.1f} "
                    f"{max(gaps):7.1f} {statistics.median(crews):7.1f} {statistics.median(keeps):7.1f} "
                    f"{statistics.median(clis):7.1f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
