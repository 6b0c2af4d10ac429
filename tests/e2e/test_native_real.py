"""Native tool calls (`--tools-via native`) through the `crew` command, against the real CLIs and
the mock model server, whose replies call the tools each request offers natively (a tool_use,
functionCall or function_call): crew's tools reach the model through the CLI's own channel, with no
text catalogue, and crew's policy decides the CLI's own tools where the CLI asks."""

from __future__ import annotations

import json

import pytest

from crewcli import only_result, processes_in, run_crew, write_config
from mockserver import tool_call

pytestmark = pytest.mark.e2e

TASK = "what does notes.txt say?"
ANSWER = "The code is 7-4-1."
CATALOGUE_MARKS = ("[crew tools]", "crew:read_file")  # what only the text catalogue would put in a prompt


def tool_results(request) -> str:
    """The text of the tool results a request carried back to the model."""
    return "\n".join(text for role, text in request.messages() if role in ("user", "tool"))


def no_catalogue(requests) -> bool:
    return not any(mark in request.text() for request in requests for mark in CATALOGUE_MARKS)


def own_tools(crew, cli: str, asked: bool = True) -> list[dict]:
    """Each of the CLI's own tool uses in the last run's record (`crew log show --json last`): its
    call (`name`: native:NAME, `input`) with crew's decision on it (`decision`, `reason`, `by`);
    those crew was asked about (`asked`), or every one (the CLI's own rules ran the others: `by: cli`)."""
    events = [json.loads(line) for line in crew(cli, "log", "show", "--json", "last").stdout.splitlines()]
    calls = {e["call"]: e for e in events if e["kind"] == "call" and e.get("via") == "own"}
    decided = [{**calls[e["call"]], **e} for e in events if e["kind"] == "decision" and e["call"] in calls]
    return [event for event in decided if not asked or event.get("by") != "cli"]


def tool_output(request) -> str:
    """What a request carried back to the model after its last call: the tool's output, and any
    message the CLI's client added after it."""
    messages = request.messages()
    last_call = max(i for i, (role, _) in enumerate(messages) if role == "assistant" or role == "tool")
    return "\n".join(text for _, text in messages[last_call:])


# --- claude


def test_claude_reads_a_file_through_crews_sdk_mcp_server(crew, mock_server, notes):
    mock_server.script(tool_call("mcp__crew__read_file", {"path": "notes.txt"}), "The code is 7-4-1.")
    done = crew("claude", "query", "--tools-via", "native", "--json", "@claude what does notes.txt say?")
    assert done.returncode == 0, done.stderr
    result = only_result(done.stdout)
    assert result["answer"] == "The code is 7-4-1."
    assert [(c["name"], c["success"]) for c in result["tool_calls"]] == [("crew:read_file", True)]
    first, second = mock_server.requests
    assert "mcp__crew__read_file" in first.tool_names()
    assert "mcp__crew__write_file" not in first.tool_names()  # query mode: not offered
    assert notes in tool_results(second)
    assert no_catalogue(mock_server.requests)


def test_claude_corrects_input_that_breaks_the_schema_after_crews_message(crew, mock_server, notes):
    mock_server.script(
        tool_call("mcp__crew__read_file", {"paht": "notes.txt"}),
        tool_call("mcp__crew__read_file", {"path": "notes.txt"}),
        "The code is 7-4-1.",
    )
    done = crew("claude", "query", "--tools-via", "native", "--json", "@claude what does notes.txt say?")
    assert done.returncode == 0, done.stderr
    assert [(c["name"], c["success"]) for c in only_result(done.stdout)["tool_calls"]] == [
        ("crew:read_file", False),
        ("crew:read_file", True),
    ]
    _, corrected, answered = mock_server.requests
    assert "invalid input for crew:read_file" in tool_results(corrected)
    assert notes in tool_results(answered)


def test_claude_in_query_mode_is_offered_no_tool_of_its_own_that_writes_or_runs_commands(crew, mock_server, workdir):
    mock_server.script(tool_call("Read", {"file_path": "/etc/hostname"}), "I may not read it.")
    done = crew("claude", "query", "--tools-via", "native", "@claude what is in /etc/hostname?")
    assert done.returncode == 0, done.stderr
    first, second = mock_server.requests
    own = [name for name in first.tool_names() if not name.startswith("mcp__")]
    assert set(own) <= {"Read", "Glob", "Grep"}, own
    # Claude asks its client before reading outside the working directory: crew refuses, and says why
    assert "outside the working directory" in tool_results(second)
    [decision] = own_tools(crew, "claude")
    assert (decision["name"], decision["decision"]) == ("native:Read", "refused")


