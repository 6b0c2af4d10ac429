"""crewbridge.work.worktrees: a worktree per agent on crew/<run id>/<agent>, outside the checkout; what an
agent changed (new files and its own commits too); `apply` all or nothing; `clean` that never drops
uncommitted work unless forced; an agent that rewrites its worktree's `.git` cannot steer crew's git."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from crewbridge.base.mentions import Mention
from crewbridge.errors import UsageError
from crewbridge.system.git import Change
from crewbridge.work.worktrees import Conflict, RunsCode, apply, clean, find, labels, listed, make, table
from gitrepo import git, make_repo, status, write

RUN = "20260101-120000-abc123"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00binary"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path / "repo",
        {"notes.txt": "deploy: Friday\nowner: dana\n", "src/app.py": "print(1)\n", "old.txt": "bye\n"},
    )


def kept(repo: Path) -> list[Path]:
    """Where crew keeps `repo`'s worktrees: a folder of its state directory, named after it (or none)."""
    return [
        p.resolve() for p in (Path(os.environ["XDG_STATE_HOME"]) / "crewbridge" / "worktrees").glob(f"{repo.name}-*")
    ]


def branches(repo: Path) -> list[str]:
    return sorted(git(repo, "branch", "--format=%(refname:short)").split())


def test_each_agent_gets_a_worktree_on_its_branch_from_head_outside_the_checkout(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD").strip()
    made = make(repo, RUN, ["claude", "gemini"])
    assert [(w.agent, w.branch, w.base) for w in made.worktrees] == [
        ("claude", f"crew/{RUN}/claude", head),
        ("gemini", f"crew/{RUN}/gemini", head),
    ]
    for worktree in made.worktrees:
        assert worktree.path == kept(repo)[0] / RUN / worktree.agent
        assert (worktree.path / "notes.txt").read_text() == "deploy: Friday\nowner: dana\n"
    assert status(repo) == "" and made.notice() == ""
    assert branches(repo) == [f"crew/{RUN}/claude", f"crew/{RUN}/gemini", "main"]


def test_repositories_of_one_name_keep_their_worktrees_apart(repo: Path, tmp_path: Path) -> None:
    other = make_repo(tmp_path / "elsewhere" / "repo", {"x.txt": "x\n"})
    make(repo, RUN, ["claude"])
    make(other, RUN, ["claude"])
    assert [w.path.parent.parent.name for w in listed(repo) + listed(other)] == [
        p.name
        for p in sorted(
            (Path(os.environ["XDG_STATE_HOME"]) / "crewbridge" / "worktrees").iterdir(), key=lambda p: p.stat().st_mtime
        )
    ]
    assert listed(repo)[0].path != listed(other)[0].path


def test_a_dirty_checkout_is_said_to_be_left_out_head_is_the_base(repo: Path) -> None:
    write(repo, {"notes.txt": "mine\n", "scratch.txt": "s\n"})
    made = make(repo, RUN, ["claude"])
    assert made.notice() == (
        f"your checkout has uncommitted changes (2 files); the worktrees start from HEAD "
        f"({made.base[:10]}) without them"
    )
    assert (made.worktrees[0].path / "notes.txt").read_text().startswith("deploy")
    assert not (made.worktrees[0].path / "scratch.txt").exists()


def test_making_them_is_all_or_nothing(repo: Path) -> None:
    git(repo, "branch", f"crew/{RUN}/gemini")  # taken: the second worktree cannot be made
    with pytest.raises(Exception, match="gemini"):
        make(repo, RUN, ["claude", "gemini"])
    assert listed(repo) == [] and f"crew/{RUN}/claude" not in branches(repo)
    assert kept(repo) == []


def test_an_agent_mentioned_twice_gets_a_name_per_mention() -> None:
    mentions = [
        Mention("claude", "opus"),
        Mention("claude", "haiku"),
        Mention("gemini"),
        Mention("claude", "haiku"),
        Mention("codex", "gpt-5/x"),
    ]
    assert labels(mentions) == ["claude-opus", "claude-haiku", "gemini", "claude-haiku-2", "codex"]


def test_an_agent_works_in_the_worktrees_copy_of_its_folder(repo: Path, tmp_path: Path) -> None:
    made = make(repo, RUN, ["claude"])
    worktree = made.worktrees[0]
    assert made.place(worktree, repo / "src") == worktree.path / "src"
    (repo / "untracked").mkdir()
    assert made.place(worktree, repo / "untracked").is_dir()  # HEAD lacks it: made, empty
    with pytest.raises(UsageError, match=r"@claude works in .*, outside the repository at .*; --worktree needs"):
        made.place(worktree, tmp_path)


def test_what_an_agent_changed_counts_new_files_deletions_and_its_own_commits(repo: Path) -> None:
    worktree = make(repo, RUN, ["claude"]).worktrees[0]
    write(worktree.path, {"notes.txt": "deploy: Tuesday\nowner: dana\n"})
    git(worktree.path, "commit", "-qam", "the agent committed this")
    write(worktree.path, {"new/todo.md": "a\nb\n", "logo.png": PNG})
    (worktree.path / "old.txt").unlink()
    assert worktree.changes() == [
        Change("logo.png", "added", None, None),
        Change("new/todo.md", "added", 2, 0),
        Change("notes.txt", "modified", 1, 1),
        Change("old.txt", "deleted", 0, 1),
    ]


def test_listed_are_crews_worktrees_only_by_run(repo: Path, tmp_path: Path) -> None:
    git(repo, "worktree", "add", "-q", "-b", "feature", str(tmp_path / "mine"))  # the user's own
    make(repo, RUN, ["claude"])
    make(repo, "20260102-120000-def456", ["gemini"])
    assert [(w.run_id, w.agent) for w in listed(repo)] == [(RUN, "claude"), ("20260102-120000-def456", "gemini")]
    assert [w.agent for w in listed(repo / "src", RUN)] == ["claude"]
    lines = table(listed(repo))
    assert lines[0].split() == ["RUN", "AGENT", "CHANGES", "BRANCH", "WORKTREE"]
    assert lines[1].split()[:5] == [RUN, "claude", "no", "changes", f"crew/{RUN}/claude"]
    rows = [json.loads(line) for line in table(listed(repo), as_json=True)]
    assert rows[0]["branch"] == f"crew/{RUN}/claude" and rows[0]["changes"] == []


def test_a_run_is_named_whole_by_a_unique_start_or_as_last(repo: Path) -> None:
    make(repo, RUN, ["claude", "gemini"])
    make(repo, "20260102-120000-def456", ["claude"])
    assert find(repo, RUN, "@gemini").agent == "gemini"
    assert find(repo, "20260101", "claude").run_id == RUN
    assert find(repo, "last", "claude").run_id == "20260102-120000-def456"
    with pytest.raises(UsageError, match=r"matches 2 runs with worktrees .*; give more of it"):
        find(repo, "2026", "claude")
    with pytest.raises(UsageError, match=f"run {RUN} has no worktree for 'codex'; its agents: claude, gemini"):
        find(repo, RUN, "codex")
    with pytest.raises(UsageError, match="no worktree of run '19990101' in this repository; `crew worktrees`"):
        find(repo, "19990101", "claude")


def test_apply_brings_every_change_in_uncommitted_even_from_a_subfolder(repo: Path) -> None:
    worktree = make(repo, RUN, ["claude"]).worktrees[0]
    write(worktree.path, {"notes.txt": "deploy: Tuesday\nowner: dana\n", "new/todo.md": "a\n", "logo.png": PNG})
    (worktree.path / "old.txt").unlink()
    applied = apply(repo / "src", RUN, "claude")  # git apply in a subfolder would skip the rest
    assert [c.path for c in applied.changes] == ["logo.png", "new/todo.md", "notes.txt", "old.txt"]
    assert (repo / "notes.txt").read_text() == "deploy: Tuesday\nowner: dana\n"
    assert (repo / "logo.png").read_bytes() == PNG and (repo / "new/todo.md").read_text() == "a\n"
    assert not (repo / "old.txt").exists()
    assert git(repo, "diff", "--cached") == ""  # uncommitted, not staged


def test_apply_that_conflicts_changes_nothing(repo: Path) -> None:
    worktree = make(repo, RUN, ["claude"]).worktrees[0]
    write(worktree.path, {"notes.txt": "deploy: Tuesday\nowner: dana\n", "src/app.py": "print(2)\n"})
    write(repo, {"notes.txt": "deploy: Monday\nowner: dana\n"})  # the person changed the same line
    with pytest.raises(
        Conflict,
        match=r"@claude's changes do not apply to .* \(patch failed: notes.txt:1; notes.txt: "
        r"patch does not apply\); nothing was applied",
    ):
        apply(repo, RUN, "claude")
    assert (repo / "src/app.py").read_text() == "print(1)\n"  # which alone would have applied
    assert status(repo) == " M notes.txt\n"


def test_applying_twice_says_the_changes_are_there_already_and_changes_nothing(repo: Path) -> None:
    worktree = make(repo, RUN, ["claude"]).worktrees[0]
    write(worktree.path, {"notes.txt": "deploy: Tuesday\nowner: dana\n", "new.txt": "n\n", "logo.png": PNG})
    assert not apply(repo, RUN, "claude").already
    again = apply(repo, RUN, "claude")
    assert again.already and [c.path for c in again.changes] == ["logo.png", "new.txt", "notes.txt"]
    assert again.lines() == [
        f"@claude's changes of run {RUN} are in this checkout already (applied before); nothing was applied. "
        f"`crew worktrees clean {RUN}` removes the worktree"
    ]
    assert (repo / "notes.txt").read_text() == "deploy: Tuesday\nowner: dana\n"
    write(repo, {"notes.txt": "deploy: Monday\nowner: dana\n"})  # changed since: neither applies nor is there
    with pytest.raises(Conflict, match="Commit or stash your changes"):
        apply(repo, RUN, "claude")


def test_apply_without_changes_says_there_is_nothing(repo: Path) -> None:
    make(repo, RUN, ["claude"])
    with pytest.raises(UsageError, match=f"@claude changed nothing in run {RUN}; there is nothing to apply"):
        apply(repo, RUN, "claude")


def test_clean_keeps_uncommitted_work_unless_forced(repo: Path) -> None:
    made = make(repo, RUN, ["claude", "gemini"])
    write(made.worktrees[1].path, {"new.txt": "work\n"})
    done = clean(repo, RUN)
    assert [(c.worktree.agent, c.removed) for c in done] == [("claude", True), ("gemini", False)]
    assert done[0].line() == f"removed {made.worktrees[0].path} and branch crew/{RUN}/claude"
    assert done[1].line() == (
        f"kept {made.worktrees[1].path}: uncommitted changes (1 file); `crew apply {RUN} "
        "gemini` takes them, --force drops them"
    )
    assert branches(repo) == [f"crew/{RUN}/gemini", "main"]
    assert [c.removed for c in clean(repo, force=True)] == [True]
    assert branches(repo) == ["main"] and kept(repo) == []
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_clean_removes_a_worktree_whose_changes_were_applied_and_keeps_one_taken_back(repo: Path) -> None:
    made = make(repo, RUN, ["claude", "gemini"])
    for worktree in made.worktrees:
        write(worktree.path, {f"{worktree.agent}.txt": "work\n", "notes.txt": f"by {worktree.agent}\n"})
    apply(repo, RUN, "claude")
    done = clean(repo, RUN)  # gemini's changes were never applied: they stay
    assert [(c.worktree.agent, c.removed) for c in done] == [("claude", True), ("gemini", False)]
    assert done[0].line() == (
        f"removed {made.worktrees[0].path} and branch crew/{RUN}/claude (its changes are in your checkout: "
        "crew apply took them)"
    )
    assert (repo / "claude.txt").read_text() == "work\n"  # the checkout keeps what was applied
    git(repo, "checkout", "--", "notes.txt")
    (repo / "claude.txt").unlink()
    write(repo, {"gemini.txt": "work\n"})  # part of gemini's changes only: they are not all there
    assert [c.removed for c in clean(repo, RUN)] == [False]


def test_clean_keeps_a_branch_with_commits_of_its_own_unless_forced(repo: Path) -> None:
    worktree = make(repo, RUN, ["claude"]).worktrees[0]
    write(worktree.path, {"notes.txt": "committed\n"})
    git(worktree.path, "commit", "-qam", "kept work")
    done = clean(repo, RUN)
    assert done[0].removed and done[0].branch_kept and not worktree.path.exists()
    assert "kept branch" in done[0].line() and f"crew/{RUN}/claude" in branches(repo)


def test_clean_leaves_the_worktree_crew_runs_in(repo: Path) -> None:
    worktree = make(repo, RUN, ["claude"]).worktrees[0]
    done = clean(worktree.path / "src")
    assert not done[0].removed and done[0].why == "crew runs inside it; run clean from elsewhere"


def test_a_worktree_deleted_by_hand_is_cleaned_up(repo: Path) -> None:
    import shutil

    worktree = make(repo, RUN, ["claude"]).worktrees[0]
    shutil.rmtree(worktree.path)
    assert [c.removed for c in clean(repo)] == [True] and branches(repo) == ["main"]


def test_an_agent_rewriting_its_worktrees_git_link_cannot_steer_crews_git(repo: Path, tmp_path: Path) -> None:
    worktree = make(repo, RUN, ["claude"]).worktrees[0]
    write(worktree.path, {"notes.txt": "deploy: Tuesday\nowner: dana\n"})
    # The agent swaps the worktree's `.git` link for a repository of its own, whose config runs a
    # command whenever git looks at the folder.
    trap = make_repo(tmp_path / "trap", {"x.txt": "x\n"})
    pwned = tmp_path / "pwned"
    git(trap, "config", "core.fsmonitor", f"touch {pwned}; false")
    (worktree.path / ".git").unlink()
    (trap / ".git").rename(worktree.path / ".git")
    assert [c.path for c in worktree.changes()] == ["notes.txt"]
    applied = apply(repo, RUN, "claude")
    assert [c.path for c in applied.changes] == ["notes.txt"]
    assert (repo / "notes.txt").read_text().startswith("deploy: Tuesday")
    assert [c.removed for c in clean(repo, force=True)] == [True]
    assert not pwned.exists()


def test_no_filter_the_agents_attributes_name_runs_in_crews_git(repo: Path, tmp_path: Path) -> None:
    """The agent names a clean filter its trap repository configures (and one the user's own
    repository configures, as git-lfs is): `crew worktrees`, `crew apply` and `crew worktrees clean`
    run neither, and see the bytes on disk."""
    worktree = make(repo, RUN, ["claude"]).worktrees[0]
    pwned = tmp_path / "pwned"
    git(repo, "config", "filter.users.clean", f"touch {pwned}-users; cat")
    trap = make_repo(tmp_path / "trap", {"x.txt": "x\n"})
    git(trap, "config", "filter.evil.clean", f"touch {pwned}; cat")
    write(worktree.path, {".gitattributes": "* filter=evil\n*.txt filter=users\n", "notes.txt": "deploy: Tuesday\n"})
    (worktree.path / ".git").unlink()
    (trap / ".git").rename(worktree.path / ".git")
    [row] = [json.loads(line) for line in table(listed(repo), as_json=True)]
    assert [c["path"] for c in row["changes"]] == [".gitattributes", "notes.txt"]
    with pytest.raises(RunsCode):  # a new driver in the attributes: refused, as always
        apply(repo, RUN, "claude")
    assert clean(repo)[0].why.startswith("uncommitted changes (2 files)")
    assert not pwned.exists() and not Path(f"{pwned}-users").exists()
    assert b"+deploy: Tuesday" in worktree.patch()


@pytest.mark.slow
def test_apply_refuses_changes_that_would_run_code_on_the_next_git_command(repo: Path) -> None:
    """A gitlink (a run cut short before crew disarmed it), a new attributes driver: refused, nothing applied."""
    worktree = make(repo, RUN, ["claude"]).worktrees[0]
    git(worktree.path, "init", "-q", "sub")
    git(worktree.path / "sub", "commit", "-q", "--allow-empty", "-m", "x")
    write(worktree.path, {".gitattributes": "*.py filter=evil\n", "notes.txt": "changed\n"})
    with pytest.raises(RunsCode) as refused:
        apply(repo, RUN, "claude")
    assert str(refused.value).startswith(
        "@claude's changes hold what would run code on your next git command (sub: a gitlink (an embedded "
        "repository), which git would run; .gitattributes: names a driver git would run on those files: filter=evil)"
        "; nothing was applied."
    )
    assert status(repo) == ""
