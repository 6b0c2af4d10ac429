"""Every tool call of every CLI is in the run's record, with crew's decision: the real CLIs, made by
the mock model server to use their own tools (codex's commands and patches, claude's and gemini's
shell and file tools, an MCP server's tool), each give one `call` (via "own", named native:TOOL, the
CLI's id as its ref), a `decision` (crew's policy's where the CLI asked; `allowed` by `cli` where it
ran the tool under its own rules) and a `result` — in --jsonl, in the transcript (`crew log show
--json`) and on the terminal, for a CLI run per turn and a live one alike."""

from __future__ import annotations

import json

import pytest

from crewcli import run_crew, write_config
from mockserver import tool_call

pytestmark = pytest.mark.e2e

PATCH = "*** Begin Patch\n*** Add File: made.txt\n+made\n*** End Patch\n"
PER_TURN = {"CREW_LIVE": "0"}  # a new CLI process per turn: codex exec, claude -p, gemini -p


def own_calls(events: list[dict]) -> list[tuple]:
    """Each of the CLI's own calls in a record, in order: its name, the decisions on it (decision,
    by) and its result's success."""
    calls = [e for e in events if e["kind"] == "call" and e.get("via") == "own"]
    return [
        (
            call["name"],
            [
                (e["decision"], e.get("by", "policy"))
                for e in events
                if e["kind"] == "decision" and e["call"] == call["call"]
            ],
            [e["success"] for e in events if e["kind"] == "result" and e["call"] == call["call"]],
        )
        for call in calls
    ]


def the_call(events: list[dict], name: str) -> tuple[dict, dict]:
    """The own call named `name` (the only one) and its result."""
    [call] = [e for e in events if e["kind"] == "call" and e["name"] == name]
    [result] = [e for e in events if e["kind"] == "result" and e["call"] == call["call"]]
    return call, result


@pytest.fixture
def crew_run(cli_env, workdir, tmp_path):
    """crew_run(cli, *args, env=…) → (the run's --jsonl events, the same run's transcript as `crew
    log show --json` reads it, and what `crew log show` shows of it: the terminal's lines)."""

    def run(cli, *args, env=None):
        environment = {**cli_env(cli), **(env or {})}
        done = run_crew([args[0], "--jsonl", *args[1:]], env=environment, cwd=workdir)
        assert done.returncode == 0, done.stderr
        events = [json.loads(line) for line in done.stdout.splitlines()]
        logged = [json.loads(line) for line in crew_log(environment, workdir, "--json").stdout.splitlines()]
        assert own_calls(logged) == own_calls(events)  # the transcript is the stream written down
        shown = crew_log(environment, workdir)
        return events, logged, shown.stdout + shown.stderr

    return run


def line_with(shown: str, *words: str) -> str:
    """The one line of `shown` that holds every one of `words`."""
    [line] = [line for line in shown.splitlines() if all(word in line for word in words)]
    return line


def crew_log(env, workdir, *options):
    done = run_crew(["log", "show", *options, "last"], env=env, cwd=workdir)
    assert done.returncode == 0, done.stderr
    return done


# --- codex: its commands and patches (exec_command, apply_patch), an MCP server's tool


@pytest.mark.parametrize("env", [{}, PER_TURN], ids=["app-server", "exec"])
def test_a_command_codex_runs_unasked_is_a_call_the_cli_allowed_with_its_output(crew_run, mock_server, workdir, env):
    (workdir / "notes.txt").write_text("the code is 7-4-1\n")
    mock_server.script(tool_call("exec_command", {"cmd": "echo made > made.txt; cat notes.txt"}), "Made it.")
    events, logged, shown = crew_run("codex", "execute", "@codex:gpt-5.5 make made.txt", env=env)
    assert (workdir / "made.txt").read_text() == "made\n"
    # nothing in crew's policy could refuse it: codex did not ask, its sandbox decided
    assert own_calls(events) == [("native:exec_command", [("allowed", "cli")], [True])]
    call, result = the_call(logged, "native:exec_command")
    assert call["input"]["command"] == "/bin/bash -lc 'echo made > made.txt; cat notes.txt'" and call["ref"]
    assert result["data"] == {"output": "the code is 7-4-1\n", "exit_code": 0}
    assert line_with(shown, "native:exec_command", "echo made > made.txt", ": ran (crew was not asked")


