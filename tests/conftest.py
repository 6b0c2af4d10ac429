"""Shared fixtures: the mock model server, the real CLIs (pinned), and their scratch environments."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable, Iterator

import pytest

from clienv import BIN, CLIS, REPO
from clienv import cli_env as build_env
from mockserver import MockServer

PACKAGES = {"claude": "@anthropic-ai/claude-code", "gemini": "@google/gemini-cli",
            "codex": "@openai/codex"}


@pytest.fixture
def mock_server() -> Iterator[MockServer]:
    """A running mock model server. The test fails if a CLI asked for more replies than scripted,
    called a route the mock lacks, or tried to reach a host other than 127.0.0.1."""
    with MockServer() as mock:
        yield mock
    assert not mock.problems, f"the mock model server saw: {'; '.join(mock.problems)}"


def require_cli(name: str) -> str:
    """The path of the real CLI `name`, at the version package.json pins; fails the test (never
    skips it) when it is missing or another version."""
    hint = f"run `npm ci` in {REPO} (package.json pins the versions)"
    path = shutil.which(name, path=str(BIN))
    if path is None:
        pytest.fail(f"real CLI '{name}' not found in {BIN}; {hint}", pytrace=False)
    pinned = json.loads((REPO / "package.json").read_text())["dependencies"][PACKAGES[name]]
    installed = json.loads((REPO / "node_modules" / PACKAGES[name] / "package.json").read_text())
    if installed["version"] != pinned:
        pytest.fail(f"{PACKAGES[name]} {installed['version']} is installed but package.json pins "
                    f"{pinned}; {hint}", pytrace=False)
    return path


@pytest.fixture(params=CLIS)
def cli(request: pytest.FixtureRequest) -> str:
    """Each real CLI in turn (claude, gemini, codex); fails when one is missing."""
    require_cli(request.param)
    return request.param


@pytest.fixture
def cli_env(mock_server: MockServer, tmp_path: Path) -> Callable[[str], dict[str, str]]:
    """`cli_env(name)`: the environment for real CLI `name`, with a scratch HOME under this test's
    tmp_path and the model API pointed at `mock_server`. The same name gives the same HOME, so a
    second turn finds the first turn's session."""
    def env(name: str) -> dict[str, str]:
        require_cli(name)
        return build_env(name, mock_server.url, tmp_path / f"home-{name}")
    return env


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """The directory the CLI runs in."""
    path = tmp_path / "work"
    path.mkdir()
    return path
