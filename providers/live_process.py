"""A long-lived CLI that reads JSON lines on stdin and writes JSON lines on stdout, driven through
Child: send a line, read lines as they come, every read bounded by a deadline. The process runs in its own
process group, ended as a whole on close, on errors and on timeouts."""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.providers.base import Provider, Turn, parse_object

from crewbridge.errors import CrewError, ProviderError
from crewbridge.events import Notice, Usage
from crewbridge.process import Child
from crewbridge.sandbox import Sandbox

if TYPE_CHECKING:
    from crewbridge.native import Channel

CONTROL_TIMEOUT = 30.0  # seconds a live CLI gets to answer a control message between turns


def control_deadline() -> float:
    return time.monotonic() + CONTROL_TIMEOUT


class LiveProcess:
    """One running CLI process for a whole conversation."""

    def __init__(
        self, argv: list[str], *, env: dict[str, str], cwd: Path, install_hint: str = "", sandbox: Sandbox | None = None
    ) -> None:
        self.name = os.path.basename(argv[0])
        self.child = Child(argv, env=env, cwd=cwd, keep_stdin=True, install_hint=install_hint, sandbox=sandbox)

    @property
    def pid(self) -> int:
        return self.child.proc.pid

    def write(self, obj: dict[str, Any]) -> None:
        self.child.send_line(json.dumps(obj))

    def read(self, deadline: float | None) -> dict[str, Any] | Notice:
        """The next JSON object the CLI writes (a Notice for a line that is not one). Raises
        CrewTimeout, after ending the process group, when `deadline` passes; ProviderError when
        the CLI exits."""
        while True:
            # Child's reader splits each chunk into lines once (pexpect's expect, used before, copied
            # the rest of its buffer at each line: a 40 MB stream of short lines took 5 times as long).
            line = self.child.read_line(deadline)
            if line is None:
                raise ProviderError(self._exit_message())
            obj = parse_object(line)
            if obj is not None:
                return obj

    def read_until(self, done: Callable[[dict[str, Any]], bool], deadline: float | None) -> dict[str, Any]:
        """Read (and set aside) everything up to the first object for which `done` is true."""
        while True:
            obj = self.read(deadline)
            if isinstance(obj, dict) and done(obj):
                return obj

    def _exit_message(self) -> str:
        code = self.child.wait()
        detail = self.child.stderr.strip().splitlines()[-1:] or ["no message on stderr"]
        return f"{self.name} exited with status {code}: {detail[0]}"

    def close(self) -> None:
        """End the whole process group (SIGTERM, then SIGKILL if it lingers)."""
        self.child.kill()


class LiveConversation:
    """Base of a conversation held in one long-lived CLI process (`argv`), started by start() or the
    first message, and never after close() — which may come from another thread (Ctrl-C)."""

    native_tools = False  # offers crew's tools natively when the turn asks (Turn.native)

    def __init__(
        self, provider: Provider, base: Turn, argv: list[str], *, cwd: Path, env: dict[str, str] | None = None
    ) -> None:
        self.provider = provider
        self.base = base
        self.argv = argv
        self.cwd = cwd
        self.env = {**os.environ, **provider.env(), **(env or {})}
        self.session_id: str | None = None
        self.reported: Usage | None = None  # live CLIs report each reply's usage, not totals
        self.late: list[Usage] = []  # usage read while finishing a reply the loop stopped reading
        self.process: LiveProcess | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._handed = False  # _launch() gave the process out (and its caller set it up)
        self.channel: Channel | None = None

    def serve(self, channel: Channel) -> bool:
        self.channel = channel
        return self.base.native and self.native_tools

    def start(self) -> None:
        """Start the CLI now: it boots while crew builds the first message, which it waits for."""
        with self._lock:
            if self._closed or self.process is not None:
                return
            try:
                self.process = self._new_process()
            except CrewError:
                pass  # not installed: send() tries again and reports it

    def _launch(self) -> tuple[LiveProcess, bool]:
        """The process, and whether this is the first time it is given out: the caller sets it up
        then (CLINotFound when the CLI is not installed)."""
        with self._lock:
            if self._closed:
                raise ProviderError(f"{self.provider.name}: the conversation was already closed")
            if self.process is None:
                self.process = self._new_process()
            first, self._handed = not self._handed, True
            return self.process, first

    def _new_process(self) -> LiveProcess:
        return LiveProcess(
            self.argv, env=self.env, cwd=self.cwd, install_hint=self.provider.install_hint, sandbox=self.base.sandbox
        )

    def late_usage(self) -> list[Usage]:
        late, self.late = self.late, []
        return late

    def close(self) -> None:
        with self._lock:
            self._closed = True
        if self.process is not None:
            self.process.close()


class RpcConversation(LiveConversation):
    """A live conversation with a CLI that speaks JSON-RPC 2.0 on stdio (codex app-server, gemini --acp)."""

    def __init__(
        self, provider: Provider, base: Turn, argv: list[str], *, cwd: Path, env: dict[str, str] | None = None
    ) -> None:
        super().__init__(provider, base, argv, cwd=cwd, env=env)
        self._ids = itertools.count(1)

    def _request(self, method: str, params: dict[str, Any]) -> int:
        """Send a request; its id."""
        assert self.process is not None
        request_id = next(self._ids)
        self.process.write({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    def _call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A request and its result; what arrives meanwhile is set aside (nothing is running)."""
        request_id = self._request(method, params)
        assert self.process is not None
        reply = self.process.read_until(
            lambda obj: obj.get("id") == request_id and "method" not in obj, control_deadline()
        )
        if "error" in reply:
            raise ProviderError(f"{self.provider.name} refused {method}: {reply['error'].get('message')}")
        return reply.get("result") or {}
