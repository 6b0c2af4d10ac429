"""before_tool_call / after_tool_call hooks: shell commands fed JSON on stdin, or Python callables.

A hook sees `{"event", "tool", "agent", "input"[, "result"][, "workdir"]}`. It leaves the call alone
(exit 0, no output / returns None), replaces the input or the result (exit 0 with a JSON object on
stdout / returns a dict), or blocks it (exit 2 with the reason on stdout or stderr / raises Block).
A hook that fails in any other way (another exit status, a crash, output that is not JSON, no answer
within its timeout) is reported and blocks the call: a broken guard never lets a call through.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crewbridge.base import jsonio
from crewbridge.base.globs import matches
from crewbridge.errors import CrewError, CrewTimeout
from crewbridge.system.pinned import Pins, ScriptChanged
from crewbridge.system.process import error_line
from crewbridge.system.trust import shell_words
from crewbridge.toolkit.custom_tools import run_argv
from crewbridge.toolkit.registry import Tool, ToolResult

BEFORE = "before_tool_call"
AFTER = "after_tool_call"
BLOCK_EXIT = 2
DEFAULT_HOOK_TIMEOUT = 30.0
HOOK_OUTPUT_LIMIT = 8 << 20  # characters of a hook's stdout (a replacement input can be a whole file)

log = logging.getLogger("crewbridge.toolkit.hooks")


class Block(Exception):
    """Raised by a Python hook to block the call; the message is the reason the model is given."""


class HookFailed(Exception):
    """The hook itself went wrong (its message says how); the call is blocked."""


@dataclass
class HookSpec:
    """One configured hook: exactly one of `command` (argv, no shell), `shell` (run by /bin/sh),
    `python` ("module:function" or "file.py:function") or `func` (a callable, from the Python API)."""

    event: str
    command: list[str] | None = None
    shell: str | None = None
    python: str | None = None
    func: Callable[[dict[str, Any]], Any] | None = None
    tools: list[str] = field(default_factory=list)  # tool-name globs; empty = every tool
    agents: list[str] = field(default_factory=list)  # agent-id globs; empty = every agent
    timeout: float = DEFAULT_HOOK_TIMEOUT
    base: Path | None = None  # the config file's directory: hooks run there, relative paths start there
    _loaded: Callable[[dict[str, Any]], Any] | None = field(default=None, init=False, repr=False)
    pins: Pins = field(default_factory=Pins, init=False, repr=False)  # the scripts it names, as loaded

    def __post_init__(self) -> None:
        given = [k for k in ("command", "shell", "python", "func") if getattr(self, k) is not None]
        if len(given) != 1:
            raise CrewError(
                f"a {self.event} hook needs exactly one of command, shell, python (got {', '.join(given) or 'none'})"
            )
        if self.base is not None:  # from a crew.yaml: the scripts it names run as they are now
            self.pins = Pins.read(self._words(), self.base)

    def _words(self) -> list[str]:
        """The words that may name a script: a command's, a shell line's, a Python hook's file."""
        if self.command is not None:
            return self.command
        if self.shell is not None:
            return shell_words(self.shell)
        where = (self.python or "").rpartition(":")[0]
        return [where] if where.endswith(".py") else []

    @property
    def label(self) -> str:
        if self.func is not None:
            return getattr(self.func, "__qualname__", repr(self.func))
        text = " ".join(self.command) if self.command is not None else self.shell or self.python or ""
        return text if len(text) <= 60 else text[:57] + "..."

    def applies(self, tool: str, agent: str) -> bool:
        return (not self.tools or matches(tool, self.tools)) and (not self.agents or matches(agent, self.agents))

    def run(self, payload: dict[str, Any], workdir: Path | None, passed: Sequence[str] = ()) -> Any:
        """The hook's replacement (a dict) or None. Raises Block or HookFailed. A hook's process
        gets of the secret-named variables only those `passed` (crewbridge.system.childenv)."""
        if self.command is not None or self.shell is not None:
            return self._run_process(payload, workdir, passed)
        return self._run_python(payload)

    def _run_process(self, payload: dict[str, Any], workdir: Path | None, passed: Sequence[str]) -> Any:
        try:
            if self.command is not None:
                argv = [self.pins.path(word) for word in self.command]  # crew's copies of the scripts
            else:
                self.pins.check()
                argv = ["/bin/sh", "-c", self.shell or ""]
        except ScriptChanged as exc:
            raise HookFailed(str(exc)) from None
        if self.base is not None and "/" in argv[0] and not os.path.isabs(argv[0]):
            argv[0] = str(self.base / argv[0])
        told = {
            "CREW_HOOK_EVENT": self.event,
            "CREW_TOOL": payload["tool"],
            "CREW_AGENT": payload["agent"],
            "CREW_WORKDIR": str(workdir or ""),
        }
        try:
            done = run_argv(
                argv,
                cwd=self.base or workdir,
                timeout=self.timeout,
                env={**os.environ, **told},
                passed=[*told, *passed],
                stdin=json.dumps(payload, ensure_ascii=False, default=str),
                limit=HOOK_OUTPUT_LIMIT,
            )
        except CrewTimeout:
            raise HookFailed(f"gave no answer within {self.timeout:g}s and was stopped") from None
        except (CrewError, OSError) as exc:
            raise HookFailed(f"could not start: {getattr(exc, 'strerror', None) or exc}") from None
        if done.truncated:
            raise HookFailed(f"printed more than {HOOK_OUTPUT_LIMIT} characters")
        if done.code == BLOCK_EXIT:
            raise Block(done.stdout.strip() or done.stderr.strip() or "no reason given")
        if done.code != 0:
            raise HookFailed(f"exited with status {done.code}: {error_line(done.stderr)}")
        if not done.stdout.strip():
            return None
        try:
            return jsonio.loads(done.stdout)
        except jsonio.TooDeep as exc:
            raise HookFailed(f"printed {exc}") from None
        except ValueError:
            raise HookFailed(
                "printed something that is not JSON on stdout (print nothing to leave the "
                "call unchanged, a JSON object to replace it; logs go to stderr)"
            ) from None

    def _run_python(self, payload: dict[str, Any]) -> Any:
        if self._loaded is None:
            self._loaded = self.func or _load_callable(self.python or "", self.base, self.pins)
        func = self._loaded
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["value"] = func(payload)
            except BaseException as exc:  # everything a hook raises is its answer or its failure
                box["error"] = exc

        worker = threading.Thread(target=target, name=f"hook-{self.event}", daemon=True)
        worker.start()
        worker.join(self.timeout)
        if worker.is_alive():
            raise HookFailed(f"gave no answer within {self.timeout:g}s (the thread is left behind)")
        error = box.get("error")
        if isinstance(error, Block):
            raise error
        if error is not None:
            raise HookFailed(f"raised {type(error).__name__}: {error}")
        return box.get("value")


