"""A run's options: one dataclass that the commands' click options, Bridge.run and Bridge.chat share."""

from __future__ import annotations

import pytest

from crewbridge.base.options import TASK_ONLY, RunOptions
from crewbridge.errors import UsageError
from crewbridge.terminal.commands import chat_command, execute_command, query_command

OWN = {"continue_last", "verbose", "config_path"}  # options of the commands, not of the run


@pytest.mark.parametrize("command", [query_command, execute_command, chat_command])
def test_every_run_option_is_a_click_option_of_each_command_that_runs_agents(command):
    names = {param.name for param in command.params}
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
    ],
)
def test_worktree_and_review_go_with_execute_only(options, given):
    options.check("execute")
    with pytest.raises(UsageError) as raised:
        options.check("query")
    assert str(raised.value) == (
        f"{given} with crew execute only: query mode changes no file, so there is nothing to keep in a "
        "worktree or to review"
    )
    RunOptions().check("query")
