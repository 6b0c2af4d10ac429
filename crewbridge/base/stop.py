"""Stopping work from another thread: a run (`Bridge.run(stop=…)`), an MCP request its client
cancels, a native tool call the CLI cancels. (A plain class with no imports but threading: the
MCP server makes one per request, and loads this before its first answer.)"""

from __future__ import annotations

import threading

TYPE_CHECKING = False  # typing itself is ~5 ms to import; type checkers read this name as True
if TYPE_CHECKING:
    from collections.abc import Callable


class Stop:
    """Set once, from any thread: `set()` calls every callback given to `on_set` (ending a run's
    CLIs and the processes its tools started), at once and once. A callback that raises does not
    keep the others from running: the first error is raised once every callback has run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False
        self._callbacks: list[Callable[[], None]] = []

    def set(self) -> None:
        with self._lock:
            self._set = True
            callbacks, self._callbacks = self._callbacks, []
        failed: BaseException | None = None
        for callback in callbacks:
            try:
                callback()
            except BaseException as exc:  # the other agents' CLIs must still be ended
                failed = failed or exc
        if failed is not None:
            raise failed

    def is_set(self) -> bool:
        return self._set

    def on_set(self, callback: Callable[[], None]) -> None:
        """Call `callback` when the stop is set (now, if it is already)."""
        with self._lock:
            if not self._set:
                self._callbacks.append(callback)
                return
        callback()
