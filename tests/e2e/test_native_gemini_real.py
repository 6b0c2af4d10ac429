"""Native tool calls on the real gemini (`crew … --tools-via native "@gemini …"`: one `gemini --acp`
process) against the mock model server, whose replies call the tools each request offers natively
(a functionCall). crew's tools reach the model as `mcp_crewbridge_*` from an MCP server inside crew's own
process, with no text catalogue; gemini asks crew (ACP session/request_permission) before each of
its own tools that writes or runs a command, and crew's policy answers."""

from __future__ import annotations

import json

import pytest
from test_native_real import no_catalogue, own_tools, tool_results

from crewcli import only_result
from mockserver import tool_call

pytestmark = pytest.mark.e2e

CANCELED = "was canceled by the user"  # what gemini tells the model of a use crew refused (0.61)


def decisions(crew) -> list[tuple[str, str]]:
    """(tool, decision) of each of gemini's own tool uses in the last run's record."""
    return [(event["name"].removeprefix("native:"), event["decision"]) for event in own_tools(crew, "gemini")]


def test_gemini_reads_a_file_through_crews_mcp_server(crew, mock_server, notes):
    mock_server.script(tool_call("read_file", {"path": "notes.txt"}), "The code is 7-4-1.")
    done = crew("gemini", "query", "--tools-via", "native", "--json", "@gemini what does notes.txt say?")
    assert done.returncode == 0, done.stderr
    result = only_result(done.stdout)
    assert result["answer"] == "The code is 7-4-1."
    assert [(c["name"], c["success"]) for c in result["tool_calls"]] == [("crew:read_file", True)]
    first, second = mock_server.requests
    assert "mcp_crewbridge_read_file" in first.tool_names() and "read_file" in first.tool_names()  # its own, apart
    assert "mcp_crewbridge_write_file" not in first.tool_names()  # query mode: not offered
    assert "mcp_crewbridge_read_file" in [text for role, text in second.messages() if role == "assistant"][-1]
    assert notes in tool_results(second)
    assert no_catalogue(mock_server.requests)
    assert decisions(crew) == []  # crew's own tools are not asked about: crew's policy runs in the call


def test_gemini_corrects_input_that_breaks_the_schema(crew, mock_server, notes):
    """gemini checks the input of an MCP tool against the schema crew offers before it calls crew:
    the model reads gemini's message (naming the missing property), not crew's."""
    mock_server.script(
        tool_call("read_file", {"paht": "notes.txt"}),
        tool_call("read_file", {"path": "notes.txt"}),
        "The code is 7-4-1.",
    )
    done = crew("gemini", "query", "--tools-via", "native", "--json", "@gemini what does notes.txt say?")
    assert done.returncode == 0, done.stderr
    assert only_result(done.stdout)["answer"] == "The code is 7-4-1."
    _, corrected, answered = mock_server.requests
    told = tool_results(corrected)
    assert "required property" in told and "path" in told and notes not in told
    assert notes in tool_results(answered)


def test_gemini_in_query_mode_reads_but_may_not_write_or_run_commands(crew, mock_server, workdir):
    (workdir / "notes.txt").write_text("x\n")
    mock_server.script(
        tool_call("list_directory", {"dir_path": "."}),  # only gemini has one by that name
        tool_call("run_shell_command", {"command": "touch made.txt"}),
        tool_call("write_file", {"file_path": "new.txt", "content": "hello"}),
        "I may not change anything.",
    )
    done = crew("gemini", "query", "--tools-via", "native", "@gemini add two files")
    assert done.returncode == 0, done.stderr
    assert "I may not change anything." in done.stdout
    assert sorted(path.name for path in workdir.iterdir()) == ["notes.txt"]
    _listed, shell, write, _ = mock_server.requests
    assert "notes.txt" in tool_results(shell)  # its own tools that read run without asking
    assert CANCELED in tool_results(write) and CANCELED in tool_results(mock_server.requests[-1])
    assert decisions(crew) == [("run_shell_command", "refused"), ("write_file", "refused")]


def test_gemini_edits_and_runs_commands_in_execute_mode_unless_crews_policy_denies_it(crew, mock_server, workdir):
    # crew's own write_file is offered in execute mode: the mock would call that one; replace is gemini's only
    edit = {"file_path": "notes.txt", "old_string": "draft", "new_string": "final", "instruction": "finish it"}
    script = (tool_call("replace", edit), tool_call("run_shell_command", {"command": "echo made > made.txt"}), "Done.")
    (workdir / "notes.txt").write_text("draft\n")
    mock_server.script(*script)
    done = crew("gemini", "execute", "--tools-via", "native", "@gemini finish notes.txt and make made.txt")
    assert done.returncode == 0, done.stderr
    assert (workdir / "notes.txt").read_text() == "final\n" and (workdir / "made.txt").read_text() == "made\n"
    assert decisions(crew) == [("replace", "allowed"), ("run_shell_command", "allowed")]

    (workdir / "notes.txt").write_text("draft\n")
    (workdir / "made.txt").unlink()
    (workdir / "crew.yaml").write_text("agents:\n  gemini:\n    deny: ['native:run_shell_command']\n")
    mock_server.script(*script)
    done = crew("gemini", "execute", "--tools-via", "native", "@gemini finish notes.txt and make made.txt")
    assert done.returncode == 0, done.stderr
    assert (workdir / "notes.txt").read_text() == "final\n" and not (workdir / "made.txt").exists()
    assert CANCELED in tool_results(mock_server.requests[-1])
    assert decisions(crew) == [("replace", "allowed"), ("run_shell_command", "refused")]


def test_gemini_shell_command_crew_cannot_read_is_refused_by_the_command_rules(crew, mock_server, workdir):
    (workdir / "f").write_text("keep me")
    (workdir / "crew.yaml").write_text("agents:\n  gemini:\n    deny_commands: ['rm *']\n")
    mock_server.script(tool_call("run_shell_command", {"command": "${X:-rm} f"}), "I was not allowed to.")
    done = crew("gemini", "execute", "--tools-via", "native", "@gemini delete f")
    assert done.returncode == 0, done.stderr
    assert (workdir / "f").read_text() == "keep me"
    [decided] = own_tools(crew, "gemini")
    assert decided["decision"] == "refused" and "its program '${X:-rm}'" in decided["reason"]


def test_gemini_native_calls_are_events_of_the_jsonl_stream(crew, mock_server, notes):
    mock_server.script(tool_call("read_file", {"path": "notes.txt"}), "The code is 7-4-1.")
    done = crew("gemini", "query", "--tools-via", "native", "--jsonl", "@gemini what does notes.txt say?")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [event["kind"] for event in events if event["kind"] in ("call", "result", "answer")]
    assert kinds == ["call", "result", "answer"]
    call, result = (next(e for e in events if e["kind"] == kind) for kind in ("call", "result"))
    assert (call["via"], result["call"], result["success"]) == ("native", call["call"], True)
    assert notes in json.dumps(result)
