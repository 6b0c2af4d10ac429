"""crew batch's database as crew sees it: which one, never its password, nothing it holds unpickled,
and whether another executor still runs: each working process
holds a lock named after its executor id for its whole life, which the system lets go however the
process dies (a flock beside a SQLite file; a Postgres session's advisory lock)."""

from __future__ import annotations

import base64
import itertools
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crewbridge.batch.database import (
    DB_ENV,
    PickleRefused,
    Side,
    StoreError,
    database_files,
    database_url,
    guard,
    scrubbed,
    shown,
    take_database_url,
)
from crewbridge.errors import UsageError
from crewcli import crew_env, run_crew
from gitrepo import make_repo

HOLDER = """
import sys, time
from crewbridge.batch.database import Side
held = Side.of(sys.argv[1])
held.hold(sys.argv[2])
print("held", flush=True)
time.sleep(120)
"""


def test_the_database_is_the_flag_the_variable_or_sqlite_in_the_state_folder(tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path)}
    assert database_url(None, env) == f"sqlite:///{tmp_path}/crewbridge/batch/batches.sqlite"
    assert (tmp_path / "crewbridge" / "batch").is_dir()
    assert database_url(None, {**env, DB_ENV: "postgresql://u@h/db"}) == "postgresql://u@h/db"
    assert database_url("postgresql://a@h/x", {DB_ENV: "postgresql://u@h/db"}) == "postgresql://a@h/x"
    for bad in ("mysql://u:hunter2@h/db", "/tmp/file.sqlite", "sqlite://relative", "postgresql:/x"):
        with pytest.raises(UsageError) as raised:
            database_url(bad, env)
        assert "is not a database URL crew batch takes" in str(raised.value) and "hunter2" not in str(raised.value)


def test_the_agents_sandbox_hides_a_sqlite_database_wherever_the_url_puts_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert database_files("sqlite:////data/b.sqlite") == [
        "/data/b.sqlite",
        "/data/b.sqlite-wal",
        "/data/b.sqlite-shm",
        "/data/b.sqlite-journal",
    ]
    assert database_files("sqlite:///rel.sqlite")[0] == str(tmp_path / "rel.sqlite")
    assert database_files("postgresql://crew:pw@db/batches") == []  # a server's URL is withheld from them


def test_a_password_is_left_out_of_what_is_shown():
    assert (
        shown("postgresql://crew:s3cret@db.internal:5432/batches") == "postgresql://crew:***@db.internal:5432/batches"
    )
    assert shown("postgresql://crew@db/batches?password=s3cret") == "postgresql://crew@db/batches?password=***"
    assert shown("postgresql://crew:s3cret@db:port/batches") == "postgresql://crew:***@db:port/batches"  # malformed
    assert shown("postgresql://crew:p%40ss@db/b") == "postgresql://crew:***@db/b"
    assert shown("postgresql://crew@db/batches") == "postgresql://crew@db/batches"
    assert shown("sqlite:////tmp/x.sqlite") == "sqlite:////tmp/x.sqlite"
    url = "postgresql://crew:s3cret@db/batches"
    assert scrubbed('FATAL: password "s3cret" for user crew', url) == 'FATAL: password "***" for user crew'
    assert scrubbed("p@ss and p%40ss", "postgresql://crew:p%40ss@db/b") == "*** and ***"


@pytest.mark.parametrize(
    "url",
    ["postgresql://crew:hunter2@db/b", "postgres://crew:hunter2@db:5432/b", "postgresql://crew@db/b?password=hunter2"],
)
def test_a_password_on_the_command_line_is_refused_with_the_fix(tmp_path, url):
    with pytest.raises(UsageError) as raised:
        database_url(url, {"XDG_STATE_HOME": str(tmp_path)})
    said = str(raised.value)
    assert raised.value.exit_code == 2 and "\n" not in said and "hunter2" not in said
    assert "carries a password" in said and "~/.pgpass" in said and "passfile" in said and DB_ENV in said
    assert database_url(None, {DB_ENV: url}) == url  # from the environment: nobody else sees it


def test_the_database_address_is_taken_out_of_the_environment_crew_passes_on(monkeypatch):
    monkeypatch.setenv(DB_ENV, "postgresql://crew:hunter2@db/b")
    assert take_database_url(None) == "postgresql://crew:hunter2@db/b"
    assert DB_ENV not in os.environ  # no CLI, command or hook crew starts next inherits it


def test_a_database_that_does_not_answer_is_a_one_line_error_exit_3():
    with pytest.raises(StoreError) as raised:
        Side.of("postgresql://crew@127.0.0.1:1/batches?passfile=/nonexistent")
    assert raised.value.exit_code == 3 and "\n" not in str(raised.value)
    assert str(raised.value).startswith("cannot reach the batch database postgresql://crew@127.0.0.1:1/batches")


