"""`crew mcp`'s commands (crewbridge.cli registers them): the server, and its install into a CLI."""

from __future__ import annotations

import functools
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import click

from crewbridge.errors import UsageError

if TYPE_CHECKING:
    from crewbridge.config import Config
from crewbridge.terminal.options import (
    mcp_options,
)


@click.group("mcp", invoke_without_command=True)
@mcp_options
@click.pass_context
def mcp_group(
    ctx: click.Context,
    execute: bool,
    address: str | None,
    token_file: Path | None,
    allowed_hosts: tuple[str, ...],
    allow_remote: bool,
    policy_of: str | None,
    ask_depth: int,
    timeout: float,
    max_turns: int,
    config: Config,
) -> None:
    """Serve crew's tools, and `ask` to run agents, over MCP (stdio; --http for HTTP).
    Register it in a CLI with: crew mcp install claude|gemini|codex"""
    if ctx.invoked_subcommand is not None:
        return
    if address is None and (token_file or allowed_hosts or allow_remote):
        raise UsageError("--token-file, --allow-host and --allow-remote go with --http HOST:PORT")
    from crewbridge.mcp.early import Greeting
    from crewbridge.mcp.server import McpServer

    greeting = ctx.obj if isinstance(ctx.obj, Greeting) else None  # its initialize answered already
    server = McpServer(
        config,
        Path.cwd(),
        execute=execute,
        policy_of=policy_of,
        max_depth=ask_depth,
        timeout=timeout,
        max_turns=max_turns,
    )
    if server.sandbox_notice:
        click.echo(f"crew mcp: {server.sandbox_notice}", err=True)
    if address is None:
        from crewbridge.mcp.stdio import serve_stdio

        serve_stdio(server, greeting.link if greeting else None)
        return
    from crewbridge.protocol.mcp_http import serve_http
    from crewbridge.protocol.webserver import Listening

    say = functools.partial(click.echo, err=True)
    serve_http(server, Listening(address, token_file, allowed_hosts, allow_remote), say)


@mcp_group.command("install")
@click.argument("cli_name", metavar="CLI")
@click.option("--execute", is_flag=True, help="Register `crew mcp --execute`: the write and command tools too.")
def mcp_install_command(cli_name: str, execute: bool) -> None:
    """Register crew as an MCP server named `crew` in CLI's own configuration (user scope): a
    provider that can (claude, gemini, codex)."""
    from crewbridge.mcp.install import install

    done = install(cli_name, execute)
    click.echo(f"registered crew in {cli_name}: {shlex.join(done.add)}\nundo with: {shlex.join(done.remove)}")
