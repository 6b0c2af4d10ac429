import json
import os
import sys
import time
from importlib.metadata import EntryPoint

import pytest

from crewbridge.errors import ConfigError
from crewbridge.toolkit import custom_tools
from crewbridge.toolkit.custom_tools import CommandTool, placeholders, plugin_tools
from crewbridge.toolkit.functions import tool
from crewbridge.toolkit.registry import ToolContext

PY = sys.executable
ECHO_ARGS = [PY, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))"]


def gone(pid: int) -> bool:
    """Whether `pid` has ended (a zombie counts), allowing the kernel a moment to deliver SIGKILL."""
    for _ in range(200):
        try:
            with open(f"/proc/{pid}/stat") as handle:
                if handle.read().split(")")[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.01)
    return False


def echo_tool(*template: str, **properties: dict) -> CommandTool:
    """A tool that prints the argv it was given as JSON."""
    schema = {"type": "object", "properties": properties or {"text": {"type": "string"}}}
    return CommandTool(name="echo", command=[*ECHO_ARGS, *template], schema=schema)


def call(command_tool: CommandTool, args: dict, workdir=None, **ctx):
    from crewbridge.toolkit.registry import ToolRegistry

    registry = ToolRegistry()
    registry.register(command_tool.tool())
    return registry.call(command_tool.name, args, ToolContext(workdir or os.getcwd(), **ctx))


def test_each_argument_is_one_argv_item_and_no_shell_sees_it():
    hostile = "a; rm -rf / $(touch pwned) `id` > out | cat && \"quoted\" 'single'\nnewline *"
    result = call(echo_tool("{text}"), {"text": hostile})
    assert result.success and result.data["output"] == json.dumps([hostile])


def test_placeholders_may_sit_inside_an_item_and_take_numbers_and_booleans():
    tool_ = echo_tool("--limit={n}", "--flag={on}", "x{{literal}}", n={"type": "integer"}, on={"type": "boolean"})
    assert tool_.argv({"n": 5, "on": True})[3:] == ["--limit=5", "--flag=true", "x{literal}"]


def test_an_absent_optional_argument_drops_its_item():
    tool_ = echo_tool("-n", "{n}", "--path={path}", n={"type": "integer"}, path={"type": "string"})
    assert tool_.argv({"path": "a"})[3:] == ["-n", "--path=a"]


def test_a_list_argument_fills_one_item_per_element():
    tool_ = echo_tool("--", "{files}", files={"type": "array", "items": {"type": "string"}})
    assert tool_.argv({"files": ["a b", "-c"]})[3:] == ["--", "a b", "-c"]


@pytest.mark.parametrize("item", ["{text.__class__}", "{text[0]}", "{text!r}", "{text:>9}", "{0}", "{}", "{text"])
def test_only_plain_name_placeholders_are_accepted(item):
    with pytest.raises(ConfigError, match="tool 'echo': "):
        echo_tool(item)


def test_a_placeholder_must_name_a_schema_property():
    with pytest.raises(ConfigError, match=r"placeholder \{path\} in command is not a property of its schema \(text\)"):
        echo_tool("{path}")


def test_placeholders_lists_the_fields():
    assert placeholders("--a={a}-{b}{{c}}") == ["a", "b"]


def test_the_command_runs_in_the_working_directory(tmp_path):
    (tmp_path / "here.txt").write_text("x")
    command_tool = CommandTool(name="ls", command=["ls"], schema={"type": "object"})
    assert call(command_tool, {}, tmp_path).data["output"] == "here.txt"


def hello_tool(folder):
    """Tool `hello`: the project's script ./bin/hello (made in `folder`), as crew.yaml there names it."""
    script = folder / "bin" / "hello"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\necho hello from the project\n")
    script.chmod(0o755)
    return CommandTool(name="hello", command=["./bin/hello"], schema={"type": "object"}, base=folder), script


def test_a_relative_program_path_starts_at_the_config_directory(tmp_path):
    command_tool, _ = hello_tool(tmp_path)
    assert call(command_tool, {}, tmp_path / "bin").data == {"exit_code": 0, "output": "hello from the project"}


