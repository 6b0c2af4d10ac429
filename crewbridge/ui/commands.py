"""`crew ui`'s command (crewbridge.cli registers it)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

import click

from crewbridge.base import flags

if TYPE_CHECKING:
    pass
from crewbridge.terminal.options import (
    table_options,
)


@click.command("ui")
@table_options(flags.UI)
def ui_command(address: str, token_file: Path | None, allowed_hosts: tuple[str, ...], allow_remote: bool) -> None:
    """See every run in a browser, live: approvals, cancel, batches, usage. Prints a one-time sign-in
    link (a new one to the crew ui that serves, if one does)."""
    from crewbridge.protocol.webserver import Listening
    from crewbridge.ui.server import serve_ui

    listening = Listening(address, token_file, allowed_hosts, allow_remote)
    serve_ui(listening, functools.partial(click.echo, err=True), click.echo)
