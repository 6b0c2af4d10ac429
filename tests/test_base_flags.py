"""crewbridge.base.flags: crew's options declared once. The commands' click options are made from its
tables, and the quick readings before click (crewbridge.terminal.early, crewbridge.mcp.early) take a value
exactly where the click option made from the same entry takes it."""

from __future__ import annotations

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crewbridge.acp.commands import acp_group
from crewbridge.base import flags
from crewbridge.batch.commands import batch_submit_command, batch_worker_command
from crewbridge.mcp.commands import mcp_group
from crewbridge.terminal.commands import chat_command, execute_command, parse_command, query_command
from crewbridge.terminal.options import click_option

VALUES = st.one_of(
    st.text(max_size=8),
    st.integers().map(str),
    st.floats().map(str),
    st.sampled_from(
        [
            *("0.1", "0.09", "1", "0", "-1", " 5 ", "+5", "5_0", "1.0", "1e3", "nan", "inf"),
            *("text", "native", "Native", "0x10", "auto", "off", "required", "", "a\0b", ".", "/"),
        ]
    ),
)
VALUED = [
    flag
    for flag in (*flags.LOOP, *flags.TASK, *flags.MCP, *flags.ACP, *flags.UI, *flags.BATCH, *flags.BATCH_WORKER)
    if flag.kind != "flag"
]


def clicks(flag: flags.Flag) -> click.Option:
    """The click option crewbridge.terminal.options makes of `flag`."""
    [param] = click_option(flag)(click.command()(lambda **values: None)).params
    assert isinstance(param, click.Option)
    return param


@given(value=VALUES)
@pytest.mark.slow
def test_a_value_is_taken_exactly_when_the_click_option_made_from_the_same_entry_takes_it(value: str) -> None:
    for flag in VALUED:
        param = clicks(flag)
        try:
            param.type.convert(value, param, None)
            takes = True
        except (click.BadParameter, ValueError):  # a path holding NUL: ValueError from os.stat
            takes = False
        assert flag.takes(value) == takes, (flag.names, value)
        assert not flag.sure(value) or takes  # what a quick reading takes as sure, click takes


@pytest.mark.parametrize(
    ("command", "tables"),
    [
        (query_command, (flags.TASK, flags.LOOP)),
        (execute_command, (flags.TASK, flags.LOOP)),
        (chat_command, (flags.LOOP,)),
        (mcp_group, (flags.MCP,)),
        (acp_group, (flags.ACP,)),
        (batch_submit_command, (flags.BATCH,)),
        (batch_worker_command, (flags.BATCH_WORKER,)),
        (parse_command, (flags.PARSE,)),
    ],
)
def test_the_commands_have_exactly_the_tables_options(command, tables) -> None:
    made = {
        (param.name, *param.opts, *param.secondary_opts) for param in command.params if isinstance(param, click.Option)
    }
    declared = {(flag.dest, *flag.names) for table in tables for flag in table}
    assert made - {("mode", "--mode")} == declared
    required = {param.name for param in command.params if isinstance(param, click.Option) and param.required}
    assert required == {flag.dest for table in tables for flag in table if flag.required}


def test_a_reading_without_a_required_option_is_not_sure() -> None:
    assert flags.read(["--prefix", "x"], flags.PARSE) is None
    assert flags.read(["--format", "claude", "--prefix", "x"], flags.PARSE) == (
        {"--format": "claude", "--prefix": "x"},
        [],
    )


def test_options_are_read_by_any_of_their_names_and_the_other_words_kept_in_order() -> None:
    assert flags.read(["@a", "-y", "--timeout", "5", "hi", "--max-turns=3", "-"], flags.LOOP) == (
        {"--yes": "", "--timeout": "5", "--max-turns": "3"},
        ["@a", "hi", "-"],
    )


@pytest.mark.parametrize(
    "args",
    [
        ["--nope"],  # an option it does not know
        ["--", "hi"],
        ["-yv"],
        ["--yes=1"],  # a flag given a value: click refuses it
        ["--timeout"],  # no value
        ["--timeout", "0"],  # one click refuses
        ["--tools-via", "Native"],
        ["--continue"],  # read by click alone: the run starts its CLIs itself
        ["--resume", "RUN"],
        ["--verbose"],
    ],
)
def test_a_reading_is_not_sure_of_what_only_click_may_read(args: list[str]) -> None:
    assert flags.read(args, flags.LOOP) is None


@pytest.mark.parametrize("table", [flags.MCP, flags.ACP])
def test_an_entry_may_take_fewer_values_as_sure_than_click_takes(table) -> None:
    [sandbox] = [flag for flag in table if flag.dest == "sandbox"]
    assert sandbox.takes("required") and not sandbox.sure("required") and sandbox.sure("off")
    assert flags.read(["--sandbox", "required"], table) is None


def test_a_batchs_run_options_are_the_run_commands_entries_with_a_batchs_words_and_defaults() -> None:
    loop = {flag.dest: flag for flag in (*flags.LOOP, *flags.TASK)}
    for flag in flags.BATCH:
        if flag.dest in loop and flag.dest not in ("sandbox", "config_path"):
            same = loop[flag.dest]
            assert (flag.names, flag.kind, flag.low, flag.above, flag.choices) == (
                same.names,
                same.kind,
                same.low,
                same.above,
                same.choices,
            )
    batch = {flag.dest: flag for flag in flags.BATCH}
    assert (batch["timeout"].default, batch["max_turns"].default, batch["rounds"].default) == (600.0, 20, 3)
    assert batch["max_cost"].help == "Dollars each repository's run may cost."