def test_a_non_zero_exit_is_a_failure_with_stderr():
    command_tool = CommandTool(
        name="fail", command=[PY, "-c", "import sys; print('out'); sys.exit('bad things')"], schema={"type": "object"}
    )
    result = call(command_tool, {})
    assert (result.success, result.error) == (False, "'fail' exited with status 1: bad things")


def test_stderr_of_a_successful_command_is_kept_apart():
    command_tool = CommandTool(
        name="warn",
        command=[PY, "-c", "import sys; print('ok'); print('careful', file=sys.stderr)"],
        schema={"type": "object"},
    )
    assert call(command_tool, {}).data == {"exit_code": 0, "output": "ok", "stderr": "careful"}


def test_a_missing_program_is_a_failure_not_a_crash():
    command_tool = CommandTool(name="nope", command=["no-such-program-x"], schema={"type": "object"})
    result = call(command_tool, {})
    assert not result.success and "'no-such-program-x' not found" in result.error


@pytest.mark.slow
def test_a_command_that_hangs_is_ended_with_its_whole_group(tmp_path):
    pids = tmp_path / "pids"
    command_tool = CommandTool(
        name="hang",
        command=["sh", "-c", f"sleep 60 & echo $! > {pids}; sleep 60"],
        schema={"type": "object"},
        timeout=0.5,
    )
    result = call(command_tool, {})
    assert not result.success and "timed out after 0.5s" in result.error
    assert gone(int(pids.read_text()))


@pytest.mark.slow
def test_output_is_kept_within_the_limit():
    command_tool = CommandTool(
        name="loud", command=[PY, "-c", "for i in range(100000): print('line', i)"], schema={"type": "object"}
    )
    result = call(command_tool, {}, max_output=1000)
    assert result.success and result.truncated and len(result.data["output"]) <= 1000
    assert result.data["output"].startswith("line 0\nline 1\n")


def test_the_tool_carries_its_declaration():
    spec = CommandTool(
        name="wc",
        command=["wc", "-l", "{path}"],
        description="Count lines.\nMore.",
        schema={"type": "object", "properties": {"path": {"type": "string"}}},
        read_only=True,
        timeout=7,
        needs_approval=True,
    ).tool()
    assert (spec.name, spec.summary, spec.read_only, spec.timeout, spec.needs_approval) == (
        "wc",
        "Count lines.",
        True,
        7,
        True,
    )
    assert (
        CommandTool(name="st", command=["git", "status"], schema={"type": "object"}).tool().summary
        == "Runs `git status`."
    )


# --- plugins ----------------------------------------------------------------------------------------


@tool(schema={"type": "object"}, read_only=True)
def first(ctx):
    """First plugin tool."""


@tool(schema={"type": "object"})
def second(ctx):
    """Second plugin tool."""


PAIR = [first, second]
NOT_A_TOOL = object()


def installed(monkeypatch, **points: str) -> None:
    monkeypatch.setattr(
        custom_tools,
        "entry_points",
        lambda group: [EntryPoint(name=name, value=value, group=group) for name, value in points.items()],
    )


def test_an_entry_point_may_name_one_tool_or_a_list(monkeypatch):
    installed(monkeypatch, one=f"{__name__}:first", pair=f"{__name__}:PAIR")
    assert [t.name for t in plugin_tools()] == ["first", "first", "second"]


def test_an_entry_point_that_is_not_a_tool_is_named(monkeypatch):
    installed(monkeypatch, odd=f"{__name__}:NOT_A_TOOL")
    with pytest.raises(
        ConfigError,
        match=r"plugin tool 'odd' \(.*:NOT_A_TOOL\) cannot be loaded: CrewError: .* is "
        r"not a tool; decorate it",
    ):
        plugin_tools()


def test_a_tools_script_rewritten_after_load_is_refused(tmp_path):
    command_tool, script = hello_tool(tmp_path)
    assert call(command_tool, {}, tmp_path).data["output"] == "hello from the project"
    script.write_text("#!/bin/sh\necho planted\n")
    result = call(command_tool, {}, tmp_path)
    assert not result.success
    assert result.error.startswith("'hello' was not run: ./bin/hello changed since crew.yaml was loaded")
    assert command_tool.argv({}) == [str(tmp_path / "bin" / "hello")]  # what the command rules read
