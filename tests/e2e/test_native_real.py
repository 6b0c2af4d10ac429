"""Native tool calls (`--tools-via native`) and one policy over the CLIs' own tools, on the real CLIs
against the mock model server, which answers with native tool calls to the tools each request
offers. The answers depend on notes.txt, which only crew's read_file gives the model here."""
from __future__ import annotations

import json

import pytest

from crewcli import write_config
from mockserver import tool_call

pytestmark = pytest.mark.e2e

TASK = "what does notes.txt say?"
ANSWER = "The code is 7-4-1."


def tool_output(request) -> str:
    """What a request carried back to the model after its last call: the tool's output, and any
    message the CLI's client added after it."""
    messages = request.messages()
    last_call = max(i for i, (role, _) in enumerate(messages) if role == "assistant" or role == "tool")
    return "\n".join(text for _, text in messages[last_call:])


def catalogue_in(request) -> bool:
    return "[crew tools]" in request.text() or "crew:read_file" in request.text()


def transcript(crew, cli) -> list[dict]:
    """The last run's events, as `crew log show` prints them."""
    runs = crew(cli, "log", "--json")
    run_id = json.loads(runs.stdout.splitlines()[0])["run_id"]
    return [json.loads(line) for line in crew(cli, "log", "show", run_id).stdout.splitlines()]


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
    assert not any(catalogue_in(request) for request in mock_server.requests)
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
    assert not any(catalogue_in(request) for request in mock_server.requests)


def test_codex_native_call_with_bad_input_is_corrected_on_the_next_turn(crew, mock_server, notes):
    mock_server.script(tool_call("read_file", {"paht": "notes.txt"}), tool_call("read_file", {"path": "notes.txt"}),
                       ANSWER)
    done = crew("codex", "query", "--json", "--tools-via", "native", f"@codex:gpt-5.5 {TASK}")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["answer"] == ANSWER
    assert [(call["name"], call["success"]) for call in result["tool_calls"]] == [("crew:read_file", False),
                                                                                 ("crew:read_file", True)]
    _, corrected, answered = mock_server.requests
    assert "invalid input for crew:read_file" in tool_output(corrected) and notes not in corrected.text()
    assert notes in tool_output(answered)


@pytest.mark.parametrize("tools_via", ["text", "native"])
def test_codex_query_refuses_its_own_shell_and_patch_tools(tools_via, crew, mock_server, workdir):
    mock_server.script(tool_call("exec_command", {"cmd": "echo made > made.txt"}),
                       tool_call("apply_patch", {"input": PATCH}), "I may not change files here.")
    done = crew("codex", "query", "--tools-via", tools_via, "@codex:gpt-5.5 make made.txt")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "I may not change files here.\n"
    assert not (workdir / "made.txt").exists()
    _, after_shell, after_patch = mock_server.requests
    assert "did not let your exec_command call run: crew does not allow exec_command for query mode" \
        in tool_output(after_shell)
    assert "did not let your apply_patch call run: crew does not allow apply_patch for query mode" \
        in tool_output(after_patch)
    decided = [event for event in transcript(crew, "codex") if event.get("kind") == "native_tool"]
    assert [(event["tool"], event["decision"]) for event in decided] == [("exec_command", "refused"),
                                                                         ("apply_patch", "refused")]
    assert "echo made > made.txt" in decided[0]["input"]["command"]
    assert decided[1]["input"]["changes"][0]["path"] == str(workdir / "made.txt")
    assert "native:exec_command" in done.stderr and "refused" in done.stderr


def test_codex_asks_about_every_command_so_query_refuses_even_one_that_reads(crew, mock_server, notes):
    mock_server.script(tool_call("exec_command", {"cmd": "cat notes.txt"}), "I may not run commands here.")
    done = crew("codex", "query", "@codex:gpt-5.5 what does notes.txt say?")
    assert done.returncode == 0, done.stderr
    assert notes not in mock_server.requests[1].text()
    decided = [event for event in transcript(crew, "codex") if event.get("kind") == "native_tool"]
    assert [(event["tool"], event["decision"]) for event in decided] == [("exec_command", "refused")]


def test_codex_execute_runs_its_shell_and_deny_refuses_it_with_the_reason(crew, mock_server, workdir):
    mock_server.script(tool_call("exec_command", {"cmd": "echo made > made.txt"}), "Made it.")
    done = crew("codex", "execute", "@codex:gpt-5.5 make made.txt")
    assert done.returncode == 0, done.stderr
    assert (workdir / "made.txt").read_text() == "made\n"
    [decided] = [event for event in transcript(crew, "codex") if event.get("kind") == "native_tool"]
    assert (decided["tool"], decided["decision"]) == ("exec_command", "allowed")

    (workdir / "made.txt").unlink()
    write_config(workdir / "crew.yaml", agents={"codex": {"deny": ["native:exec_command"]}})
    mock_server.script(tool_call("exec_command", {"cmd": "echo made > made.txt"}), "I was not allowed to.")
    done = crew("codex", "execute", "@codex:gpt-5.5 make made.txt")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "I was not allowed to.\n"
    assert not (workdir / "made.txt").exists()
    assert "crew's policy does not allow exec_command for agent 'codex'" in tool_output(mock_server.requests[-1])
    [decided] = [event for event in transcript(crew, "codex") if event.get("kind") == "native_tool"]
    assert (decided["tool"], decided["decision"]) == ("exec_command", "refused")


def test_codex_native_calls_are_jsonl_call_and_result_events(crew, mock_server, notes):
    mock_server.script(tool_call("read_file", {"path": "notes.txt"}), ANSWER)
    done = crew("codex", "query", "--jsonl", "--tools-via", "native", f"@codex:gpt-5.5 {TASK}")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    call, result = [event for event in events if event["type"] in ("call", "result")]
    assert call == {"type": "call", "agent": "codex", "name": "crew:read_file", "input": {"path": "notes.txt"}}
    assert result["name"] == "crew:read_file" and result["result"]["success"] is True
    assert notes in result["result"]["data"]["content"]
    assert events[-1]["type"] == "answer" and events[-1]["answer"] == ANSWER
