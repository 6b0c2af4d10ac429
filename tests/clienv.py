"""Scratch homes and environments that point the real claude, gemini and codex CLIs (and the
third-party CLIs crew drives by configuration alone: llm, qwen, opencode) at the mock, and `run_cli`,
which runs one provider turn through crew's own process handling and decodes it.

`cli_env(name, mock_url, home)` writes the settings files DESIGN.md describes under `home` (a fresh
directory per test) and returns the complete environment to run that CLI with. Nothing of the
caller's own credentials or CLI settings leaks in, and nothing leaves 127.0.0.1: the model base URL
is the mock, and every HTTP(S) proxy variable points at the mock too, which refuses and records any
request for another host (`MockServer.problems`).
"""

from __future__ import annotations

import configparser
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from crewbridge.providers.base import Turn

from crewbridge import providers
from crewbridge.base.decoded import Done, Event, Failure, Session, Text, Usage
from crewbridge.system.process import Child

REPO = Path(__file__).resolve().parent.parent
BIN = REPO / "node_modules" / ".bin"  # where `npm install` in the repo root puts the pinned CLIs
VENV_BIN = Path(sys.executable).parent  # where pip puts the pinned PyPI CLIs (setup.cfg's test extra)
CLIS = ("claude", "gemini", "codex")  # the built-in providers
PACKAGES = {
    "claude": "@anthropic-ai/claude-code",
    "gemini": "@google/gemini-cli",
    "codex": "@openai/codex",
    "qwen": "@qwen-code/qwen-code",
    "opencode": "opencode-ai",
    "conformance": "@modelcontextprotocol/conformance",
}  # the official MCP conformance suite
PYPI = {"llm": "llm"}  # CLIs installed from PyPI, by command

# Variables of the caller's environment that could carry real credentials or redirect a CLI.
_VENDOR_PREFIXES = ("ANTHROPIC_", "CLAUDE", "GEMINI_", "GOOGLE_", "OPENAI_", "CODEX_", "VERTEX")
_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


ALL = "CREW_TEST_ALL"  # "1" (scripts/test sets it): a test that lacks what it needs fails, never skips


def missing(why: str) -> None:
    """What the test needs is not on this machine: skip it saying `why`, or fail it under
    CREW_TEST_ALL=1 (scripts/test, CI), where everything is installed first."""
    if os.environ.get(ALL) == "1":
        pytest.fail(f"{why} ({ALL}=1: every test runs)", pytrace=False)
    pytest.skip(why)


def require_cli(name: str, repo: Path = REPO) -> str:
    """The path of the real CLI `name` (in the repo's node_modules/.bin, or this Python's bin for
    a PyPI one), at the version package.json or setup.cfg pins. A CLI that is not installed skips
    the test, saying so (`missing`: it fails under CREW_TEST_ALL=1); another version fails it."""
    if name in PYPI:
        return _require_pypi(name, repo)
    hint = f"run `npm install` in {repo} (package.json and its lock pin the versions)"
    path = shutil.which(name, path=str(repo / "node_modules" / ".bin"))
    if path is None:
        missing(f"real CLI '{name}' not found in {repo / 'node_modules' / '.bin'}; {hint}")
        raise AssertionError("unreachable: missing() skips or fails")
    pinned = json.loads((repo / "package.json").read_text())["dependencies"][PACKAGES[name]]
    installed = json.loads((repo / "node_modules" / PACKAGES[name] / "package.json").read_text())
    if installed["version"] != pinned:
        pytest.fail(
            f"{PACKAGES[name]} {installed['version']} is installed but package.json pins {pinned}; {hint}",
            pytrace=False,
        )
    return path


def _require_pypi(name: str, repo: Path) -> str:
    hint = f"run `pip install -e '.[test]'` in {repo} (setup.cfg's test extra pins the versions)"
    setup = configparser.ConfigParser()
    setup.read(repo / "setup.cfg")
    test_extra = setup["options.extras_require"]["test"].split()
    pinned = next(line.split("==")[1] for line in test_extra if line.startswith(f"{PYPI[name]}=="))
    path = shutil.which(name, path=str(VENV_BIN))
    try:
        installed = version(PYPI[name])
    except PackageNotFoundError:
        installed = None
    if path is None or installed is None:
        pytest.fail(f"real CLI '{name}' not found in {VENV_BIN}; {hint}", pytrace=False)
    if installed != pinned:
        pytest.fail(f"{PYPI[name]} {installed} is installed but setup.cfg pins {pinned}; {hint}", pytrace=False)
    return path


def cli_env(name: str, mock_url: str, home: Path) -> dict[str, str]:
    """The environment for CLI `name` with its scratch HOME at `home`, talking to `mock_url`."""
    if name not in _SETUP:
        raise ValueError(f"no environment for CLI {name!r}; known: {', '.join(_SETUP)}")
    home.mkdir(parents=True, exist_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(_VENDOR_PREFIXES) and k not in _PROXY_VARS and k.upper() != "NO_PROXY"
    }
    env.update(
        HOME=str(home),
        PATH=os.pathsep.join([str(BIN), str(VENV_BIN), env.get("PATH", "")]),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        NO_COLOR="1",
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
    )
    env.update({var: mock_url for var in _PROXY_VARS})
    env.update(_SETUP[name](mock_url, home))
    return env


def _claude(mock_url: str, home: Path) -> dict[str, str]:
    return {
        "ANTHROPIC_BASE_URL": mock_url,
        "ANTHROPIC_API_KEY": "dummy",
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_BUG_COMMAND": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


# privacy.usageStatisticsEnabled (default on) sends usage to play.googleapis.com.
GEMINI_SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "general": {
        "maxAttempts": 1,
        "enableAutoUpdate": False,
        "enableAutoUpdateNotification": False,
        "sessionRetention": {"enabled": False},
    },
    "telemetry": {"enabled": False},
    "privacy": {"usageStatisticsEnabled": False},
}


