"""A batch's repository on one machine: the base commit, the worktree each try works in, the commit
(the same bytes, so the same id, wherever it is made again) and the push; a machine that lacks the
agent's tree makes it from the recorded patch."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crewbridge.batch.repos import Place, RepoError, patch_of
from crewbridge.batch.spec import BatchSpec, Repo, repo_of
from crewbridge.system.git import FALLBACK_IDENT, GitError, Stamp
from gitrepo import git, make_repo, status

SPEC = BatchSpec("b1", "@claude add todo.md")
STAMP = Stamp("Ada", "ada@example.com", "1700000000 +0000")


@pytest.fixture
def bare(tmp_path: Path) -> Path:
    source = make_repo(tmp_path / "source", {"notes.txt": "hello\n"})
    git(tmp_path, "clone", "-q", "--bare", str(source), str(tmp_path / "origin.git"))
    return tmp_path / "origin.git"


def agent_writes(place: Place, base: str) -> tuple[str, bytes | None, Path]:
    """What an agent would leave: a new file and a changed one, as a tree and its patch; its worktree."""
    worktree = place.worktree(SPEC, base)
    (worktree.path / "todo.md").write_text("- ship it\n")
    (worktree.path / "notes.txt").write_text("hello, world\n")
    tree = worktree.checkout.snapshot()
    return tree, patch_of(worktree, base, tree, 1 << 20), worktree.path


@pytest.mark.slow
def test_a_local_repository_gets_the_commit_on_the_batchs_branch_and_the_checkout_is_untouched(tmp_path):
    top = make_repo(tmp_path / "app", {"notes.txt": "hello\n"})
    place = Place(repo_of(str(top), tmp_path), tmp_path / "state")
    base = place.base("b1")
    assert base == git(top, "rev-parse", "HEAD").strip()
    tree, patch, worktree = agent_writes(place, base)
    commit = place.commit(SPEC, base, tree, patch, STAMP)
    assert git(top, "rev-parse", SPEC.branch).strip() == commit
    assert git(top, "log", "-1", "--format=%an <%ae> %at%n%s%n%b", commit) == (
        "Ada <ada@example.com> 1700000000\nadd todo.md\ncrew batch b1\n\n"
    )
    assert git(top, "show", f"{commit}:todo.md") == "- ship it\n"
    assert status(top) == "" and (top / "todo.md").exists() is False
    assert status(worktree) == ""  # its index follows the commit made on its branch


@pytest.mark.slow
def test_each_try_starts_from_a_fresh_worktree_at_the_base(tmp_path):
    top = make_repo(tmp_path / "app", {"notes.txt": "hello\n"})
    place = Place(repo_of(str(top), tmp_path), tmp_path / "state")
    base = place.base("b1")
    tree, patch, first = agent_writes(place, base)
    place.commit(SPEC, base, tree, patch, STAMP)  # an earlier try got as far as its commit
    (first / "marker").write_text("")  # and what a killed agent left
    again = place.worktree(SPEC, base)
    assert again.path == first and sorted(path.name for path in first.iterdir()) == [".git", "notes.txt"]
    assert git(top, "rev-parse", SPEC.branch).strip() == base  # the branch starts again at the base
    shutil.rmtree(again.path)  # a worktree whose folder is gone (removed by hand) is forgotten
    assert place.worktree(SPEC, base).checkout.snapshot() == git(top, "rev-parse", f"{base}^{{tree}}").strip()
    elsewhere = Place(repo_of(str(top), tmp_path), tmp_path / "other-state").worktree(SPEC, base)
    assert git(top, "worktree", "list").count("\n") == 2 and elsewhere.path.is_dir()  # another machine's went


@pytest.mark.slow
def test_a_url_is_cloned_into_the_state_folder_committed_and_pushed(tmp_path, bare):
    place = Place(repo_of(f"file://{bare}", tmp_path), tmp_path / "state")
    base = place.base("b1")
    assert place.clone.parent == tmp_path / "state" / "batch" / "clones" and (place.clone / ".git").is_dir()
    assert base == git(bare, "rev-parse", "HEAD").strip()
    tree, patch, _ = agent_writes(place, base)
    commit = place.commit(SPEC, base, tree, patch, STAMP)
    place.push(SPEC, commit)
    assert git(bare, "rev-parse", SPEC.branch).strip() == commit
    assert git(place.clone, "worktree", "list").count("\n") == 1  # the worktree went after the push


@pytest.mark.slow
def test_another_machine_makes_the_same_commit_from_the_recorded_patch(tmp_path, bare):
    here = Place(repo_of(f"file://{bare}", tmp_path), tmp_path / "one")
    base = here.base("b1")
    tree, patch, _ = agent_writes(here, base)
    commit = here.commit(SPEC, base, tree, patch, STAMP)
    elsewhere = Place(repo_of(f"file://{bare}", tmp_path), tmp_path / "two")  # a clone without the tree
    assert elsewhere.commit(SPEC, base, tree, patch, STAMP) == commit
    with pytest.raises(RepoError, match="too large to keep"):
        Place(repo_of(f"file://{bare}", tmp_path), tmp_path / "three").commit(SPEC, base, tree, None, STAMP)
    with pytest.raises(RepoError, match="did not apply"):
        Place(repo_of(f"file://{bare}", tmp_path), tmp_path / "four").commit(SPEC, base, tree, b"garbage", STAMP)
    elsewhere.push(SPEC, commit)
    assert git(bare, "rev-parse", SPEC.branch).strip() == commit


def test_the_identity_is_gits_else_crews_own(tmp_path, monkeypatch):
    top = make_repo(tmp_path / "app", {"notes.txt": "hello\n"})
    place = Place(repo_of(str(top), tmp_path), tmp_path / "state")
    git(top, "config", "user.name", "Grace")
    git(top, "config", "user.email", "grace@example.com")
    assert place.checkout().stamp(1700000000.7) == Stamp("Grace", "grace@example.com", "1700000000 +0000")
    git(top, "config", "--unset", "user.name")
    git(top, "config", "--unset", "user.email")
    for name, value in {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_COUNT": "1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "user.useConfigOnly")  # no identity guessed from the host
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "true")
    assert place.checkout().stamp(1.0) == Stamp(*FALLBACK_IDENT, "1 +0000")


def test_an_unreachable_url_is_an_error_of_crews(tmp_path):
    place = Place(repo_of(f"file://{tmp_path}/nowhere.git", tmp_path), tmp_path / "state")
    with pytest.raises(GitError, match="git clone failed"):
        place.base("b1")
    gone = Place(Repo("app", path=str(tmp_path / "moved"), key="k"), tmp_path / "state")
    with pytest.raises(RepoError, match="is not on this machine"):
        gone.base("b1")
