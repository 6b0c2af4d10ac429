"""crewbridge.system.gitguard: what a run leaves that would run code on the user's next git command is
found and disarmed (moved to the quarantine, written back, taken out of the index), with real git;
what runs nothing is left alone."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from crewbridge.system import gitguard
from crewbridge.system.git import Checkout
from crewbridge.system.gitguard import Armed, Watch, armed_between
from gitrepo import git, make_repo, write


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"notes.txt": "hi\n", "src/app.py": "print(1)\n"})


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "ran"


def fsmonitor(tmp_path: Path, marker: Path) -> Path:
    """A core.fsmonitor program that leaves `marker` when git runs it."""
    script = tmp_path / "fsmonitor.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    script.chmod(0o755)
    return script


def user_git_status(folder: Path) -> None:
    """The user's next `git status` there: as a person runs it, with their configuration."""
    subprocess.run(["git", "status", "--short"], cwd=folder, capture_output=True, check=False)


def quarantine() -> Path:
    return Path(os.environ["XDG_STATE_HOME"]) / "crewbridge" / "quarantine"


def plant_nested_repository(repo: Path, tmp_path: Path, marker: Path, name: str = "sub") -> None:
    """What the attack does inside the sandbox: a repository whose fsmonitor is a program of the
    agent's, added to the index as a gitlink."""
    git(repo, "init", "-q", name)
    git(repo / name, "commit", "-q", "--allow-empty", "-m", "x")
    git(repo / name, "config", "core.fsmonitor", str(fsmonitor(tmp_path, marker)))
    git(repo, "add", name)


def test_a_planted_repository_and_its_gitlink_are_disarmed_and_git_status_runs_nothing(
    repo: Path, tmp_path: Path, marker: Path
) -> None:
    watch = Watch(repo)
    plant_nested_repository(repo, tmp_path, marker)
    found = watch.disarm()
    assert [(a.path, a.what.split(",")[0]) for a in found] == [
        ("sub/.git", "a new git repository"),
        ("sub", "a gitlink added to the index: git runs that repository"),
    ]
    moved = next(quarantine().glob("*/sub/.git"))
    assert found[0].done == f"moved to {moved}" and (moved / "config").is_file()  # nothing lost
    assert "git update-index --force-remove" in found[1].done
    assert "160000" not in git(repo, "ls-files", "-s")
    user_git_status(repo)
    user_git_status(repo / "sub")
    assert not marker.exists()


def test_without_the_guard_the_same_plant_runs_on_git_status(repo: Path, tmp_path: Path, marker: Path) -> None:
    """The attack is real: what the test above disarms runs the agent's program otherwise."""
    plant_nested_repository(repo, tmp_path, marker)
    user_git_status(repo)
    assert marker.exists()


def test_a_second_disarm_sees_only_what_came_since(repo: Path, tmp_path: Path, marker: Path) -> None:
    watch = Watch(repo)
    plant_nested_repository(repo, tmp_path, marker)
    assert len(watch.disarm()) == 2
    assert watch.disarm() == []
    plant_nested_repository(repo, tmp_path, marker, "other")
    assert [a.path for a in watch.disarm()] == ["other/.git", "other"]


def test_repositories_there_before_the_run_stay_and_a_change_to_their_config_is_written_back(
    repo: Path, tmp_path: Path, marker: Path
) -> None:
    git(repo, "init", "-q", "vendor/lib")
    before = (repo / "vendor/lib/.git/config").read_bytes()
    watch = Watch(repo)
    git(repo / "vendor/lib", "config", "core.fsmonitor", str(fsmonitor(tmp_path, marker)))
    git(repo / "vendor/lib", "config", "user.name", "Agent")
    found = watch.disarm()
    assert [(a.path, a.what) for a in found] == [("vendor/lib/.git/config", "a changed git config: core.fsmonitor")]
    assert found[0].done.startswith("restored as it was before the run; the run's is in ")
    assert (repo / "vendor/lib/.git/config").read_bytes() == before
    assert (repo / "vendor/lib/.git").is_dir()