def _settings(path: Path, settings: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2))


def _gemini(mock_url: str, home: Path) -> dict[str, str]:
    _settings(home / ".gemini" / "settings.json", GEMINI_SETTINGS)
    return {"GEMINI_API_KEY": "dummy", "GOOGLE_GEMINI_BASE_URL": mock_url, "GEMINI_CLI_TRUST_WORKSPACE": "true"}


# [analytics] (default on for exec) sends metrics to ab.chatgpt.com. No `model`: codex's default is
# one it knows (an unknown one adds a "model metadata not found" error item to the output).
CODEX_CONFIG = """\
model_provider = "mock"
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.mock]
name = "mock"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "OPENAI_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[features]
plugins = false
remote_plugin = false
apps = false
api_key_model_discovery = false
"""


def _codex(mock_url: str, home: Path) -> dict[str, str]:
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(CODEX_CONFIG.format(url=mock_url))
    return {"CODEX_HOME": str(codex_home), "OPENAI_API_KEY": "dummy"}


def _llm(mock_url: str, home: Path) -> dict[str, str]:
    """llm's own model configuration: an OpenAI-compatible model "mock" at the mock's /v1 (no
    api_key_name: no key is sent or needed), its default model."""
    user_path = home / "llm"
    user_path.mkdir(parents=True, exist_ok=True)
    (user_path / "extra-openai-models.yaml").write_text(
        f'- model_id: mock\n  model_name: mock-model\n  api_base: "{mock_url}/v1"\n'
    )
    (user_path / "default_model.txt").write_text("mock")  # as `llm models default mock` writes it
    return {"LLM_USER_PATH": str(user_path)}


# Without these, Qwen Code checks for updates, sends usage statistics, and after a turn asks the
# model again in the background to update its "managed memory".
QWEN_SETTINGS = {
    "security": {"auth": {"selectedType": "openai"}},
    "general": {"enableAutoUpdate": False},
    "telemetry": {"enabled": False},
    "privacy": {"usageStatisticsEnabled": False},
    "memory": {"enableManagedAutoMemory": False},
}


def _qwen(mock_url: str, home: Path) -> dict[str, str]:
    _settings(home / ".qwen" / "settings.json", QWEN_SETTINGS)
    return {"OPENAI_BASE_URL": f"{mock_url}/v1", "OPENAI_API_KEY": "dummy", "OPENAI_MODEL": "mock-model"}


def _opencode(mock_url: str, home: Path) -> dict[str, str]:
    """A provider "mock" in opencode's global config (XDG_CONFIG_HOME/opencode), its default model.
    Without the variables it fetches a model list from models.opencode.ai and checks for updates; on
    each run it also installs its plugin package into the config directory in the background, from
    the npm registry, here the mock (which answers 404)."""
    config = {
        "$schema": "https://opencode.ai/config.json",
        "model": "mock/mock-model",
        "autoupdate": False,
        "share": "disabled",
        "provider": {
            "mock": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "mock",
                "options": {"baseURL": f"{mock_url}/v1", "apiKey": "dummy"},
                "models": {"mock-model": {"name": "mock-model"}},
            }
        },
    }
    _settings(home / ".config" / "opencode" / "opencode.json", config)
    return {
        "OPENCODE_DISABLE_MODELS_FETCH": "true",
        "OPENCODE_DISABLE_AUTOUPDATE": "true",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "true",
        "npm_config_registry": f"{mock_url}/npm/",
    }


_SETUP = {"claude": _claude, "gemini": _gemini, "codex": _codex, "llm": _llm, "qwen": _qwen, "opencode": _opencode}


@dataclass
class Run:
    """One finished CLI run: exit status, raw stdout lines, the decoder's events, stderr."""

    returncode: int
    lines: list[str]
    events: list[Event]
    stderr: str
    seconds: float

    @property
    def text(self) -> str:
        """The assistant text, as the decoder delivered it."""
        return "".join(e.text for e in self.events if isinstance(e, Text))

    @property
    def session_id(self) -> str | None:
        return next((e.session_id for e in self.events if isinstance(e, Session) and e.session_id), None)

    @property
    def failures(self) -> list[Failure]:
        return [e for e in self.events if isinstance(e, Failure)]

    @property
    def usage(self) -> list[Usage]:
        return [e for e in self.events if isinstance(e, Usage)]

    @property
    def done(self) -> Done | None:
        """The last Done event, if the run reported its end."""
        return next((e for e in reversed(self.events) if isinstance(e, Done)), None)


def run_cli(name: str, turn: Turn, env: dict[str, str], cwd: Path, timeout: float = 60.0) -> Run:
    """Run `turn` through provider `name` (prompt on stdin) and decode its whole output."""
    provider = providers.load(name)
    start = time.monotonic()
    env = {**provider.env(), **env}
    child = Child(
        provider.argv(turn),
        env=env,
        cwd=cwd,
        stdin=turn.prompt,
        install_hint=provider.install_hint,
        passed=provider.logins(env),  # as crew starts it: its own credentials, no other secret
    )
    try:
        lines = list(child.lines(deadline=start + timeout))
        returncode = child.wait()
    finally:
        child.close()
    decoder = provider.decoder()
    events = [event for line in lines for event in decoder.decode(line)]
    return Run(returncode, lines, events, child.stderr, time.monotonic() - start)
