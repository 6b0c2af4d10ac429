"""One call of a file tool, in a fresh interpreter, for bench/tool_memory.py: prints the RSS before
the call and the peak during it (MB), as JSON. It imports only crewbridge, and the crewbridge of
the interpreter running it, so that another checkout's tools can be measured the same way.

    python bench/tool_memory_worker.py FOLDER TOOL INPUT_JSON
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from crewbridge.tools import builtin_registry

from crewbridge.toolkit.registry import ToolContext


def status_mb() -> dict[str, float]:
    """VmRSS, VmHWM, … of this process, in MB."""
    fields = (line.split() for line in Path("/proc/self/status").read_text().splitlines())
    return {words[0].rstrip(":"): int(words[1]) / 1024 for words in fields if words[-1:] == ["kB"]}


def main(folder: str, tool: str, data: str) -> None:
    registry = builtin_registry()
    registry.prepare()
    baseline = status_mb()["VmRSS"]
    Path("/proc/self/clear_refs").write_text("5")  # forget the peak of the imports: VmHWM = VmRSS
    result = registry.call(f"crew:{tool}", json.loads(data), ToolContext(Path(folder))).to_dict()
    shown = result["error"] or json.dumps(result["data"], ensure_ascii=False)
    print(
        json.dumps(
            {
                "baseline": baseline,
                "peak": status_mb()["VmHWM"],
                "success": result["success"],
                "result": shown if len(shown) <= 210 else f"{shown[:60]}…{shown[-150:]}",
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:4])
