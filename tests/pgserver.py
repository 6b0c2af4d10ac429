"""A real Postgres for the tests (crew batch's shared database): Debian's `postgresql` package
(scripts/test installs it), started once per test session on 127.0.0.1 at a free port, its data
and socket in a temporary folder, stopped and removed at the end. As root, it runs as the
`postgres` user (Postgres refuses to run as root). `Postgres.database()` makes a new empty database
for one test."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

BIN_GLOB = "/usr/lib/postgresql/*/bin"
USER = "crew"  # the server's superuser (trust authentication, on 127.0.0.1 only)


def binaries() -> Path | None:
    """The newest installed Postgres's bin folder, or None."""
    found = sorted(Path("/").glob(BIN_GLOB.lstrip("/")), key=lambda path: int(path.parent.name))
    return found[-1] if found and (found[-1] / "initdb").exists() else None


class Postgres:
    """One running server (`start()`, `stop()`)."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="crew-pg-"))
        self.data, self.sockets = self.root / "data", self.root / "sockets"
        self.port = _free_port()
        self._count = 0

    def _run(self, *args: str) -> None:
        as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        done = subprocess.run([*as_user, *args], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:2])} failed: {done.stdout}{done.stderr}")

    def start(self) -> Postgres:
        self.sockets.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
            shutil.chown(self.sockets, "postgres")
        self.root.chmod(0o755)
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", USER, "--auth=trust", "--no-sync", "-E", "UTF8")
        options = f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.root / "log"), "-w", "start"
        )
        return self

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def database(self) -> str:
        """A new empty database's URL."""
        import psycopg

        self._count += 1
        name = f"test{self._count}"
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {name}")
        return self.url(name)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
