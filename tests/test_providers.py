"""Finding providers by name: the built-in ones, and those installed packages declare under the entry
point group `crewbridge.providers` (imported only when used). The tools group `crewbridge.tools` is
checked here too, from the same installed distribution."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
import tomllib
from crewbridge.providers.base import McpServer, Turn
from crewbridge.providers.claude import ClaudeProvider
from crewbridge.providers.codex import CodexProvider

from crewbridge import providers
from crewbridge.bridge import Bridge
from crewbridge.config import load_config
from crewbridge.errors import ConfigError, UsageError
from crewbridge.terminal.doctor import OK, diagnose

PLUGIN_MODULE = '''
import json
import os
import sys
from crewbridge.providers.generic import GenericProvider, GenericSpec
from crewbridge.toolkit.functions import tool

class EchoProvider(GenericProvider):
    """A CLI that always answers the same."""
    def __init__(self):
        super().__init__(GenericSpec(name="echo", command=[sys.executable, "-c", "print('hello from echo')"],
                                     probe=False))

@tool(read_only=True)
def shout(text: str) -> str:
    """Say it louder."""
    return text.upper()

class NotAProvider:
    pass

def broken():
    raise RuntimeError("no GPU here")
'''

ENTRY_POINTS = """
[crewbridge.providers]
echo = crewplug:EchoProvider
claude = crewplug:EchoProvider
odd = crewplug:NotAProvider
broken = crewplug:broken

[crewbridge.tools]
shout = crewplug:shout
"""


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A distribution `crewplug` 1.0 on sys.path, as pip would install it: a module and its
    .dist-info with entry points. Returns the site directory."""
    site = tmp_path / "site"
    info = site / "crewplug-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: crewplug\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(ENTRY_POINTS))
    (site / "crewplug.py").write_text(PLUGIN_MODULE)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "crewplug", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    return site


def crew_yaml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "crew.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_builtin_providers_load_by_name() -> None:
    assert isinstance(providers.load("claude"), ClaudeProvider)
    with pytest.raises(UsageError, match="provider 'nope' not found; known providers: claude, gemini, codex, demo"):
        providers.load("nope")


@pytest.mark.slow
def test_plugin_providers_are_named_without_being_imported(installed: Path) -> None:
    assert providers.names() == ["claude", "gemini", "codex", "demo", "broken", "echo", "odd"]
    assert "crewplug" not in sys.modules


def test_a_plugin_cannot_take_a_builtin_name(installed: Path) -> None:
    assert isinstance(providers.load("claude"), ClaudeProvider)


def test_an_agent_runs_on_a_plugin_provider_imported_only_then(installed: Path, tmp_path: Path) -> None:
    config = load_config(crew_yaml(tmp_path, "agents:\n  echoer:\n    provider: echo\n"), tmp_path)
    assert "crewplug" not in sys.modules  # checking the name did not import it
    result = Bridge(config, workdir=tmp_path).ask("@echoer hi")
    assert result.answer == "hello from echo"


def test_an_unknown_provider_in_crew_yaml_names_the_plugin_ones_too(installed: Path, tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError,
        match=r"crew.yaml:3: agents.x.provider: provider 'ech' is not known; give "
        r"provider: one of broken, claude, codex, demo, echo, gemini, odd",
    ):
        load_config(crew_yaml(tmp_path, "agents:\n  x:\n    provider: ech\n"), tmp_path)


def test_a_broken_plugin_is_named_with_its_package(installed: Path) -> None:
    with pytest.raises(
        ConfigError,
        match=r"plugin provider 'broken' \(crewplug:broken, from crewplug\) cannot be "
        r"loaded: RuntimeError: no GPU here; fix or uninstall the package",
    ):
        providers.load("broken")
    with pytest.raises(ConfigError, match=r"plugin provider 'odd' .* gave NotAProvider, not a Provider"):
        providers.load("odd")


def test_plugin_tools_come_from_the_same_distribution(installed: Path, tmp_path: Path) -> None:
    registry = load_config(None, tmp_path).registry()
    assert "shout" in registry and registry.resolve("crew:shout").summary == "Say it louder."
    off = load_config(crew_yaml(tmp_path, "plugins: false\n"), tmp_path).registry()
    assert "shout" not in off