@pytest.mark.parametrize("via", ["native", "text"])  # Claude asks crew in either: its live process is the same
def test_claude_runs_its_own_bash_in_execute_mode_unless_crews_policy_denies_it(via, crew, mock_server, workdir):
    mock_server.script(tool_call("Bash", {"command": "echo made > made.txt"}), "Done.")
    done = crew("claude", "execute", "--tools-via", via, "@claude make made.txt")
    assert done.returncode == 0, done.stderr
    assert (workdir / "made.txt").read_text() == "made\n"
    assert [(d["name"], d["decision"]) for d in own_tools(crew, "claude")] == [("native:Bash", "allowed")]

    (workdir / "made.txt").unlink()
    (workdir / "crew.yaml").write_text("agents:\n  claude:\n    deny: ['native:Bash']\n")
    mock_server.script(tool_call("Bash", {"command": "echo made > made.txt"}), "I was not allowed to.")
    done = crew("claude", "execute", "--tools-via", via, "@claude make made.txt")
    assert done.returncode == 0, done.stderr
    assert not (workdir / "made.txt").exists()
    told = tool_results(mock_server.requests[-1])
    assert "crew's policy does not allow Bash" in told and "native:" in told
    [decision] = own_tools(crew, "claude")
    assert (decision["name"], decision["decision"]) == ("native:Bash", "refused")


@pytest.mark.parametrize("via", ["native", "text"])
def test_claudes_bash_with_a_program_crew_cannot_know_is_refused_by_the_command_rules(via, crew, mock_server, workdir):
    (workdir / "f").write_text("keep me")
    write_config(workdir / "crew.yaml", agents={"claude": {"deny_commands": ["rm *"]}})
    mock_server.script(tool_call("Bash", {"command": "X=rm; $X f"}), "I was not allowed to.")
    done = crew("claude", "execute", "--tools-via", via, "@claude delete f")
    assert done.returncode == 0, done.stderr
    assert (workdir / "f").read_text() == "keep me"
    assert "its program '$X' is known only when the shell runs" in tool_results(mock_server.requests[-1])
    [decision] = own_tools(crew, "claude")
    assert (decision["name"], decision["decision"]) == ("native:Bash", "refused")


def test_claude_native_calls_are_events_of_the_jsonl_stream(crew, mock_server, notes):
    mock_server.script(tool_call("mcp__crew__read_file", {"path": "notes.txt"}), "The code is 7-4-1.")
    done = crew("claude", "query", "--tools-via", "native", "--jsonl", "@claude what does notes.txt say?")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [event["kind"] for event in events if event["kind"] in ("call", "result", "answer")]
    assert kinds == ["call", "result", "answer"]
    call, result = (next(e for e in events if e["kind"] == kind) for kind in ("call", "result"))
    assert (call["via"], result["call"], result["success"]) == ("native", call["call"], True)


# --- codex
# codex 0.169.0 offers crew's tools as dynamic tools of the thread crew runs in its app-server. With
# `@codex:gpt-5.5` they are function tools the model calls by name; its default model calls every tool
# from JavaScript through its `exec` tool (code mode). Its own tools: `exec_command`, `apply_patch`.

PATCH = "*** Begin Patch\n*** Add File: made.txt\n+made\n*** End Patch\n"


def test_codex_native_round_trip_without_the_catalogue(crew, mock_server, notes):
    mock_server.script(tool_call("read_file", {"path": "notes.txt"}), ANSWER)
    done = crew("codex", "query", "--tools-via", "native", f"@codex:gpt-5.5 {TASK}")
    assert done.returncode == 0, done.stderr
    assert done.stdout == ANSWER + "\n"
    first, second = mock_server.requests
    assert {"crew_read_file", "crew_grep", "crew_list_files"} <= set(first.tool_names())
    assert "crew_write_file" not in first.tool_names()  # query mode: not offered
    assert notes not in first.text() and notes in tool_output(second)
    assert no_catalogue(mock_server.requests)
    assert "crew:read_file notes.txt" in done.stderr  # the tool line, as for a text call


