"""Tool registry: declaration, prefixed names, validation, dispatch, and the result envelope."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from crewbridge.base.globs import DEFAULT_PREFIX as DEFAULT_PREFIX
from crewbridge.base.validation import Validator, compile_schema, first_error
from crewbridge.errors import CrewError, ToolNotFound

if TYPE_CHECKING:  # for start-up speed: skills are read once the CLIs have started
    from crewbridge.base.skills import Skill
    from crewbridge.base.stop import Stop
    from crewbridge.sandbox import Sandbox
    from crewbridge.system.process import Groups

DEFAULT_TOOL_TIMEOUT = 60.0
MAX_OUTPUT_CHARS = 20_000
CREW_MODULES = ("crewbridge.tools.", "crewbridge.engine.asking")  # crew's own tools: the built-ins, the agents' ask
TIMEOUT_GRACE = 0.5  # a tool that enforces ctx.timeout itself (run_command) gets this long to clean up


class ToolFailure(Exception):
    """Raised by a tool for an expected failure; its message goes back to the model as the error."""


def _groups() -> Groups:
    # For start-up speed: crewbridge.system.process (subprocess, logging) loads with the first tool context,
    # not with every command that reads crew.yaml (crew mcp answers initialize without it).
    from crewbridge.system.process import Groups

    return Groups()


class Files(Protocol):
    """Where crew's file tools read a file's text instead of the disk: an editor's buffers (crew
    acp). Paths are absolute and real, resolved beneath the working directory first and watched
    while read (crewbridge.system.beneath.by_name); crew's path rules, policy and mode apply as they do on
    the disk. Writes are always crew's own, on the disk."""

    def read_text(self, path: str) -> str: ...


@dataclass(frozen=True)
class FileChange:
    """What a write or edit did to a file, for a face that shows it (an editor's diff); never sent
    to the model. `old`: None when the file was created."""

    path: str  # absolute
    old: str | None
    new: str


@dataclass
class ToolContext:
    """What a running tool may know: where it works and how much it may return."""

    workdir: Path
    timeout: float = DEFAULT_TOOL_TIMEOUT
    max_output: int = MAX_OUTPUT_CHARS
    registry: ToolRegistry | None = None  # the one the call came through (for tools like `help`)
    truncated: bool = False  # a tool sets this when it cut its output
    deadline: float | None = None  # time.monotonic() when the run ends: no tool runs past it
    groups: Groups = field(default_factory=_groups)  # the process groups the run's tools started
    skills: dict[str, Skill] = field(default_factory=dict)  # the agent's skills, by name (crew:skill)
    sandbox: Sandbox | None = None  # where the tools' commands run (run_command, command tools)
    files: Files | None = None  # where the file tools read and write text (None: the disk)
    roots: tuple[
        Path, ...
    ] = ()  # folders used as the working directory is, real paths (an editor's additional directories)
    change: FileChange | None = None  # set by a write or edit tool for its result (one call's context)

    def stoppable(self, stop: Stop) -> ToolContext:
        """This context for one call that `stop` may cancel (MCP's notifications/cancelled): the
        processes it starts are ended when the stop is set, or with the run's."""
        from crewbridge.system.process import Groups  # loaded already: this context's groups are one

        groups = Groups(self.groups)
        stop.on_set(groups.end)
        return replace(self, groups=groups)

    @property
    def read_roots(self) -> list[Path]:
        """Folders outside the working directory that read-only tools may read: the skills'."""
        return [skill.folder for skill in self.skills.values()]

    def cut(self, text: str, limit: int | None = None) -> str:
        """Truncate `text` to the output limit with a marker saying how much was cut."""
        limit = self.max_output if limit is None else limit
        if len(text) <= limit:
            return text
        self.truncated = True
        return text[:limit] + f"\n[… truncated: {len(text) - limit} more characters not shown]"