def test_dbos_unpickles_nothing_once_guarded_and_other_code_still_may(tmp_path):
    from dbos import DBOSPortableJSONSerializer
    from dbos._serialization import deserialize_args  # DBOS's own reading of a row that says py_pickle

    marker = tmp_path / "ran"
    planted = base64.b64encode(pickle.dumps(Planted(marker))).decode()
    guard()
    guard()  # once per process, however often asked
    with pytest.raises(PickleRefused, match=r"naming posix\.system"):
        deserialize_args(planted, "py_pickle", DBOSPortableJSONSerializer())
    assert not marker.exists()
    assert pickle.loads(pickle.dumps(Path("x"))) == Path("x")  # crew's guard is DBOS's only


class Planted:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, ...]:
        return (os.system, (f"touch {self.marker}",))


def check_liveness(url: str) -> None:
    """An executor held by a live process is alive; once that process is killed it is not, and an
    executor nobody ever held is not either."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, url, "host-1-abc"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        probe = Side.of(url)
        probe.hold("host-2-def")
        assert probe.alive("host-1-abc")
        assert not probe.alive("host-3-never")
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        # Postgres ends the killed client's session (and its lock) once its backend reads the closed
        # socket: a moment after the kill on a busy machine, never a lasting "alive".
        deadline = time.monotonic() + 30
        while probe.alive("host-1-abc") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not probe.alive("host-1-abc")
        probe.close()
    finally:
        holder.kill()
        holder.wait()


@pytest.fixture(params=["sqlite", "postgres"])
def each_database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A batch database of each kind: a SQLite file, and the tests' Postgres."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'batches.sqlite'}"
    return str(request.getfixturevalue("postgres_url"))


@pytest.mark.slow
def test_a_killed_executor_is_seen_dead(each_database: str):
    check_liveness(each_database)


@pytest.mark.slow
def test_a_password_in_the_environment_is_shown_nowhere(tmp_path: Path, postgres_url: str):
    """$CREW_BATCH_DB may carry the password (Postgres here trusts 127.0.0.1 and ignores it): no line
    crew batch writes, person's or --json, and no error, shows it."""
    url = postgres_url.replace("crew@", "crew:hunter2@", 1)
    env = crew_env(tmp_path / "home", **{DB_ENV: url})
    repo = make_repo(tmp_path / "repo", {"notes.txt": "x\n"})
    said = []
    for args in (
        ["batch", "--detach", "--json", "--id", "pw", "@demo hi", str(repo)],
        ["batch", "worker", "--until-idle"],
        ["batch", "status", "pw", "--json"],
        ["batch", "status", "pw"],
        ["batch", "list"],
    ):
        done = run_crew(args, env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        said.append(done.stdout + done.stderr)
    assert "pw  done  1 repository: 1 unchanged" in said[-1]
    assert "crew: worker " in said[1] and f" on {shown(url)}" in said[1]
    away = {**env, DB_ENV: "postgresql://crew:hunter2@127.0.0.1:1/none"}
    unreachable = run_crew(["batch", "status"], env=away, cwd=tmp_path)
    assert unreachable.returncode == 3 and "crew:***@127.0.0.1:1/none" in unreachable.stderr
    assert not any("hunter2" in text for text in [*said, unreachable.stderr])


TAKER = """
import sys, time
from crewbridge.batch.database import Side
pace = Side.of(sys.argv[1]).pace()
with pace.turn("github https://api.github.com"):
    began = time.time()
    if sys.argv[2] == "limited":
        pace.hold("github https://api.github.com", time.time() + 1.0)  # as a limited request does
    time.sleep(0.3)
    print(sys.argv[2], began, time.time(), flush=True)
"""


def check_pace(url: str) -> None:
    """Processes working on one database take a forge's turns one at a time, and once one is told to
    wait, the others wait until then; another forge's turn is its own."""
    takers = [
        subprocess.Popen([sys.executable, "-c", TAKER, url, how], stdout=subprocess.PIPE, text=True)
        for how in ("limited", "plain", "plain")
    ]
    spans = sorted(
        (float(start), float(end), how) for how, start, end in (t.communicate(timeout=60)[0].split() for t in takers)
    )
    assert all(taker.returncode == 0 for taker in takers)
    for (_, end, _), (start, _, _) in itertools.pairwise(spans):
        assert start >= end  # never two at once
    side = Side.of(url)
    limited = side.not_before("github https://api.github.com")
    after = spans[[how for _, _, how in spans].index("limited") + 1 :]
    assert limited > 0 and all(start >= limited for start, _, _ in after)  # the wait it was told of, waited out
    assert side.not_before("gitlab https://gitlab.com/api/v4") == 0.0
    side.hold_forge("gitlab https://gitlab.com/api/v4", 5.0)
    side.hold_forge("gitlab https://gitlab.com/api/v4", 3.0)  # an earlier time does not shorten a wait
    assert side.not_before("gitlab https://gitlab.com/api/v4") == 5.0
    side.close()


@pytest.mark.slow
def test_the_forges_pace_is_shared_by_the_processes_of_a_database(each_database: str):
    check_pace(each_database)