def test_config_keys_that_run_nothing_are_left_as_the_run_set_them(repo: Path) -> None:
    watch = Watch(repo)
    git(repo, "config", "user.email", "agent@example.com")
    git(repo, "remote", "add", "origin", "https://example.com/x.git")
    assert watch.disarm() == []
    assert "agent@example.com" in (repo / ".git/config").read_text()


def test_the_top_config_and_hooks_written_without_a_sandbox_are_disarmed(repo: Path) -> None:
    """What bubblewrap keeps read-only, Landlock and --sandbox off do not: the guard catches it."""
    watch = Watch(repo)
    git(repo, "config", "core.pager", "touch /tmp/never")
    git(repo, "config", "alias.st", "!touch /tmp/never")
    hook = repo / ".git/hooks/pre-commit"
    hook.write_text("#!/bin/sh\ntouch /tmp/never\n")
    found = watch.disarm()
    assert [(a.path, a.what) for a in found] == [
        (".git/config", "a changed git config: alias.st, core.pager"),
        (".git/hooks/pre-commit", "a new git hook"),
    ]
    assert "pager" not in (repo / ".git/config").read_text()
    assert not hook.exists()


def test_a_submodules_config_and_hooks_in_the_git_folder_are_watched(repo: Path, tmp_path: Path) -> None:
    make_repo(tmp_path / "lib", {"lib.txt": "x\n"})
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(tmp_path / "lib"), "lib")
    git(repo, "commit", "-q", "-m", "lib")
    watch = Watch(repo)
    git(repo / "lib", "config", "core.fsmonitor", "touch /tmp/never")
    (repo / ".git/modules/lib/hooks/post-checkout").write_text("#!/bin/sh\n")
    found = watch.disarm()
    assert [(a.path, a.what) for a in found] == [
        (".git/modules/lib/config", "a changed git config: core.fsmonitor"),
        (".git/modules/lib/hooks/post-checkout", "a new git hook"),
    ]
    assert "fsmonitor" not in (repo / ".git/modules/lib/config").read_text()


def test_a_new_submodule_git_folder_is_moved_out(repo: Path) -> None:
    watch = Watch(repo)
    git(repo, "init", "-q", "--bare", str(repo / ".git/modules/evil"))
    found = watch.disarm()
    assert [(a.path, a.what) for a in found] == [(".git/modules/evil", "a new submodule repository in the git folder")]
    assert not (repo / ".git/modules/evil").exists()


def test_a_gitattributes_line_naming_a_new_driver_is_taken_out(repo: Path) -> None:
    write(repo, {".gitattributes": "*.png binary\n*.bin filter=lfs\n"})
    watch = Watch(repo)
    write(repo, {".gitattributes": "*.png binary\n*.bin filter=lfs\n*.c filter=evil diff=evil\n*.md text\n"})
    write(repo, {"src/.gitattributes": '"a b" merge=evil\n[attr]x diff=lfs\n*.big filter=lfs\n'})
    found = watch.disarm()
    assert [(a.path, a.what) for a in found] == [
        (".gitattributes", "names a driver it did not name before, which git runs on those files: line 3 (diff=evil)"),
        (
            "src/.gitattributes",
            "names a driver it did not name before, which git runs on those files: line 1 (merge=evil), "
            "line 2 (diff=lfs)",
        ),
    ]
    assert (repo / ".gitattributes").read_text() == "*.png binary\n*.bin filter=lfs\n*.md text\n"
    assert (repo / "src/.gitattributes").read_text() == "*.big filter=lfs\n"  # a driver in use before stays
    assert "the file as the run left it is in" in found[0].done


def test_info_attributes_is_read_as_gitattributes(repo: Path) -> None:
    watch = Watch(repo)
    write(repo, {".git/info/attributes": "* filter=evil\n"})
    assert [a.path for a in watch.disarm()] == [".git/info/attributes"]
    assert (repo / ".git/info/attributes").read_text() == ""


def test_a_gitmodules_source_or_update_command_that_changed_is_written_back(repo: Path) -> None:
    gitmodules = '[submodule "lib"]\n\tpath = lib\n\turl = https://example.com/lib.git\n'
    write(repo, {".gitmodules": gitmodules})
    watch = Watch(repo)
    write(repo, {".gitmodules": gitmodules.replace("https://example.com", "/tmp/evil") + "\tupdate = !sh x\n"})
    found = watch.disarm()
    assert [(a.path, a.what) for a in found] == [
        (".gitmodules", "a changed submodule source or update command: submodule.lib.update, submodule.lib.url")
    ]
    assert (repo / ".gitmodules").read_text() == gitmodules


