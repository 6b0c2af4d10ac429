"""`crew acp`'s commands (crewbridge.cli registers them): the agent editors run, and its check."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from crewbridge.config import Config
from crewbridge.terminal.options import (
    acp_options,
)


@click.group("acp", invoke_without_command=True)
@acp_options
@click.pass_context
def acp_group(ctx: click.Context, timeout: float, max_turns: int, config: Config, sandbox: str | None) -> None:
    """Serve crew as an Agent Client Protocol agent on stdio, for editors (Zed, JetBrains, Neovim,
    acpx): every configured agent, crew's policy and sandbox. See docs/acp.md."""
    from crewbridge.base.extras import require

    if ctx.invoked_subcommand == "login":  # the CLI's own login: no ACP
        return
    require("acp", f"crew acp{' ' + ctx.invoked_subcommand if ctx.invoked_subcommand else ''}")
    if ctx.invoked_subcommand is not None:
        return
    from crewbridge.acp.agent import serve
    from crewbridge.acp.early import Greeting
    from crewbridge.acp.session import Serving
    from crewbridge.sandbox import Sandboxing

    sandboxing = Sandboxing()
    sandboxing.mechanism(sandbox or config.sandbox)  # required where none works: refused before serving
    greeting = ctx.obj if isinstance(ctx.obj, Greeting) else None  # its initialize answered already
    path = config.files[-1].path if config.files and config.files[-1].kind == "config" else None
    serve(greeting, config_path=path, sandbox=sandbox, sandboxing=sandboxing, serving=Serving(timeout, max_turns))


@acp_group.command("login")
@click.argument("cli")
def acp_login_command(cli: str) -> None:
    """Log in to CLI (claude, gemini, codex) with the CLI's own login, in this terminal: what an
    editor runs for crew's auth methods (docs/acp.md)."""
    import os

    from crewbridge.providers import load

    argv = load(cli).login_argv()
    os.execvp(argv[0], argv)  # the CLI's own login, in this terminal: crew has no part in it


@acp_group.command("check", context_settings={"ignore_unknown_options": True})
@click.option(
    "--timeout", type=click.FloatRange(min=1), default=120.0, show_default=True, help="Seconds each step may take."
)
@click.option(
    "--prompt", default="Say hello in one short sentence.", show_default=True, help="The prompt that is streamed."
)
@click.option(
    "--write-prompt",
    default="Create a file named acp-check.txt that says ok.",
    show_default=True,
    help="A prompt whose model is expected to ask for a permission (answered allow, then reject).",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def acp_check_command(timeout: float, prompt: str, write_prompt: str, command: tuple[str, ...]) -> None:
    """Check that the ACP agent COMMAND (`crew acp check -- gemini --acp`) does what the protocol
    says: a table of what held; exit 0 only when everything required held."""
    from crewbridge.acp.check import Checker

    checker = Checker(list(command), timeout=timeout, prompt=prompt, write_prompt=write_prompt)
    results = checker.run()
    click.echo(checker.table(results))
    if not checker.passed(results):
        sys.exit(1)
