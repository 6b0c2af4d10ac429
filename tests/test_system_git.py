"""crewbridge.system.git: finding a checkout, snapshots of what is on disk that leave the index alone, what
changed between two trees and the patch that carries it, and git run bounded and where it is told."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crewbridge.errors import CLINotFound, CrewTimeout, UsageError
from crewbridge.system.git import Change, Checkout, GitError, run_git, summary
from crewbridge.system.process import _groups
from crewcli import processes_in
from gitrepo import git, make_repo, status, write

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00binary"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path / "repo",
        {"notes.txt": "one\ntwo\n", "src/app.py": "print(1)\n", "old.txt": "bye\n", ".gitignore": "build/\n"},
    )


def test_a_checkout_is_found_from_any_folder_inside_it(repo: Path) -> None:
    checkout = Checkout.of(repo / "src", "--worktree")
    assert checkout.top == repo.resolve()
    assert checkout.git_dir == checkout.common == (repo / ".git").resolve()


def test_outside_a_repository_it_is_one_line_naming_the_folder_and_the_option(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as caught:
        Checkout.of(tmp_path, "--worktree")
    assert str(caught.value) == (
        f"--worktree needs a git repository, and {tmp_path} is not in one (git init there, or go without --worktree)"
    )
    assert caught.value.exit_code == 2


def test_a_repository_without_a_commit_has_no_head_to_start_from(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    with pytest.raises(UsageError, match="has no commit yet; commit once first"):
        Checkout.of(tmp_path, "--worktree").head("--worktree")


def test_uncommitted_lists_changed_untracked_and_renamed_files_but_not_ignored_ones(repo: Path) -> None:
    write(repo, {"notes.txt": "changed\n", "new/deep.txt": "x\n", "build/out.o": "ignored\n"})
    git(repo, "mv", "old.txt", "renamed.txt")
    assert sorted(Checkout.of(repo, "x").uncommitted()) == ["new/deep.txt", "notes.txt", "renamed.txt"]


def test_a_snapshot_holds_every_file_on_disk_and_leaves_the_index_as_it_was(repo: Path) -> None:
    write(repo, {"notes.txt": "one\nTWO\n", "added.txt": "new\n", "build/out.o": "ignored\n"})
    (repo / "old.txt").unlink()
    git(repo, "add", "notes.txt")  # a staged change, which the snapshot must not disturb
    index, before = (repo / ".git" / "index").read_bytes(), status(repo)
    checkout = Checkout.of(repo, "x")
    tree = checkout.snapshot()
    assert (repo / ".git" / "index").read_bytes() == index and status(repo) == before
    assert sorted(git(repo, "ls-tree", "-r", "--name-only", tree).split()) == [
        ".gitignore",
        "added.txt",
        "notes.txt",
        "src/app.py",
    ]
    assert git(repo, "show", f"{tree}:notes.txt") == "one\nTWO\n"


def test_a_snapshot_sees_a_change_that_keeps_the_files_size_and_time(tmp_path: Path) -> None:
    # A file changed within the second its index entry was written: same size and time. Its bytes
    # tell it apart (crew reads every file's, as git does for a "racily clean" entry).
    past = 1_600_000_000 * 10**9
    repo = tmp_path / "racy"
    repo.mkdir()
    write(repo, {"notes.txt": "one\n"})
    os.utime(repo / "notes.txt", ns=(past, past))
    make_repo(repo, {})
    git(repo, "config", "core.trustctime", "false")
    with open(repo / "notes.txt", "r+") as same_file:  # same inode, same size
        same_file.write("ONE\n")
    os.utime(repo / "notes.txt", ns=(past, past))
    os.utime(repo / ".git" / "index", ns=(past, past))
    checkout = Checkout.of(repo, "x")
    assert [c.path for c in checkout.changes("HEAD", checkout.snapshot())] == ["notes.txt"]


def test_a_snapshot_runs_no_program_the_folder_names_and_follows_no_symlink(repo: Path, tmp_path: Path) -> None:
    """Attributes name a clean filter the repository configures: the snapshot stores the bytes on
    disk and runs nothing. A symlink is stored as a symlink, never read through; a FIFO is left out
    (nothing blocks); an executable keeps its mode; a repository made inside is a gitlink."""
    marker = tmp_path / "filtered"
    git(repo, "config", "filter.evil.clean", f"touch {marker}; tr a-z A-Z")
    git(repo, "config", "core.fsmonitor", f"touch {marker}-fsmonitor; false")
    write(repo, {".gitattributes": "* filter=evil\n", "notes.txt": "one\nthree\n", "run.sh": "echo hi\n"})
    (repo / "run.sh").chmod(0o755)
    (tmp_path / "secret.txt").write_text("SECRET\n")
    (repo / "link").symlink_to(tmp_path / "secret.txt")
    (repo / "up").symlink_to(tmp_path)  # a folder reached through a symlink: never entered
    os.mkfifo(repo / "pipe")
    inner = make_repo(repo / "inner", {"x.txt": "x\n"})
    checkout = Checkout.of(repo, "x")
    tree = checkout.snapshot()
    listed = git(repo, "ls-tree", "-r", tree).splitlines()
    modes = {line.split("\t")[1]: line.split()[0] for line in listed}
    assert modes == {
        ".gitattributes": "100644",
        ".gitignore": "100644",
        "inner": "160000",
        "link": "120000",
        "notes.txt": "100644",
        "old.txt": "100644",
        "run.sh": "100755",
        "src/app.py": "100644",
        "up": "120000",
    }
    assert git(repo, "show", f"{tree}:notes.txt") == "one\nthree\n"  # as on disk: no filter ran
    assert git(repo, "show", f"{tree}:link") == str(tmp_path / "secret.txt")
    assert f"160000 commit {git(inner, 'rev-parse', 'HEAD').strip()}\tinner" in listed
    assert "SECRET" not in str(checkout.diff("HEAD", tree)) and not list(tmp_path.glob("filtered*"))


def test_changes_between_a_commit_and_a_snapshot(repo: Path) -> None:
    write(repo, {"notes.txt": "one\ntwo\nthree\nfour\n", "added.txt": "a\nb\n", "logo.png": PNG})
    (repo / "old.txt").unlink()
    checkout = Checkout.of(repo, "x")
    changed = checkout.changes("HEAD", checkout.snapshot())
    assert changed == [
        Change("added.txt", "added", 2, 0),
        Change("logo.png", "added", None, None),
        Change("notes.txt", "modified", 2, 0),
        Change("old.txt", "deleted", 0, 1),
    ]
    assert summary(changed) == "4 files changed, +4 -1"
    assert [c.line() for c in changed] == [
        "A added.txt +2 -0",
        "A logo.png binary",
        "M notes.txt +2 -0",
        "D old.txt +0 -1",
    ]
    assert summary([]) == "no changes"


def test_the_binary_patch_carries_every_change_to_another_checkout(repo: Path, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    write(repo, {"notes.txt": "one\n2\n", "logo.png": PNG, "dir/new.txt": "n\n"})
    (repo / "old.txt").unlink()
    checkout = Checkout.of(repo, "x")
    patch = checkout.diff("HEAD", checkout.snapshot(), binary=True)
    run_git(["apply", "-"], clone, input=patch)
    assert (clone / "logo.png").read_bytes() == PNG and (clone / "notes.txt").read_text() == "one\n2\n"
    assert (clone / "dir/new.txt").read_text() == "n\n" and not (clone / "old.txt").exists()


def test_a_users_diff_settings_do_not_change_the_patch(repo: Path) -> None:
    git(repo, "config", "diff.noprefix", "true")
    git(repo, "config", "diff.external", "/bin/false")
    write(repo, {"notes.txt": "one\n"})
    checkout = Checkout.of(repo, "x")
    assert b"--- a/notes.txt\n+++ b/notes.txt\n" in checkout.diff("HEAD", checkout.snapshot())


def test_git_variables_in_crews_environment_do_not_send_it_to_another_repository(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = make_repo(tmp_path / "other", {"x.txt": "x\n"})
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(other / ".git" / "index"))
    checkout = Checkout.of(repo, "x")
    assert checkout.top == repo.resolve()
    write(repo, {"mine.txt": "m\n"})
    assert "mine.txt" in git(repo, "--git-dir", str(repo / ".git"), "ls-tree", "-r", "--name-only", checkout.snapshot())


def test_a_failing_git_command_says_what_git_said(repo: Path) -> None:
    with pytest.raises(
        GitError, match=r"^git cat-file failed in .*repo: fatal: Not a valid object name no-such-thing$"
    ):
        Checkout.of(repo, "x").git(["cat-file", "-p", "no-such-thing"])


@pytest.mark.slow
def test_a_git_command_past_its_time_is_ended_with_what_it_started(repo: Path, tmp_path: Path) -> None:
    before = set(_groups)  # groups other tests of this process left tracked are theirs
    with pytest.raises(CrewTimeout, match=r"git wait did not finish in 0.5s"):
        run_git(["-c", "alias.wait=!sleep 60", "wait"], repo, timeout=0.5)
    assert processes_in(repo) == [] and set(_groups) <= before


def test_a_git_too_old_for_crew_says_so(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = tmp_path / "old-git"
    old.mkdir()
    # git rev-parse passes an option it does not know through (`git rev-parse --no-such-flag` prints
    # it): before 2.31, --path-format=absolute
    (old / "git").write_text('#!/bin/sh\nshift\nfor arg; do echo "$arg"; done\n')
    (old / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{old}:{os.environ['PATH']}")
    with pytest.raises(UsageError, match=r"^--worktree needs git 2.31 or newer \(`git --version` says which"):
        Checkout.of(repo, "--worktree")


def test_without_git_installed_it_says_so(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(CLINotFound, match="git is not installed"):
        Checkout.of(repo, "--worktree")
    assert os.environ["PATH"] == str(tmp_path / "empty")


def test_a_command_a_repositorys_config_names_runs_without_the_users_secrets_unless_passed(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filter, alias or hook the repository names runs with crew's git's environment: the rule of
    crewbridge.system.childenv holds there too; crew batch's forge commands pass the way to the forge."""
    from crewbridge.system.childenv import FORGE

    for name, value in {"GITHUB_TOKEN": "gh-value", "SSH_AUTH_SOCK": "/agent", "CREW_BATCH_DB": "pg://u:p@h/d"}.items():
        monkeypatch.setenv(name, value)
    show = ["-c", "alias.peek=!echo ${GITHUB_TOKEN:-none} ${SSH_AUTH_SOCK:-none} ${CREW_BATCH_DB:-none}", "peek"]
    assert run_git(show, repo).stdout == b"none none none\n"
    assert run_git(show, repo, passed=FORGE).stdout == b"gh-value /agent none\n"
