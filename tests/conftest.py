"""Shared fixtures: the mock model server, the real CLIs (pinned), and their scratch environments."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from clienv import BIN, CLIS, PACKAGES, PLAIN_ANSWER, LivedInHomes, missing, require_cli
from clienv import cli_env as build_env
from crewbridge.sandbox import MECHANISM_ENV, Sandboxing, detect
from crewbridge.system import beneath, process
from mockserver import MockServer
from pgserver import BIN_GLOB, Postgres, binaries
from phoenix import Phoenix
from phoenix import binary as phoenix_binary


@functools.cache
def lacking(what: str) -> str | None:
    """Why this machine lacks `what` a test marked `needs(what)` needs (None: it has it): "clis",
    the pinned real CLIs npm installs; "bwrap" or "landlock", that sandbox mechanism working here."""
    if what == "clis":
        absent = [name for name in PACKAGES if not (BIN / name).exists()]
        return f"the real CLIs {', '.join(absent)} are not installed in {BIN} (npm install)" if absent else None
    if what in ("bwrap", "landlock"):
        found = detect({**os.environ, MECHANISM_ENV: what})
        return None if found.mechanism is not None else f"no {what} sandbox here: {found.reasons()}"
    raise AssertionError(f"needs({what!r}): not something a test can need (clis, bwrap, landlock)")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked needs(...) is skipped, saying why, where this machine lacks what it needs
    (failed instead under CREW_TEST_ALL=1, as scripts/test runs the suite)."""
    for mark in item.iter_markers("needs"):
        for what in mark.args:
            why = lacking(what)
            if why is not None:
                missing(why)


@pytest.fixture(autouse=True, scope="session")
def no_outside_stdin() -> Iterator[None]:
    """Nothing the tests start reads what runs the tests: stdin is /dev/null for the whole session,
    whatever pytest was given (a pipe another program writes to, a terminal) and however it captures
    (`-s` leaves fd 0 alone). A crew that inherited such a pipe read it as the task's context; a test
    that wants stdin gives its own."""
    saved, devnull = os.dup(0), os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    try:
        yield
    finally:
        os.dup2(saved, 0)
        os.close(saved)


@pytest.fixture
def mock_server() -> Iterator[MockServer]:
    """A running mock model server. The test fails if a CLI asked for more replies than scripted,
    called a route the mock lacks, or tried to reach a host other than 127.0.0.1."""
    with MockServer() as mock:
        yield mock
    assert not mock.problems, f"the mock model server saw: {'; '.join(mock.problems)}"


@pytest.fixture(params=CLIS)
def cli(request: pytest.FixtureRequest) -> str:
    """Each real CLI in turn (claude, gemini, codex); fails when one is missing."""
    require_cli(request.param)
    return request.param


@pytest.fixture(scope="session")
def lived_in_homes(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[LivedInHomes]:
    """Homes where the real CLIs were used before crew, made once a session: in the folder the
    pytest-xdist workers' temporary folders share."""
    base = tmp_path_factory.getbasetemp()
    root = (base if worker_id == "master" else base.parent) / "lived-in"
    root.mkdir(exist_ok=True)
    with MockServer() as mock:
        mock.respond(lambda request: PLAIN_ANSWER)
        yield LivedInHomes(root, mock.url)


@pytest.fixture
def cli_env(mock_server: MockServer, tmp_path: Path, lived_in_homes: LivedInHomes) -> Callable[[str], dict[str, str]]:
    """`cli_env(name)`: the environment for real CLI `name`, with a HOME under this test's tmp_path
    where the CLI was already used (a copy of a lived-in home: users' machines are not fresh), the
    model API pointed at `mock_server`. The same name gives the same HOME, so a second turn finds
    the first turn's session."""

    def env(name: str) -> dict[str, str]:
        require_cli(name)
        home = tmp_path / f"home-{name}"
        if not home.exists():
            lived_in_homes.copy(name, home, mock_server.url)
        return build_env(name, mock_server.url, home)

    return env


@pytest.fixture(params=["openat2", "walk"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each way crewbridge.system.beneath resolves a path: openat2, and the O_NOFOLLOW walk (forced by
    CREW_BENEATH=walk). Fails where openat2 is missing rather than test only the walk unsaid."""
    if request.param == "walk":
        monkeypatch.setenv(beneath.WALK, "walk")
    else:
        monkeypatch.delenv(beneath.WALK, raising=False)
        assert beneath._syscall() is not None, "openat2 is not available here: only the walk can be tested"
    return str(request.param)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """The directory the CLI runs in."""
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture(autouse=True)
def private_user_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Transcripts, trusted configs and the user crew.yaml live in a scratch place, never the real home."""
    base = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_STATE_HOME", str(base / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(base / "config"))


@pytest.fixture
def started_clis(monkeypatch: pytest.MonkeyPatch) -> list[process.Child]:
    """Every CLI process crew starts from now on, in order."""
    children: list[process.Child] = []
    spawn = process.Child.__init__
    monkeypatch.setattr(
        process.Child, "__init__", lambda self, argv, **kw: (children.append(self), spawn(self, argv, **kw))[1]
    )
    return children


@pytest.fixture(params=["bwrap", "landlock"])
def sandboxing(request: pytest.FixtureRequest) -> Sandboxing:
    """Each real sandbox mechanism in turn (bubblewrap, then Landlock), as `--sandbox required` gets
    it: where this machine does not offer it the test is skipped saying why (failed under
    CREW_TEST_ALL=1)."""
    why = lacking(request.param)
    if why is not None:
        missing(why)
    return Sandboxing(env={**os.environ, MECHANISM_ENV: request.param})


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Postgres]:
    """A real Postgres on 127.0.0.1 for the whole session (tests/pgserver.py); the tests that use it
    are skipped, saying why, only where Debian's postgresql package is not installed."""
    found = binaries()
    if found is None:
        missing(f"Postgres is not installed here ({BIN_GLOB}); scripts/test installs Debian's postgresql")
    server = Postgres(found).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def phoenix() -> Iterator[Phoenix]:
    """A real Arize Phoenix on 127.0.0.1 for the whole session (tests/phoenix.py): the tracing backend
    the telemetry tests send to; skipped, saying why, only where scripts/test has not made its venv."""
    found = phoenix_binary()
    if found is None:
        missing("Arize Phoenix is not installed (.venv-phoenix); scripts/test makes its venv")
    server = Phoenix(found).start()
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: Postgres) -> str:
    """A new empty Postgres database for this test: its URL."""
    return postgres_server.database()
