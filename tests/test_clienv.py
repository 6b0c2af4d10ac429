"""Scratch environments for the real CLIs: settings files, the mock as the only reachable host, and
the check that fails a test (never skips it) when a pinned CLI is missing."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import tomllib

from clienv import ALL, BIN, CODEX_CONFIG, USER_MCP, cli_env, copy_home, require_cli, user_mcp_starts
from mockserver import MockServer

URL = "http://127.0.0.1:4321"


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A caller whose environment holds real credentials and a proxy of its own."""
    for name, value in {
        "ANTHROPIC_API_KEY": "sk-real",
        "OPENAI_API_KEY": "sk-real",
        "GEMINI_API_KEY": "real",
        "GOOGLE_CLOUD_PROJECT": "p",
        "CLAUDECODE": "1",
        "CODEX_HOME": "/real/.codex",
        "https_proxy": "http://corp:3128",
        "no_proxy": "corp",
    }.items():
        monkeypatch.setenv(name, value)
    return tmp_path / "home"


@pytest.mark.parametrize("name", ["claude", "gemini", "codex"])
def test_nothing_of_the_callers_credentials_or_proxies_leaks_in(name, home):
    env = cli_env(name, URL, home)
    assert env["HOME"] == str(home)
    assert env["PATH"].split(":")[0] == str(BIN)
    assert "GOOGLE_CLOUD_PROJECT" not in env and "CLAUDECODE" not in env
    assert {env[k] for k in ("HTTP_PROXY", "HTTPS_PROXY", "https_proxy", "ALL_PROXY")} == {URL}
    assert env["NO_PROXY"] == env["no_proxy"] == "127.0.0.1,localhost"
    assert not any(value.startswith(("sk-real", "real", "/real")) for value in env.values())


def test_claude_talks_to_the_mock_without_retries(home):
    env = cli_env("claude", URL, home)
    assert env["ANTHROPIC_BASE_URL"] == URL and env["ANTHROPIC_API_KEY"] == "dummy"
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "0"
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"


def test_gemini_has_api_key_auth_one_attempt_and_no_outside_traffic(home):
    env = cli_env("gemini", URL, home)
    assert (env["GOOGLE_GEMINI_BASE_URL"], env["GEMINI_API_KEY"]) == (URL, "dummy")
    assert env["GEMINI_CLI_TRUST_WORKSPACE"] == "true"
    settings = json.loads((home / ".gemini" / "settings.json").read_text())
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["general"]["maxAttempts"] == 1
    assert settings["general"]["sessionRetention"]["enabled"] is False
    assert settings["general"]["enableAutoUpdate"] is False
    assert settings["telemetry"]["enabled"] is False
    assert settings["privacy"]["usageStatisticsEnabled"] is False


def test_codex_uses_the_mock_provider_without_retries_analytics_or_plugins(home):
    env = cli_env("codex", URL, home)
    assert env["CODEX_HOME"] == str(home / ".codex") and env["OPENAI_API_KEY"] == "dummy"
    config = tomllib.loads((home / ".codex" / "config.toml").read_text())
    assert config["model_provider"] == "mock"
    assert config["model_providers"]["mock"] == {
        "name": "mock",
        "base_url": URL + "/v1",
        "wire_api": "responses",
        "env_key": "OPENAI_API_KEY",
        "request_max_retries": 0,
        "stream_max_retries": 0,
    }
    assert config["check_for_update_on_startup"] is False
    assert config["analytics"] == {"enabled": False}
    assert not any(config["features"].values())


def test_an_unknown_cli_is_named_in_the_error(home):
    with pytest.raises(ValueError, match="no environment for CLI 'claud'; known: claude, gemini"):
        cli_env("claud", URL, home)