def test_doctor_checks_plugin_providers_and_names_their_package(installed: Path, tmp_path: Path) -> None:
    found = {check.subject: check for check in diagnose(None, tmp_path, only=("echo", "broken"))}
    assert found["echo"].status == OK and found["echo"].message.startswith("found (plugin from crewplug); runs `")
    assert found["broken"].message.startswith("plugin provider 'broken' (crewplug:broken, from crewplug) cannot")


# -- where each CLI keeps its sessions (measured on the pinned versions: tests/e2e/test_sessions_real.py)


def test_claude_has_a_session_under_its_project_folder_named_after_the_working_directory(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    cwd = Path("/work/my_project.v2")
    assert not ClaudeProvider().has_session("S1", env, cwd)
    folder = tmp_path / ".claude" / "projects" / "-work-my-project-v2"
    folder.mkdir(parents=True)
    (folder / "S1.jsonl").write_text("{}\n")
    assert ClaudeProvider().has_session("S1", env, cwd)
    assert not ClaudeProvider().has_session("S1", env, Path("/work/other"))
    assert ClaudeProvider().has_session("S1", {"HOME": "/nowhere", "CLAUDE_CONFIG_DIR": str(tmp_path / ".claude")}, cwd)


def test_codex_has_a_session_when_a_rollout_file_names_it(tmp_path: Path) -> None:
    from crewbridge.providers.codex import CodexProvider

    env = {"HOME": "/nowhere", "CODEX_HOME": str(tmp_path)}
    assert not CodexProvider().has_session("0199-abcd", env, tmp_path)
    day = tmp_path / "sessions" / "2026" / "11" / "24"
    day.mkdir(parents=True)
    (day / "rollout-2026-11-24T21-08-42-0199-abcd.jsonl").write_text("{}\n")
    assert CodexProvider().has_session("0199-abcd", env, tmp_path)


def test_gemini_has_a_session_when_the_chat_file_of_this_project_holds_it(tmp_path: Path) -> None:
    from crewbridge.providers.gemini import GeminiProvider

    sid, env, work = "eff58380-aa39-4f8f-be15-a777d80ba241", {"HOME": str(tmp_path)}, Path("/work/app")
    assert not GeminiProvider().has_session(sid, env, work)
    chats = tmp_path / ".gemini" / "tmp" / "app" / "chats"
    chats.mkdir(parents=True)
    (chats / f"session-2026-11-24T21-08-{sid[:8]}.jsonl").write_text(json.dumps({"sessionId": sid}) + "\n")
    assert not GeminiProvider().has_session(sid, env, work)  # no project named for this directory
    (tmp_path / ".gemini" / "projects.json").write_text(json.dumps({"projects": {"/work/app": "app", "/x": "x"}}))
    assert GeminiProvider().has_session(sid, env, work)
    assert not GeminiProvider().has_session(sid, env, Path("/x"))  # another project's session: gemini refuses it


def test_codex_keeps_its_own_sandbox_read_only_in_query_mode_and_leaves_execute_mode_to_crews(tmp_path: Path) -> None:
    from crewbridge.providers.codex import CodexProvider

    from crewbridge.sandbox import MECHANISM_ENV, Sandboxing

    def own(turn: Turn) -> str:
        argv = CodexProvider().argv(turn)
        return argv[argv.index("--sandbox") + 1]

    assert [own(Turn("", mode)) for mode in ("query", "execute")] == ["read-only", "workspace-write"]
    for mechanism in ("bwrap", "landlock"):
        sandboxing = Sandboxing(env={**os.environ, MECHANISM_ENV: mechanism})
        inside = [
            Turn("", mode, sandbox=sandboxing.cli("required", tmp_path, mode, CodexProvider().state))
            for mode in ("query", "execute")
        ]
        # query: its commands never run unasked (its own sandbox cannot start inside crew's, so none runs)
        assert [own(turn) for turn in inside] == ["read-only", "danger-full-access"]


def test_each_cli_writes_only_its_data_and_sees_its_state_folder_through_a_view() -> None:
    from crewbridge.providers.claude import ClaudeProvider
    from crewbridge.providers.codex import CodexProvider
    from crewbridge.providers.gemini import GeminiProvider

    env = {"HOME": "/h"}
    claude = ClaudeProvider().state(env)
    assert (claude.home, claude.variable) == (Path("/h/.claude"), "CLAUDE_CONFIG_DIR")
    assert Path("/h/.claude/projects") in claude.data and {"session-env", "shell-snapshots"} <= set(claude.private)
    assert dict(claude.also) == {".claude.json": Path("/h/.claude.json")}  # its MCP servers, beside the folder
    moved = ClaudeProvider().state({**env, "CLAUDE_CONFIG_DIR": "/c"})
    assert moved.home == Path("/c") and moved.also == ()  # then /c/.claude.json, an entry of the folder
    gemini = GeminiProvider().state(env)
    assert (gemini.home, gemini.variable, gemini.within) == (Path("/h/.gemini"), "GEMINI_CLI_HOME", ".gemini")
    assert gemini.data == (Path("/h/.gemini/tmp"),) and gemini.read_only == (Path("/h/.gemini/tmp/bin"),)
    codex = CodexProvider().state({**env, "CODEX_HOME": "/x"})
    assert (codex.home, codex.variable) == (Path("/x"), "CODEX_HOME")
    assert Path("/x/sessions") in codex.data and codex.data_files == (Path("/x/installation_id"),)
    assert dict(codex.view_env) == {"CODEX_SQLITE_HOME": "sqlite"} and "sqlite" in codex.private
    own_sqlite = CodexProvider().state({**env, "CODEX_SQLITE_HOME": "/db"})
    assert Path("/db") in own_sqlite.data and own_sqlite.view_env == ()
    for state in (claude, gemini, codex):
        assert state.home not in state.data  # the folder itself, with its settings, is never writable


def test_each_cli_declares_the_files_it_logs_in_with_next_to_its_state() -> None:
    from crewbridge.providers.claude import ClaudeProvider
    from crewbridge.providers.codex import CodexProvider
    from crewbridge.providers.gemini import GeminiProvider

    env = {"HOME": "/h"}
    assert ClaudeProvider().state(env).login == (Path("/h/.claude/.credentials.json"), Path("/h/.claude.json"))
    moved = ClaudeProvider().state({**env, "CLAUDE_CONFIG_DIR": "/c"}).login
    assert moved == (Path("/c/.credentials.json"), Path("/c/.claude.json"))
    assert CodexProvider().state({**env, "CODEX_HOME": "/x"}).login == (Path("/x/auth.json"), Path("/x/.env"))
    gemini = GeminiProvider().state({**env, "GOOGLE_APPLICATION_CREDENTIALS": "/keys/sa.json"}).login
    assert {
        Path("/h/.gemini/oauth_creds.json"),
        Path("/h/.gemini/.env"),
        Path("/h/.env"),
        Path("/keys/sa.json"),
    } <= set(gemini)


def test_each_cli_gets_its_own_logins_and_what_crew_sets_for_it_and_no_other_vendors_key(tmp_path) -> None:
    """Variables as a person's environment holds them: each CLI gets its own key, none another's."""
    from crewbridge.providers.base import cli_environment
    from crewbridge.providers.gemini import GeminiProvider

    from crewbridge.system.childenv import without_secrets

    keys = {"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o", "GEMINI_API_KEY": "g", "MY_GATEWAY_KEY": "m"}
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(
        '[model_providers.gw]\nbase_url = "http://gw/v1"\nenv_key = "MY_GATEWAY_KEY"\n'
    )
    got = {}
    for provider in (ClaudeProvider(), CodexProvider(), GeminiProvider()):
        added = {"CREW_ASK_DEPTH": "1", "CODEX_HOME": str(codex_home)}  # what crew sets for it
        env, passed = cli_environment(provider, Turn("", passed=("GITHUB_TOKEN",)), added)
        given = without_secrets({**env, **keys, "GITHUB_TOKEN": "t"}, passed)
        got[provider.name] = sorted(name for name in given if name in {*keys, "GITHUB_TOKEN", "CREW_ASK_DEPTH"})
    assert got == {
        "claude": ["ANTHROPIC_API_KEY", "CREW_ASK_DEPTH", "GITHUB_TOKEN"],
        "codex": ["CREW_ASK_DEPTH", "GITHUB_TOKEN", "MY_GATEWAY_KEY", "OPENAI_API_KEY"],  # its config.toml's env_key
        "gemini": ["CREW_ASK_DEPTH", "GEMINI_API_KEY", "GITHUB_TOKEN"],
    }


# --- arguments stay arguments ----------------------------------------------------------------------


@pytest.mark.parametrize("field, value", [("model", "--dangerously-skip-permissions"), ("session_id", "-c")])
def test_a_turn_refuses_a_value_that_would_reach_a_cli_as_an_option(field: str, value: str) -> None:
    from crewbridge.providers.base import Turn

    with pytest.raises(UsageError, match=f"'{value}' starts with '-', so the CLI would read it as an option"):
        Turn("hi", **{field: value})


def test_each_cli_that_takes_mcp_servers_says_how_crew_is_registered_in_it_and_where(tmp_path):
    serve = ["crew", "mcp"]
    env = {"HOME": str(tmp_path / "home"), "CODEX_HOME": str(tmp_path / "codex")}
    files = {}
    for name in ("claude", "gemini", "codex"):
        add, remove = providers.load(name).mcp_commands(serve)
        assert add[:3] == [name, "mcp", "add"] and add[-2:] == serve and "crew" in add
        assert remove[:3] == [name, "mcp", "remove"] and remove[-1] == "crew"
        files[name] = providers.load(name).mcp_files(env, tmp_path)
    assert files == {
        "claude": [(tmp_path / "home" / ".claude.json", "json"), (tmp_path / ".mcp.json", "json")],
        "gemini": [
            (tmp_path / "home" / ".gemini" / "settings.json", "json"),
            (tmp_path / ".gemini" / "settings.json", "json"),
        ],
        "codex": [(tmp_path / "codex" / "config.toml", "toml")],
    }
    assert providers.load("demo").mcp_commands(serve) is None and providers.load("demo").mcp_files(env, tmp_path) == []


def test_each_cli_is_kept_to_the_mcp_servers_crew_gives_it(tmp_path: Path) -> None:
    from crewbridge.providers.claude import ClaudeProvider
    from crewbridge.providers.codex import CodexProvider
    from crewbridge.providers.gemini import ACP_SERVER, NO_SERVER, GeminiProvider

    env = {"HOME": str(tmp_path), "CODEX_HOME": str(tmp_path / "codex")}
    query, native = Turn("", "query"), Turn("", "query", native=True)
    assert ClaudeProvider().own_mcp_only(query, env, tmp_path) == ["--strict-mcp-config"]
    assert GeminiProvider().own_mcp_only(query, env, tmp_path) == ["--allowed-mcp-server-names", NO_SERVER]
    assert GeminiProvider().own_mcp_only(native, env, tmp_path) == ["--allowed-mcp-server-names", ACP_SERVER]
    editors = Turn("", "query", native=True, mcp_servers=(McpServer("vault", "vault-mcp"), McpServer("db", "db")))
    assert GeminiProvider().own_mcp_only(editors, env, tmp_path) == [
        "--allowed-mcp-server-names",
        f"{ACP_SERVER},vault,db",
    ]
    assert ACP_SERVER != "crew"  # the name `crew mcp install` gives crew in gemini's settings
    assert CodexProvider().own_mcp_only(query, env, tmp_path) == []  # no config: no server to turn off
    (tmp_path / "codex").mkdir()
    (tmp_path / "codex" / "config.toml").write_text(
        '[mcp_servers.crew]\ncommand = "crew"\n[mcp_servers.docs]\nurl = "x"\n'
    )
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "config.toml").write_text('[mcp_servers."lint-server"]\ncommand = "lint"\n')
    assert CodexProvider().own_mcp_only(query, env, tmp_path) == [
        "-c",
        "mcp_servers.crew.enabled=false",
        "-c",
        "mcp_servers.docs.enabled=false",
        "-c",
        "mcp_servers.lint-server.enabled=false",
    ]
    given = Turn("", "query", mcp_servers=(McpServer("docs", "docs-mcp"),))  # the editor's, by a configured name
    assert "mcp_servers.docs.enabled=false" not in CodexProvider().own_mcp_only(given, env, tmp_path)


