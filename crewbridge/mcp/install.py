"""Registering `crew mcp` in a CLI's own MCP configuration, through the CLI's own `mcp add` (user
scope), and finding where it is registered (for `crew doctor`). What differs between CLIs (the
commands, the files) is their providers' (Provider.mcp_commands, Provider.mcp_files)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from crewbridge.errors import CLINotFound, ProviderError, UsageError
from crewbridge.providers import BUILTIN, Provider, load, plugins
from crewbridge.providers.base import mcp_servers
from crewbridge.system.childenv import without_secrets
from crewbridge.toolkit.native import SERVER  # crew's name in each CLI: claude shows mcp__crew__read_file


@dataclass
class Registration:
    cli: str
    add: list[str]  # the command that registers crew
    remove: list[str]  # the command that undoes it


def crew_command() -> list[str]:
    """How a CLI starts this crew: its console script beside this Python, else on PATH, else `-m`."""
    script = Path(sys.executable).with_name("crew")
    if script.exists():
        return [str(script)]
    found = shutil.which("crew")
    return [found] if found else [sys.executable, "-m", "crewbridge"]


def installable() -> dict[str, Provider]:
    """The built-in providers whose CLI crew can register its MCP server in, by name."""
    return {name: provider for name in BUILTIN if (provider := load(name)).mcp_commands([]) is not None}


def registration(cli: str, execute: bool = False) -> Registration:
    """The commands that register crew in `cli` (a provider's name) and remove it again."""
    serve = [*crew_command(), "mcp", *(["--execute"] if execute else [])]
    known = installable()
    provider = known.get(cli) or (load(cli) if cli in plugins() else None)  # a plugin's provider may register it
    commands = None if provider is None else provider.mcp_commands(serve)
    if commands is None:
        raise UsageError(f"'{cli}' is not one of the CLIs crew mcp install registers crew in: {', '.join(known)}")
    return Registration(cli, *commands)


def install(cli: str, execute: bool = False, env: Mapping[str, str] | None = None) -> Registration:
    """Register crew in `cli` (replacing an earlier registration of crew there)."""
    wanted = registration(cli, execute)
    binary = shutil.which(cli, path=(env or os.environ).get("PATH"))
    if binary is None:
        raise CLINotFound(f"{cli} is not installed (not on PATH); install it with: {load(cli).install_hint}")
    _run([binary, *wanted.remove[1:]], env)  # fails when crew was not registered: nothing to undo
    done = _run([binary, *wanted.add[1:]], env)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise ProviderError(f"`{' '.join(wanted.add[:3])}` failed (exit {done.returncode}): {said[-1] if said else ''}")
    return wanted


def _run(argv: list[str], env: Mapping[str, str] | None) -> subprocess.CompletedProcess[str]:
    clean = without_secrets(os.environ if env is None else env)
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, env=clean)


def registered(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> dict[str, str]:
    """Where crew is registered: CLI → the configuration file that names it (its provider's mcp_files)."""
    env = os.environ if env is None else env
    cwd = cwd or Path.cwd()
    found: dict[str, str] = {}
    for cli, provider in installable().items():
        for path, kind in provider.mcp_files(env, cwd):
            if cli not in found and SERVER in mcp_servers(path, kind):
                found[cli] = str(path)
    return found