def test_a_missing_cli_skips_the_test_saying_how_to_install_it_and_fails_it_where_every_test_runs(
    tmp_path, monkeypatch
):
    (tmp_path / "package.json").write_text('{"dependencies": {"@openai/codex": "1.0.0"}}')
    monkeypatch.delenv(ALL, raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"real CLI 'codex' not found .*npm install"):
        require_cli("codex", repo=tmp_path)
    monkeypatch.setenv(ALL, "1")  # scripts/test: everything was installed first
    with pytest.raises(pytest.fail.Exception, match=r"real CLI 'codex' not found .*npm install.*CREW_TEST_ALL=1"):
        require_cli("codex", repo=tmp_path)


def test_another_version_than_the_pinned_one_fails_the_test(tmp_path):
    (tmp_path / "package.json").write_text('{"dependencies": {"@openai/codex": "1.0.0"}}')
    package = tmp_path / "node_modules" / "@openai" / "codex"
    package.mkdir(parents=True)
    (package / "package.json").write_text('{"version": "0.9.0"}')
    binary = tmp_path / "node_modules" / ".bin" / "codex"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    with pytest.raises(
        pytest.fail.Exception, match=re.escape("@openai/codex 0.9.0 is installed but package.json pins 1.0.0")
    ):
        require_cli("codex", repo=tmp_path)
    (package / "package.json").write_text('{"version": "1.0.0"}')
    assert require_cli("codex", repo=tmp_path) == str(binary)


# --- lived-in homes


def test_a_lived_in_home_keeps_what_the_cli_wrote_and_takes_the_tests_settings_over_it(home):
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"mcpServers": {"usertools": {"command": "x"}}, "general": {"vimMode": True}}))
    codex = home / ".codex" / "config.toml"
    codex.parent.mkdir()
    codex.write_text(CODEX_CONFIG.format(url="http://127.0.0.1:1") + '\n[mcp_servers.usertools]\ncommand = "x"\n')
    cli_env("gemini", URL, home)
    cli_env("codex", URL, home)
    kept = json.loads(settings.read_text())
    assert kept["mcpServers"] == {"usertools": {"command": "x"}}
    assert kept["general"]["vimMode"] is True and kept["general"]["maxAttempts"] == 1
    config = tomllib.loads(codex.read_text())
    assert config["mcp_servers"] == {"usertools": {"command": "x"}}
    assert config["model_providers"]["mock"]["base_url"] == URL + "/v1"


def test_a_copy_of_a_lived_in_home_names_the_tests_mock_in_its_settings_only(tmp_path):
    lived, old = tmp_path / "lived", "http://127.0.0.1:1111"
    (lived / ".codex" / "sessions").mkdir(parents=True)
    (lived / ".claude.json").write_text(json.dumps({"mcpServers": {"u": {"args": [old]}}}))
    (lived / ".codex" / "config.toml").write_text(f'base_url = "{old}/v1"\n')
    (lived / ".codex" / "sessions" / "s.jsonl").write_text(old)  # what the CLI recorded stays as it was
    copy_home(lived, tmp_path / "home", old, URL)
    home = tmp_path / "home"
    assert json.loads((home / ".claude.json").read_text()) == {"mcpServers": {"u": {"args": [URL]}}}
    assert (home / ".codex" / "config.toml").read_text() == f'base_url = "{URL}/v1"\n'
    assert (home / ".codex" / "sessions" / "s.jsonl").read_text() == old


@pytest.mark.slow
def test_the_users_own_mcp_server_reports_its_start_and_answers_as_an_mcp_server(tmp_path):
    with MockServer() as mock:
        server = subprocess.run(
            [sys.executable, str(USER_MCP), mock.url],
            input="\n".join(
                json.dumps(message)
                for message in (
                    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}},
                    {"jsonrpc": "2.0", "method": "notifications/initialized"},
                    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                )
            ),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert user_mcp_starts(mock, tmp_path) == 1 and user_mcp_starts(mock, tmp_path / "elsewhere") == 0
    initialized, listed = (json.loads(line) for line in server.stdout.splitlines())
    assert initialized["result"]["protocolVersion"] == "2025-06-18"
    assert [tool["name"] for tool in listed["result"]["tools"]] == ["weather"]
