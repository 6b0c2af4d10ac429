"""Reading `crew query|execute` arguments before click loads, to start the agents' CLIs early."""
from __future__ import annotations

import click
import pytest

from crewbridge.cli import cli
from crewbridge.early import COMMANDS, OPTIONS, read_args


@pytest.mark.parametrize("argv, expected", [
    (["query", "@claude hi"], ("query", "@claude hi", None)),
    (["execute", "@codex", "fix", "it"], ("execute", "@codex fix it", None)),
    (["query", "--json", "-y", "-v", "--timeout", "9", "--max-turns=3", "@a", "hi"], ("query", "@a hi", None)),
    (["query", "--config", "team.yaml", "@a hi"], ("query", "@a hi", "team.yaml")),
    (["query", "--config=team.yaml", "@a hi"], ("query", "@a hi", "team.yaml")),
    (["query", "--", "@a", "--json"], ("query", "@a --json", None)),
    (["query", "@a", "-"], ("query", "@a -", None)),
])
def test_plain_query_and_execute_arguments_are_read(argv, expected) -> None:
    assert read_args(argv) == expected


@pytest.mark.parametrize("argv", [
    [], ["--version"], ["chat", "@claude"], ["tools", "list"],
    ["query"], ["query", "--json"],  # no task
    ["query", "--help", "@a hi"], ["query", "-h", "@a hi"],  # help, not a run
    ["query", "-yv", "@a hi"], ["query", "--jsn", "@a hi"],  # what click reads differently or refuses
    ["query", "--json=1", "@a hi"],
])
def test_anything_else_is_left_to_click(argv) -> None:
    assert read_args(argv) is None


@pytest.mark.parametrize("name", COMMANDS)
def test_the_table_holds_the_options_click_defines(name) -> None:
    command = cli.commands[name]
    defined = {flag: not option.is_flag for option in command.params if isinstance(option, click.Option)
               for flag in option.opts + option.secondary_opts}
    defined = {flag: takes for flag, takes in defined.items() if flag not in ("-h", "--help")}
    assert defined == OPTIONS
