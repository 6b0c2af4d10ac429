"""The whole loop through the `crew` command, against the real claude, gemini and codex binaries
talking to the mock model server: the model's tool calls are run by crew, their results (or errors)
reach the model in its next request with the task kept, and the final answer is printed.

Whatever continuation is in force (a live process, or a new process per turn), these assert only
what the model is sent next, what crew prints, and its exit code."""

from __future__ import annotations

import pytest

from clienv import cli_env as build_env
from clienv import require_cli
from crewcli import only_result, processes_in, run_crew, tool_block
from mockserver import MockServer, reply

pytestmark = pytest.mark.e2e


def last_message(request) -> str:
    """The last message a model request carried: crew's newest message (a task, or tool results)."""
    return request.messages()[-1][1]


def calls(done) -> list[tuple[str, bool]]:
    """(name, success) of each tool call in a `--json` result."""
    return [(call["name"], call["success"]) for call in only_result(done.stdout)["tool_calls"]]


def test_an_answer_that_needs_a_file_only_a_crew_tool_can_read(cli, crew, mock_server, notes):
    mock_server.script(reply("Let me read it.\n", tool_block("crew:read_file", path="notes.txt")), "The code is 7-4-1.")
    done = crew(cli, "query", f"@{cli} what does notes.txt say?")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The code is 7-4-1.\n"
    first, second = mock_server.requests
    assert notes not in first.text()
    assert notes in second.text() and "what does notes.txt say?" in second.text()


def test_a_chain_list_files_then_read_file_then_the_answer(cli, crew, mock_server, workdir):
    (workdir / "docs").mkdir()
    (workdir / "docs" / "plan-4711.md").write_text("ship on friday\n")
    mock_server.script(
        tool_block("crew:list_files", path="docs"),
        tool_block("crew:read_file", path="docs/plan-4711.md"),
        "We ship on Friday.",
    )
    done = crew(cli, "query", "--json", f"@{cli} when do we ship? the plan is under docs/")
    assert done.returncode == 0, done.stderr
    assert only_result(done.stdout)["answer"] == "We ship on Friday."
    assert calls(done) == [("crew:list_files", True), ("crew:read_file", True)]
    _, listed, read = mock_server.requests
    assert "plan-4711.md" in last_message(listed)  # the listing came back as the tool's result
    assert "ship on friday" not in listed.text() and "ship on friday" in last_message(read)


def test_model_mistakes_go_back_with_how_to_fix_them_and_are_corrected(cli, crew, mock_server, notes):
    mock_server.script(
        tool_block("crew:read_fil", path="notes.txt")  # an unknown tool
        + tool_block("crew:read_file", path=42),  # input that breaks the schema
        tool_block("crew:read_file", path="notes.txt"),
        "The code is 7-4-1.",
    )
    done = crew(cli, "query", "--json", f"@{cli} what does notes.txt say?")
    assert done.returncode == 0, done.stderr
    assert only_result(done.stdout)["answer"] == "The code is 7-4-1."
    assert calls(done) == [("crew:read_fil", False), ("crew:read_file", False), ("crew:read_file", True)]
    _, errors, read = mock_server.requests
    assert "unknown tool 'crew:read_fil'; did you mean 'crew:read_file'?" in last_message(errors)
    assert "at $.path: 42 is not of type 'string'" in last_message(errors)
    assert notes in last_message(read) and notes not in errors.text()


@pytest.mark.parametrize("mode", ["query", "execute"])
def test_query_refuses_a_write_tool_and_execute_runs_it(mode, cli, crew, mock_server, workdir):
    mock_server.script(tool_block("crew:write_file", path="out.txt", content="written by the model\n"), "Done.")
    done = crew(cli, mode, f"@{cli} write out.txt")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Done.\n"
    follow_up = mock_server.requests[1].text()
    if mode == "query":
        assert not (workdir / "out.txt").exists()
        assert "tool 'write_file' is not available in query mode" in follow_up
    else:
        assert (workdir / "out.txt").read_text() == "written by the model\n"
        assert '"success": true' in follow_up


def test_claude_and_gemini_run_in_parallel_each_answer_under_its_label(tmp_path, mock_server, workdir, notes):
    require_cli("claude"), require_cli("gemini")
    (workdir / "plan.txt").write_text("ship on friday\n")
    with MockServer() as gemini_mock:  # one server per CLI: each gets its own script, in its own order
        env = {
            **build_env("claude", mock_server.url, tmp_path / "home"),
            **build_env("gemini", gemini_mock.url, tmp_path / "home"),
        }
        mock_server.script(tool_block("crew:read_file", path="notes.txt"), "Claude: the code is 7-4-1.")
        gemini_mock.script(tool_block("crew:read_file", path="plan.txt"), "Gemini: we ship on Friday.")
        done = run_crew(["query", "@claude @gemini what do the files say?"], env=env, cwd=workdir)
    assert processes_in(tmp_path) == []
    assert not gemini_mock.problems, gemini_mock.problems
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert (
        out.index("@claude")
        < out.index("Claude: the code is 7-4-1.")
        < out.index("@gemini")
        < out.index("Gemini: we ship on Friday.")
    )
    assert notes in mock_server.requests[1].text() and "ship on friday" in gemini_mock.requests[1].text()
