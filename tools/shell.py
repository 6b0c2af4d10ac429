"""Shell tool: run_command, a /bin/sh command in the working directory, in its own process group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from typing import IO, Any

from crewbridge.sandbox import spawn
from crewbridge.system.process import wait_exit
from crewbridge.toolkit.functions import tool
from crewbridge.toolkit.registry import ToolContext, ToolFailure

DRAIN_WAIT = 0.25  # after the group is ended, how long to wait for output still in the pipe

RUN_SCHEMA = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "minLength": 1},
        "timeout": {"type": "number", "exclusiveMinimum": 0, "description": "seconds (capped by crew)"},
    },
    "required": ["command"],
    "additionalProperties": False,
}


@tool(schema=RUN_SCHEMA, read_only=False)
def run_command(ctx: ToolContext, command: str, timeout: float | None = None) -> dict[str, Any]:
    """Run a /bin/sh command in the working directory; returns output and exit code.

    stdout and stderr come back merged; stdin is empty. When the command ends (or times out),
    its whole process group is ended too, background jobs included. Inside crew's sandbox (when
    the run has one) it may write only the working directory and its private /tmp, and has no
    network unless the agent's `sandbox_network` is true (then the hosts crew.yaml allows).
    """
    limit = min(timeout or ctx.timeout, ctx.timeout)
    capture = _Capture(ctx.max_output)
    try:
        proc, launch = spawn(
            ["/bin/sh", "-c", command],
            sandbox=ctx.sandbox,
            env=None,
            cwd=ctx.workdir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
    except OSError as exc:
        raise ToolFailure(f"cannot start /bin/sh in {ctx.workdir}: {exc.strerror or exc}") from None
    ctx.groups.add(proc.pid, launch)
    reader = threading.Thread(target=capture.drain, args=(proc.stdout,), daemon=True, name="run_command-output")
    reader.start()
    try:
        code = proc.returncode if wait_exit(proc, limit) else None
    finally:  # whatever happened, nothing the command started outlives the call
        _end_group(proc.pid)
        proc.wait()
        launch.ended()
        ctx.groups.discard(proc.pid)
        reader.join(DRAIN_WAIT)  # a process that left the group may hold the pipe open: no waiting
    output = capture.text()
    ctx.truncated = capture.cut > 0
    if code is None:
        raise ToolFailure(
            f"command timed out after {limit:g}s and was killed with its process group; output until then:\n{output}"
        )
    return {"exit_code": code, "output": output}


def _end_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is already empty
        os.killpg(pgid, signal.SIGKILL)


class _Capture:
    """Output kept within `limit` bytes: the start and the end, with a marker for the middle."""

    def __init__(self, limit: int) -> None:
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.cut = 0  # bytes dropped from the middle

    def drain(self, pipe: IO[bytes]) -> None:
        with pipe:
            while chunk := os.read(pipe.fileno(), 65536):
                room = self.half - len(self.head)
                self.head += chunk[:room]
                self.tail += chunk[room:]
                if len(self.tail) > self.half:
                    self.cut += len(self.tail) - self.half
                    del self.tail[: -self.half]

    def text(self) -> str:
        if not self.cut:  # decoded as one, so a character split between head and tail stays whole
            return (self.head + self.tail).decode("utf-8", errors="replace")
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        return f"{head}\n[… truncated: {self.cut} bytes not shown …]\n{tail}"