class Hooks:
    """The hooks in force for a run, by event."""

    def __init__(
        self,
        specs: dict[str, list[Any]] | None = None,
        *,
        workdir: Path | None = None,
        report: Callable[[str], None] | None = None,
        passed: Sequence[str] = (),
    ) -> None:
        """`passed`: the secret-named variables the hooks' processes get (crew.yaml's env.pass)."""
        self.specs = {event: [_spec(event, s) for s in items] for event, items in (specs or {}).items()}
        self.workdir = workdir
        self.passed = passed
        self.report = report or log.warning

    def before(
        self, name: str, data: dict[str, Any], agent: str, tool: Tool | None = None
    ) -> tuple[dict[str, Any], str | None]:
        """The (possibly changed) input, and a reason when a hook blocks the call. A changed input
        is checked against `tool`'s schema; one it does not accept blocks the call."""
        for spec in self._matching(BEFORE, name, agent):
            payload = {"event": BEFORE, "tool": name, "agent": agent, "input": data}
            try:
                new = self._ask(spec, payload)
            except Block as exc:
                return data, f"blocked by a {BEFORE} hook: {exc}"
            except HookFailed as exc:
                return data, self._failed(spec, name, str(exc), "the call was not run")
            if new is None:
                continue
            if not isinstance(new, dict):
                problem: str | None = "it is not a JSON object"
            else:
                problem = tool.check(new) if tool is not None else None
            if problem:
                return data, self._failed(
                    spec,
                    name,
                    f"changed the input into one the tool does not accept: {problem}",
                    "the call was not run",
                )
            data = new
        return data, None

    def after(self, name: str, data: dict[str, Any], result: ToolResult, agent: str) -> ToolResult:
        """The result, possibly changed or withheld by hooks."""
        for spec in self._matching(AFTER, name, agent):
            payload = {"event": AFTER, "tool": name, "agent": agent, "input": data, "result": result.to_dict()}
            try:
                new = self._ask(spec, payload)
            except Block as exc:
                return _withheld(result, f"the tool ran, but a {AFTER} hook withheld its result: {exc}")
            except HookFailed as exc:
                return _withheld(result, self._failed(spec, name, str(exc), "the tool ran but its result is withheld"))
            if new is None:
                continue
            if not isinstance(new, dict) or not isinstance(new.get("success"), bool):
                return _withheld(
                    result,
                    self._failed(
                        spec,
                        name,
                        "replaced the result with something that is not a result object "
                        '({"success": true|false, "data": …, "error": …})',
                        "the tool ran but its result is withheld",
                    ),
                )
            result = ToolResult(
                new["success"],
                data=new.get("data"),
                error=new.get("error") or (None if new["success"] else "failed (set by a hook)"),
                tool=result.tool,
                duration_ms=result.duration_ms,
                truncated=result.truncated,
                notices=result.notices,
                change=result.change,  # the file changed, whatever the hook says of it
            )
        return result

    def _matching(self, event: str, name: str, agent: str) -> list[HookSpec]:
        return [spec for spec in self.specs.get(event, []) if spec.applies(name, agent)]

    def _ask(self, spec: HookSpec, payload: dict[str, Any]) -> Any:
        if self.workdir is not None:
            payload["workdir"] = str(self.workdir)
        return spec.run(payload, self.workdir, self.passed)

    def _failed(self, spec: HookSpec, tool: str, what: str, consequence: str) -> str:
        message = f"{spec.event} hook '{spec.label}' failed on {tool}: {what}; {consequence}"
        self.report(message)
        return message