@pytest.mark.parametrize("env", [{}, PER_TURN], ids=["app-server", "exec"])
def test_a_patch_codex_applies_unasked_is_a_call_with_the_files_it_changed(crew_run, mock_server, workdir, env):
    mock_server.script(tool_call("apply_patch", {"input": PATCH}), "Made it.")
    events, logged, _ = crew_run("codex", "execute", "@codex:gpt-5.5 make made.txt", env=env)
    assert (workdir / "made.txt").read_text() == "made\n"
    assert own_calls(events) == [("native:apply_patch", [("allowed", "cli")], [True])]
    call, result = the_call(logged, "native:apply_patch")
    assert [change["path"] for change in call["input"]["changes"]] == [str(workdir / "made.txt")]
    assert result["data"]["output"] == f"add {workdir / 'made.txt'}"


def test_codexs_questions_link_to_its_calls_one_call_each_with_crews_decision(crew_run, mock_server, workdir):
    # deny_commands: crew's policy could refuse a command, so codex asks about each command and patch
    write_config(workdir / "crew.yaml", agents={"codex": {"deny_commands": ["rm *"]}})
    (workdir / "notes.txt").write_text("keep me\n")
    mock_server.script(
        tool_call("exec_command", {"cmd": "echo made > made.txt"}),
        tool_call("exec_command", {"cmd": "rm notes.txt"}),
        tool_call("apply_patch", {"input": PATCH.replace("made.txt", "patched.txt")}),
        "Done.",
    )
    events, _, shown = crew_run("codex", "execute", "@codex:gpt-5.5 tidy up")
    assert (workdir / "made.txt").exists() and (workdir / "patched.txt").exists()
    assert (workdir / "notes.txt").read_text() == "keep me\n"
    assert own_calls(events) == [
        ("native:exec_command", [("allowed", "policy")], [True]),
        ("native:exec_command", [("refused", "policy")], [False]),  # codex declined it: its result says so
        ("native:apply_patch", [("allowed", "policy")], [True]),
    ]
    assert "deny_commands" in line_with(shown, "native:exec_command", "rm notes.txt", ": refused")


# --- claude: Bash, Write, Read (live: it asks crew about what its rules do not allow; per turn: it cannot ask)


def test_claudes_own_tools_are_each_one_call_whether_it_asked_crew_or_not(crew_run, mock_server, workdir):
    (workdir / "notes.txt").write_text("the code is 7-4-1\n")
    mock_server.script(
        tool_call("Bash", {"command": "echo made > made.txt"}, "Making it."),
        tool_call("Write", {"file_path": "w.txt", "content": "written\n"}),
        tool_call("Read", {"file_path": "notes.txt"}),
        "Done.",
    )
    events, logged, shown = crew_run("claude", "execute", "@claude make the files")
    assert (workdir / "made.txt").read_text() == "made\n" and (workdir / "w.txt").read_text() == "written\n"
    assert own_calls(events) == [
        ("native:Bash", [("allowed", "policy")], [True]),  # claude asked (can_use_tool)
        ("native:Write", [("allowed", "policy")], [True]),
        ("native:Read", [("allowed", "cli")], [True]),  # inside the project: claude reads without asking
    ]
    _, read = the_call(logged, "native:Read")
    assert "the code is 7-4-1" in read["data"]["output"]
    assert line_with(shown, "native:Read", "notes.txt: ran (crew was not asked")


