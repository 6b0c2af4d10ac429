"""crew batch's DBOS: which database, and whether another executor still runs: each working process
holds a lock named after its executor id for its whole life, which the system lets go however the
process dies (a flock beside a SQLite file; a Postgres session's advisory lock)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crewbridge.batch.database import DB_ENV, Side, database_url, shown
from crewbridge.errors import UsageError

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


def test_a_password_is_left_out_of_what_isshown():
    assert (
        shown("postgresql://crew:s3cret@db.internal:5432/batches") == "postgresql://crew:***@db.internal:5432/batches"
    )
    assert shown("postgresql://crew@db/batches") == "postgresql://crew@db/batches"
    assert shown("sqlite:////tmp/x.sqlite") == "sqlite:////tmp/x.sqlite"


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


@pytest.mark.slow
def test_a_killed_executor_is_seen_dead_on_sqlite(tmp_path: Path):
    check_liveness(f"sqlite:///{tmp_path / 'batches.sqlite'}")


@pytest.mark.slow
def test_a_killed_executor_is_seen_dead_on_postgres(postgres_url: str):
    check_liveness(postgres_url)
