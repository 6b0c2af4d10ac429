"""Registering `crew mcp` in a CLI's own MCP configuration, through the CLI's own `mcp add` (user
scope), and finding where it is registered (for `crew doctor`)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from crewbridge.childenv import without_secrets
from crewbridge.errors import CLINotFound, ProviderError, UsageError
from crewbridge.providers import load

CLIS = ("claude", "gemini", "codex")
NAME = "crew"  # the server's name in each CLI: claude shows mcp__crew__read_file, gemini mcp_crew_read_file


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


def registration(cli: str, execute: bool = False) -> Registration:
    """The commands that register crew in `cli` and remove it again."""
    if cli not in CLIS:
        raise UsageError(f"crew mcp install knows {', '.join(CLIS)}, not '{cli}'")
    serve = [*crew_command(), "mcp", *(["--execute"] if execute else [])]
    if cli == "claude":
        return Registration(
            cli,
            [cli, "mcp", "add", "--scope", "user", NAME, "--", *serve],
            [cli, "mcp", "remove", "--scope", "user", NAME],
        )
    if cli == "gemini":  # trusted: in -p mode gemini offers an MCP server's tools only when it is
        return Registration(
            cli,
            [cli, "mcp", "add", "--scope", "user", "--trust", NAME, *serve],
            [cli, "mcp", "remove", "--scope", "user", NAME],
        )
    return Registration(cli, [cli, "mcp", "add", NAME, "--", *serve], [cli, "mcp", "remove", NAME])


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
    """Where crew is registered: CLI → the configuration file that names it."""
    env = os.environ if env is None else env
    home = Path(env.get("HOME", "~")).expanduser()
    cwd = cwd or Path.cwd()
    codex_home = Path(env.get("CODEX_HOME") or home / ".codex")
    found: dict[str, str] = {}
    for cli, path, servers in (
        ("claude", home / ".claude.json", _json_servers),
        ("claude", cwd / ".mcp.json", _json_servers),
        ("gemini", home / ".gemini" / "settings.json", _json_servers),
        ("gemini", cwd / ".gemini" / "settings.json", _json_servers),
        ("codex", codex_home / "config.toml", toml_servers),  # [mcp_servers.crew]
    ):
        if cli not in found and NAME in servers(path):
            found[cli] = str(path)
    return found


def _json_servers(path: Path) -> dict[str, object]:
    try:
        servers = json.loads(path.read_text()).get("mcpServers")
    except (OSError, ValueError, AttributeError):
        return {}
    return servers if isinstance(servers, dict) else {}


def toml_servers(path: Path) -> dict[str, object]:
    """The MCP servers a codex config.toml names (its [mcp_servers.NAME] tables)."""
    try:
        text = path.read_text()
    except OSError:
        return {}
    return {name: True for _, name in re.findall(r'(?m)^\s*\[mcp_servers\.("?)([\w-]+)\1\]', text)}
