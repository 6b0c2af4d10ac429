"""Write, then review (`crew execute --review`), through the `crew` command against the real claude,
gemini and codex and the mock model server: the reviewer answers with crew:verdict in query mode,
its findings reach the writer in the writer's conversation, the rounds end at approval or exit 6,
the reviewer cannot write, and one budget covers both agents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clienv import cli_env as build_env
from clienv import require_cli
from crewcli import only_result, processes_in, run_crew, tool_block
from gitrepo import make_repo, status
from mockserver import MockServer, reply

pytestmark = pytest.mark.e2e

TASK = "set the deploy day in notes.txt to Tuesday"
TYPO = {"path": "notes.txt", "line": 1, "severity": "high", "message": "'Tusday' is misspelled"}


def verdict(kind: str, *findings: dict) -> str:
    return tool_block("crew:verdict", verdict=kind, **({"findings": list(findings)} if findings else {}))


def last_message(request) -> str:
    return request.messages()[-1][1]


@pytest.fixture
def repo(workdir: Path) -> Path:
    return make_repo(workdir, {"notes.txt": "deploy: Friday\nowner: dana\n"})


def test_a_review_that_asks_for_changes_gets_them_and_approves(cli, crew, mock_server, repo):
    # One CLI writes and reviews: one mock answers both, in the order the run asks them
    mock_server.script(
        tool_block("crew:write_file", path="notes.txt", content="deploy: Tusday\nowner: dana\n"),
        "Set it.",  # writer
        verdict("changes", TYPO),  # reviewer, round 1
        tool_block("crew:edit_file", path="notes.txt", old_string="Tusday", new_string="Tuesday"),
        "Fixed it.",
        verdict("approve"),
    )  # reviewer, round 2
    done = crew(cli, "execute", "--json", "--review", cli, f"@{cli} {TASK}")
    assert done.returncode == 0, done.stderr
    result = only_result(done.stdout)
    assert result["answer"] == "Fixed it."
    assert result["review"] == {"reviewer": cli, "rounds": 2, "verdict": "approve", "findings": [], "disputed": []}
    assert (repo / "notes.txt").read_text() == "deploy: Tuesday\nowner: dana\n"
    _, _, review1, fix, _, review2 = mock_server.requests
    assert TASK in review1.text() and "-deploy: Friday\n+deploy: Tusday" in review1.text()
    assert "crew:verdict" in review1.text() and "crew:write_file" not in review1.text()  # query mode
    assert "1. [high] notes.txt:1: 'Tusday' is misspelled" in last_message(fix)
    assert TASK in fix.text()  # the writer's own conversation, its task still in it
    assert "-deploy: Friday\n+deploy: Tuesday" in review2.text() and "Round 1:" in review2.text()


def test_a_cross_vendor_review_that_runs_out_of_rounds_exits_6(tmp_path, mock_server, repo):
    require_cli("claude"), require_cli("codex")
    with MockServer() as codex_mock:
        env = {
            **build_env("claude", mock_server.url, tmp_path / "home"),
            **build_env("codex", codex_mock.url, tmp_path / "home"),
        }
        mock_server.script(
            tool_block("crew:write_file", path="notes.txt", content="deploy: Tusday\nowner: dana\n"),
            "Set it.",
            "It is right as it is.",
        )
        codex_mock.script(verdict("changes", TYPO), verdict("changes", TYPO))
        done = run_crew(["execute", "--review", "codex", "--rounds", "2", f"@claude {TASK}"], env=env, cwd=repo)
    assert processes_in(tmp_path) == []
    assert not codex_mock.problems, codex_mock.problems
    assert done.returncode == 6, done.stderr
    assert done.stdout.splitlines()[-1] == "It is right as it is."
    assert (
        done.stderr.count("crew: review ") == 2 and "crew: review 2 of 2 by @codex: asks for changes\n" in done.stderr
    )
    assert done.stderr.splitlines()[-1] == (
        "crew: error: @claude's change was not approved by @codex in 2 rounds (1 finding left; --json shows them); "
        "raise --rounds, or take the change as it is"
    )


def test_the_reviewers_writes_are_refused(cli, crew, mock_server, repo):
    mock_server.script(
        tool_block("crew:write_file", path="notes.txt", content="deploy: Tuesday\nowner: dana\n"),
        "Set it.",
        tool_block("crew:write_file", path="notes.txt", content="the reviewer's own version\n"),
        verdict("approve"),
    )
    done = crew(cli, "execute", "--json", "--review", cli, f"@{cli} {TASK}")
    assert done.returncode == 0, done.stderr
    assert (repo / "notes.txt").read_text() == "deploy: Tuesday\nowner: dana\n"
    assert "tool 'write_file' is not available in query mode" in last_message(mock_server.requests[3])


def test_one_budget_covers_the_writer_and_the_reviewer(tmp_path, mock_server, repo):
    require_cli("claude"), require_cli("gemini")
    with MockServer() as gemini_mock:
        env = {
            **build_env("claude", mock_server.url, tmp_path / "home"),
            **build_env("gemini", gemini_mock.url, tmp_path / "home"),
        }
        write = tool_block("crew:write_file", path="notes.txt", content="deploy: Tusday\nowner: dana\n")
        mock_server.script(
            reply(write, input_tokens=400, output_tokens=100), reply("Set it.", input_tokens=400, output_tokens=100)
        )
        gemini_mock.script(reply(verdict("changes", TYPO), input_tokens=400, output_tokens=100))
        # the writer alone (1,000 tokens) is within 1,200; with the reviewer's round it is past it
        done = run_crew(["execute", "--max-tokens", "1200", "--review", "gemini", f"@claude {TASK}"], env=env, cwd=repo)
    assert processes_in(tmp_path) == []
    assert done.returncode == 5, done.stderr
    assert done.stderr.splitlines()[-1] == (
        "crew: error: @claude's review was stopped after round 1: the run used 1,500 tokens, past --max-tokens "
        "1,200, the writer's and the reviewer's usage together; raise the limit"
    )
    assert len(mock_server.requests) == 2 and len(gemini_mock.requests) == 1  # no second round was started


def test_a_review_in_a_worktree_reads_the_writers_files_there(tmp_path, mock_server, repo):
    require_cli("gemini"), require_cli("codex")
    with MockServer() as gemini_mock:
        env = {
            **build_env("codex", mock_server.url, tmp_path / "home"),
            **build_env("gemini", gemini_mock.url, tmp_path / "home"),
        }
        mock_server.script(
            tool_block("crew:write_file", path="notes.txt", content="deploy: Tuesday\nowner: dana\n"), "Set it."
        )
        gemini_mock.script(tool_block("crew:read_file", path="notes.txt"), verdict("approve"))
        done = run_crew(["execute", "--json", "--worktree", "--review", "gemini", f"@codex {TASK}"], env=env, cwd=repo)
    assert processes_in(tmp_path) == []
    assert done.returncode == 0, done.stderr
    result = only_result(done.stdout)
    assert result["review"]["verdict"] == "approve" and result["branch"] == f"crew/{result['run_id']}/codex"
    assert "deploy: Tuesday" in last_message(gemini_mock.requests[1])  # what the reviewer read: the writer's file
    assert status(repo) == "" and (repo / "notes.txt").read_text() == "deploy: Friday\nowner: dana\n"
    assert (Path(result["worktree"]) / "notes.txt").read_text() == "deploy: Tuesday\nowner: dana\n"


def test_a_reviewer_calls_verdict_through_its_clis_native_channel(crew, mock_server, repo):
    from mockserver import tool_call

    mock_server.script(
        tool_call("mcp__crew__write_file", {"path": "notes.txt", "content": "deploy: Tuesday\nowner: dana\n"}),
        "Set it.",  # the writer
        tool_call("mcp__crew__verdict", {"verdict": "approve", "findings": [{"path": "notes.txt", "line": 1}]}),
        tool_call("mcp__crew__verdict", {"verdict": "approve"}),
        "Approved.",
    )  # the reviewer
    done = crew("claude", "execute", "--json", "--tools-via", "native", "--review", "claude", f"@claude {TASK}")
    assert done.returncode == 0, done.stderr
    result = only_result(done.stdout)
    assert result["review"]["verdict"] == "approve" and result["answer"] == "Set it."
    review = mock_server.requests[2]
    assert "mcp__crew__verdict" in review.tool_names() and "mcp__crew__write_file" not in review.tool_names()
    assert "mcp__crew__dispute" in mock_server.requests[0].tool_names()
    # its schema is checked on this channel too: the first call lacked severity and message
    assert "invalid input for crew:verdict at $.findings[0]" in "\n".join(
        text for _, text in mock_server.requests[3].messages()
    )


def test_claude_hands_a_change_to_codex_reviewed_by_gemini_over_mcp(mock_server, repo, tmp_path):
    from test_mcp_real import STDIO, all_env, claude

    from mockserver import tool_call

    mock_server.script(
        tool_call("ask", {"task": f"@codex {TASK}", "mode": "execute", "worktree": True, "review": "gemini"}),
        tool_block("crew:write_file", path="notes.txt", content="deploy: Tuesday\nowner: dana\n"),
        "Set it.",  # codex
        verdict("approve"),  # gemini
        "Codex moved it to Tuesday and Gemini approved.",
    )  # claude again, with the ask's answer
    done = claude(
        "have codex move the deploy day, reviewed by gemini",
        all_env(mock_server.url, tmp_path / "home"),
        repo,
        server={**STDIO, "args": [*STDIO["args"], "--execute"]},
    )
    assert done.returncode == 0, done.stderr
    ask, wrote, _answered, review, last = mock_server.requests
    assert [r.vendor for r in (ask, wrote, review, last)] == ["anthropic", "openai", "gemini", "anthropic"]
    content = json.loads(last.messages()[-1][1])  # claude passes the ask's structured content on
    [told] = content["results"]
    assert content["run"] == told["run_id"]
    assert (told["answer"], told["review"]["verdict"], told["branch"]) == (
        "Set it.",
        "approve",
        f"crew/{told['run_id']}/codex",
    )
    assert (Path(told["worktree"]) / "notes.txt").read_text() == "deploy: Tuesday\nowner: dana\n"
    assert status(repo) == "" and (repo / "notes.txt").read_text() == "deploy: Friday\nowner: dana\n"
    assert processes_in(tmp_path) == []