def _spec(event: str, item: Any) -> HookSpec:
    if isinstance(item, HookSpec):
        return item
    if callable(item):
        return HookSpec(event, func=item)
    raise CrewError(f"a {event} hook must be a HookSpec or a callable, not {type(item).__name__}")


def _withheld(result: ToolResult, error: str) -> ToolResult:
    return ToolResult(False, error=error, tool=result.tool, duration_ms=result.duration_ms, notices=result.notices)


def _load_callable(target: str, base: Path | None, pins: Pins) -> Callable[[dict[str, Any]], Any]:
    """`module:function`, or `path/to/file.py:function` (relative to `base`; from crew's copy of it
    as it was loaded, `pins`). HookFailed if absent."""
    where, _, name = target.rpartition(":")
    try:
        if where.endswith(".py"):
            path = Path(where) if os.path.isabs(where) or base is None else base / where
            path = Path(pins.path(where)) if where in pins.pins else path
            spec = importlib.util.spec_from_file_location(f"crew_hook_{path.stem}", path)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load {path}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
        func = getattr(module, name)
    except ScriptChanged as exc:
        raise HookFailed(str(exc)) from None
    except Exception as exc:
        raise HookFailed(f"cannot load {target}: {type(exc).__name__}: {exc}") from None
    if not callable(func):
        raise HookFailed(f"{target} is not callable")
    return func
