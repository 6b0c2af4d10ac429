"""Figure 8: crew's tools as the text catalogue vs through each CLI's native channel
(`--tools-via text|native`), the same task on the same mock: the model reads notes.txt with crew's
read_file, then answers. Per CLI, in pairs (crew installed as users install it, the real CLI against
the mock model server):

- model requests the task took;
- characters of the first model request (the CLI's whole body: its system prompt, its tool list, crew's
  message — the catalogue's cost, or that of the native tool definitions);
- the tool turn: from the end of the reply that calls the tool to the next model request, as the
  mock sees it (the CLI hands the call over, crew runs it and gives the result back, the CLI asks
  again); with text, crew also stops the reply and sends a follow-up message;
- the whole run's wall time.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from bench.common import Row, Settings, installed, median, paired, ratio_row, run_timed, spread

CLIS = ("claude", "gemini", "codex")
MENTION = {"codex": "codex:gpt-5.5"}  # codex's default model calls tools from its code mode only: a function-tool model
SECRET = "the launch code is 7-4-1"
ANSWER = "The code is 7-4-1."
TASK = "what does notes.txt say?"
TARGET = 1.0  # native ≤ text


def run(settings: Settings) -> list[Row]:
    from crewbridge.providers import load

    from clienv import BIN, cli_env
    from mockserver import MockServer

    if not settings.cli:
        return []
    crew = str(installed() / "crew")
    rows: list[Row] = []
    for name in CLIS:
        if not load(name).native_via:
            rows.append(Row("8 native", f"{name}: no native channel", 0, note="skipped"))
            continue
        if not (BIN / name).exists():
            raise RuntimeError(f"the real {name} CLI is not in {BIN}; run `npm install`")
        home = Path(tempfile.mkdtemp(prefix="crew-bench-native-"))
        try:
            with MockServer() as mock:
                env = cli_env(name, mock.url, home / "home")
                work = home / "work"
                work.mkdir()
                (work / "notes.txt").write_text(SECRET + "\n")
                rows += _compare(settings, crew, name, mock, env, work)
                if mock.problems:
                    raise RuntimeError(f"the mock model server saw: {'; '.join(mock.problems)}")
        finally:
            shutil.rmtree(home, ignore_errors=True)
    return rows


def _compare(settings: Settings, crew: str, name: str, mock, env: dict[str, str], work: Path) -> list[Row]:
    from crewcli import tool_block
    from mockserver import tool_call

    seen: dict[str, list[dict[str, float]]] = {"text": [], "native": []}

    def once(via: str) -> float:
        call = (
            tool_call("read_file", {"path": "notes.txt"})
            if via == "native"
            else tool_block("crew:read_file", path="notes.txt")
        )
        mock.requests.clear()
        mock.script(call, ANSWER)
        done = run_timed([crew, "query", "--tools-via", via, f"@{MENTION.get(name, name)} {TASK}"], env=env, cwd=work)
        if done.returncode != 0 or ANSWER not in done.stdout.decode():
            raise RuntimeError(
                f"crew query --tools-via {via} @{name} failed (exit {done.returncode}): {done.stderr.decode()[-300:]}"
            )
        first, second = mock.requests[0], mock.requests[1]
        seen[via].append(
            {"requests": len(mock.requests), "chars": len(json.dumps(first.body)), "gap": second.received - first.ended}
        )
        return done.wall

    mine, theirs, ratios = paired(lambda: once("native"), lambda: once("text"), settings.repeats(7, 3))
    native, text = seen["native"][-len(mine) :], seen["text"][-len(theirs) :]
    gaps = [n["gap"] / t["gap"] for n, t in zip(native, text, strict=True)]
    return [
        Row(
            "8 native",
            f"{name}: model requests, native / text",
            median([n["requests"] for n in native]),
            baseline=median([t["requests"] for t in text]),
        ),
        Row(
            "8 native",
            f"{name}: characters of the first model request, native / text",
            median([n["chars"] for n in native]),
            "chars",
            median([t["chars"] for t in text]),
            median([n["chars"] / t["chars"] for n, t in zip(native, text, strict=True)]),
        ),
        Row(
            "8 native",
            f"{name}: tool turn, reply end → next request, native vs text",
            median([n["gap"] for n in native]) * 1000,
            "ms",
            median([t["gap"] for t in text]) * 1000,
            median(gaps),
            TARGET,
            spread(gaps, "×"),
        ),
        ratio_row(
            "8 native",
            f"{name}: the whole run, native vs text (wall)",
            mine,
            theirs,
            ratios,
            unit="s",
            scale=1,
            target=TARGET,
        ),
    ]
