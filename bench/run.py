"""Run crewbridge's benchmarks and print every figure side by side (medians, ratios, spreads).

    .venv/bin/python bench/run.py                 # every figure, full size (about 6 minutes)
    .venv/bin/python bench/run.py --quick         # smaller inputs, fewer runs (about 2 minutes)
    .venv/bin/python bench/run.py --only startup,catalogue --runs 9
    .venv/bin/python bench/run.py --only overhead,launch,turn,dispatch,parse,startup,mcp --before ../before

Figures print what they measure; they are not pass/fail tests. The "ok" column compares the
median (or the median ratio) with the target of issue 26 (issue 6 for the others). On a busy
machine the spreads are wide: re-run on a quiet one before trusting a figure near its target.
Exit status 1: a figure failed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` and `crewbridge` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Row, Settings, fmt

FIGURES = {  # name → module; issue 26's table first, then the rest of issue 6's, then the later issues'
    "overhead": "bench.overhead",
    "launch": "bench.launch",
    "turn": "bench.turn",
    "dispatch": "bench.dispatch",
    "parse": "bench.parse",
    "startup": "bench.startup",
    "mcp": "bench.mcp",
    "throughput": "bench.throughput",
    "catalogue": "bench.catalogue_size",
    "parallel": "bench.parallel",
    "memory": "bench.memory",
    "native": "bench.native",
    "tools": "bench.tool_memory",
    "sandbox": "bench.sandbox",
    "gitguard": "bench.gitguard",
    "commands": "bench.commands",
    "ui": "bench.ui",
    "egress": "bench.egress",
    "livedin": "bench.livedin",
    "gate": "bench.gate",
    "pulls": "bench.pulls",
    "telemetry": "bench.telemetry",
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/run.py", description="crewbridge benchmarks (issue 6)")
    parser.add_argument("--quick", action="store_true", help="smaller inputs and fewer runs")
    parser.add_argument(
        "--only", default="", metavar="NAMES", help=f"comma-separated figures to run, of: {', '.join(FIGURES)}"
    )
    parser.add_argument("--runs", type=int, metavar="N", help="repetitions of each timed measurement")
    parser.add_argument("--json", dest="as_json", action="store_true", help="print the rows as JSON lines")
    parser.add_argument(
        "--no-cli",
        dest="cli",
        action="store_false",
        help="skip the rows that need the real claude CLI and the mock model",
    )
    parser.add_argument(
        "--before",
        type=Path,
        metavar="CHECKOUT",
        help="another checkout of crewbridge (with its .venv), measured in the same "
        "rounds as this one in the figures of issue 26; its rows say [before]",
    )
    args = parser.parse_args(argv)
    if args.before is not None:
        args.before = args.before.resolve()
        if not (args.before / "crewbridge").is_dir() or not (args.before / ".venv" / "bin" / "python").exists():
            parser.error(f"--before {args.before} is not a crewbridge checkout with a .venv")
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(FIGURES)
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        parser.error(f"unknown figure {', '.join(unknown)}; choose from: {', '.join(FIGURES)}")
    if args.runs is not None and args.runs < 1:
        parser.error("--runs must be at least 1")
    args.names = names
    return args


def table(rows: list[Row]) -> str:
    """The rows aligned in columns; each row's note on a line of its own below it."""
    head = ("figure", "what", "value", "baseline", "ratio", "target", "ok", "spread")
    body = []
    for row in rows:
        unit = f" {row.unit}" if row.unit else ""
        bound = "" if row.target is None else "≤ " + fmt(row.target) + ("×" if row.ratio is not None else unit)
        body.append(
            (
                row.figure,
                row.what,
                fmt(row.value) + unit,
                "" if row.baseline is None else fmt(row.baseline) + unit,
                "" if row.ratio is None else f"{row.ratio:.2f}×",
                bound,
                {True: "yes", False: "NO", None: ""}[row.ok],
                row.spread,
            )
        )
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(head, widths, strict=True)).rstrip(),
        "  ".join("-" * w for w in widths),
    ]
    for row, cells in zip(rows, body, strict=True):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True)).rstrip())
        if row.note:
            lines.append(" " * (widths[0] + 2) + "↳ " + row.note)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = Settings(quick=args.quick, runs=args.runs, cli=args.cli, before=args.before)
    print(
        f"crewbridge benchmarks{' (quick)' if args.quick else ''}: Python "
        f"{platform.python_version()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}",
        file=sys.stderr,
    )
    rows: list[Row] = []
    failed = []
    for name in args.names:
        start = time.monotonic()
        print(f"running {name} …", file=sys.stderr, flush=True)
        try:
            new = importlib.import_module(FIGURES[name]).run(settings)
        except Exception as exc:  # one broken figure must not hide the others
            failed.append(f"{name} ({type(exc).__name__}: {exc})")
            print(f"  {name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        rows += new
        print(f"  {name}: {time.monotonic() - start:.1f} s", file=sys.stderr)
        if args.as_json:
            for row in new:
                print(json.dumps({**row.__dict__, "ok": row.ok}), flush=True)
    if not args.as_json:
        print(table(rows))
    if failed:
        print(f"failed: {'; '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
