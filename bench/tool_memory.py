"""Figure 9: the file tools' memory. Peak RSS while crew:read_file, crew:grep and crew:edit_file
work on a file that is one 300 MB line (40 MB with --quick), above the interpreter's baseline (its
RSS once the tools are imported and ready, before the call).

Each call runs in a fresh interpreter (bench/tool_memory_worker.py), so one does not inherit
another's heap. To measure another checkout's tools (main, before a change), give
its interpreter: `python bench/tool_memory.py --python /work/main/.venv/bin/python --size 20`
(sizes in MB; an edit that holds the file costs dozens of times its size; --only read_file,grep)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` and `crewbridge` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import PYTHON, Row, Settings, scratch

TARGET_MB = 16.0
NAME = "one-line.txt"
CALLS = {  # tool → its input; the file is one line: "a"s, NEEDLE in the middle, "b"s
    "read_file": {"path": NAME},
    "grep": {"pattern": "NEEDLE", "path": NAME},
    "edit_file": {"path": NAME, "old_string": "NEEDLE", "new_string": "ELDEEN"},
}


def one_line_file(size: int) -> Path:
    """A folder holding NAME: one line of `size` bytes with a single NEEDLE in its middle."""
    folder = scratch(f"one-line-{size // 1_000_000}MB")
    path = folder / NAME
    half = (size - len("NEEDLE")) // 2
    with path.open("wb") as out:
        for fill, count in ((b"a", half), (b"NEEDLE", 1), (b"b", size - half - len("NEEDLE"))):
            while count > 0:
                step = min(count, 1 << 24) if len(fill) == 1 else 1
                out.write(fill * step)
                count -= step
    return folder


def measure(folder: Path, tool: str, python: str = PYTHON) -> dict[str, Any]:
    worker = Path(__file__).with_name("tool_memory_worker.py")
    out = subprocess.run(
        [python, str(worker), str(folder), tool, json.dumps(CALLS[tool])], capture_output=True, text=True, timeout=900
    )
    if out.returncode != 0:
        return {"failed": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"}
    return dict(json.loads(out.stdout))


def rows(size: int, python: str = PYTHON, tools: list[str] | None = None) -> list[Row]:
    found = []
    for tool in tools or CALLS:  # the file is written for each (edit_file changes it)
        got = measure(one_line_file(size), tool, python)
        what = f"{tool} on a {size // 1_000_000} MB one-line file: peak RSS above baseline"
        if "failed" in got:
            found.append(Row("9 tool memory", what, float("nan"), "MB", target=TARGET_MB, note=got["failed"]))
            continue
        found.append(
            Row(
                "9 tool memory",
                what,
                got["peak"] - got["baseline"],
                "MB",
                target=TARGET_MB,
                note=f"baseline {got['baseline']:.0f} MB, peak {got['peak']:.0f} MB; "
                f"{'ok' if got['success'] else 'error'}: {got['result']}",
            )
        )
    return found


def run(settings: Settings) -> list[Row]:
    return rows(40_000_000 if settings.quick else 300_000_000)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench/tool_memory.py", description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=PYTHON, help="the interpreter whose crewbridge is measured")
    parser.add_argument("--size", type=int, default=300, help="the line's size in MB (default 300)")
    parser.add_argument("--only", default=",".join(CALLS), help="comma-separated tools (default: all)")
    args = parser.parse_args(argv)
    for row in rows(args.size * 1_000_000, args.python, [name for name in args.only.split(",") if name in CALLS]):
        print(f"{row.what}: {row.value:.1f} {row.unit}\n    {row.note}")


if __name__ == "__main__":
    main()