def test_codex_native_round_trip_in_its_code_mode(crew, mock_server, notes):
    code = 'const r = await tools.crew_read_file({path: "notes.txt"});\ntext(r);'
    mock_server.script(tool_call("exec", {"code": code}), ANSWER)
    done = crew("codex", "query", "--tools-via", "native", f"@codex {TASK}")
    assert done.returncode == 0, done.stderr
    assert done.stdout == ANSWER + "\n"
    first, second = mock_server.requests
    assert first.tool_names()[0] == "exec" and "crew_read_file" in json.dumps(first.responses_tools()[0])
    assert notes in tool_output(second)
    assert no_catalogue(mock_server.requests)


def test_codex_native_call_with_bad_input_is_corrected_on_the_next_turn(crew, mock_server, notes):
    mock_server.script(
        tool_call("read_file", {"paht": "notes.txt"}), tool_call("read_file", {"path": "notes.txt"}), ANSWER
    )
    done = crew("codex", "query", "--json", "--tools-via", "native", f"@codex:gpt-5.5 {TASK}")
    assert done.returncode == 0, done.stderr
    result = only_result(done.stdout)
    assert result["answer"] == ANSWER
    assert [(call["name"], call["success"]) for call in result["tool_calls"]] == [
        ("crew:read_file", False),
        ("crew:read_file", True),
    ]
    _, corrected, answered = mock_server.requests
    assert "invalid input for crew:read_file" in tool_output(corrected) and notes not in corrected.text()
    assert notes in tool_output(answered)


@pytest.mark.parametrize("tools_via", ["text", "native"])
def test_codex_query_refuses_its_own_shell_and_patch_tools(tools_via, crew, mock_server, workdir):
    mock_server.script(
        tool_call("exec_command", {"cmd": "echo made > made.txt"}),
        tool_call("apply_patch", {"input": PATCH}),
        "I may not change files here.",
    )
    done = crew("codex", "query", "--tools-via", tools_via, "@codex:gpt-5.5 make made.txt")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "I may not change files here.\n"
    assert not (workdir / "made.txt").exists()
    _, after_shell, after_patch = mock_server.requests
    assert "did not let your exec_command call run: crew does not allow exec_command for query mode" in tool_output(
        after_shell
    )
    assert "did not let your apply_patch call run: crew does not allow apply_patch for query mode" in tool_output(
        after_patch
    )
    decided = own_tools(crew, "codex")
    assert [(event["name"], event["decision"]) for event in decided] == [
        ("native:exec_command", "refused"),
        ("native:apply_patch", "refused"),
    ]
    assert "echo made > made.txt" in decided[0]["input"]["command"]
    assert decided[1]["input"]["changes"][0]["path"] == str(workdir / "made.txt")
    assert "native:exec_command" in done.stderr and "refused" in done.stderr


def test_codex_asks_about_every_command_so_query_refuses_even_one_that_reads(crew, mock_server, notes):
    mock_server.script(tool_call("exec_command", {"cmd": "cat notes.txt"}), "I may not run commands here.")
    done = crew("codex", "query", "@codex:gpt-5.5 what does notes.txt say?")
    assert done.returncode == 0, done.stderr
    assert notes not in mock_server.requests[1].text()
    decided = own_tools(crew, "codex")
    assert [(event["name"], event["decision"]) for event in decided] == [("native:exec_command", "refused")]


