"""Native tool calls (`--tools-via native`) through the `crew` command, against the real CLIs and
the mock model server, whose replies call the tools each request offers natively (a tool_use,
functionCall or function_call): crew's tools reach the model through the CLI's own channel, with no
text catalogue, and crew's policy decides the CLI's own tools where the CLI asks."""
from __future__ import annotations

import json

import pytest

from crewcli import run_crew
from mockserver import tool_call

pytestmark = pytest.mark.e2e

CATALOGUE_MARKS = ("[crew tools]", "crew:read_file")  # what only the text catalogue would put in a prompt


def tool_results(request) -> str:
    """The text of the tool results a request carried back to the model."""
    return "\n".join(text for role, text in request.messages() if role in ("user", "tool"))


def no_catalogue(requests) -> bool:
    return not any(mark in request.text() for request in requests for mark in CATALOGUE_MARKS)


def logged(crew, cli: str, kind: str) -> list[dict]:
    """The records of `kind` in the last run's transcript (`crew log show last`)."""
    events = [json.loads(line) for line in crew(cli, "log", "show", "last").stdout.splitlines()]
    return [event for event in events if event.get("kind") == kind]


def write_config(workdir, text: str) -> None:
    (workdir / "crew.yaml").write_text(text)


# --- claude


def test_claude_reads_a_file_through_crews_sdk_mcp_server(crew, mock_server, notes):
    mock_server.script(tool_call("mcp__crew__read_file", {"path": "notes.txt"}), "The code is 7-4-1.")
    done = crew("claude", "query", "--tools-via", "native", "--json", "@claude what does notes.txt say?")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["answer"] == "The code is 7-4-1."
    assert [(c["name"], c["success"]) for c in result["tool_calls"]] == [("crew:read_file", True)]
    first, second = mock_server.requests
    assert "mcp__crew__read_file" in first.tool_names()
    assert "mcp__crew__write_file" not in first.tool_names()  # query mode: not offered
    assert notes in tool_results(second)
    assert no_catalogue(mock_server.requests)


def test_claude_corrects_input_that_breaks_the_schema_after_crews_message(crew, mock_server, notes):
    mock_server.script(tool_call("mcp__crew__read_file", {"paht": "notes.txt"}),
                       tool_call("mcp__crew__read_file", {"path": "notes.txt"}), "The code is 7-4-1.")
    done = crew("claude", "query", "--tools-via", "native", "--json", "@claude what does notes.txt say?")
    assert done.returncode == 0, done.stderr
    assert [(c["name"], c["success"]) for c in json.loads(done.stdout)["tool_calls"]] == [
        ("crew:read_file", False), ("crew:read_file", True)]
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
    [decision] = logged(crew, "claude", "native_tool")
    assert (decision["tool"], decision["decision"]) == ("Read", "refused")


@pytest.mark.parametrize("via", ["native", "text"])  # Claude asks crew in either: its live process is the same
def test_claude_runs_its_own_bash_in_execute_mode_unless_crews_policy_denies_it(via, crew, mock_server, workdir):
    mock_server.script(tool_call("Bash", {"command": "echo made > made.txt"}), "Done.")
    done = crew("claude", "execute", "--tools-via", via, "@claude make made.txt")
    assert done.returncode == 0, done.stderr
    assert (workdir / "made.txt").read_text() == "made\n"
    assert [(d["tool"], d["decision"]) for d in logged(crew, "claude", "native_tool")] == [("Bash", "allowed")]

    (workdir / "made.txt").unlink()
    write_config(workdir, "agents:\n  claude:\n    deny: ['native:Bash']\n")
    mock_server.script(tool_call("Bash", {"command": "echo made > made.txt"}), "I was not allowed to.")
    done = crew("claude", "execute", "--tools-via", via, "@claude make made.txt")
    assert done.returncode == 0, done.stderr
    assert not (workdir / "made.txt").exists()
    told = tool_results(mock_server.requests[-1])
    assert "crew's policy does not allow Bash" in told and "native:" in told
    [decision] = logged(crew, "claude", "native_tool")
    assert (decision["tool"], decision["decision"]) == ("Bash", "refused")


def test_claude_native_calls_are_events_of_the_jsonl_stream(crew, mock_server, notes):
    mock_server.script(tool_call("mcp__crew__read_file", {"path": "notes.txt"}), "The code is 7-4-1.")
    done = crew("claude", "query", "--tools-via", "native", "--jsonl", "@claude what does notes.txt say?")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [event["type"] for event in events if event["type"] in ("call", "result", "answer")]
    assert kinds == ["call", "result", "answer"]
    assert events[[e["type"] for e in events].index("result")]["result"]["success"] is True
