"""crewbridge.ui.link: a run reaching the `crew ui` of its user over the Unix socket — the browser as
an approval channel, and attendance that lets the page cancel the run. The UI here is a small honest
fake: a real Unix socket in the state folder, answering as the test says."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from crewbridge.record import events as ev
from crewbridge.record.stream import Record
from crewbridge.record.transcript import Transcript, read_run
from crewbridge.system.approval import Answer, Approver, Question
from crewbridge.ui import link as uilink
from crewbridge.ui.link import Attendance, BrowserChannel, Lines, at_socket, attend, connect, socket_path
from sockets import stop_listening

QUESTION = Question("claude", "write_file", {"path": "a.txt", "content": "hi"})


class FakeUi:
    """Listens where `crew ui` would; each connection's first message lands in `heard`, and
    `reply(message)` (when set) answers it."""

    def __init__(self, path: Path, reply: dict | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(str(path))
        self.listener.listen()
        self.reply = reply
        self.heard: list[dict] = []
        self.after: list[dict] = []  # what came after the first message (settled)
        self.connections: list[socket.socket] = []
        self.arrived = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            self.connections.append(sock)
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        lines = Lines(sock)
        first = lines.next()
        if first is None:
            return
        self.heard.append(first)
        self.arrived.set()
        if self.reply is not None:
            sock.sendall(json.dumps(self.reply).encode() + b"\n")
        while (message := lines.next()) is not None:
            self.after.append(message)

    def send_all(self, message: dict) -> None:
        for sock in self.connections:
            sock.sendall(json.dumps(message).encode() + b"\n")

    def close(self) -> None:
        stop_listening(self.listener)
        for sock in self.connections:
            sock.close()


@pytest.fixture
def ui_path(tmp_path) -> Path:
    return tmp_path / "state" / "ui.sock"


def test_the_socket_is_in_the_users_state_folder(tmp_path):
    assert socket_path({"XDG_STATE_HOME": str(tmp_path)}) == tmp_path / "crewbridge" / "ui.sock"


def test_with_no_ui_serving_the_browser_is_not_available_and_asks_nothing(ui_path):
    channel = BrowserChannel("run", ui_path)
    assert not channel.available()
    assert channel.ask(QUESTION, None) is None
    ui_path.parent.mkdir(parents=True)
    ui_path.write_text("")  # a stale file, not a socket
    assert not channel.available()


def test_a_run_without_a_transcript_is_never_asked_in_the_browser(ui_path):
    ui = FakeUi(ui_path, {"op": "answer", "verdict": "yes"})
    channel = BrowserChannel(None, ui_path)  # transcripts: false
    assert not channel.available() and channel.ask(QUESTION, time.monotonic() + 30) is None
    assert ui.heard == []


def test_a_question_goes_to_the_ui_and_its_verdict_comes_back(ui_path):
    ui = FakeUi(ui_path, {"op": "answer", "verdict": "yes"})
    channel = BrowserChannel("20250101-000000-abc123", ui_path)
    assert channel.available()
    assert channel.ask(QUESTION, time.monotonic() + 30) == "yes"
    asked = next(message for message in ui.heard if message)
    assert asked == {
        "op": "ask",
        "run": "20250101-000000-abc123",
        "agent": "claude",
        "tool": "write_file",
        "input": {"path": "a.txt", "content": "hi"},
        "shown": QUESTION.shown_input(),
        "note": "",
    }
    ui.close()


@pytest.mark.parametrize("reply", [{"op": "answer", "verdict": "maybe"}, {"op": "cancel"}, {"verdict": "yes"}])
def test_anything_but_a_verdict_is_not_an_answer(ui_path, reply):
    FakeUi(ui_path, reply)
    assert BrowserChannel("r", ui_path).ask(QUESTION, time.monotonic() + 0.5) is None


def test_a_large_input_goes_in_its_shown_form_only(ui_path):
    ui = FakeUi(ui_path, {"op": "answer", "verdict": "no"})
    big = Question("claude", "write_file", {"path": "a", "content": "x" * (uilink.SENT_INPUT + 1)})
    assert BrowserChannel("r", ui_path).ask(big, time.monotonic() + 30) == "no"
    assert ui.heard[-1]["input"] is None and ui.heard[-1]["shown"].endswith("more characters)")


def test_a_question_nobody_answers_ends_at_its_deadline(ui_path):
    FakeUi(ui_path)
    assert BrowserChannel("r", ui_path).ask(QUESTION, time.monotonic() + 0.3) is None


def asked_and_waiting(ui_path):
    """A UI that answers nothing, a channel, and the thread of its question (waiting there); what
    the question got lands in the list."""
    ui = FakeUi(ui_path)
    channel = BrowserChannel("r", ui_path)
    got: list = []
    thread = threading.Thread(target=lambda: got.append(channel.ask(QUESTION, None)))
    thread.start()
    assert ui.arrived.wait(30)
    return ui, channel, thread, got


def test_withdrawing_ends_a_waiting_question_and_refuses_more_until_reopened(ui_path):
    ui, channel, thread, got = asked_and_waiting(ui_path)
    channel.withdraw()
    thread.join(30)
    assert got == [None] and not thread.is_alive()
    assert channel.ask(QUESTION, None) is None
    ui.reply = {"op": "answer", "verdict": "always"}
    channel.reopen()
    assert channel.ask(QUESTION, time.monotonic() + 30) == "always"


def test_an_answer_elsewhere_is_told_to_the_ui(ui_path):
    ui, channel, thread, got = asked_and_waiting(ui_path)
    channel.settled(QUESTION, Answer("no", "terminal"))
    thread.join(30)
    deadline = time.monotonic() + 30
    while not ui.after and time.monotonic() < deadline:
        time.sleep(0.01)
    assert got == [None] and ui.after == [{"op": "settled", "verdict": "no", "source": "terminal"}]


def test_without_a_terminal_a_run_waits_for_the_browser_and_its_answer_is_recorded(ui_path):
    FakeUi(ui_path, {"op": "answer", "verdict": "yes"})
    heard: list = []
    approver = Approver(channels=[BrowserChannel("r", ui_path)], answered=lambda q, a: heard.append(a))
    assert approver.interactive  # tests run without a terminal: the browser is the one channel
    assert approver.ask(QUESTION, time.monotonic() + 30) == Answer("yes", "browser")
    assert heard == [Answer("yes", "browser")]


# -- attendance and cancel -------------------------------------------------------------------------


def test_a_run_attends_a_ui_that_starts_after_it_and_is_cancelled_from_it(ui_path, monkeypatch):
    monkeypatch.setattr(uilink, "POLL", 0.05)
    cancelled = threading.Event()
    attendance = Attendance("run-1", cancelled.set, ui_path)
    time.sleep(0.2)  # no UI yet: it looks again
    ui = FakeUi(ui_path)
    assert ui.arrived.wait(30)
    assert ui.heard[0]["op"] == "attend" and ui.heard[0]["run"] == "run-1" and ui.heard[0]["pid"] > 0
    ui.send_all({"op": "cancel"})
    assert cancelled.wait(30)
    attendance.close()
    ui.close()


def kept() -> Record:
    record = Record()
    record.keep(Transcript.create(record.run))
    record.emit(ev.Start(run=record.run, command="query", agents=["claude"], task="t"))
    return record


def test_a_run_joined_to_the_ui_is_cancelled_from_it_recorded_and_ends_cancelled(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(uilink, "POLL", 0.05)
    ui = FakeUi(socket_path())
    record = kept()
    [channel] = attend(record)
    assert isinstance(channel, BrowserChannel) and channel.run_id == record.run
    ended: list[str] = []
    record.on_cancel(lambda: ended.append("loop 1"))
    assert ui.arrived.wait(30) and ui.heard[0]["run"] == record.run
    ui.send_all({"op": "cancel"})
    deadline = time.monotonic() + 30
    while not record.cancelled and time.monotonic() < deadline:
        time.sleep(0.01)
    record.on_cancel(lambda: ended.append("loop 2"))  # made after the cancel: ended at once
    record.end("failed")
    assert ended == ["loop 1", "loop 2"]
    events = read_run(record.run)
    assert [e.kind for e in events] == ["start", "cancel", "end"]
    assert events[1].source == "browser" and events[-1].status == "cancelled"  # type: ignore[union-attr]
    ui.close()


def test_a_run_that_finished_all_the_same_keeps_its_status(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    record = kept()
    record.cancel("browser")
    record.end("done")
    assert read_run(record.run)[-1].status == "done"  # type: ignore[union-attr]


def test_a_run_without_a_transcript_does_not_join_the_ui(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert attend(Record()) == []


def test_a_state_folder_deeper_than_a_unix_address_holds_still_serves(tmp_path):
    """An AF_UNIX address holds 107 bytes; crew names the socket through its folder's descriptor, so
    a `crew ui` whose state folder lies deep still listens and is found."""
    deep = tmp_path.joinpath(*(["a-rather-long-folder-name"] * 8))
    deep.mkdir(parents=True)
    path = deep / "ui.sock"
    assert len(str(path).encode()) > 107
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    at_socket(path, listener.bind)
    listener.listen(1)
    try:
        assert path.is_socket()
        client = connect(path)
        assert client is not None
        client.close()
    finally:
        listener.close()
    assert connect(tmp_path / "nowhere" / "ui.sock") is None
