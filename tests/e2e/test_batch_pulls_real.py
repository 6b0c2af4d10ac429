"""`crew batch --check … --pr` through the `crew` command, with the real claude against the mock model
server, real git remotes (bare repositories that `url.<base>.insteadOf` in the test HOME's gitconfig
puts behind https://github.com/o/…) and the stand-in of GitHub's REST API (tests/forgeserver.py; no
forge is reachable here): each repository is committed only once its check passes, pushed to its
origin (or to its URL) and proposed; a pull request already open for the branch is updated, never
duplicated; the forge's secondary rate limits are waited out once each, paced across the workers of
the batch (no request while a wait is not over); `crew batch status` asks the forge for each pull
request's state and checks."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import jsonschema
import pytest

from clienv import cli_env, require_cli
from crewcli import processes_in, run_crew, start_crew, tool_block
from forgeserver import ForgeServer
from gitrepo import git, make_repo
from mockserver import MockServer, Request

pytestmark = pytest.mark.e2e

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "schemas" / "batch.json").read_text())
TOKEN = "forge-t0ken-batch"
TASK = "@claude add todo.md\n\nOne line: - ship it"
CHECK = "grep -q 'ship it' todo.md"


def repo_of(request: Request) -> str:
    """The repository a model request comes from: the worktree folder its CLI works in (repo-a → a)."""
    body = json.dumps(request.body)
    return body.split("/worktrees/", 1)[1].split("-", 2)[:2][-1] if "/worktrees/" in body else ""


def agent(request: Request) -> str:
    """Writes todo.md (in b, without what the check wants, and holds it right when told it is not)."""
    text = request.text()
    if "[check]" in text:
        return "It is fine as it is."
    if '"success": true' in text:
        return "Added todo.md."
    content = "- nothing yet\n" if repo_of(request) == "b" else "- ship it\n"
    return tool_block("crew:write_file", path="todo.md", content=content)


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[ForgeServer]:
    """Bare repositories o/repo-a … o/repo-e behind https://github.com/, and the stand-in."""
    bares = {}
    for name in "abcde":
        source = make_repo(tmp_path / "sources" / f"repo-{name}", {"notes.txt": f"repository {name}\n"})
        bares[f"o/repo-{name}"] = tmp_path / "forge" / "o" / f"repo-{name}.git"
        git(tmp_path, "clone", "-q", "--bare", str(source), str(bares[f"o/repo-{name}"]))
    with ForgeServer(bares, token=TOKEN) as server:
        yield server


@pytest.fixture
def env(mock_server: MockServer, forge: ForgeServer, tmp_path: Path) -> Callable[[str], dict[str, str]]:
    """env(machine): claude's environment with a HOME of its own whose gitconfig reaches the forge."""
    require_cli("claude")

    def made(machine: str) -> dict[str, str]:
        home = tmp_path / f"home-{machine}"
        found = cli_env("claude", mock_server.url, home)
        rewrite = ["config", "--file", str(home / ".gitconfig"), f"url.file://{tmp_path / 'forge'}/.insteadOf"]
        git(tmp_path, *rewrite, "https://github.com/")
        return {**found, "GITHUB_API_URL": forge.url, "GH_TOKEN": TOKEN}

    return made


def checkouts(tmp_path: Path, names: str) -> list[Path]:
    """The person's checkouts of o/repo-NAME, each with its origin as configured (the forge's URL)."""
    found = []
    for name in names:
        repo = tmp_path / f"repo-{name}"
        git(tmp_path, "clone", "-q", str(tmp_path / "forge" / "o" / f"repo-{name}.git"), str(repo))
        git(repo, "remote", "set-url", "origin", f"https://github.com/o/repo-{name}.git")
        found.append(repo)
    return found