@dataclass
class ToolResult:
    """The result envelope every tool call produces, success or not."""

    success: bool
    data: Any = None
    error: str | None = None
    tool: str = ""
    duration_ms: float = 0.0
    truncated: bool = False
    notices: tuple[str, ...] = ()  # what crew did besides (crewbridge.system.gitguard's disarming)
    change: FileChange | None = None  # what a write or edit did (not in the envelope: the model has it)

    def to_dict(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {
            "tool": self.tool,
            "duration_ms": round(self.duration_ms, 3),
            "truncated": self.truncated,
        }
        if self.notices:
            metadata["notices"] = list(self.notices)
        return {"success": self.success, "data": self.data, "error": self.error, "metadata": metadata}


@dataclass
class Tool:
    """A registered tool. `func(ctx, **input)` returns JSON-able data or raises ToolFailure."""

    name: str
    description: str
    input_schema: dict[str, Any]
    func: Callable[..., Any]
    read_only: bool = False
    output_schema: dict[str, Any] | None = None
    timeout: float | None = None
    needs_approval: bool = False
    ends_run: bool = False  # a successful text call ends the agent's run, its reply so far the answer (verdict)
    _validator: Validator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # The input check is compiled now (crewbridge.base.validation: plain predicates for the usual
        # schemas, microseconds). crew's own tools' schemas are held valid by their tests, so even
        # one the predicates do not take never imports jsonschema before its first call; others
        # are checked now.
        crews = (getattr(self.func, "__module__", None) or "").startswith(CREW_MODULES)
        self._validator = compile_schema(self.input_schema, f"tool '{self.name}' input_schema", trusted=crews)
        if self.output_schema is not None and not crews:
            compile_schema(self.output_schema, f"tool '{self.name}' output_schema")

    @property
    def summary(self) -> str:
        return self.description.strip().splitlines()[0] if self.description.strip() else ""

    def check(self, data: Any) -> str | None:
        """Validate an input object; the error message, or None."""
        if not isinstance(data, dict):
            return f"at $: input must be an object, got {type(data).__name__}"
        return first_error(self._validator, data)


def as_tool(obj: Any) -> Tool:
    """A Tool from a Tool or a function decorated with @tool."""
    if isinstance(obj, Tool):
        return obj
    spec = getattr(obj, "__crew_tool__", None)
    if spec is None:
        raise CrewError(f"{obj!r} is not a tool; decorate it with @crewbridge.tool(...)")
    return spec


class ToolRegistry:
    """Named tools, exposed to the model as `<prefix>:<name>`."""

    def __init__(self, prefix: str = DEFAULT_PREFIX) -> None:
        self.prefix = prefix
        self._tools: dict[str, Tool] = {}

    def register(self, obj: Any, *, replace: bool = False) -> Tool:
        spec = as_tool(obj)
        if spec.name in self._tools and not replace:
            raise CrewError(f"tool '{spec.name}' is registered twice; rename one of them")
        self._tools[spec.name] = spec
        return spec

    def register_all(self, objs: Iterable[Any]) -> None:
        for obj in objs:
            self.register(obj)

    def __contains__(self, name: str) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def names(self) -> list[str]:
        return list(self._tools)

    def qualified(self, name: str) -> str:
        return f"{self.prefix}:{name}"

    def resolve(self, qualified: str) -> Tool:
        """The tool a `prefix:name` (or bare `name`) refers to; ToolNotFound suggests the nearest."""
        bare = qualified.split(":", 1)[1] if qualified.startswith(self.prefix + ":") else qualified
        if bare in self._tools:
            return self._tools[bare]
        raise ToolNotFound(self.unknown_message(qualified))

    def unknown_message(self, qualified: str) -> str:
        bare = qualified.rsplit(":", 1)[-1]
        import difflib  # only for a name that is not known: ~1 ms on every start otherwise

        near = difflib.get_close_matches(bare, self._tools, n=1, cutoff=0.5)
        hint = (
            f"did you mean '{self.qualified(near[0])}'?"
            if near
            else "available: " + ", ".join(self.qualified(n) for n in self._tools)
        )
        return f"unknown tool '{qualified}'; {hint}"

    def subset(self, keep: Callable[[Tool], bool]) -> ToolRegistry:
        out = ToolRegistry(self.prefix)
        out._tools = {n: t for n, t in self._tools.items() if keep(t)}
        return out

    def prepare(self) -> None:
        """Get the opening of paths beneath the working directory ready (crewbridge.system.beneath: ctypes
        and openat2), so that a call runs at once when its block closes."""
        from crewbridge.system import beneath

        beneath.ready()

    def call(self, qualified: str, data: Any, ctx: ToolContext) -> ToolResult:
        """Validate and run a tool; always an envelope, never an exception."""
        start = time.perf_counter()
        try:
            spec = self.resolve(qualified)
        except ToolNotFound as exc:
            return ToolResult(False, error=str(exc), tool=qualified)
        problem = spec.check(data)
        if problem:
            return ToolResult(False, error=f"invalid input for {self.qualified(spec.name)} {problem}", tool=spec.name)
        if ctx.registry is None:  # `help` describes the registry the call came through
            ctx = replace(ctx, registry=self)
        timeout = spec.timeout or ctx.timeout
        if ctx.deadline is not None:
            timeout = max(round(min(timeout, ctx.deadline - time.monotonic()), 2), 0.01)
        result = run_with_timeout(spec, data, ctx, timeout)
        result.duration_ms = (time.perf_counter() - start) * 1000
        return result


def run_with_timeout(spec: Tool, data: dict[str, Any], ctx: ToolContext, timeout: float) -> ToolResult:
    """Run `spec.func` in a daemon thread; a tool that overruns is reported and abandoned, not waited
    for (its thread may run on until crew exits, but it holds up neither the run nor the exit)."""
    box: dict[str, Any] = {}
    local = replace(ctx, timeout=timeout, truncated=False, change=None)

    def target() -> None:
        try:
            out = spec.func(local, **data)
            json.dumps(out)  # data that is not JSON is a tool bug, reported like one
            box["data"] = out
        except ToolFailure as exc:
            box["error"] = str(exc)
        except BaseException as exc:  # a tool's bug (even sys.exit) goes back to the model, not the loop
            box["error"] = f"{type(exc).__name__}: {exc}"

    worker = threading.Thread(target=target, name=f"tool-{spec.name}", daemon=True)
    worker.start()
    worker.join(timeout + TIMEOUT_GRACE)
    if worker.is_alive():
        return ToolResult(False, error=f"tool '{spec.name}' timed out after {timeout:g}s", tool=spec.name)
    if "error" in box:
        return ToolResult(False, error=box["error"], tool=spec.name, truncated=local.truncated)
    return ToolResult(True, data=box.get("data"), tool=spec.name, truncated=local.truncated, change=local.change)