def test_a_gitmodules_change_that_runs_nothing_stays(repo: Path) -> None:
    gitmodules = '[submodule "lib"]\n\tpath = lib\n\turl = https://example.com/lib.git\n'
    write(repo, {".gitmodules": gitmodules})
    watch = Watch(repo)
    write(repo, {".gitmodules": gitmodules + "\tbranch = main\n"})
    assert watch.disarm() == []


def test_a_planted_bare_repository_and_a_dot_git_file_are_disarmed(repo: Path, tmp_path: Path) -> None:
    watch = Watch(repo)
    git(tmp_path, "init", "-q", "--bare", str(repo / "src/hidden"))
    write(repo, {"docs/.git": "gitdir: ../src/hidden\n"})
    found = watch.disarm()
    assert sorted((a.path, a.what.split(",")[0]) for a in found) == [
        ("docs/.git", "a new `.git` pointer to a git folder"),
        ("src/hidden", "a new bare git repository"),
    ]
    assert not (repo / "src/hidden").exists() and not (repo / "docs/.git").exists()


def test_in_a_folder_inside_a_repository_its_own_dot_git_is_a_nested_one(repo: Path) -> None:
    watch = Watch(repo / "src")
    git(repo / "src", "init", "-q", ".")
    assert [a.path for a in watch.disarm()] == [".git"]


def test_git_init_where_there_was_no_repository_runs_nothing_and_stays(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    watch = Watch(folder)
    git(folder, "init", "-q")
    assert watch.disarm() == []
    git(folder, "config", "core.fsmonitor", "touch /tmp/never")
    assert [a.what for a in watch.disarm()] == ["a changed git config: core.fsmonitor"]


def test_a_worktrees_pointer_to_its_git_folder_is_written_back(repo: Path, tmp_path: Path) -> None:
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"))
    pointer = (tmp_path / "wt/.git").read_text()
    watch = Watch(tmp_path / "wt")
    (tmp_path / "wt/.git").write_text("gitdir: /tmp/elsewhere\n")
    assert [(a.path, a.what) for a in watch.disarm()] == [(".git", "a changed pointer to the git folder")]
    assert (tmp_path / "wt/.git").read_text() == pointer


def test_an_ordinary_run_leaves_nothing_to_disarm(repo: Path) -> None:
    watch = Watch(repo)
    write(repo, {"src/app.py": "print(2)\n", "new/file.txt": "x\n", ".gitattributes": "*.txt text\n"})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "work")
    assert watch.disarm() == []


def test_the_walk_stops_at_its_limit_and_says_so(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gitguard, "MAX_FOLDERS", 2)
    write(repo, {"a/b/c/d.txt": "x\n"})
    watch = Watch(repo)
    found = watch.disarm()
    assert len(found) == 1 and "holds more than 2 folders" in found[0].what


def test_apply_finds_gitlinks_drivers_and_submodule_sources_between_two_trees(repo: Path, tmp_path: Path) -> None:
    checkout = Checkout.of(repo, "test")
    base = checkout.head("test")
    plant_nested_repository(repo, tmp_path, tmp_path / "ran")
    write(repo, {".gitattributes": "*.c filter=evil\n", ".gitmodules": '[submodule "s"]\n\turl = /tmp/evil\n'})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "armed")
    found = armed_between(checkout, base, "HEAD")
    assert found == [
        Armed(".gitmodules", "a changed submodule source or update command: submodule.s.url"),
        Armed("sub", "a gitlink (an embedded repository), which git would run"),
        Armed(".gitattributes", "names a driver git would run on those files: filter=evil"),
    ]


def test_summary_names_each_thing_on_a_line_of_its_own() -> None:
    text = gitguard.summary([Armed("sub/.git", "a new git repository", "moved to /q/sub/.git")])
    assert text.endswith("crew disarmed it:\n  sub/.git: a new git repository; moved to /q/sub/.git")