def test_each_repository_is_committed_once_its_check_passes_pushed_and_proposed(mock_server, env, forge, tmp_path):
    repos = [*map(str, checkouts(tmp_path, "abc")), "https://github.com/o/repo-d.git"]
    mock_server.respond(agent)
    args = ["batch", "--id", "prs", "--json", "--retries", "0", "--check", CHECK, "--check-rounds", "2"]
    done = run_crew([*args, "--pr", "--label", "bot", TASK, *repos], env=env("one"), cwd=tmp_path, timeout=600)
    assert done.returncode == 7, done.stderr  # b never passed its check
    record = json.loads(done.stdout)
    jsonschema.validate(record, SCHEMA)
    rows = {Path(row["repo"]).name.removesuffix(".git")[-1]: row for row in record["repos"]}
    for name in "acd":
        row, bare = rows[name], forge.repos[f"o/repo-{name}"]
        assert row["status"] == "done" and row["checks"][-1]["passed"] and row["checks"][-1]["command"] == CHECK
        assert git(bare, "rev-parse", "crew/batch-prs/claude").strip() == row["commit"]  # pushed to the forge
        [pull] = forge.of(f"o/repo-{name}")
        assert row["pull"]["url"] == f"https://github.com/o/repo-{name}/pull/{pull['number']}" and row["pull"]["opened"]
        assert (pull["head"]["label"], pull["base"]["ref"], pull["labels"]) == (
            "o:crew/batch-prs/claude",
            "main",
            ["bot"],
        )
        assert (
            pull["title"] == "add todo.md" and "### Checks\n\n- ✅ `grep -q 'ship it' todo.md` passed" in pull["body"]
        )
        assert f"run `{row['run']}` of batch `prs`" in pull["body"] and "- @claude: " in pull["body"]
    failed = rows["b"]
    assert failed["status"] == "failed" and failed["commit"] is None and failed["pull"] is None
    assert "still fails its check after 2 rounds" in failed["error"]
    assert [(c["round"], c["passed"]) for c in failed["checks"]] == [(1, False), (2, False)]
    assert git(forge.repos["o/repo-b"], "branch", "--list", "crew/*") == "" and forge.of("o/repo-b") == []
    assert "- nothing yet" not in git(Path(repos[1]), "log", "--all", "-p")  # nothing of it committed
    assert forge.early == 0

    forge.set_state("o/repo-a", 1, "merged")
    sha = git(forge.repos["o/repo-c"], "rev-parse", "crew/batch-prs/claude").strip()
    forge.checks[sha] = [{"status": "completed", "conclusion": "failure"}]
    shown = run_crew(["batch", "status", "prs", "--json"], env=env("one"), cwd=tmp_path)
    states = {Path(row["repo"]).name.removesuffix(".git")[-1]: row["pull"] for row in json.loads(shown.stdout)["repos"]}
    assert (states["a"]["state"], states["c"]["state"], states["c"]["checks"]) == ("merged", "open", "1 failing")
    assert states["d"]["checks"] == "none" and states["b"] is None
    table = run_crew(["batch", "status", "prs"], env=env("one"), cwd=tmp_path).stdout
    assert "https://github.com/o/repo-a/pull/1 merged, checks: none" in table
    assert "crew batch status prs  # each pull request's state and checks now" in table
    assert processes_in(tmp_path) == []


def test_a_pull_request_open_for_the_branch_is_updated_never_duplicated(mock_server, env, forge, tmp_path):
    [repo] = checkouts(tmp_path, "a")
    bare = forge.repos["o/repo-a"]
    git(bare, "branch", "crew/batch-again/claude", "main")  # an earlier run opened one for the branch
    forge.pulls["o/repo-a"] = [
        {
            "number": 41,
            "state": "open",
            "merged": False,
            "title": "an old title",
            "body": "",
            "draft": False,
            "head": {"label": "o:crew/batch-again/claude", "ref": "crew/batch-again/claude"},
            "base": {"ref": "main"},
            "labels": [],
        }
    ]
    mock_server.respond(agent)
    done = run_crew(
        ["batch", "--id", "again", "--json", "--pr", TASK, str(repo)], env=env("one"), cwd=tmp_path, timeout=300
    )
    assert done.returncode == 0, done.stderr
    [row] = json.loads(done.stdout)["repos"]
    assert row["pull"]["number"] == 41 and row["pull"]["opened"] is False
    [pull] = forge.of("o/repo-a")
    assert pull["title"] == "add todo.md" and "One line: - ship it" in pull["body"]
    assert git(bare, "show", "crew/batch-again/claude:todo.md") == "- ship it\n"  # the branch replaced


def test_secondary_limits_are_waited_out_once_each_paced_across_two_workers(mock_server, env, forge, tmp_path):
    forge.limit_every, forge.retry_after = 3, 1
    repos = [
        *map(str, checkouts(tmp_path, "ace")),
        "https://github.com/o/repo-b.git",
        "https://github.com/o/repo-d.git",
    ]
    mock_server.respond(lambda request: agent(request) if repo_of(request) != "b" else agent_b_fixed(request))
    database = f"sqlite:///{tmp_path / 'shared.sqlite'}"
    submit = ["batch", "--detach", "--db", database, "--id", "paced", "--concurrency", "4", "--pr", "--label", "x"]
    assert run_crew([*submit, TASK, *repos], env=env("one"), cwd=tmp_path).returncode == 0
    worker = ["batch", "worker", "--db", database, "--until-idle"]
    workers = [start_crew(worker, env=env("one"), cwd=tmp_path) for _ in range(2)]
    for proc in workers:
        proc.communicate(timeout=600)
        assert proc.returncode == 0
    limits = forge.limits  # those the workers met (crew batch status asks the forge too, below)
    shown = json.loads(
        run_crew(["batch", "status", "paced", "--json", "--db", database], env=env("one"), cwd=tmp_path).stdout
    )
    assert [row["status"] for row in shown["repos"]] == ["done"] * 5
    assert sorted(len(forge.of(f"o/repo-{name}")) for name in "abcde") == [1] * 5  # none duplicated
    assert limits >= 4 and forge.early == 0  # nobody asked while a wait was not over
    assert sum(row["pull"]["limits"] for row in shown["repos"]) == limits  # each waited out, once
    assert sum(row["pull"]["waited"] for row in shown["repos"]) >= limits * forge.retry_after
    assert all(row["pull"]["state"] == "open" for row in shown["repos"])  # status waited out its own
    assert processes_in(tmp_path) == []


def agent_b_fixed(request: Request) -> str:
    """Repository b's agent, when its change is right the first time."""
    return (
        "Added todo.md."
        if '"success": true' in request.text()
        else tool_block("crew:write_file", path="todo.md", content="- ship it\n")
    )
