"""The `crew` command: its group, whose commands each face keeps (COMMANDS: loaded when named),
and how a command ends — its error as one line and its exit code, Ctrl-C and SIGTERM ending
everything crew started."""

from __future__ import annotations

import gc
import importlib
import io
import os
import signal
import sys
from typing import TYPE_CHECKING, Any, NoReturn

import click

from crewbridge import VERSION_MESSAGE, __version__
from crewbridge.errors import CrewError
from crewbridge.terminal.failure import failure, silence

if TYPE_CHECKING:
    from crewbridge.acp.early import Greeting as AcpGreeting
    from crewbridge.mcp.early import Greeting
    from crewbridge.terminal.early import Early

COMMANDS = {  # each face registers its commands here: loaded when named (or listed by --help)
    "query": "crewbridge.terminal.commands:query_command",
    "execute": "crewbridge.terminal.commands:execute_command",
    "apply": "crewbridge.terminal.commands:apply_command",
    "worktrees": "crewbridge.terminal.commands:worktrees_group",
    "batch": "crewbridge.batch.commands:batch_group",
    "chat": "crewbridge.terminal.commands:chat_command",
    "prompt": "crewbridge.terminal.commands:prompt_command",
    "mcp": "crewbridge.mcp.commands:mcp_group",
    "ui": "crewbridge.ui.commands:ui_command",
    "acp": "crewbridge.acp.commands:acp_group",
    "skills": "crewbridge.terminal.commands:skills_group",
    "tools": "crewbridge.terminal.commands:tools_group",
    "parse": "crewbridge.terminal.commands:parse_command",
    "log": "crewbridge.terminal.commands:log_group",
    "config": "crewbridge.terminal.commands:config_group",
    "init": "crewbridge.terminal.commands:init_command",
    "doctor": "crewbridge.terminal.commands:doctor_command",
    "agents": "crewbridge.terminal.commands:agents_group",
}


class Commands(click.Group):
    """The group of COMMANDS, each imported when it is named."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, _, attribute = target.partition(":")
        command: click.Command = getattr(importlib.import_module(module), attribute)
        return command


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="crew", message=VERSION_MESSAGE)
def cli() -> None:
    """Give CLI language models (claude, gemini, codex, any CLI) tools they don't have."""


_stopped_by = signal.SIGINT  # the signal that stopped crew; it exits with 128 + its number


def _stop(signum: int, frame: Any) -> None:
    """SIGTERM and SIGHUP stop crew as Ctrl-C does (else its CLIs, in their own sessions, run on)."""
    global _stopped_by
    _stopped_by = signal.Signals(signum)
    raise KeyboardInterrupt


def main(early: Early | None = None, greeting: Greeting | AcpGreeting | None = None) -> None:
    """Run the command in sys.argv; `early`: its reading by crewbridge.terminal.early, CLIs started;
    `greeting`: crew mcp's or crew acp's start by crewbridge.mcp.early or crewbridge.acp.early
    (their initialize answered)."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _stop)
    _tolerant_streams(stdin=greeting is None)  # crew mcp's and acp's stdin: read as bytes, and read already
    try:
        _main(early or greeting)
    finally:
        if early is not None:
            early.bridge.close()  # what the command did not take (it failed before its run)
        # Python's last garbage collections walk every object left (~20 ms, crew's longest pause
        # after its CLIs end); what crew opened is closed by now, so they are left out.
        gc.freeze()


def _tolerant_streams(*, stdin: bool) -> None:
    """Text that is not UTF-8 never ends crew: piped input keeps bytes that are not UTF-8 as lone
    surrogates (as Python does with file names and arguments), and stdout writes a lone surrogate as
    a backslash escape (stderr does already): inside a JSON string, a valid escape of the same text."""
    for stream, errors in ((sys.stdin if stdin else None, "surrogateescape"), (sys.stdout, "backslashreplace")):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors=errors)


def _exit_now(code: int) -> NoReturn:
    """Exit with `code` at once, once everything crew started has been ended. Not sys.exit: a Ctrl-C
    that lands while Python runs exec() on a string (a dataclass or namedtuple being made, as a
    module loads) leaves the interpreter to kill itself with SIGINT when it exits, whatever the
    code; and the normal exit would wait for the threads of tools still running."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # closed, or a reader that went away
    os._exit(code)


def _silence() -> None:
    """Send what is written to stdout and stderr from now on to /dev/null (crew is exiting, and its
    last line is written: click flushes each echo)."""
    for stream in (sys.stdout, sys.stderr):
        silence(stream)


def _main(started: Early | Greeting | AcpGreeting | None) -> None:
    try:
        cli.main(prog_name="crew", standalone_mode=False, obj=started)
    except (click.exceptions.Abort, KeyboardInterrupt):  # click turns Ctrl-C into Abort
        from crewbridge.system.process import end_all

        end_all()  # the tools' commands too: nothing crew started outlives it
        click.echo(
            "crew: interrupted" if _stopped_by == signal.SIGINT else f"crew: stopped by {_stopped_by.name}", err=True
        )
        _silence()  # the last line: a tool's thread that reports its killed command now says nothing
        _exit_now(128 + _stopped_by)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:  # crew's error, or a bug in crew: one line, the traceback only on request
        if os.environ.get("CREW_DEBUG") and not isinstance(exc, CrewError):
            raise
        line, code = failure(exc)
        click.echo(line, err=True)
        sys.exit(code)
