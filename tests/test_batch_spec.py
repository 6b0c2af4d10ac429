"""A batch's repositories, id and task are checked before anything starts: a REPO that is neither a
git repository nor a git URL is named in one line (exit 2), and nothing is recorded."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from crewbridge.batch.spec import BatchSpec, batch_id, read_repos, repo_of, repos_file_text
from crewbridge.errors import UsageError
from crewcli import crew_env, error_line, run_crew
from gitrepo import git, make_repo


@pytest.mark.parametrize(
    "url",
    ["file:///srv/repo.git", "https://example.com/org/repo.git", "ssh://git@host/repo", "git@github.com:org/repo.git"],
)
def test_a_git_url_is_taken_as_it_is(url, tmp_path):
    repo = repo_of(url, tmp_path)
    assert repo.url == url and repo.path is None and repo.name == "repo"


def test_a_folder_inside_a_repository_is_that_repository(tmp_path):
    top = make_repo(tmp_path / "app", {"src/a.py": "x = 1\n"})
    repo = repo_of("app/src", tmp_path)
    assert repo.path == str(top) and repo.url is None and repo.name == "app"
    assert repo_of(str(top), Path("/")).key == repo.key  # one repository, however it is named


@pytest.mark.parametrize(
    "text, why",
    [
        ("missing", "no such folder"),
        ("plain", "not inside a git repository"),
        ("", "no such folder"),
        ("--upload-pack=touch /tmp/x", "no such folder"),  # never an option to git
        ("ext::sh -c touch% /tmp/x", "no such folder"),  # git's command transport is no URL here
        ("file://", "no such folder"),
    ],
)
def test_what_is_neither_is_named_in_one_line(text, why, tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(UsageError) as raised:
        repo_of(text, tmp_path)
    message = str(raised.value)
    assert message.startswith(f"REPO '{text}' is neither a git repository nor a git URL ({why})")
    assert "\n" not in message


def test_the_repositories_come_from_the_command_line_then_the_file_each_once(tmp_path):
    for name in ("a", "b"):
        make_repo(tmp_path / name, {"f": name})
    listed = "# the platform team's\nb\n\nfile:///srv/c.git   # by URL\na/\n"
    repos = read_repos(["a", "file:///srv/c.git/"], listed, tmp_path)
    assert [(r.text, r.position) for r in repos] == [("a", 0), ("file:///srv/c.git/", 1), ("b", 2)]
    with pytest.raises(UsageError, match="no repositories given"):
        read_repos([], "# nothing\n", tmp_path)


@pytest.mark.parametrize("bad", ["a/b", "..", "x..y", "x.lock", "-x", "has space", "x" * 65, "x:y", "x."])
def test_a_batch_id_goes_into_branch_names_so_only_safe_ones_are_taken(bad):
    with pytest.raises(UsageError, match="cannot name a batch"):
        batch_id(bad)
    assert batch_id("migrate-2.0_x") == "migrate-2.0_x"
    assert batch_id(None) != batch_id(None)


def test_a_batch_is_one_agent_and_its_commit_message_is_the_tasks_first_line():
    spec = BatchSpec("b1", "@claude:haiku bump the linter\n\nto 0.17 everywhere")
    assert spec.agent == "claude" and spec.branch == "crew/batch-b1/claude"
    assert spec.message() == "bump the linter\n\ncrew batch b1\n"
    assert BatchSpec.of(spec.to_dict()) == spec
    with pytest.raises(UsageError, match="mentions 2"):
        BatchSpec("b1", "@claude @gemini do it")
    with pytest.raises(UsageError, match="no agent mentioned"):
        BatchSpec("b1", "do it")


@pytest.mark.slow
def test_bad_input_is_refused_before_anything_starts(tmp_path):
    make_repo(tmp_path / "good", {"f": "x"})
    env = crew_env(tmp_path / "home")
    state = tmp_path / "home" / ".local" / "state" / "crewbridge"
    cases = [
        (["batch", "@demo hi", "good", "nowhere"], "REPO 'nowhere' is neither a git repository nor a git URL"),
        (["batch", "@nobody hi", "good"], "agent 'nobody'"),
        (["batch", "--id", "a/b", "@demo hi", "good"], "--id 'a/b' cannot name a batch"),
        (["batch", "--db", "mysql://u:secret@h/db", "@demo hi", "good"], "--db 'mysql://u:***@h/db' is not"),
        (["batch", "@demo hi"], "no repositories given"),
        (["batch", "--repos", "missing.txt", "@demo hi"], "--repos missing.txt: cannot read it (No such file"),
        (["batch", "--repos", "binary", "@demo hi"], "--repos binary: cannot read it ('utf-8' codec"),
        (["batch", "--db", "postgresql://u:secret@h/db", "@demo hi", "good"], "--db 'postgresql://u:***@h/db' carries"),
        (["batch", "status", "--db", "postgresql://u@h/db?password=secret"], "carries a password"),
        (["batch", "worker", "--db", "postgres://u:secret@h/db"], "put it in ~/.pgpass"),
    ]
    (tmp_path / "binary").write_bytes(b"\xff\xfe\x00")
    for args, said in cases:
        done = run_crew(args, env=env, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert said in error_line(done.stderr) and "secret" not in done.stderr
    refused_by_click = [  # the options' own checks (crewbridge.base.flags.BATCH)
        (["batch", "--repos", "good", "@demo hi"], "'good' is a directory"),
        (["batch", "--retries", "-1", "@demo hi", "good"], "-1 is not in the range x>=0"),
        (["batch", "--max-turns", "0", "@demo hi", "good"], "0 is not in the range x>=1"),
        (["batch", "--worker-concurrency", "0", "@demo hi", "good"], "0 is not in the range x>=1"),
        (["batch", "--canary", "0", "@demo hi", "good"], "0 is not in the range x>=1"),
    ]
    for args, said in refused_by_click:
        done = run_crew(args, env=env, cwd=tmp_path)
        assert done.returncode == 2 and said in done.stderr.splitlines()[-1], done.stderr
    for args in (["batch", "@demo hi", "good"], ["batch", "status"], ["batch", "list"]):  # a database that is not there
        done = run_crew([*args, "--db", "postgresql://crew@127.0.0.1:1/db"], env=env, cwd=tmp_path)
        assert done.returncode == 3 and len(done.stderr.splitlines()) == 1, done.stderr
        assert done.stderr.startswith("crew: error: cannot reach the batch database postgresql://crew@127.0.0.1:1/db")
    assert not (state / "batch").exists()  # no database made, nothing recorded
    assert git(tmp_path / "good", "branch", "--list", "crew/*") == ""


@pytest.mark.slow
def test_asking_after_a_batch_that_is_not_there_names_those_that_are(tmp_path):
    env = crew_env(tmp_path / "home")
    done = run_crew(["batch", "status", "nosuch"], env=env, cwd=tmp_path)
    assert done.returncode == 2 and "no batch 'nosuch' in " in error_line(done.stderr)
    assert "there is none yet (crew batch list)" in done.stderr
    latest = run_crew(["batch", "status"], env=env, cwd=tmp_path)
    assert latest.returncode == 2 and "no batch in " in error_line(latest.stderr)


def test_a_repos_file_is_read_from_a_file_or_standard_input(tmp_path, monkeypatch):
    listed = tmp_path / "repos.txt"
    listed.write_text("a  # the first\n\nb\n")
    assert repos_file_text(listed) == "a  # the first\n\nb\n" and repos_file_text(None) is None
    monkeypatch.setattr("sys.stdin", io.StringIO("c\n"))
    assert repos_file_text(Path("-")) == "c\n"