def test_claude_run_per_turn_cannot_ask_and_its_refusals_are_in_the_record_too(crew_run, mock_server, workdir):
    (workdir / "notes.txt").write_text("the code is 7-4-1\n")
    mock_server.script(
        tool_call("Bash", {"command": "echo made > made.txt"}),
        tool_call("Read", {"file_path": "notes.txt"}),
        "Done.",
    )
    events, logged, _ = crew_run("claude", "execute", "@claude make it", env=PER_TURN)
    assert not (workdir / "made.txt").exists()  # claude -p refuses what it would have to ask about
    assert own_calls(events) == [
        ("native:Bash", [("allowed", "cli")], [False]),
        ("native:Read", [("allowed", "cli")], [True]),
    ]
    _, bash = the_call(logged, "native:Bash")
    assert bash["error"]  # claude's own words: it would have had to ask (here: the redirection was blocked)


# --- gemini: write_file, run_shell_command, read_file (per turn: stream-json; native: ACP, where it asks)


def test_geminis_own_tools_run_per_turn_are_calls_the_cli_allowed(crew_run, mock_server, workdir):
    (workdir / "notes.txt").write_text("the code is 7-4-1\n")
    mock_server.script(
        tool_call("write_file", {"file_path": "w.txt", "content": "written\n"}, own=True),
        tool_call("read_file", {"file_path": "notes.txt"}, own=True),
        "Done.",
    )
    events, logged, _ = crew_run("gemini", "execute", "@gemini write w.txt")
    assert (workdir / "w.txt").read_text() == "written\n"
    assert own_calls(events) == [
        ("native:write_file", [("allowed", "cli")], [True]),
        ("native:read_file", [("allowed", "cli")], [True]),
    ]
    write, _ = the_call(logged, "native:write_file")
    assert write["input"] == {"file_path": "w.txt", "content": "written\n"} and write["ref"]


def test_geminis_own_tools_over_acp_are_decided_by_crew_where_it_asks(crew_run, mock_server, workdir):
    (workdir / "notes.txt").write_text("the code is 7-4-1\n")
    mock_server.script(
        tool_call("write_file", {"file_path": "w.txt", "content": "written\n"}, own=True),
        tool_call("run_shell_command", {"command": "echo made > made.txt"}, own=True),
        tool_call("read_file", {"file_path": "notes.txt"}, own=True),
        "Done.",
    )
    events, logged, shown = crew_run("gemini", "execute", "--tools-via", "native", "@gemini make the files")
    assert (workdir / "w.txt").read_text() == "written\n" and (workdir / "made.txt").read_text() == "made\n"
    assert own_calls(events) == [
        ("native:write_file", [("allowed", "policy")], [True]),  # gemini asked (session/request_permission)
        ("native:run_shell_command", [("allowed", "policy")], [True]),
        ("native:read_file", [("allowed", "cli")], [True]),  # a read: gemini does not ask
    ]
    shell, _ = the_call(logged, "native:run_shell_command")
    assert shell["input"] == {"command": "echo made > made.txt"}
    assert line_with(shown, "native:read_file", ": ran (crew was not asked")


# --- crew's own tools reaching the CLI natively are crew's calls, recorded once

OWN_SHELL = {
    "claude": tool_call("Bash", {"command": "echo made > made.txt"}),
    "codex": tool_call("exec_command", {"cmd": "echo made > made.txt"}),
    "gemini": tool_call("run_shell_command", {"command": "echo made > made.txt"}, own=True),
}
SHELL_NAME = {"claude": "native:Bash", "codex": "native:exec_command", "gemini": "native:run_shell_command"}


def test_crews_tools_natively_are_recorded_once_as_crews_and_the_clis_own_beside_them(
    cli, crew_run, mock_server, workdir
):
    (workdir / "notes.txt").write_text("the code is 7-4-1\n")
    mock_server.script(tool_call("read_file", {"path": "notes.txt"}), OWN_SHELL[cli], "Done.")
    agent = "@codex:gpt-5.5" if cli == "codex" else f"@{cli}"
    events, _, _ = crew_run(cli, "execute", "--tools-via", "native", f"{agent} read notes.txt, then make made.txt")
    assert (workdir / "made.txt").read_text() == "made\n"
    calls = [(e["name"], e.get("via", "text")) for e in events if e["kind"] == "call"]
    assert calls == [("crew:read_file", "native"), (SHELL_NAME[cli], "own")]
    assert [e["success"] for e in events if e["kind"] == "result"] == [True, True]
