"""Where `crew parse`'s time goes on a 40 MB claude stream of text deltas, stage by stage (CPU, in
this process): reading the lines, decoding them (providers.base.parse_object), the decoder's events,
the extractor (which checks each call found: jsonschema is imported for the first), against
json.loads per line; each stage includes reading. The whole command is figure "1 parse".

    .venv/bin/python bench/parse_stages.py [--before ../before] [--runs 3]

Each checkout's stages run in a fresh interpreter of its own (bench.worker)."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

STAGES = ["read", "json.loads", "parse_object", "decode", "decode+extract"]


def measure(path: str) -> dict[str, float]:
    """CPU milliseconds of each stage over the file at `path`."""
    import json

    from crewbridge.providers.base import parse_object
    from crewbridge.providers.claude import ClaudeDecoder

    from crewbridge.base.decoded import MessageEnd, Text
    from crewbridge.toolkit.extract import Extractor

    def cpu(func) -> float:  # type: ignore[no-untyped-def]
        start = time.process_time()
        func()
        return (time.process_time() - start) * 1000

    def lines():  # type: ignore[no-untyped-def]
        with open(path, encoding="utf-8") as stream:
            yield from stream

    def extract() -> None:
        decoder, extractor = ClaudeDecoder(), Extractor()
        for line in lines():
            for event in decoder.decode(line):
                if isinstance(event, Text):
                    extractor.feed(event.text)
                elif isinstance(event, MessageEnd):
                    extractor.end_message()

    def decode() -> None:
        decoder = ClaudeDecoder()
        for line in lines():
            decoder.decode(line)

    def each(func) -> None:  # type: ignore[no-untyped-def]
        for line in lines():
            func(line)

    out = {
        "read": cpu(lambda: each(len)),
        "json.loads": cpu(lambda: each(json.loads)),
        "parse_object": cpu(lambda: each(parse_object)),
        "decode": cpu(decode),
    }
    out["decode+extract"] = cpu(extract)  # jsonschema is imported for the first call found
    return out


def main() -> None:
    from bench.common import REPO, Settings, in_process
    from bench.throughput import stream_file

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", type=Path)
    args = parser.parse_args()
    path = str(stream_file(Settings(), partial=True))
    sides = {"crew": REPO, **({"before": args.before.resolve()} if args.before else {})}
    got: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    for _ in range(args.runs):
        for side, repo in sides.items():
            got[side].append(in_process(repo, "parse-stages", path))
    print(f"CPU ms over {Path(path).name}, medians of {args.runs} (each stage includes reading the lines)")
    print(f"{'side':7} " + " ".join(f"{stage:>15}" for stage in STAGES))
    for side, runs in got.items():
        print(f"{side:7} " + " ".join(f"{statistics.median(r[s] for r in runs):15.0f}" for s in STAGES))


if __name__ == "__main__":
    main()
