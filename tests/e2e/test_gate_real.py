"""The check gate (`crew execute --check`) through the `crew` command, with the real claude, gemini
and codex against the mock model server: a real test command (python's unittest) fails on the
agent's change, its output goes back to the same agent in its conversation, the agent fixes it and
the check passes in round 2; a change that never passes ends with exit 9, its worktree kept; with a
review, the reviewer is asked only once the check passed."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from crewcli import only_result, tool_block
from gitrepo import make_repo

pytestmark = pytest.mark.e2e

TASK = "set the deploy day in notes.txt to Tuesday"
TEST = """import unittest


class Deploy(unittest.TestCase):
    def test_the_day_is_tuesday(self):
        with open("notes.txt") as notes:
            self.assertEqual(notes.read().split()[1], "Tuesday")


if __name__ == "__main__":
    unittest.main()
"""
CHECK = f"{shlex.quote(sys.executable)} -m unittest -q test_deploy"


@pytest.fixture
def repo(workdir: Path) -> Path:
    return make_repo(workdir, {"notes.txt": "deploy: Friday\n", "test_deploy.py": TEST})


def last_message(request) -> str:
    return request.messages()[-1][1]


def test_a_failing_test_goes_back_to_the_agent_which_fixes_it_and_passes_in_round_two(cli, crew, mock_server, repo):
    mock_server.script(
        tool_block("crew:write_file", path="notes.txt", content="deploy: Tusday\n"),
        "Set it.",
        tool_block("crew:edit_file", path="notes.txt", old_string="Tusday", new_string="Tuesday"),
        "Fixed the spelling.",
    )
    done = crew(cli, "execute", "--json", "--check", CHECK, f"@{cli} {TASK}")
    assert done.returncode == 0, done.stderr
    result = only_result(done.stdout)
    assert result["answer"] == "Fixed the spelling."
    assert [(c["round"], c["passed"], c["exit_code"]) for c in result["checks"]] == [(1, False, 1), (2, True, 0)]
    assert "AssertionError: 'Tusday' != 'Tuesday'" in result["checks"][0]["output"]
    assert (repo / "notes.txt").read_text() == "deploy: Tuesday\n"
    _, _, told, _ = mock_server.requests
    message = last_message(told)  # the writer's own conversation: its task is still in it
    assert message.startswith("[check]\ncrew ran the check on your change (round 1 of 3) and it failed:")
    assert f"$ {CHECK}\nexit status 1; the end of its output:" in message
    assert "AssertionError: 'Tusday' != 'Tuesday'" in message and "FAILED (failures=1)" in message
    assert TASK in told.text()
    lines = [line for line in done.stderr.splitlines() if "check " in line]
    assert lines[0].startswith(f"crew: @{cli}: check 1/3 failed, exit status 1: {CHECK} (")
    assert lines[-1].startswith(f"crew: @{cli}: check 2/3 passed: {CHECK} (")


def test_a_change_that_never_passes_exits_9_and_keeps_its_worktree(crew, mock_server, repo):
    mock_server.script(
        tool_block("crew:write_file", path="notes.txt", content="deploy: Tusday\n"),
        "Set it.",
        "The spelling is fine as it is.",
    )
    done = crew("claude", "execute", "--worktree", "--check", CHECK, "--check-rounds", "2", f"@claude {TASK}")
    assert done.returncode == 9, done.stderr
    assert done.stdout.splitlines()[-1] == "The spelling is fine as it is."
    assert (
        f"crew: error: @claude's change still fails its check after 2 rounds: `{CHECK}` (exit status 1); "
        "--json and `crew log show` have its output (raise --check-rounds, or take the change as it is)"
    ) in done.stderr
    assert len(mock_server.requests) == 3  # told once; after the last round nobody asks for a fix
    run = done.stderr.split("crew apply ")[1].split()[0]
    shown = crew("claude", "log", "show", "--json", run)
    checks = [json.loads(line) for line in shown.stdout.splitlines() if '"kind":"check"' in line]
    assert [(c["round"], c["passed"]) for c in checks] == [(1, False), (2, False)]
    replayed = crew("claude", "log", "show", run)
    assert "crew: @claude: check 2/2 failed, exit status 1:" in replayed.stderr + replayed.stdout
    assert (repo / "notes.txt").read_text() == "deploy: Friday\n"  # the checkout untouched: the worktree has it


def test_the_reviewer_is_asked_only_once_the_check_passed(crew, mock_server, repo):
    mock_server.script(
        tool_block("crew:write_file", path="notes.txt", content="deploy: Tusday\n"),
        "Set it.",  # writer; the check fails
        tool_block("crew:edit_file", path="notes.txt", old_string="Tusday", new_string="Tuesday"),
        "Fixed.",  # the check passes
        tool_block("crew:verdict", verdict="approve"),  # reviewer
    )
    done = crew("claude", "execute", "--json", "--review", "claude", "--check", CHECK, f"@claude {TASK}")
    assert done.returncode == 0, done.stderr
    result = only_result(done.stdout)
    assert result["review"]["verdict"] == "approve" and [c["passed"] for c in result["checks"]] == [False, True]
    review = mock_server.requests[4].text()
    assert "+deploy: Tuesday" in review and "Tusday" not in review
