"""crewbridge: give CLI language models tools they don't have, by prompt interception.

The Python API, imported on first use so that `import crewbridge` (and `crew --version`) stay fast:

    from crewbridge import Bridge

    bridge = Bridge()                      # crew.yaml found as the `crew` command finds it

    @bridge.tool(read_only=True)
    def word_count(path: str) -> int:
        '''How many words a file holds.

        Args:
            path: The file, relative to the working directory.
        '''
        return len(open(path).read().split())

    print(bridge.ask("@claude how many words are in notes.txt?").answer)
"""

from __future__ import annotations

from crewbridge.version import VERSION_MESSAGE, __version__

TYPE_CHECKING = False  # typing itself is ~5 ms to import; type checkers read this name as True

_EXPORTS = {
    "Bridge": "crewbridge.bridge",
    "Chat": "crewbridge.engine.dialogue",
    "RunOptions": "crewbridge.base.options",
    "Outcome": "crewbridge.api",
    "EventStream": "crewbridge.api",
    "Stop": "crewbridge.base.stop",
    "Event": "crewbridge.record.events",
    "RunResult": "crewbridge.engine.loop",
    "CallRecord": "crewbridge.engine.loop",
    "tool": "crewbridge.toolkit.functions",
    "Tool": "crewbridge.toolkit.registry",
    "ToolContext": "crewbridge.toolkit.registry",
    "ToolFailure": "crewbridge.toolkit.registry",
    "ToolRegistry": "crewbridge.toolkit.registry",
    "ToolResult": "crewbridge.toolkit.registry",
    "function_tool": "crewbridge.toolkit.functions",
    "Config": "crewbridge.config",
    "load_config": "crewbridge.config",
    "Provider": "crewbridge.providers.base",
    "Turn": "crewbridge.providers.base",
    "CrewError": "crewbridge.errors",
    "ConfigError": "crewbridge.errors",
    "UsageError": "crewbridge.errors",
    "ProviderError": "crewbridge.errors",
}
__all__ = [  # _EXPORTS' names, spelled out for tools that read __all__ (a test holds the two equal)
    "VERSION_MESSAGE",
    "Bridge",
    "CallRecord",
    "Chat",
    "Config",
    "ConfigError",
    "CrewError",
    "Event",
    "EventStream",
    "Outcome",
    "Provider",
    "ProviderError",
    "RunOptions",
    "RunResult",
    "Stop",
    "Tool",
    "ToolContext",
    "ToolFailure",
    "ToolRegistry",
    "ToolResult",
    "Turn",
    "UsageError",
    "__version__",
    "function_tool",
    "load_config",
    "tool",
]

if TYPE_CHECKING:
    from typing import Any

    from crewbridge.api import EventStream, Outcome
    from crewbridge.base.options import RunOptions
    from crewbridge.base.stop import Stop
    from crewbridge.bridge import Bridge
    from crewbridge.config import Config, load_config
    from crewbridge.engine.dialogue import Chat
    from crewbridge.engine.loop import CallRecord, RunResult
    from crewbridge.errors import ConfigError, CrewError, ProviderError, UsageError
    from crewbridge.providers.base import Provider, Turn
    from crewbridge.record.events import Event
    from crewbridge.toolkit.functions import function_tool, tool
    from crewbridge.toolkit.registry import Tool, ToolContext, ToolFailure, ToolRegistry, ToolResult


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'crewbridge' has no attribute '{name}'")
    value = getattr(__import__(module, fromlist=(name,)), name)  # not importlib: crew --version skips it
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
