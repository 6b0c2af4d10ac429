"""A run's options: one dataclass that the commands' click options, Bridge.run and Bridge.chat share."""

from __future__ import annotations

import pytest

from crewbridge.base.options import TASK_ONLY, RunOptions, command_line
from crewbridge.errors import UsageError
from crewbridge.terminal.commands import chat_command, execute_command, query_command

OWN = {"continue_last", "verbose", "config_path"}  # options of the commands, not of the run
READ = {"no_check": "checks", "pr_body_file": "pr_body"}  # the command line's words for run options (command_line)


@pytest.mark.parametrize("command", [query_command, execute_command, chat_command])
def test_every_run_option_is_a_click_option_of_each_command_that_runs_agents(command):
    names = {READ.get(param.name, param.name) for param in command.params}
    expected = set(RunOptions.names()) - (set(TASK_ONLY) if command is chat_command else set())
    assert (names - {"text", "as_json", "as_jsonl", "no_stdin", "agent", "mode"}) == expected | OWN


def test_options_given_by_name_replace_the_defaults():
    options = RunOptions().given({"max_turns": 3, "tools_via": "native"})
    assert (options.max_turns, options.tools_via, options.timeout) == (3, "native", 300.0)


def test_a_name_that_is_not_an_option_is_a_usage_error_naming_the_options():
    with pytest.raises(UsageError, match=r"unknown run option max_turn; the options are: max_turns, timeout"):
        RunOptions().given({"max_turn": 3})


def test_pick_takes_the_run_options_out_and_leaves_the_commands_own():
    values = {"max_turns": 2, "verbose": True, "resume": None}
    assert RunOptions.pick(values) == RunOptions(max_turns=2)
    assert values == {"verbose": True}


@pytest.mark.parametrize(
    ("options", "given"),
    [
        (RunOptions(worktree=True), "--worktree goes"),
        (RunOptions(review="gemini"), "--review goes"),
        (RunOptions(worktree=True, review="gemini"), "--worktree and --review go"),
        (RunOptions(checks=("make test",)), "--check goes"),
        (RunOptions(worktree=True, pr=True), "--worktree and --pr go"),
    ],
)
def test_worktree_review_check_and_pr_go_with_execute_only(options, given):
    options.check("execute")
    with pytest.raises(UsageError) as raised:
        options.check("query")
    assert str(raised.value) == (
        f"{given} with crew execute only: query mode changes no file, so there is nothing to keep in a "
        "worktree, check, review or propose"
    )
    RunOptions().check("query")
    RunOptions(checks=()).check("query")  # --no-check, or crew.yaml's check: nothing to refuse


def test_a_pull_request_needs_a_worktree_and_its_settings_need_pr():
    with pytest.raises(UsageError, match=r"^--pr proposes the branch of an agent's worktree; give --worktree too$"):
        RunOptions(pr=True).check("execute")
    with pytest.raises(UsageError, match=r"^--draft, --label say how to open a pull request; give --pr too$"):
        RunOptions(worktree=True, draft=True, labels=("bot",)).check("execute")
    RunOptions(worktree=True, pr=True, draft=True, pr_title="T", pr_body="B", labels=("bot",)).check("execute")


def test_the_command_line_words_become_run_options(tmp_path):
    values = {"checks": (), "labels": ("a", "b"), "pr_body_file": None, "no_check": False}
    command_line(values)
    assert values == {"checks": None, "labels": ("a", "b")}  # no --check: crew.yaml's
    values = {"checks": ("ruff check .", "pytest"), "no_check": False}
    command_line(values)
    assert values == {"checks": ("ruff check .", "pytest")}
    values = {"checks": (), "no_check": True}
    command_line(values)
    assert values == {"checks": ()}  # --no-check: none at all
    with pytest.raises(UsageError, match=r"^--check and --no-check were both given; choose one$"):
        command_line({"checks": ("x",), "no_check": True})
    body = tmp_path / "body.md"
    body.write_text("Bumps ruff.\n")
    values = {"pr_body_file": body}
    command_line(values)
    assert values == {"pr_body": "Bumps ruff.\n"}
    with pytest.raises(
        UsageError, match=r"^--pr-body .*missing.md: cannot read it \(No such file or directory\); give"
    ):
        command_line({"pr_body_file": tmp_path / "missing.md"})
