"""Figure 6: memory. Peak RSS while crew processes a 200 MB claude stream-json output, above the
interpreter's baseline (its RSS once crewbridge is imported, before the stream starts).

Each measurement runs in a fresh interpreter (`python bench/memory.py PATH WAY`), so one does not
inherit another's heap. Ways: `loop` — the agent loop reading the stream from a CLI process (`cat`)
as one reply with no tool call, so it reads all of it; `parse` — decoder and extractor over the
file's lines, as `crew parse` does.

Streams: a long session whose bulk is what Claude's own tools read (native tool results, which crew
sets aside) with about 5M characters of assistant text; and one that is half assistant text (figure
1's mix), past what the loop keeps of one reply (loop.MAX_REPLY characters: it stops such a runaway
CLI, so memory stays bounded there too)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a worker script
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import PYTHON, Row, Settings, scratch
from bench.streams import write_stream

TARGET_MB = 60.0


def rss_mb(field: str) -> float:
    """VmRSS (now) or VmHWM (the peak so far) of this process, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status (Linux only)")


def worker(path: Path, way: str) -> dict[str, float]:
    from crewbridge.providers.claude import ClaudeDecoder

    from bench.harness import fake_conversation, run_loop
    from crewbridge.base.decoded import MessageEnd, Text
    from crewbridge.errors import ProviderError
    from crewbridge.toolkit.extract import Extractor
    from crewbridge.toolkit.registry import ToolRegistry

    baseline = rss_mb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # forget the peak of the imports: VmHWM = VmRSS
    chars, stopped = 0, False
    if way == "loop":
        try:
            result = run_loop(fake_conversation(["cat", str(path)], path.parent), ToolRegistry(), "go", path.parent)
            chars = len(result.answer)
        except ProviderError:  # a runaway reply: the loop stopped it
            stopped = True
    else:
        decoder, extractor = ClaudeDecoder(), Extractor()
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                for event in decoder.decode(line):
                    if isinstance(event, Text):
                        chars += len(event.text)
                        extractor.feed(event.text)
                    elif isinstance(event, MessageEnd):
                        extractor.end_message()
    return {"baseline": baseline, "peak": rss_mb("VmHWM"), "chars": chars, "stopped": stopped}


def measure(path: Path, way: str) -> dict[str, float]:
    out = subprocess.run([PYTHON, __file__, str(path), way], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"memory worker ({way}) failed: {out.stderr.strip()[-300:]}")
    return json.loads(out.stdout)


def bare_interpreter() -> float:
    """VmRSS of a fresh interpreter that imported nothing (ru_maxrss would count the fork)."""
    out = subprocess.run(
        [PYTHON, "-c", "print(open('/proc/self/status').read())"], capture_output=True, text=True, check=True
    )
    return next(int(line.split()[1]) / 1024 for line in out.stdout.splitlines() if line.startswith("VmRSS:"))


STREAMS = {  # name → (write_stream options, ways to measure)
    "tool-heavy, whole messages": ({"text_share": 0.05, "partial": False}, ("loop", "parse")),
    "tool-heavy, deltas": ({"text_share": 0.05, "partial": True}, ("loop",)),
    "half text, whole messages": ({"text_share": 0.5, "partial": False}, ("loop", "parse")),
}


def run(settings: Settings) -> list[Row]:
    size = 40_000_000 if settings.quick else 200_000_000
    rows = []
    bare = bare_interpreter()
    for label, (options, ways) in STREAMS.items():
        slug = label.replace(", ", "-").replace(" ", "_")
        name = f"claude-{size // 1_000_000}MB-{slug}-nocalls.jsonl"
        path = write_stream(scratch("streams") / name, size, calls=False, **options)
        for way in ways:
            got = measure(path, way)
            text = (
                "the loop stopped the reply at its limit"
                if got["stopped"]
                else f"{got['chars'] / 1e6:.1f}M characters" + (" (the answer)" if way == "loop" else "")
            )
            rows.append(
                Row(
                    "6 memory",
                    f"{way}: {size // 1_000_000} MB stream, {label}: peak RSS above baseline",
                    got["peak"] - got["baseline"],
                    "MB",
                    target=TARGET_MB,
                    note=f"baseline {got['baseline']:.0f} MB (bare interpreter {bare:.0f} "
                    f"MB), peak {got['peak']:.0f} MB; assistant text: {text}",
                )
            )
    return rows


if __name__ == "__main__":
    print(json.dumps(worker(Path(sys.argv[1]), sys.argv[2])))
