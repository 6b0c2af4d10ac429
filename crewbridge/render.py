"""What a person sees: the answer on stdout, tool calls as compact lines on stderr."""
from __future__ import annotations

import json
import sys
import threading
from typing import Any, Sequence

from crewbridge.loop import Progress


class Renderer:
    def __init__(self, *, quiet: bool = False, out: Any = None, err: Any = None) -> None:
        self.quiet = quiet
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._lock = threading.Lock()

    def progress(self, event: Progress) -> None:
        if self.quiet or event.call is None or event.kind != "result":
            return
        call, result = event.call, event.call.result
        arg = next(iter(call.input.values()), "") if isinstance(call.input, dict) and call.input else ""
        status = "ok" if result.success else f"error: {result.error}"
        with self._lock:
            self.err.write(f"@{event.agent} → {call.name} {str(arg)[:60]}  [{status}]\n")
            self.err.flush()

    def finish(self, outcomes: Sequence[Any], *, as_json: bool) -> None:
        if as_json:
            objs = [o.result.to_dict() if o.result else {"agent": o.agent, "error": str(o.error)}
                    for o in outcomes]
            self.out.write(json.dumps(objs[0] if len(objs) == 1 else {"results": objs}, ensure_ascii=False) + "\n")
            return
        labelled = len(outcomes) > 1
        for outcome in outcomes:
            if labelled:
                self.out.write(f"── @{outcome.agent} ──\n")
            if outcome.result is not None:
                self.out.write(outcome.result.answer + "\n")
            else:
                self.err.write(f"crew: error: {outcome.error}\n")
        self.out.flush()
