"""The command line's options as click decorators, made from the one options table
(crewbridge.base.flags), and what the commands share: the early start's reading, piped stdin, the
run options."""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from crewbridge.base import flags
from crewbridge.errors import UsageError

if TYPE_CHECKING:
    from crewbridge.base.options import RunOptions
    from crewbridge.config import Config
    from crewbridge.terminal.early import Early


def click_option(flag: flags.Flag) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """click's option for one of crewbridge.base.flags' (the table the early readings read too)."""
    kinds: dict[str, dict[str, Any]] = {
        "flag": {"is_flag": True},
        "int": {"type": click.IntRange(min=int(flag.low), min_open=flag.above)},
        "float": {"type": click.FloatRange(min=flag.low, min_open=flag.above)},
        "choice": {"type": click.Choice(list(flag.choices))},
        "path": {"type": click.Path(dir_okay=False, path_type=Path)},
        "text": {},
    }
    kind = kinds[flag.kind]
    if flag.default is not None:
        kind.update(default=flag.default, show_default=flag.show_default)
    return click.option(
        *flag.names,
        flag.dest,
        help=flag.help,
        metavar=flag.metavar,
        multiple=flag.multiple,
        required=flag.required,
        **kind,
    )


def config_option(func: Callable[..., Any]) -> Callable[..., Any]:
    @click_option(flags.CONFIG)
    @functools.wraps(func)
    def wrapper(*args: Any, config_path: Path | None, **kwargs: Any) -> Any:
        from crewbridge.config import load_config

        early = early_reading()
        if early is not None and early.reading.config_path == config_path:  # it read this file
            return func(*args, config=early.bridge.config, **kwargs)
        return func(*args, config=load_config(config_path, Path.cwd()), **kwargs)

    return wrapper


def early_reading() -> Early | None:
    """crewbridge.terminal.early's reading of this command, its CLIs started (crew query/execute), if any:
    main() gives it to click as the context's obj (not imported here: other commands never load it)."""
    obj = click.get_current_context().obj
    if obj is None:
        return None
    from crewbridge.terminal.early import Early  # loaded already when there is one

    return obj if isinstance(obj, Early) else None


def sandbox_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """--sandbox for a command that takes no RunOptions (mcp): it replaces crew.yaml's top-level
    `sandbox:` (put after config_option)."""

    @click_option(flags.SANDBOX)
    @functools.wraps(func)
    def wrapper(*args: Any, sandbox: str | None, config: Config, **kwargs: Any) -> Any:
        if sandbox is not None:
            config = dataclasses.replace(config, sandbox=sandbox)
        return func(*args, config=config, **kwargs)

    return wrapper


def apply_all(func: Callable[..., Any], decorators: list[Callable[..., Any]]) -> Callable[..., Any]:
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def options_of(table: tuple[flags.Flag, ...]) -> list[Callable[[Callable[..., Any]], Callable[..., Any]]]:
    """click's options for `table`, in its order; --config loads the file (config_option)."""
    return [config_option if flag.dest == "config_path" else click_option(flag) for flag in table]


SANDBOX = click_option(flags.SANDBOX)


def loop_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The options of every command that runs an agent loop (query, execute, chat): crewbridge.base.flags.LOOP."""
    return apply_all(func, options_of(flags.LOOP))


NO_STDIN = click_option(flags.NO_STDIN)


def run_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The options of the commands that run a task (query, execute): crewbridge.base.flags.TASK, then LOOP."""
    return apply_all(func, [click.argument("text", nargs=-1, required=True), *options_of(flags.TASK), loop_options])


def table_options(table: tuple[flags.Flag, ...]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A command's options: those of `table`, in its order."""
    return lambda func: apply_all(func, options_of(table))


def acp_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """crew acp's options: crewbridge.base.flags.ACP (--sandbox stays the sessions' own: each project's
    crew.yaml is read where its session works)."""
    own = tuple(flag for flag in flags.ACP if flag.dest != "config_path")
    return apply_all(func, [*options_of(own), config_option])


def mcp_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """crew mcp's options: crewbridge.base.flags.MCP, its --sandbox read into the configuration."""
    own = tuple(flag for flag in flags.MCP if flag.dest != "sandbox")
    return apply_all(func, [*options_of(own), sandbox_option])


def piped_context(timeout: float | None) -> str | None:
    """What a pipe or file on stdin holds (crewbridge.base.piped), waited for within `timeout`."""
    from crewbridge.base.piped import read_context

    return read_context(sys.stdin, functools.partial(click.echo, err=True), timeout)


def run_options_of(continue_last: bool, values: dict[str, Any]) -> RunOptions:
    """The RunOptions loop_options gave (--continue resolved to the run it continues)."""
    from crewbridge.base.options import RunOptions, command_line
    from crewbridge.work.sessions import run_to_resume

    if values.get("rounds", 0) is None:  # not given: the default
        del values["rounds"]
    elif "rounds" in values and not values.get("review"):
        raise UsageError("--rounds counts review rounds; give --review AGENT too")
    values["resume"] = run_to_resume(continue_last, values.get("resume"))
    command_line(values)
    return RunOptions.pick(values)
