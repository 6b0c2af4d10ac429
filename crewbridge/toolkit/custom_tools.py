"""Tools beyond the built-ins: commands declared in crew.yaml, and Python tools from installed plugins.

A command tool is an argv template run without a shell: each `{name}` placeholder is filled with the
argument of that name as one argv item, so no argument can inject shell syntax.
"""

from __future__ import annotations

import json
import string
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.base.plugins import entry_points
from crewbridge.errors import ConfigError, CrewError, CrewTimeout
from crewbridge.system.pinned import Pins
from crewbridge.system.process import Child
from crewbridge.toolkit.registry import MAX_OUTPUT_CHARS, Tool, ToolContext, ToolFailure, as_tool

if TYPE_CHECKING:
    from crewbridge.sandbox import Sandbox

PLUGIN_GROUP = "crewbridge.tools"
STDERR_SHOWN = 2000  # characters of stderr put in a failing tool's error


@dataclass
class Finished:
    """A command that ran to its end."""

    code: int
    stdout: str
    stderr: str
    truncated: bool = False


def run_argv(
    argv: list[str],
    *,
    cwd: Path | None,
    timeout: float,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    limit: int = MAX_OUTPUT_CHARS,
    started: Callable[[Child], None] | None = None,
    sandbox: Sandbox | None = None,
    passed: Collection[str] = (),
) -> Finished:
    """Run `argv` (no shell) in its own process group, stdout kept up to `limit` characters.
    The group is ended when it finishes or times out (CrewTimeout); OSError when it cannot start.
    `started` is told the child at once (so that another thread can end it early). Of the
    secret-named variables in `env` it gets those `passed` (crewbridge.system.childenv)."""
    deadline = time.monotonic() + timeout
    child = Child(argv, cwd=cwd, env=env, stdin=stdin, sandbox=sandbox, passed=passed)
    if started is not None:
        started(child)
    kept: list[str] = []
    size = 0
    try:
        for line in child.lines(deadline):
            if size + len(line) < limit:
                kept.append(line)
            size += len(line) + 1
        code = child.wait(max(deadline - time.monotonic(), 0.01))
        if code < 0 and time.monotonic() >= deadline:
            raise CrewTimeout(f"'{argv[0]}' did not finish in {timeout:g}s; it was stopped")
        return Finished(code, "\n".join(kept), child.stderr.strip(), truncated=size > limit)
    finally:
        child.close()  # also ends anything it left running in its group


@dataclass
class CommandTool:
    """A tool from crew.yaml `tools:`: an argv template and a JSON Schema for its arguments."""

    name: str
    command: list[str]
    schema: dict[str, Any]
    description: str = ""
    read_only: bool = False
    timeout: float | None = None
    needs_approval: bool = False
    base: Path | None = None  # relative program paths (`./bin/x`) start here: the config's directory
    pins: Pins = field(default_factory=Pins, init=False, repr=False)  # the scripts it names, as loaded

    def __post_init__(self) -> None:
        known = set(self.schema.get("properties", {}))
        try:
            names = [name for item in self.command for name in placeholders(item)]
        except ValueError as exc:
            raise ConfigError(f"tool '{self.name}': {exc}") from None
        for name in names:
            if name not in known:
                raise ConfigError(
                    f"tool '{self.name}': placeholder {{{name}}} in command is not a "
                    f"property of its schema ({', '.join(sorted(known)) or 'none'}); "
                    "add it to schema.properties or fix the name"
                )
        if self.base is not None:  # from a crew.yaml: the scripts it names run as they are now
            self.pins = Pins.read(self.command, self.base)

    def tool(self) -> Tool:
        return Tool(
            name=self.name,
            description=self.description or f"Runs `{' '.join(self.command)}`.",
            input_schema=self.schema,
            func=self._run,
            read_only=self.read_only,
            timeout=self.timeout,
            needs_approval=self.needs_approval,
        )

    def argv(self, args: dict[str, Any], *, pinned: bool = False) -> list[str]:
        """The command with each placeholder filled; an item naming an absent argument is left out,
        an item that is exactly `{name}` with a list argument becomes one item per element. With
        `pinned`, a script it names is crew's copy as loaded (ScriptChanged when it changed since)."""
        out: list[str] = []
        for item in self.command:
            fields = placeholders(item)
            if not fields:
                text = item.format_map({})  # `{{` → `{`; a pinned word holds no brace
                out.append(self.pins.path(text) if pinned else text)
            elif any(args.get(f) is None for f in fields):
                continue
            elif len(fields) == 1 and item == f"{{{fields[0]}}}" and isinstance(args[fields[0]], list):
                out += [_text(v) for v in args[fields[0]]]
            else:
                out.append(item.format_map({f: _text(args[f]) for f in fields}))
        program = out[0] if out else ""
        if "/" in program and not Path(program).is_absolute() and self.base is not None:
            out[0] = str(self.base / program)
        return out

    def _run(self, ctx: ToolContext, **args: Any) -> dict[str, Any]:
        try:
            argv = self.argv(args, pinned=True)
        except CrewError as exc:  # a script it names changed since crew.yaml was loaded
            raise ToolFailure(f"'{self.name}' was not run: {exc}") from None
        started: list[Child] = []

        def track(child: Child) -> None:
            started.append(child)
            ctx.groups.add(child.pgid)

        try:
            done = run_argv(
                argv, cwd=ctx.workdir, timeout=ctx.timeout, limit=ctx.max_output, started=track, sandbox=ctx.sandbox
            )
        except CrewTimeout:
            raise ToolFailure(f"'{self.name}' timed out after {ctx.timeout:g}s and was stopped") from None
        except CrewError as exc:
            raise ToolFailure(str(exc)) from None
        except OSError as exc:
            raise ToolFailure(f"cannot run '{argv[0]}': {exc.strerror or exc}") from None
        finally:
            for child in started:  # run_argv ended its group
                ctx.groups.discard(child.pgid)
        ctx.truncated = done.truncated
        if done.code != 0:
            detail = done.stderr[-STDERR_SHOWN:] or done.stdout[-STDERR_SHOWN:] or "no output"
            raise ToolFailure(f"'{self.name}' exited with status {done.code}: {detail}")
        result: dict[str, Any] = {"exit_code": 0, "output": done.stdout}
        if done.stderr:
            result["stderr"] = done.stderr[-STDERR_SHOWN:]
        return result


def placeholders(item: str) -> list[str]:
    """The `{name}` fields of one argv item (`{{` is a literal brace). ValueError for anything but
    plain names: no attribute access, indexing, conversions or format specs."""
    fields = []
    for _, name, spec, conversion in string.Formatter().parse(item):
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            raise ValueError(
                f"placeholder {{{name}{'!' + conversion if conversion else ''}"
                f"{':' + spec if spec else ''}}} must be a plain {{name}}"
            )
        fields.append(name)
    return fields


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)  # numbers, true/false, objects as JSON


def plugin_tools(group: str = PLUGIN_GROUP) -> list[Tool]:
    """Tools installed packages declare under the entry point group `crewbridge.tools`. Each entry
    point names a @tool function, a Tool, or a list of them; it is imported only when called for."""
    out: list[Tool] = []
    for point in entry_points(group=group):
        try:
            loaded = point.load()
            items = loaded if isinstance(loaded, (list, tuple)) else [loaded]
            out += [as_tool(item) for item in items]
        except Exception as exc:  # a broken plugin is named, not a traceback
            raise ConfigError(
                f"plugin tool '{point.name}' ({point.value}) cannot be loaded: "
                f"{type(exc).__name__}: {exc}; fix or uninstall the package providing it"
            ) from None
    return out