def test_codex_execute_runs_its_shell_and_deny_refuses_it_with_the_reason(crew, mock_server, workdir):
    mock_server.script(tool_call("exec_command", {"cmd": "echo made > made.txt"}), "Made it.")
    done = crew("codex", "execute", "@codex:gpt-5.5 make made.txt")
    assert done.returncode == 0, done.stderr
    assert (workdir / "made.txt").read_text() == "made\n"
    # nothing in crew's policy could refuse it: codex was not made to ask, its sandbox decides; the
    # record has the command all the same, run by codex's own rules
    assert not own_tools(crew, "codex")
    [ran] = own_tools(crew, "codex", asked=False)
    assert (ran["name"], ran["decision"], ran["by"]) == ("native:exec_command", "allowed", "cli")

    (workdir / "made.txt").unlink()
    write_config(workdir / "crew.yaml", agents={"codex": {"deny": ["native:exec_command"]}})
    mock_server.script(tool_call("exec_command", {"cmd": "echo made > made.txt"}), "I was not allowed to.")
    done = crew("codex", "execute", "@codex:gpt-5.5 make made.txt")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "I was not allowed to.\n"
    assert not (workdir / "made.txt").exists()
    assert "crew's policy does not allow exec_command for agent 'codex'" in tool_output(mock_server.requests[-1])
    [decided] = own_tools(crew, "codex")
    assert (decided["name"], decided["decision"]) == ("native:exec_command", "refused")

    write_config(workdir / "crew.yaml", agents={"codex": {"deny_commands": ["rm *"]}})
    mock_server.script(tool_call("exec_command", {"cmd": "echo made > made.txt"}), "Made it.")
    done = crew("codex", "execute", "@codex:gpt-5.5 make made.txt")
    assert done.returncode == 0 and (workdir / "made.txt").exists()  # asked, and allowed
    [decided] = own_tools(crew, "codex")
    assert (decided["name"], decided["decision"]) == ("native:exec_command", "allowed")


def test_codex_commands_are_read_inside_its_bash_lc_and_checked(crew, mock_server, workdir):
    (workdir / "f").write_text("keep me")
    write_config(workdir / "crew.yaml", agents={"codex": {"deny_commands": ["rm *"]}})
    mock_server.script(tool_call("exec_command", {"cmd": "X=rm; $X f"}), "I was not allowed to.")
    done = crew("codex", "execute", "@codex:gpt-5.5 delete f")
    assert done.returncode == 0, done.stderr
    assert (workdir / "f").read_text() == "keep me"
    [decided] = own_tools(crew, "codex")
    assert decided["input"]["command"] == "/bin/bash -lc 'X=rm; $X f'"  # as codex asks about it
    assert (decided["decision"], "its program '$X'" in decided["reason"]) == ("refused", True)
    assert "its program '$X'" in tool_output(mock_server.requests[-1])


def test_codex_native_calls_are_jsonl_call_and_result_events(crew, mock_server, notes):
    mock_server.script(tool_call("read_file", {"path": "notes.txt"}), ANSWER)
    done = crew("codex", "query", "--jsonl", "--tools-via", "native", f"@codex:gpt-5.5 {TASK}")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    call, result = [event for event in events if event["kind"] in ("call", "result")]
    assert {k: call[k] for k in ("agent", "name", "input", "via")} == {
        "agent": "codex",
        "name": "crew:read_file",
        "input": {"path": "notes.txt"},
        "via": "native",
    }
    assert (result["call"], result["name"], result["success"]) == (call["call"], "crew:read_file", True)
    assert notes in result["data"]["content"]
    answer = next(event for event in events if event["kind"] == "answer")
    assert answer["text"] == ANSWER and events[-1]["kind"] == "end"


def test_a_native_call_claude_gives_up_on_is_cancelled_at_once_and_its_command_ended(
    cli_env, workdir, tmp_path, mock_server
):
    # claude's MCP client aborts a call that outlives MCP_TOOL_TIMEOUT and sends
    # notifications/cancelled on the stream crew reads; the call runs on a thread of its own, so
    # the cancellation reaches it and its command's process group is ended long before it would end.
    mock_server.script(
        tool_call("mcp__crew__run_command", {"command": "sleep 40; touch late.txt"}),
        "The command was cancelled.",
    )
    env = {**cli_env("claude"), "MCP_TOOL_TIMEOUT": "3000"}
    done = run_crew(
        ["execute", "--tools-via", "native", "--json", "--timeout", "120", "@claude run the slow command"],
        env=env,
        cwd=workdir,
        timeout=200,
    )
    assert done.returncode == 0, done.stderr
    assert only_result(done.stdout)["answer"] == "The command was cancelled."
    assert "timed out" in tool_output(mock_server.requests[-1]).lower()
    assert processes_in(tmp_path) == []  # the sleep too: its group was ended
    assert not (workdir / "late.txt").exists()
