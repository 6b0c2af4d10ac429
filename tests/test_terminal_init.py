"""Getting started: `crew init` writes a commented starter crew.yaml that loads as written and never
replaces a file unasked; `crew agents list`; shell completion as the README documents it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from crewbridge.cli import cli
from crewbridge.config import load_config, read_config
from crewbridge.errors import UsageError
from crewbridge.terminal.init import add_recipe, recipe_names, recipe_text, starter_text, write_starter


@pytest.fixture(autouse=True)
def scratch_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.setattr("crewbridge.toolkit.custom_tools.entry_points", lambda group: [])


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    monkeypatch.chdir(path)
    return path


def test_the_starter_is_found_and_used_as_written_without_needing_trust(project: Path) -> None:
    path = write_starter(project)
    assert path == project / "crew.yaml" and path.read_text() == starter_text()
    config = load_config(None, project)  # found by the directory search: a file that runs commands would be refused
    assert config.path == path and config.prefix == "crew"
    assert config.agents["reviewer"].profile == "read-only" and config.agents["reviewer"].provider == "claude"
    assert set(config.agents) == {"claude", "gemini", "codex", "demo", "reviewer"}
    config.registry()  # its globs all match tools


def test_every_commented_example_is_valid_configuration_once_uncommented(project: Path) -> None:
    out: list[str] = []
    inside = False  # in a commented-out section: "# tools:" and the "#   …" lines under it
    for line in starter_text().splitlines():
        inside = line[2:] in ("tools:", "providers:", "hooks:") or (inside and line.startswith("#   "))
        out.append(line[2:] if inside else line)
    (project / "full.yaml").write_text("\n".join(out))
    config = read_config(project / "full.yaml")
    assert set(config.tools) == {"count_lines"} and set(config.providers) == {"llama"}
    assert [hook.command for hook in config.hooks["before_tool_call"]] == [["./hooks/check.sh"]]
    config.registry()


def test_an_existing_file_is_never_replaced_without_force(project: Path) -> None:
    (project / "crew.yaml").write_text("prefix: mine\n")
    with pytest.raises(UsageError, match=re.escape("crew.yaml exists already; edit it, or pass --force to replace it")):
        write_starter(project)
    assert (project / "crew.yaml").read_text() == "prefix: mine\n"
    write_starter(project, force=True)
    assert (project / "crew.yaml").read_text() == starter_text()
    assert sorted(p.name for p in project.iterdir()) == ["crew.yaml"]  # no temporary file left


def test_the_other_config_name_in_the_same_directory_is_refused_even_with_force(project: Path) -> None:
    (project / ".crew.yaml").write_text("prefix: hidden\n")
    with pytest.raises(UsageError, match=r"\.crew\.yaml exists already and crew would find both files"):
        write_starter(project, force=True)
    assert not (project / "crew.yaml").exists()


def test_a_named_file_is_written_and_a_missing_directory_refused(project: Path) -> None:
    assert write_starter(project / "team.yaml") == project / "team.yaml"
    with pytest.raises(UsageError, match="is not a directory; create it first or give another path"):
        write_starter(project / "missing" / "crew.yaml")


def test_the_command_writes_here_or_to_the_users_config(project: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["init"])
    assert result.exit_code == 0 and result.output.startswith(f"wrote {project / 'crew.yaml'}\nnext: crew doctor")
    assert runner.invoke(cli, ["init"]).exit_code != 0
    assert runner.invoke(cli, ["init", "--force"]).exit_code == 0
    assert runner.invoke(cli, ["init", "--user"]).exit_code == 0
    assert (tmp_path / "xdg-config" / "crewbridge" / "crew.yaml").read_text() == starter_text()


# --- crew init --agent: recipes ---------------------------------------------------------------------


def test_every_recipe_loads_and_describes_its_agent_and_provider(project: Path) -> None:
    assert recipe_names() == ["llm", "opencode", "qwen"]
    for name in recipe_names():
        (project / f"{name}.yaml").write_text(recipe_text(name))
        config = read_config(project / f"{name}.yaml")
        assert config.agents[name].provider == name and config.providers[name].install_hint


def test_recipes_go_under_the_starters_sections_and_keep_its_comments(project: Path) -> None:
    add_recipe(project, "llm")
    add_recipe(project, "qwen")
    text = (project / "crew.yaml").read_text()
    assert text.startswith(starter_text().split("\n# Your own command tools")[0])  # kept as it was
    assert "  # llm (https://llm.datasette.io)" in text and '# Read-only: "default" approval' in text
    config = read_config(project / "crew.yaml")
    assert {"reviewer", "llm", "qwen"} <= set(config.agents) and set(config.providers) == {"llm", "qwen"}
    assert config.providers["qwen"].options["query"][:2] == ["--approval-mode", "default"]


def test_a_file_without_the_sections_gets_them_and_one_with_the_name_is_refused(project: Path) -> None:
    (project / "crew.yaml").write_text("prefix: mine   # my own\n")
    add_recipe(project / "crew.yaml", "llm")
    text = (project / "crew.yaml").read_text()
    assert text.startswith("prefix: mine   # my own\n\nagents:\n")
    assert read_config(project / "crew.yaml").providers["llm"].command[0] == "llm"
    with pytest.raises(UsageError, match="has an agent or provider 'llm' already; edit it, or remove it first"):
        add_recipe(project, "llm")
    assert (project / "crew.yaml").read_text() == text


def test_an_inline_section_or_an_unknown_recipe_is_refused_and_nothing_written(project: Path) -> None:
    (project / "crew.yaml").write_text("agents: {}\n")
    with pytest.raises(UsageError, match=r"agents: is written inline .* write it as an indented block"):
        add_recipe(project, "qwen")
    with pytest.raises(UsageError, match="no recipe for 'aider'; known: llm, opencode, qwen"):
        add_recipe(project, "aider")
    assert (project / "crew.yaml").read_text() == "agents: {}\n"
    assert [p.name for p in project.iterdir()] == ["crew.yaml"]  # no temporary file left


def test_the_command_adds_recipes_and_says_to_trust_the_file(project: Path) -> None:
    result = CliRunner().invoke(cli, ["init", "--agent", "llm", "--agent", "qwen"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(
        f"added llm, qwen to {project / 'crew.yaml'}\nnext: read it, then crew config trust"
    )
    result = CliRunner().invoke(cli, ["init", "--agent", "nope"])
    assert result.exit_code != 0 and "no recipe for 'nope'" in str(result.exception)


# --- crew agents list ------------------------------------------------------------------------------


def test_agents_list_shows_id_provider_model_and_profile(project: Path) -> None:
    (project / "crew.yaml").write_text(
        "agents:\n  fast:\n    provider: gemini\n    model: gemini-2.5-flash\n    profile: read-only\n"
    )
    result = CliRunner().invoke(cli, ["agents", "list"])
    assert result.exit_code == 0
    assert result.output.splitlines() == [
        "AGENT    PROVIDER  MODEL             PROFILE",
        "@claude  claude    (default)         coding",
        "@gemini  gemini    (default)         coding",
        "@codex   codex     (default)         coding",
        "@demo    demo      (default)         coding",
        "@fast    gemini    gemini-2.5-flash  read-only",
    ]
    rows = [json.loads(line) for line in CliRunner().invoke(cli, ["agents", "list", "--json"]).output.splitlines()]
    assert rows[-1] == {"id": "fast", "provider": "gemini", "model": "gemini-2.5-flash", "profile": "read-only"}


# --- crew --version ---------------------------------------------------------------------------------


def test_version_is_printed_without_loading_the_engine() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "crewbridge", "--version"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == "crew, version 0.1.0\n"
    loaded = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert "crewbridge" in loaded
    assert not loaded & {
        "click",
        "crewbridge.cli",
        "crewbridge.config",
        "crewbridge.bridge",
        "yaml",
        "jsonschema",
        "pexpect",
    }


# --- shell completion ------------------------------------------------------------------------------


def completion(**variables: str) -> str:
    env = {**os.environ, **variables}
    return subprocess.run(
        [sys.executable, "-m", "crewbridge"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.mark.parametrize(
    "shell, marker",
    [
        ("bash", "complete -o nosort -F _crew_completion crew"),
        ("zsh", "#compdef crew"),
        ("fish", "complete --no-files --command crew"),
    ],
)
def test_the_completion_script_of_each_shell_is_printed(shell: str, marker: str) -> None:
    assert marker in completion(_CREW_COMPLETE=f"{shell}_source")


@pytest.mark.slow
def test_completion_offers_commands_and_options() -> None:
    assert "plain,doctor" in completion(_CREW_COMPLETE="bash_complete", COMP_WORDS="crew do", COMP_CWORD="1")
    words = completion(_CREW_COMPLETE="bash_complete", COMP_WORDS="crew init --", COMP_CWORD="2").split()
    assert {"plain,--force", "plain,--user"} <= set(words)


def test_force_with_recipes_starts_again_from_the_starter(project: Path) -> None:
    (project / "crew.yaml").write_text("prefix: mine\nagents:\n  llm: {provider: claude}\n")
    result = CliRunner().invoke(cli, ["init", "--force", "--agent", "llm"])
    assert result.exit_code == 0, result.output
    config = read_config(project / "crew.yaml")
    assert config.prefix == "crew" and config.agents["llm"].provider == "llm"
