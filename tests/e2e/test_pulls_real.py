"""`crew execute --worktree --pr` through the `crew` command, with the real claude against the mock
model server, real git remotes (bare repositories that `url.<base>.insteadOf` in the test HOME's
gitconfig puts behind https://github.com/… and https://gitlab.com/…) and the stand-in of GitHub's and
GitLab's REST APIs (tests/forgeserver.py; no forge is reachable here): the change is committed on the
worktree's branch, pushed, and its pull request opened with the task, the change, the checks and
the usage in its body; the token reaches no agent; what cannot be proposed is refused before any
model is asked; a forge that refuses leaves the branch pushed (exit 3)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from clienv import cli_env, require_cli
from crewcli import only_result, processes_in, run_crew, tool_block
from forgeserver import ForgeServer
from gitrepo import git, make_repo

pytestmark = pytest.mark.e2e

TOKEN = "forge-t0ken-e2e"
TASK = "@claude add todo.md\n\nOne line: - ship it"
WRITE = tool_block("crew:write_file", path="todo.md", content="- ship it\n")


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[ForgeServer]:
    """The bare repositories at forge/o/r.git (GitHub) and forge/g/p.git (GitLab), and the stand-in."""
    bares = {}
    for path in ("o/r", "g/p"):
        source = make_repo(tmp_path / "sources" / path, {"notes.txt": "deploy: Friday\n"})
        bares[path] = tmp_path / "forge" / f"{path}.git"
        bares[path].parent.mkdir(parents=True, exist_ok=True)
        git(tmp_path, "clone", "-q", "--bare", str(source), str(bares[path]))
    with ForgeServer(bares, token=TOKEN) as server:
        yield server


def home_env(tmp_path: Path, mock_url: str, forge: ForgeServer, **extra: str) -> dict[str, str]:
    """claude's environment, its HOME's gitconfig sending github.com and gitlab.com to the bare repositories."""
    require_cli("claude")
    home = tmp_path / "home"
    env = cli_env("claude", mock_url, home)
    for host in ("github.com", "gitlab.com"):
        git(
            tmp_path,
            "config",
            "--file",
            str(home / ".gitconfig"),
            "--add",
            f"url.file://{tmp_path / 'forge'}/.insteadOf",
            f"https://{host}/",
        )
    return {
        **env,
        "GITHUB_API_URL": forge.url,
        "CI_API_V4_URL": f"{forge.url}/api/v4",
        "GH_TOKEN": TOKEN,
        "GITLAB_TOKEN": TOKEN,
        **extra,
    }


def checkout(tmp_path: Path, url: str) -> Path:
    """The person's checkout of `url` (its origin as configured: the forge's URL), on main as there."""
    repo = make_repo(tmp_path / "work", {"notes.txt": "deploy: Friday\n"})
    git(repo, "remote", "add", "origin", url)
    bare = tmp_path / "forge" / (url.split("/", 3)[3])  # where the test HOME's insteadOf sends it
    git(repo, "fetch", "-q", str(bare), "+refs/heads/main:refs/remotes/origin/main")
    git(repo, "reset", "-q", "--hard", "origin/main")
    git(repo, "branch", "-q", "--set-upstream-to", "origin/main")
    return repo


def test_a_change_is_pushed_and_its_pull_request_opened_with_what_the_run_did(tmp_path, mock_server, forge):
    env = home_env(tmp_path, mock_server.url, forge)
    repo = checkout(tmp_path, "https://github.com/o/r.git")
    mock_server.script(WRITE + tool_block("crew:run_command", command="env"), "Added todo.md.")
    args = ["execute", "--json", "--worktree", "--pr", "--label", "bot", "--check", "grep -q ship todo.md", TASK]
    done = run_crew(args, env=env, cwd=repo, timeout=300)
    assert done.returncode == 0, done.stderr
    result = only_result(done.stdout)
    run, branch = result["run_id"], f"crew/{result['run_id']}/claude"
    assert result["pull"] == {"url": "https://github.com/o/r/pull/1", "number": 1, "branch": branch, "opened": True}
    assert f"crew: pull request opened: https://github.com/o/r/pull/1 ({branch})" in done.stderr
    bare = forge.repos["o/r"]
    assert git(bare, "show", f"{branch}:todo.md") == "- ship it\n"
    assert git(bare, "log", "--format=%B", "-1", branch) == f"add todo.md\n\ncrew run {run}\n\n"
    [pull] = forge.of("o/r")
    assert (pull["title"], pull["head"]["label"], pull["base"]["ref"], pull["labels"]) == (
        "add todo.md",
        f"o:{branch}",
        "main",
        ["bot"],
    )
    text = pull["body"]
    assert text.startswith("add todo.md\n\nOne line: - ship it\n\n### What the agent did\n\n> Added todo.md.")
    assert "### Changes\n\n1 file changed, +1 -0\n\n- added `todo.md` (+1 -0)" in text
    assert "### Checks\n\n- ✅ `grep -q ship todo.md` passed" in text
    assert "### Usage\n\n- @claude: " in text and " tokens" in text and f"run `{run}`" in text
    # the token stayed with crew: the agent's command saw none of it (its output went to the model)
    seen = json.dumps([request.body for request in mock_server.requests])
    assert "HOME=" in seen and TOKEN not in seen and "GH_TOKEN" not in seen and "GITLAB_TOKEN" not in seen
    assert git(repo, "status", "--porcelain") == ""  # the person's checkout untouched
    assert processes_in(tmp_path) == []


def test_a_gitlab_merge_request_as_a_draft(tmp_path, mock_server, forge):
    env = home_env(tmp_path, mock_server.url, forge)
    repo = checkout(tmp_path, "https://gitlab.com/g/p.git")
    mock_server.script(WRITE, "Added todo.md.")
    done = run_crew(
        ["execute", "--worktree", "--pr", "--draft", "--pr-title", "Todo", TASK], env=env, cwd=repo, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "crew: draft merge request opened: https://gitlab.com/g/p/-/merge_requests/1 (crew/" in done.stderr
    [request] = forge.of("g/p")
    assert request["title"] == "Draft: Todo" and request["target_branch"] == "main"


def test_what_cannot_be_proposed_is_refused_before_any_model_is_asked(tmp_path, mock_server, forge):
    env = home_env(tmp_path, mock_server.url, forge)
    bare = make_repo(tmp_path / "alone", {"notes.txt": "x\n"})  # no remote
    done = run_crew(["execute", "--worktree", "--pr", TASK], env=env, cwd=bare)
    assert done.returncode == 2
    assert done.stderr.strip().endswith(
        "has no remote 'origin' to push to; add one (git remote add origin URL) or go without --pr"
    )
    repo = checkout(tmp_path, "https://github.com/o/r.git")
    unset = {k: v for k, v in env.items() if k not in ("GH_TOKEN", "GITHUB_TOKEN")}
    only_git = tmp_path / "only-git"
    only_git.mkdir()
    (only_git / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    unset["PATH"] = str(only_git)  # no gh to ask either
    done = run_crew(["execute", "--worktree", "--pr", TASK], env=unset, cwd=repo)
    assert done.returncode == 2 and "no token for github at github.com" in done.stderr, done.stderr
    done = run_crew(["execute", "--pr", TASK], env=env, cwd=repo)
    assert (
        done.returncode == 2 and "--pr proposes the branch of an agent's worktree; give --worktree too" in done.stderr
    )
    assert mock_server.requests == [] and forge.requests == []


def test_a_forge_that_refuses_leaves_the_branch_pushed_and_exits_3(tmp_path, mock_server, forge):
    env = home_env(tmp_path, mock_server.url, forge, GH_TOKEN="wrong-token")
    repo = checkout(tmp_path, "https://github.com/o/r.git")
    mock_server.script(WRITE, "Added todo.md.")
    done = run_crew(["execute", "--worktree", "--pr", TASK], env=env, cwd=repo, timeout=300)
    assert done.returncode == 3, done.stderr
    assert "github.com refused GET /repos/o/r/pulls" in done.stderr and "HTTP 401: Bad credentials" in done.stderr
    assert "wrong-token" not in done.stderr
    branches = git(forge.repos["o/r"], "branch", "--list", "crew/*").split()
    assert len(branches) == 1 and forge.of("o/r") == []