# -- MCP servers an editor gives a crew acp session (Provider.mcp_via) ----------------------------

VAULT = McpServer("vault", "/usr/bin/vault-mcp", ("--stdio", 'say "hi"'), (("VAULT_TOKEN", "s3cret"),))


def test_claude_takes_mcp_servers_in_an_mcp_config_whose_secrets_stay_in_its_environment() -> None:
    provider = ClaudeProvider()
    option, config = provider.mcp_options([VAULT])
    assert option == "--mcp-config" and "s3cret" not in config
    assert json.loads(config) == {
        "mcpServers": {
            "vault": {
                "type": "stdio",
                "command": "/usr/bin/vault-mcp",
                "args": ["--stdio", 'say "hi"'],
                "env": {"VAULT_TOKEN": "${CREW_MCP_1_1}"},
                "alwaysLoad": True,
            }
        }
    }
    assert provider.mcp_env([VAULT]) == {"CREW_MCP_1_1": "s3cret"}
    assert provider.mcp_options([]) == [] and provider.mcp_env([]) == {}


def test_codex_takes_mcp_servers_as_config_overrides_in_toml() -> None:
    options = CodexProvider().mcp_options([VAULT])
    assert options[::2] == ["-c"] * (len(options) // 2)
    table = tomllib.loads("\n".join(options[1::2]))["mcp_servers"]["vault"]
    assert table == {
        "command": "/usr/bin/vault-mcp",
        "args": ["--stdio", 'say "hi"'],
        "env": {"VAULT_TOKEN": "s3cret"},
        "required": True,
        "default_tools_approval_mode": "prompt",
    }


def test_gemini_takes_mcp_servers_in_its_acp_session_and_other_clis_take_none(tmp_path: Path) -> None:
    from crewbridge.conversations import new_conversation
    from crewbridge.conversations.gemini import GeminiSessionConversation
    from crewbridge.conversations.gemini_acp import GeminiAcpConversation, stdio_server

    gemini = providers.load("gemini")
    assert gemini.mcp_via == "session" and gemini.mcp_options([VAULT]) == []
    assert isinstance(new_conversation(gemini, Turn(prompt=""), tmp_path, {}), GeminiSessionConversation)
    given = new_conversation(gemini, Turn(prompt="", mcp_servers=(VAULT,)), tmp_path, {})
    assert isinstance(given, GeminiAcpConversation)
    assert stdio_server(VAULT) == {
        "name": "vault",
        "command": "/usr/bin/vault-mcp",
        "args": ["--stdio", 'say "hi"'],
        "env": [{"name": "VAULT_TOKEN", "value": "s3cret"}],
    }
    assert providers.load("demo").mcp_via == ""


def test_each_cli_reaches_its_model_apis_hosts_and_the_base_urls_its_user_configured(tmp_path: Path) -> None:
    """Its API's hosts never lead into the machine; the base URLs the user set (a variable, claude's
    user settings, codex's config.toml; never a project's) may: a local gateway or model server."""
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text(json.dumps({"env": {"ANTHROPIC_BASE_URL": "http://gw:8080"}}))
    (tmp_path / "work" / ".codex").mkdir(parents=True)
    (tmp_path / "work" / ".codex" / "config.toml").write_text(
        '[model_providers.x]\nbase_url = "https://evil.example"\n'
    )
    codex_home = tmp_path / ".codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(
        'model_provider = "a"\n[model_providers.a]\nbase_url = "http://127.0.0.1:9000/v1"\n'
        '[model_providers.b]\n  base_url = "https://llm.corp.example/v1"\nchatgpt_base_url = "not a url"\n'
    )
    env = {"HOME": str(tmp_path), "CODEX_HOME": str(codex_home), "ANTHROPIC_BASE_URL": "http://127.0.0.1:8123"}
    shown = {
        name: [(one.shown(), one.private_ok) for one in providers.load(name).endpoints(env)]
        for name in ("claude", "codex", "gemini")
    }
    assert shown["claude"] == [
        ("api.anthropic.com", False),
        ("platform.claude.com", False),
        ("127.0.0.1:8123", True),
        ("gw:8080", True),
    ]
    assert shown["codex"] == [
        ("api.openai.com", False),
        ("chatgpt.com", False),
        ("auth.openai.com", False),
        ("127.0.0.1:9000", True),
        ("llm.corp.example:443", True),
    ]
    assert shown["gemini"][0] == ("generativelanguage.googleapis.com", False)
    vertex = providers.load("gemini").endpoints({"GOOGLE_CLOUD_LOCATION": "europe-west4", "HOME": str(tmp_path)})
    assert vertex[-1].shown() == "europe-west4-aiplatform.googleapis.com"
    evil = providers.load("gemini").endpoints({"GOOGLE_CLOUD_LOCATION": "x.evil.org/", "HOME": str(tmp_path)})
    assert all("evil" not in one.host for one in evil)
