"""crewbridge.ui.signin: a sign-in code works once and for five minutes; a session's cookie value is
replaced as it is used, and a replaced one that comes back signs both holders out; a second
`crew ui` gets a fresh link only as the user outside any sandbox (real bubblewrap and Landlock)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from crewbridge.errors import UsageError
from crewbridge.sandbox import Confinement, Sandbox, spawn
from crewbridge.ui import signin
from crewbridge.ui.link import Lines, connect, send, socket_path
from crewbridge.ui.server import Ui
from crewbridge.ui.signin import CODE_LIFE, DETACHED, GRACE, ROTATE, SignIns, new_link

TOKEN = "signin-test-token-0123456789"


class Clock:
    """time.monotonic as the tests move it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 1000.0
        monkeypatch.setattr(signin.time, "monotonic", lambda: self.now)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    return Clock(monkeypatch)


def test_a_code_signs_in_once(clock: Clock) -> None:
    signins = SignIns()
    code = signins.code()
    seen = signins.redeem(code)
    assert seen is not None and seen.cookie == seen.session.value and len(seen.session.csrf) == 64
    assert signins.redeem(code) is None  # spent
    assert signins.redeem("never-given") is None and signins.redeem("") is None
    assert signins.seen(seen.cookie) == signin.Seen(seen.session, None)  # the session it opened


def test_a_code_expires(clock: Clock) -> None:
    signins = SignIns()
    code = signins.code()
    clock.now += CODE_LIFE + 1
    assert signins.redeem(code) is None


def test_a_sessions_cookie_is_replaced_as_it_is_used_and_the_old_one_ends_after_its_grace(clock: Clock) -> None:
    said: list[str] = []
    signins = SignIns(said=said.append)
    first = signins.redeem(signins.code())
    assert first is not None and first.cookie is not None
    clock.now += ROTATE + 1
    rotated = signins.seen(first.cookie)
    assert rotated is not None and rotated.cookie not in (None, first.cookie)
    clock.now += GRACE / 2  # a request under way with the old value: the new one again
    assert signins.seen(first.cookie) == signin.Seen(rotated.session, rotated.cookie)
    assert signins.seen(rotated.cookie) == signin.Seen(rotated.session, None)
    clock.now += GRACE  # the old value, past its grace: a copy in use elsewhere
    assert signins.seen(first.cookie) is None
    assert signins.seen(rotated.cookie) is None  # both holders are signed out
    assert said == ["a session's replaced cookie came back: signed it out (a copy in use elsewhere?)"]


def test_a_session_lives_while_a_page_of_it_is_open_and_ends_after_it_closed(clock: Clock) -> None:
    signins = SignIns()
    seen = signins.redeem(signins.code())
    assert seen is not None
    signins.attached(seen.session)  # the page's event stream
    signins.attached(seen.session)  # another tab
    clock.now += DETACHED * 10
    signins.detached(seen.session)
    again = signins.seen(seen.cookie)
    assert again is not None and again.cookie is not None  # one page is still open (its value replaced: due)
    signins.detached(seen.session)
    clock.now += DETACHED - 1
    assert signins.seen(again.cookie) is not None  # a reload, a phone's tab in the background
    clock.now += 2
    assert signins.seen(again.cookie) is None  # a copy read from the browser's store: nothing
    assert signins.seen(None) is None and signins.seen("") is None


def test_a_session_no_page_ever_opened_ends_too(clock: Clock) -> None:
    signins = SignIns()
    seen = signins.redeem(signins.code())
    assert seen is not None
    clock.now += DETACHED + 1
    assert signins.seen(seen.cookie) is None


# -- a second crew ui -------------------------------------------------------------------------------


@pytest.fixture
def ui(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    served = Ui(token=TOKEN)
    served.start()
    yield served
    served.close()


def test_a_second_crew_ui_gets_a_fresh_link_to_the_one_that_serves(ui: Ui) -> None:
    link = new_link(socket_path())
    assert link is not None and link.startswith(f"{ui.url}/sign-in/")
    assert ui.signins.redeem(link.rsplit("/", 1)[1]) is not None
    assert not list(socket_path().parent.glob("ui-claim-*"))  # the proof is removed


def test_with_none_serving_there_is_no_link(tmp_path: Path) -> None:
    assert new_link(tmp_path / "ui.sock") is None


def test_a_client_that_does_not_prove_where_it_runs_gets_no_link(ui: Ui) -> None:
    sock = connect(socket_path())
    assert sock is not None
    with sock:
        lines = Lines(sock)
        send(sock, {"op": "sign-in"})
        asked = lines.next()
        assert asked is not None and asked["op"] == "prove"
        send(sock, {"op": "proved"})  # without making the file
        assert lines.next() == {"op": "refused", "why": f"it did not make {socket_path().parent / asked['name']}"}


@pytest.mark.slow
@pytest.mark.parametrize("checked", ["no_new_privs and the claim", "the claim alone"])
def test_a_command_in_the_sandbox_gets_no_link(ui: Ui, sandboxing, tmp_path: Path, monkeypatch, checked) -> None:
    """An agent's shell (a CLI's sandbox: the network kept, so Unix sockets too; crew's state folder
    visible) asks the crew ui that serves for a link: refused. With the no_new_privs check off, the
    sandbox still keeps it from making the file that proves where it runs."""
    if checked == "the claim alone":
        monkeypatch.setattr("crewbridge.ui.desk.no_new_privs", lambda pid: False)
    work = tmp_path / "work"
    work.mkdir()
    state = socket_path().parent
    mechanism = sandboxing.mechanism("required")
    sandbox = Sandbox(mechanism, Confinement((work,), visible=(work, state), network=True))
    asks = (
        "import sys; from pathlib import Path; from crewbridge.ui.signin import new_link\n"
        "try:\n    print(new_link(Path(sys.argv[1])))\nexcept Exception as exc:\n    print('refused:', exc)\n"
    )
    proc, launch = spawn(
        [sys.executable, "-c", asks, str(socket_path())], sandbox=sandbox, env=None, cwd=work, stdout=subprocess.PIPE
    )
    said = proc.communicate(timeout=60)[0].decode()
    launch.ended()
    if checked.startswith("no_new_privs"):
        assert said.startswith("refused: another crew ui serves for this user") and "inside a sandbox" in said, said
    else:
        assert said.startswith(f"refused: cannot write {state}"), said
    assert "/sign-in/" not in said
    assert not list(state.glob("ui-claim-*"))


def test_a_link_refused_says_what_to_do(ui: Ui, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(path: Path) -> None:
        raise UsageError(f"cannot write {path.parent} (Read-only file system), so …")

    monkeypatch.setattr(signin, "_claim", refuse)
    with pytest.raises(UsageError, match=r"cannot write .* \(Read-only file system\)"):
        new_link(socket_path())
    assert os.listdir(socket_path().parent).count("ui.sock") == 1
