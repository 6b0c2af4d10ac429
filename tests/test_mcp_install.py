"""`crew mcp install`: crew registered in the real claude, gemini and codex through their own
`mcp add`, in a scratch HOME; the CLI then starts it; `crew doctor` says where it is registered."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from clienv import BIN, require_cli
from crewbridge.mcp.install import registered, registration
from crewcli import crew_env, run_crew


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    env = crew_env(tmp_path / "home", PATH=f"{BIN}:/usr/bin:/bin", CODEX_HOME=str(tmp_path / "home" / ".codex"))
    (tmp_path / "home" / ".codex").mkdir(parents=True)
    return env


def test_each_cli_is_told_to_start_crew_mcp_under_the_name_crew():
    for cli in ("claude", "gemini", "codex"):
        done = registration(cli, execute=True)
        assert done.add[:3] == [cli, "mcp", "add"] and "crew" in done.add
        assert done.add[-2:] == ["mcp", "--execute"]
        assert done.remove[:3] == [cli, "mcp", "remove"] and done.remove[-1] == "crew"
    assert "--trust" in registration("gemini").add  # else gemini -p offers none of its tools


@pytest.mark.parametrize("cli", ["claude", "gemini", "codex"])
@pytest.mark.needs("clis")
@pytest.mark.slow
def test_install_registers_crew_in_the_clis_own_configuration(cli, env, tmp_path):
    require_cli(cli)
    done = run_crew(["mcp", "install", cli], env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"registered crew in {cli}: {cli} mcp add ")
    assert f"undo with: {cli} mcp remove" in done.stdout
    assert list(registered(env, tmp_path)) == [cli]
    again = run_crew(["mcp", "install", cli, "--execute"], env=env, cwd=tmp_path)  # replaces the first
    assert again.returncode == 0, again.stderr
    doctor = run_crew(["doctor", cli], env=env, cwd=tmp_path)
    assert f"crew is registered in {cli} (" in doctor.stdout


@pytest.mark.needs("clis")
@pytest.mark.slow
def test_claude_starts_the_registered_crew(env, tmp_path):
    require_cli("claude")
    assert run_crew(["mcp", "install", "claude"], env=env, cwd=tmp_path).returncode == 0
    listed = subprocess.run(
        [str(BIN / "claude"), "mcp", "list"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert "crew:" in listed.stdout and "Connected" in listed.stdout, listed.stdout + listed.stderr


def test_registrations_are_read_from_each_clis_files(tmp_path):
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    (home / ".codex").mkdir()
    (home / ".claude.json").write_text(json.dumps({"mcpServers": {"other": {}}}))
    (home / ".gemini" / "settings.json").write_text(json.dumps({"mcpServers": {"crew": {"command": "crew"}}}))
    (home / ".codex" / "config.toml").write_text('[mcp_servers."crew"]\ncommand = "crew"\n')
    assert registered({"HOME": str(home)}, tmp_path) == {
        "gemini": str(home / ".gemini" / "settings.json"),
        "codex": str(home / ".codex" / "config.toml"),
    }


@pytest.mark.slow
def test_an_unknown_cli_is_a_usage_error(env, tmp_path):
    done = run_crew(["mcp", "install", "cursor"], env=env, cwd=tmp_path)
    assert done.returncode == 2 and "'cursor' is not one of" in done.stderr
