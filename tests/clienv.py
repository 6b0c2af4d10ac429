"""Scratch homes and environments that point the real claude, gemini and codex CLIs (and the
third-party CLIs crew drives by configuration alone: llm, qwen, opencode) at the mock, and `run_cli`,
which runs one provider turn through crew's own process handling and decodes it.

`cli_env(name, mock_url, home)` writes the settings files DESIGN.md describes under `home` (a fresh
directory per test) and returns the complete environment to run that CLI with. Nothing of the
caller's own credentials or CLI settings leaks in, and nothing leaves 127.0.0.1: the model base URL
is the mock, and every HTTP(S) proxy variable points at the mock too, which refuses and records any
request for another host (`MockServer.problems`). A home that already holds the CLI's settings (a
lived-in one) keeps them: the test's are written over them.

`live_in(name, env, project)` uses a CLI in its home as a person does before they meet crew: an MCP
server of their own added with the CLI's own command, two plain runs in `project` (a session and
its continuation: sessions, project registries, databases, what the CLI writes about itself), the
folder trusted. The e2e tier's homes are copies of such a home (`copy_home`), made once a session.
"""

from __future__ import annotations

import configparser
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from crewbridge.providers.base import Turn

from crewbridge import providers
from crewbridge.base.decoded import Done, Event, Failure, Session, Text, Usage
from crewbridge.system.process import Child
from mockserver import MockServer

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
    """`settings` written over what the JSON file at `path` holds (a lived-in home's own)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    current = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps(_over(current, settings), indent=2))


def _over(current: dict, ours: dict) -> dict:
    merged = dict(current)
    for key, value in ours.items():
        inner = merged.get(key)
        merged[key] = _over(inner, value) if isinstance(value, dict) and isinstance(inner, dict) else value
    return merged


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
    config = codex_home / "config.toml"
    if config.exists():  # what codex itself wrote in it stays (`codex mcp add`); the mock is this one
        text = re.sub(r'(?m)^base_url = ".*/v1"$', f'base_url = "{mock_url}/v1"', config.read_text())
    else:
        text = CODEX_CONFIG.format(url=mock_url)
    config.write_text(text)
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

# --- lived-in homes -------------------------------------------------------------------------------
# Users' machines are not fresh: each CLI ran there before crew, and wrote what crew's sandbox must
# serve (gemini's projects.json hung every @gemini once it existed: docs/sandbox.md).

USER_MCP = Path(__file__).resolve().parent / "usermcp.py"  # the user's own MCP server: it reports each start
GEMINI_MODEL = "gemini-2.5-pro"  # named: no routing call first
# How a person adds an MCP server of their own to each built-in CLI (the recipes' CLIs get none).
ADD_MCP = {
    "claude": ["claude", "mcp", "add", "--scope", "user", "usertools", "--"],
    "gemini": ["gemini", "mcp", "add", "--scope", "user", "--trust", "usertools"],
    "codex": ["codex", "mcp", "add", "usertools", "--"],
}
# Two plain runs: a session, then that session continued.
PLAIN = {
    "claude": (["claude", "-p", "hi"], ["claude", "-p", "--continue", "and again"]),
    "gemini": (
        ["gemini", "-p", "hi", "-m", GEMINI_MODEL],
        ["gemini", "-p", "and again", "-m", GEMINI_MODEL, "--resume", "latest"],
    ),
    "codex": (
        ["codex", "exec", "--skip-git-repo-check", "hi"],
        ["codex", "exec", "--skip-git-repo-check", "resume", "--last", "and again"],
    ),
    "llm": (["llm", "hi"], ["llm", "-c", "and again"]),
    "qwen": (["qwen", "-p", "hi"], ["qwen", "-p", "and again", "--continue"]),
    "opencode": (["opencode", "run", "hi"], ["opencode", "run", "--continue", "and again"]),
}
PLAIN_ANSWER = "Plain answer."  # what a mock answers the plain runs (MockServer.respond)


def live_in(name: str, env: dict[str, str], project: Path, witness: str) -> None:
    """Use CLI `name` (run with `env`) as a person does before they meet crew: add their own MCP
    server (which reports each start to `witness`, a mock's URL), run the CLI plainly in `project`,
    trust that folder."""
    project.mkdir(parents=True, exist_ok=True)
    if name in ADD_MCP:
        plainly(env, project, [*ADD_MCP[name], sys.executable, str(USER_MCP), witness])
    run_plainly(name, env, project)
    trust(name, env, project)


def run_plainly(name: str, env: dict[str, str], project: Path) -> None:
    """Run CLI `name` plainly in `project` twice (a session, then that session continued), against a
    mock that answers PLAIN_ANSWER."""
    project.mkdir(parents=True, exist_ok=True)
    for argv in PLAIN[name]:
        said = plainly(env, project, argv)
        assert said.strip().endswith(PLAIN_ANSWER), f"plain {' '.join(argv)} in {project} said: {said}"


def plainly(env: dict[str, str], cwd: Path, argv: list[str]) -> str:
    """Run `argv` outside crew in `cwd`; → its stdout. TMPDIR is a folder beside the home, as /tmp
    is on a machine (codex makes no links to itself below a temporary folder)."""
    temp = Path(env["HOME"]).parent / "tmp-plain"
    temp.mkdir(exist_ok=True)
    done = subprocess.run(
        argv,
        env={**env, "TMPDIR": str(temp)},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"plain {' '.join(argv)} in {cwd}: exit {done.returncode}: {done.stderr}"
    return done.stdout


def trust(name: str, env: dict[str, str], project: Path) -> None:
    """Trust folder `project` as each CLI's trust prompt does when the user accepts it (only the
    interactive CLIs ask, so it is written here as they write it)."""
    home = Path(env["HOME"])
    if name == "claude":
        path = home / ".claude.json"
        config = json.loads(path.read_text())
        config["hasCompletedOnboarding"] = True
        config.setdefault("projects", {}).setdefault(str(project), {}).update(hasTrustDialogAccepted=True)
        path.write_text(json.dumps(config, indent=2))
    elif name == "gemini":
        path = home / ".gemini" / "trustedFolders.json"
        folders = json.loads(path.read_text()) if path.exists() else {}
        path.write_text(json.dumps({**folders, str(project): "TRUST_FOLDER"}, indent=2))
    elif name == "codex":
        with (Path(env["CODEX_HOME"]) / "config.toml").open("a") as config:
            config.write(f'\n[projects."{project}"]\ntrust_level = "trusted"\n')


@dataclass
class LivedInHomes:
    """Homes where each CLI was used (`live_in`, in a project folder named `work` as the tests' is,
    elsewhere), made once in `root` by whichever test process asks first (pytest-xdist's workers
    share it), against the mock at `url` (which answers PLAIN_ANSWER); `copy` gives a test its own."""

    root: Path
    url: str

    def copy(self, name: str, home: Path, mock_url: str) -> None:
        """A copy of the lived-in home of CLI `name` at `home`, pointing at the mock at `mock_url`."""
        made = self.root / name
        with open(self.root / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one process makes it; the others wait for it
            if not made.exists():
                building = self.root / f"{name}.building"
                shutil.rmtree(building, ignore_errors=True)
                live_in(name, cli_env(name, self.url, building / "home"), building / "work", self.url)
                (building / "url").write_text(self.url)
                building.rename(made)
        copy_home(made / "home", home, (made / "url").read_text(), mock_url)


def copy_home(lived: Path, home: Path, old_url: str, new_url: str) -> None:
    """A copy of lived-in home `lived` at `home`, its settings files (.json, .toml, .yaml) pointing at
    the mock at `new_url` where they named `old_url` (the user's MCP server reports there)."""
    shutil.copytree(lived, home, symlinks=True)
    for path in home.rglob("*"):
        if path.suffix in (".json", ".toml", ".yaml") and path.is_file() and not path.is_symlink():
            text = path.read_text()
            if old_url in text:
                path.write_text(text.replace(old_url, new_url))


def user_mcp_starts(mock: MockServer, below: Path) -> int:
    """How often the user's own MCP server (USER_MCP) started in a folder below `below`, as `mock` saw it."""
    return sum(
        1
        for request in mock.aux
        if request.path == "/user-mcp-started"
        and Path(parse_qs(request.query).get("cwd", ["/"])[0]).is_relative_to(below)
    )


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
    """Run `turn` through provider `name` (prompt on stdin) and decode its whole output. As crew
    runs a CLI, none of the MCP servers the user added to it starts (Provider.own_mcp_only)."""
    provider = providers.load(name)
    turn = replace(turn, options=[*turn.options, *provider.own_mcp_only(turn, env, cwd)])
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
