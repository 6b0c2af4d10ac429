"""crewbridge.work.pulls: what a pull request of a run says (its title and body: the task, the agent's
summary, the change, the checks, the review's verdict, the usage), and the git that delivers it (the
remote as configured, not as insteadOf rewrites it; the branch it goes into; the push), on real
repositories."""

from __future__ import annotations

from pathlib import Path

import pytest

from crewbridge.errors import ForgeError, UsageError
from crewbridge.system.git import Checkout
from crewbridge.work.pulls import FILES, Told, base_branch, body, push, remote_url, title_of
from gitrepo import git, make_repo


def test_the_title_is_the_tasks_first_line_without_its_mention_unless_given():
    assert title_of("@claude bump ruff to 0.17\n\nand fix what it finds") == "bump ruff to 0.17"
    assert title_of("rename the flag") == "rename the flag"
    assert title_of("@claude " + "x" * 300) == "x" * 119 + "…"
    assert title_of("@claude bump ruff", "chore: bump ruff") == "chore: bump ruff"


def test_the_body_says_the_task_the_change_the_checks_the_review_and_the_usage():
    told = Told(
        task="@claude bump ruff\n\nand fix what it finds",
        answer="Bumped ruff.\nFixed two findings.",
        changes=[
            {"path": "pyproject.toml", "status": "modified", "added": 1, "removed": 1},
            {"path": "logo.png", "status": "added", "added": None, "removed": None},
        ],
        checks=[
            {"command": "ruff check .", "round": 1, "passed": False, "exit_code": 1, "output": "E501 line too long\n"},
            {"command": "pytest -q", "round": 1, "passed": True, "exit_code": 0, "output": ""},
            {"command": "ruff check .", "round": 2, "passed": True, "exit_code": 0, "output": ""},
        ],
        review={"reviewer": "gemini", "rounds": 1, "verdict": "approve", "findings": []},
        usage={
            "claude": {"input_tokens": 1000, "output_tokens": 234, "cost_usd": 0.0123},
            "gemini": {"input_tokens": 10, "output_tokens": 5, "cost_usd": None},
        },
        run="20260101-000000-abcdef",
    )
    assert body(told) == (
        "bump ruff\n\nand fix what it finds\n\n"
        "### What the agent did\n\n> Bumped ruff.\n> Fixed two findings.\n\n"
        "### Changes\n\n2 files changed, +1 -1\n\n- modified `pyproject.toml` (+1 -1)\n- added `logo.png` (binary)\n\n"
        "### Checks\n\n- ✅ `ruff check .` passed, round 2\n- ✅ `pytest -q` passed\n\n"
        "### Review\n\n@gemini approved after 1 round.\n\n"
        "### Usage\n\n- @claude: 1,234 tokens, $0.0123\n- @gemini: 15 tokens\n\n"
        "---\n_Proposed by crew, run `20260101-000000-abcdef`._\n"
    )


def test_a_body_given_replaces_the_task_and_a_failure_shows_its_output_in_a_fence_it_cannot_close():
    told = Told(
        task="@claude t",
        intro="Bumps ruff across the fleet.\n",
        checks=[{"command": "make", "round": 3, "passed": False, "exit_code": 2, "output": "```\nboom\n"}],
        review={
            "reviewer": "codex",
            "rounds": 2,
            "verdict": "changes",
            "findings": [{"severity": "high", "path": "a.py", "message": "wrong"}],
        },
        changes=[{"path": f"f{n}", "status": "added", "added": 1, "removed": 0} for n in range(FILES + 2)],
    )
    text = body(told)
    assert text.startswith("Bumps ruff across the fleet.\n\n### Changes\n\n52 files changed, +52 -0")
    assert "- … and 2 more" in text and "`f50`" not in text
    assert "- ❌ `make` failed, exit status 2, round 3\n\n````\n```\nboom\n````\n" in text
    assert "@codex asked for changes after 2 rounds; findings left:\n- [high] a.py wrong" in text
    assert "### Usage" not in text and "run `" not in text


def test_the_remote_is_the_url_as_configured_not_as_insteadof_rewrites_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    git(tmp_path, "config", "--global", "url.file:///srv/forge/.insteadOf", "https://github.com/")
    repo = make_repo(tmp_path / "work", {"a": "b"})
    git(repo, "remote", "add", "origin", "https://github.com/o/r.git")
    assert remote_url(Checkout.of(repo, "--pr")) == "https://github.com/o/r.git"
    assert git(repo, "remote", "get-url", "origin").strip() == "file:///srv/forge/o/r.git"  # what git itself gives
    with pytest.raises(
        UsageError, match=r"has no remote 'upstream' to push to; add one \(git remote add upstream URL\)"
    ):
        remote_url(Checkout.of(repo, "--pr"), "upstream")


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    """A bare repository whose HEAD is `trunk`, and a clone of it on a branch `feature` that tracks its own."""
    source = make_repo(tmp_path / "source", {"a": "b"})
    git(source, "branch", "-q", "-m", "trunk")
    git(source, "branch", "-q", "feature")
    bare = tmp_path / "r.git"
    git(tmp_path, "clone", "-q", "--bare", str(source), str(bare))
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(bare), str(clone))
    return bare, clone


def test_the_base_is_the_branch_head_tracks_else_the_remotes_default(pair):
    bare, clone = pair
    checkout = Checkout.of(clone, "--pr")
    assert base_branch(checkout, "origin") == "trunk"
    git(clone, "checkout", "-q", "-b", "feature", "--track", "origin/feature")
    assert base_branch(checkout, "origin") == "feature"
    git(clone, "checkout", "-q", "-b", "local")  # tracks nothing
    assert base_branch(checkout, "origin") == "trunk" and base_branch(checkout, f"file://{bare}") == "trunk"


def test_a_push_replaces_the_branch_and_a_refused_one_is_a_forge_error(pair):
    bare, clone = pair
    checkout = Checkout.of(clone, "--pr")
    head = git(clone, "rev-parse", "HEAD").strip()
    push(checkout, "origin", head, "crew/x/claude")
    assert git(bare, "rev-parse", "crew/x/claude").strip() == head
    with pytest.raises(ForgeError, match=r"^cannot push crew/x/claude to nowhere: git push failed"):
        push(checkout, "nowhere", head, "crew/x/claude")
