"""crewbridge.ui.server: `crew ui`'s pages and API over real HTTP, in-process over transcripts the
tests write (and crew's own Transcript), attacked as a hostile page or client would: no token, a
forged cookie, a foreign Host or Origin, another origin of the same site, a missing CSRF token."""

from __future__ import annotations

import http.client
import json
import re
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from crewbridge.record import events as ev
from crewbridge.record.stream import Record
from crewbridge.record.transcript import Transcript, read_run
from crewbridge.ui import link as uilink
from crewbridge.ui.link import BrowserChannel, socket_path
from crewbridge.ui.server import Ui
from crewcli import crew_env, end_group, error_line, run_crew, start_crew
from gitrepo import git, make_repo, write
from runfiles import write_run

TOKEN = "ui-test-token-0123456789"
QUESTION_ID = re.compile(r"^[0-9a-f]{16}$")


class Browser:
    """One client of the UI with a cookie jar of one cookie, as a browser on the UI's own page."""

    def __init__(self, ui: Ui) -> None:
        self.ui = ui
        self.port = urlsplit(ui.url).port
        self.cookie: str | None = None
        self.csrf = ""

    def request(self, method: str, path: str, body: bytes | None = None, **headers: str | None):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        sent = {"Host": f"127.0.0.1:{self.port}", "Cookie": f"crew_ui={self.cookie}" if self.cookie else None}
        sent.update({name.replace("_", "-"): value for name, value in headers.items()})
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in sent.items():
            if value is not None:
                connection.putheader(name, value)
        connection.endheaders(body)
        answer = connection.getresponse()
        data = answer.read()
        connection.close()
        return answer.status, answer.headers, data

    def sign_in(self, link: str | None = None) -> Browser:
        """Open a sign-in link (a new one from the UI when none is given), as a browser does."""
        status, headers, _ = self.request("GET", urlsplit(link or self.ui.sign_in_link()).path)
        assert status == 303 and headers["Location"] == "/"
        self.cookie = re.match(r"crew_ui=([^;]+);", headers["Set-Cookie"]).group(1)
        _, _, page = self.request("GET", "/")
        self.csrf = re.search(rb'name="csrf" content="([0-9a-f]+)"', page).group(1).decode()
        return self

    def get_json(self, path: str):
        status, _, data = self.request("GET", path)
        assert status == 200, data
        return json.loads(data)

    def post(self, path: str, body: dict | None = None, **headers: str | None):
        sent = {
            "Content_Type": "application/json",
            "X_CSRF_Token": self.csrf,
            "Origin": f"http://127.0.0.1:{self.port}",
            **headers,
        }
        data = json.dumps(body or {}).encode()
        status, _, answer = self.request("POST", path, data, Content_Length=str(len(data)), **sent)
        return status, answer


def recorded(command: str, task: str, agents: tuple[str, ...] = ("claude",)) -> Record:
    """A run of this process, written down as crew writes one, attending a crew ui as crew's faces join it."""
    import os

    record = Record()
    record.keep(Transcript.create(record.run))
    record.emit(ev.Start(run=record.run, at=ev_now(), command=command, agents=list(agents), task=task, pid=os.getpid()))
    uilink.attend(record)
    return record


def ev_now() -> str:
    from crewbridge.record.stream import now

    return now()


@pytest.fixture
def ui(tmp_path, monkeypatch):
    """A UI serving the runs of $XDG_STATE_HOME (this test's), its desk on the user's socket there."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr(uilink, "POLL", 0.05)
    served = Ui(token=TOKEN)
    served.start()
    yield served
    served.close()


# -- who gets in -----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/runs/20250101-000000-abc123", "/usage", "/static/app.js", "/api/runs"])
def test_without_a_session_or_the_token_everything_answers_401(ui, path):
    browser = Browser(ui)
    assert browser.request("GET", path)[0] == 401
    assert browser.request("GET", f"{path}?token={TOKEN}")[0] == 401  # the token signs in nothing in an address
    browser.cookie = "forged.0123456789abcdef"
    assert browser.request("GET", path)[0] == 401


def test_a_sign_in_link_works_once_and_leaves_a_strict_cookie(ui):
    link = ui.sign_in_link()
    status, headers, _ = Browser(ui).request("GET", urlsplit(link).path)
    assert status == 303 and headers["Location"] == "/"
    cookie = headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert "Max-Age" not in cookie and "Expires" not in cookie  # the browser keeps it in memory only
    assert urlsplit(link).path.rsplit("/", 1)[1] not in cookie
    status, headers, page = Browser(ui).request("GET", urlsplit(link).path, Accept="text/html")
    assert status == 410 and b'data-signed-out="used"' in page and b"crew ui" in page  # the history's copy
    assert b'<a href="/" data-back="">' in page  # a used link's way back is to the runs
    assert b'<link rel="stylesheet" href="/static/app.css">' in page and b"<script" not in page
    assert Browser(ui).request("GET", "/static/app.css")[0] == 200  # its style needs no sign-in


def test_a_browser_without_a_session_is_told_how_to_sign_in(ui):
    status, _, page = Browser(ui).request("GET", "/usage", Accept="text/html,*/*")
    assert status == 401 and b'data-signed-out="out"' in page and b"Run crew ui in a terminal" in page
    assert b'<a href="/usage" data-back="">back to /usage</a>' in page  # the way back, once signed in
    for path in ("/nothing/<b>", "//evil.example/usage", "/usage%0a"):  # not a page of crew ui's: the runs
        page = Browser(ui).request("GET", path, Accept="text/html")[2]
        assert b'<a href="/" data-back="">back to /</a>' in page and b"evil" not in page and b"<b>" not in page
    status, _, text = Browser(ui).request("GET", "/api/runs", Accept="text/html,*/*")
    assert status == 401 and text.startswith(b"crew ui needs a sign-in: run `crew ui`")


def test_a_session_s_cookie_is_replaced_as_it_is_used(ui, monkeypatch):
    from crewbridge.ui import signin

    browser = Browser(ui).sign_in()
    first = browser.cookie
    now = signin.time.monotonic() + signin.ROTATE + 1
    monkeypatch.setattr(signin.time, "monotonic", lambda: now)
    status, headers, _ = browser.request("GET", "/api/runs")
    assert status == 200 and headers["Set-Cookie"].startswith("crew_ui=")
    browser.cookie = re.match(r"crew_ui=([^;]+);", headers["Set-Cookie"]).group(1)
    assert browser.cookie != first and browser.post("/api/runs/20250101-000000-abc123/cancel")[0] == 404
    now += signin.GRACE + 1
    thief = Browser(ui)
    thief.cookie = first  # a copy of the replaced value, read from the browser's store
    assert thief.request("GET", "/api/runs")[0] == 401
    assert browser.request("GET", "/api/runs")[0] == 401  # signed out together


def test_pages_run_only_crews_own_script(ui):
    browser = Browser(ui).sign_in()
    status, headers, page = browser.request("GET", "/")
    assert status == 200 and b'<script src="/static/app.js"' in page
    policy = headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    for name in ("app.js", "app.css"):
        status, headers, data = browser.request("GET", f"/static/{name}")
        assert status == 200 and data and headers["ETag"]
        assert browser.request("GET", f"/static/{name}", If_None_Match=headers["ETag"])[0] == 304
    for shipped in (page, browser.request("GET", "/static/app.js")[2], browser.request("GET", "/static/app.css")[2]):
        assert not re.search(rb"https?://(?!www\.w3\.org/2000/svg)", shipped)  # nothing fetched from elsewhere


def test_a_bearer_token_reads_but_never_changes(ui):
    browser = Browser(ui)
    status, _, _ = browser.request("GET", "/api/runs", Authorization=f"Bearer {TOKEN}")
    assert status == 200
    status, _ = browser.post("/api/runs/20250101-000000-abc123/cancel", Authorization=f"Bearer {TOKEN}")
    assert status == 403


@pytest.mark.parametrize(
    "headers",
    [
        {"X_CSRF_Token": None},
        {"X_CSRF_Token": "0" * 64},
        {"Origin": "http://127.0.0.1:1"},  # the same site, another origin: a page on another port
        {"Origin": "http://evil.example.com"},
        {"Origin": "null"},
        {"Origin": None, "Sec_Fetch_Site": "cross-site"},
        {"Content_Type": "application/x-www-form-urlencoded"},
        {"Content_Type": "text/plain"},
    ],
)
def test_a_change_needs_the_cookie_its_csrf_token_json_and_this_origin(ui, headers):
    run = write_run(socket_path().parent / "runs", "20250101-000000-abc123", pid=1, end=None)
    browser = Browser(ui).sign_in()
    status, _ = browser.post(f"/api/runs/{run}/cancel", **headers)
    assert status in (403, 415)
    assert browser.post(f"/api/runs/{run}/cancel")[0] == 409  # checks passed: nothing here attends that run


def test_a_foreign_host_is_refused(ui):
    browser = Browser(ui).sign_in()
    assert browser.request("GET", "/api/runs", Host="evil.example.com")[0] == 403


# -- runs ------------------------------------------------------------------------------------------


def test_the_runs_newest_first_and_filtered(ui):
    runs = socket_path().parent / "runs"
    write_run(runs, "20250101-000000-aaa111", agents=["claude"], task="read the notes", end="ok")
    write_run(runs, "20250102-000000-bbb222", agents=["gemini"], task="fix the date", end="failed")
    write_run(runs, "20250103-000000-ccc333", agents=["claude", "codex"], task="review", end="interrupted")
    browser = Browser(ui).sign_in()
    listed = browser.get_json("/api/runs")
    assert [(r["run_id"][-6:], r["status"]) for r in listed] == [
        ("ccc333", "cancelled"),
        ("bbb222", "failed"),
        ("aaa111", "done"),
    ]
    assert [r["run_id"][-6:] for r in browser.get_json("/api/runs?agent=claude")] == ["ccc333", "aaa111"]
    assert [r["run_id"][-6:] for r in browser.get_json("/api/runs?status=failed")] == ["bbb222"]
    assert [r["run_id"][-6:] for r in browser.get_json("/api/runs?q=NOTES")] == ["aaa111"]
    assert browser.request("GET", "/api/runs?status=bogus")[0] == 400


def test_a_runs_events_stream_whole_and_end(ui):
    run = write_run(socket_path().parent / "runs", "20250101-000000-abc123", end="ok")
    status, headers, data = Browser(ui).sign_in().request("GET", f"/api/runs/{run}/events")
    assert status == 200 and headers["Content-Type"] == "text/event-stream"
    events = [
        json.loads(block.split("data: ", 1)[1]) for block in data.decode().split("\n\n") if "event: event" in block
    ]
    assert [event["kind"] for event in events] == ["start", "turn", "call", "result", "answer", "end"]
    assert events[2]["call"] == events[3]["call"]  # a result finds its call by id, a version 0 record's too
    assert data.decode().rstrip().endswith('event: end\ndata: {"status": "done"}')


def test_a_run_that_died_ends_its_stream_with_what_it_wrote_last(ui):
    run = write_run(socket_path().parent / "runs", "20250101-000000-abc123", end=None, pid=(1 << 22) + 1)
    _, _, data = Browser(ui).sign_in().request("GET", f"/api/runs/{run}/events")
    blocks = data.decode().split("\n\n")
    kinds = [json.loads(b.split("data: ", 1)[1])["kind"] for b in blocks if "event: event" in b]
    assert kinds == ["start", "turn", "call", "result"]
    assert data.decode().rstrip().endswith('event: end\ndata: {"status": "unfinished"}')


def test_a_live_runs_events_arrive_as_they_are_written_the_models_text_among_them(ui):
    record = recorded("query", "live")
    browser = Browser(ui).sign_in()
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(browser.request("GET", f"/api/runs/{record.run}/events")[2]))
    reader.start()
    time.sleep(0.3)
    record.emit(ev.Text(agent="claude", text="I'll read a."))
    record.emit(ev.Call(agent="claude", call=record.next_call(), name="crew:read_file", input={"path": "a"}))
    record.end("done")
    reader.join(30)
    events = [json.loads(b.split("data: ", 1)[1]) for b in got[0].decode().split("\n\n") if "event: event" in b]
    assert [event["kind"] for event in events] == ["start", "text", "call", "end"]
    assert events[1]["text"] == "I'll read a." and events[2]["call"] == "c1"


def test_a_page_opened_mid_reply_has_the_reply_from_its_first_word(ui):
    record = recorded("query", "long reply")
    for word in ["It ", "goes ", "on ", "and ", "on."]:
        record.emit(ev.Text(agent="claude", text=word))
    browser = Browser(ui).sign_in()
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(browser.request("GET", f"/api/runs/{record.run}/events")[2]))
    reader.start()
    time.sleep(0.3)
    record.end("done")
    reader.join(30)
    texts = [json.loads(b.split("data: ", 1)[1]) for b in got[0].decode().split("\n\n") if '"kind":"text"' in b]
    assert "".join(text["text"] for text in texts) == "It goes on and on."


def test_a_worktrees_diff_comes_from_the_git_folder_crew_recorded_and_runs_no_filter(ui, tmp_path):
    """The agent points its worktree's `.git` at a repository it made, whose config has a clean
    filter its attributes name (and fsmonitor): the page's diff is the worktree's against its base,
    by the git folders crew recorded, and nothing of the trap runs."""
    from crewbridge.work.worktrees import make

    repo = make_repo(tmp_path / "repo", {"notes.txt": "deploy: Friday\n"})
    record = recorded("execute", "edit")
    made = make(repo, record.run, ["claude"])
    made.changed(made.worktrees[0], record)  # as the run's end records it: where it worked, its git folders
    worktree = made.worktrees[0].path
    pwned = tmp_path / "pwned"
    trap = make_repo(tmp_path / "trap", {"x.txt": "x\n"})
    git(trap, "config", "filter.evil.clean", f"touch {pwned}; cat")
    git(trap, "config", "core.fsmonitor", f"touch {pwned}-fsmonitor; false")
    write(worktree, {".gitattributes": "* filter=evil\n", "notes.txt": "deploy: Tuesday\n"})
    (worktree / ".git").unlink()
    (trap / ".git").rename(worktree / ".git")
    shown = Browser(ui).sign_in().get_json(f"/api/runs/{record.run}/diff?agent=claude")
    assert "-deploy: Friday\n+deploy: Tuesday" in shown["diff"] and "+* filter=evil" in shown["diff"]
    assert "x.txt" not in shown["diff"] and shown["apply"] == f"crew apply {record.run} claude"
    assert not list(tmp_path.glob("pwned*"))
    record.end("done")


def test_usage_is_the_same_as_crew_log_by_agent(ui, tmp_path):
    runs = socket_path().parent / "runs"
    write_run(runs, "20250101-000000-aaa111", agents=["claude"], end="ok", tokens=(100, 20), cost=0.01)
    write_run(runs, "20250102-000000-bbb222", agents=["claude", "gemini"], end="ok", tokens=(5, 5), cost=None)
    usage = Browser(ui).sign_in().get_json("/api/usage")
    done = run_crew(
        ["log", "--by", "agent", "--json"],
        env={**crew_env(tmp_path / "home"), "XDG_STATE_HOME": str(tmp_path / "state")},
        cwd=tmp_path,
    )
    assert usage["agents"] == [json.loads(line) for line in done.stdout.splitlines()]
    assert {(s["day"], s["agent"], s["tokens"]) for s in usage["series"]} == {
        ("2025-01-01", "claude", 120),
        ("2025-01-02", "claude", 10),
        ("2025-01-02", "gemini", 10),
    }


def test_without_a_batch_database_there_are_no_batches_and_none_is_made(ui):
    assert Browser(ui).sign_in().get_json("/api/batches") == {"batches": []}
    assert not (socket_path().parent / "batch").exists()


def test_without_the_batch_extra_the_batches_say_how_to_install_it(ui, monkeypatch):
    monkeypatch.setitem(sys.modules, "dbos", None)  # not importable
    said = Browser(ui).sign_in().get_json("/api/batches")
    assert said["batches"] == [] and "pip install '.[batch]'" in said["missing"]


def test_a_batch_says_how_many_repositories_ended_in_each_state_and_links_their_runs():
    from crewbridge.ui.batches import Batch, Repo

    batch = Batch(
        "two", "bump it", [Repo("a", "done", "crew/batch-two/claude", run="r1"), Repo("b", "failed", error="boom")]
    )
    data = batch.to_dict()
    assert (data["counts"], data["finished"], data["incomplete"], data["total"]) == ({"done": 1, "failed": 1}, 2, 1, 2)
    assert [repo["run"] for repo in data["repos"]] == ["r1", None]


def test_a_page_crew_ui_has_not_is_a_page_with_the_way_back(ui):
    status, headers, page = Browser(ui).sign_in().request("GET", "/no/such/<page>", Accept="text/html")
    assert status == 404 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert b'<a href="/">Back to the runs</a>' in page and b"/no/such/&lt;page&gt;" in page
    status, _, text = Browser(ui).sign_in().request("GET", "/api/nothing", Accept="text/html")
    assert status == 404 and b"crew ui has no /api/nothing" in text  # programs get the plain answer


def test_a_batch_database_that_cannot_be_read_is_said_so(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("CREW_BATCH_DB", "postgresql://crew@127.0.0.1:9/none")  # nothing listens on port 9
    served = Ui(token=TOKEN)
    served.start()
    try:
        status, _, data = Browser(served).sign_in().request("GET", "/api/batches")
        assert status == 503 and b"cannot read crew batch's database" in data
    finally:
        served.close()


# -- approvals and cancel --------------------------------------------------------------------------


def ask_on_thread(run_id: str, deadline: float = 60.0):
    """A run's question about write_file, asked on the browser from a thread; its verdict lands in the list."""
    from crewbridge.system.approval import Question

    got: list = []
    channel = BrowserChannel(run_id)
    question = Question("claude", "write_file", {"path": "a.txt", "content": "hi\n"})
    thread = threading.Thread(target=lambda: got.append(channel.ask(question, time.monotonic() + deadline)))
    thread.start()
    return channel, thread, got


def open_questions(browser: Browser, count: int = 1) -> list[dict]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = [q for q in browser.get_json("/api/questions") if q["state"] == "open"]
        if len(found) >= count:
            return found
        time.sleep(0.02)
    raise AssertionError("no question arrived")


@pytest.mark.parametrize("verdict", ["yes", "no", "always"])
def test_a_question_is_answered_from_the_page_once(ui, verdict):
    record = recorded("execute", "write")
    _, thread, got = ask_on_thread(record.run)
    browser = Browser(ui).sign_in()
    [question] = open_questions(browser)
    assert QUESTION_ID.match(question["id"]) and question["tool"] == "write_file"
    assert question["input"] == {"path": "a.txt", "content": "hi\n"} and question["run"] == record.run
    assert browser.post(f"/api/questions/{question['id']}", {"verdict": verdict})[0] == 200
    thread.join(30)
    assert got == [verdict]
    status, answer = browser.post(f"/api/questions/{question['id']}", {"verdict": "yes"})
    assert status == 409 and b"already answered" in answer
    record.end("done")


def test_a_second_answer_is_refused_while_the_asker_is_still_reading_the_first(ui):
    record = recorded("execute", "write")
    asker = uilink.connect(socket_path())
    asker.settimeout(30)  # an answer that never comes fails the test, not hangs it
    assert uilink.send(asker, {"op": "ask", "run": record.run, "agent": "claude", "tool": "write_file", "input": {}})
    browser = Browser(ui).sign_in()
    [question] = open_questions(browser)
    assert browser.post(f"/api/questions/{question['id']}", {"verdict": "no"})[0] == 200
    status, answer = browser.post(f"/api/questions/{question['id']}", {"verdict": "yes"})  # asker still connected
    assert status == 409 and b"already answered on the browser" in answer
    assert uilink.Lines(asker).next() == {"op": "answer", "verdict": "no"}
    asker.close()
    record.end("done")


def test_a_question_reaches_the_page_with_nothing_in_it_hidden(ui):
    from crewbridge.system.approval import Question

    record = recorded("execute", "run")
    channel = BrowserChannel(record.run)
    command = "ls -la" + " " * 220 + "; echo owned > pwned.txt\n\x1b[8mrm -rf ~\u202e"
    question = Question("claude", "native:Bash\u200b", {"command": command, "note": "a\nb"})
    thread = threading.Thread(target=channel.ask, args=(question, time.monotonic() + 60))
    thread.start()
    [asked] = open_questions(Browser(ui).sign_in())
    assert asked["tool"] == "native:Bash\\u200b"
    assert asked["shown"] == (
        r'{"command": "ls -la⟨220 spaces⟩; echo owned > pwned.txt\n\u001b[8mrm -rf ~\u202e", "note": "a\nb"}'
    )
    # the strings an edit's diff is drawn from: line breaks kept, the rest drawn as in `shown`
    assert asked["input"] == {
        "command": "ls -la⟨220 spaces⟩; echo owned > pwned.txt\n" + r"\x1b[8mrm -rf ~\u202e",
        "note": "a\nb",
    }
    channel.withdraw()
    thread.join(30)
    record.end("done")


def test_an_answer_elsewhere_shows_on_the_page(ui):
    from crewbridge.system.approval import Answer, Question

    record = recorded("execute", "write")
    channel = BrowserChannel(record.run)
    question = Question("claude", "write_file", {"path": "a"})
    thread = threading.Thread(target=channel.ask, args=(question, None))
    thread.start()
    browser = Browser(ui).sign_in()
    [asked] = open_questions(browser)
    channel.settled(question, Answer("no", "terminal"))
    thread.join(30)
    deadline = time.monotonic() + 30
    while browser.get_json("/api/questions")[0]["state"] == "open" and time.monotonic() < deadline:
        time.sleep(0.02)
    shown = browser.get_json("/api/questions")[0]
    assert (shown["id"], shown["state"], shown["verdict"], shown["source"]) == (
        asked["id"],
        "answered",
        "no",
        "terminal",
    )
    record.end("done")


def test_a_question_in_the_name_of_a_run_another_process_runs_is_not_shown(ui):
    run = write_run(socket_path().parent / "runs", "20250101-000000-abc123", pid=1, end=None)
    _, thread, got = ask_on_thread(run, deadline=1.0)
    thread.join(30)
    assert got == [None] and Browser(ui).sign_in().get_json("/api/questions") == []


def test_cancel_from_the_page_reaches_the_run(ui):
    record = recorded("query", "long")
    ended = threading.Event()
    record.on_cancel(ended.set)
    browser = Browser(ui).sign_in()
    deadline = time.monotonic() + 30
    while not browser.get_json(f"/api/runs/{record.run}")["attended"] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert browser.post(f"/api/runs/{record.run}/cancel")[0] == 200
    assert ended.wait(30)
    record.end("failed")
    events = read_run(record.run)
    assert isinstance(events[-2], ev.Cancel) and events[-2].source == "browser"
    assert isinstance(events[-1], ev.End) and events[-1].status == "cancelled"


def test_a_run_waiting_for_an_answer_is_listed_waiting(ui):
    record = recorded("execute", "write")
    record.emit(ev.Ask(agent="claude", call="c1", name="write_file", input={"path": "a"}))
    browser = Browser(ui).sign_in()
    assert browser.get_json(f"/api/runs/{record.run}")["status"] == "waiting"
    record.emit(ev.Approval(agent="claude", call="c1", name="write_file", answer="yes", source="terminal"))
    assert browser.get_json(f"/api/runs/{record.run}")["status"] == "running"
    record.end("done")
    assert browser.get_json(f"/api/runs/{record.run}")["status"] == "done"


# -- crew ui, as a person starts it ----------------------------------------------------------------


def test_crew_ui_prints_a_sign_in_link_on_stdout_and_a_second_one_prints_a_fresh_link(tmp_path):
    env = crew_env(tmp_path / "home", CREW_UI_TOKEN=TOKEN)
    proc = start_crew(["ui", "--listen", "127.0.0.1:0"], env=env, cwd=tmp_path)
    try:
        line = proc.stdout.readline()
        url = re.fullmatch(r"crew ui: open (http://127\.0\.0\.1:(\d+))/sign-in/([\w-]{43})\n", line)
        assert url and TOKEN not in line, line
        assert "signs in one browser, once, within 5 minutes" in proc.stderr.readline()
        connection = http.client.HTTPConnection("127.0.0.1", int(url.group(2)), timeout=30)
        connection.request("GET", "/api/runs", headers={"Authorization": f"Bearer {TOKEN}"})  # programs: the token
        answer = connection.getresponse()
        assert answer.status == 200 and answer.read() == b"[]"
        second = run_crew(["ui", "--listen", "127.0.0.1:0"], env=env, cwd=tmp_path)
        fresh = re.fullmatch(r"crew ui: open (http://127\.0\.0\.1:\d+)/sign-in/([\w-]{43})\n", second.stdout)
        assert second.returncode == 0 and fresh and fresh.group(1) == url.group(1), second
        assert fresh.group(2) != url.group(3) and "one serves already" in second.stderr
        for code in (url.group(3), fresh.group(2)):
            connection.request("GET", f"/sign-in/{code}")
            answer = connection.getresponse()
            answer.read()
            assert answer.status == 303 and answer.headers["Set-Cookie"].startswith("crew_ui=")
    finally:
        end_group(proc)


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (["--listen", "0.0.0.0:0"], {}, "add --allow-remote"),
        (["--listen", "nonsense"], {}, "--listen 'nonsense' is not HOST:PORT"),
        ([], {"CREW_UI_TOKEN": "short"}, "CREW_UI_TOKEN must be at least 16"),
    ],
)
def test_what_would_open_it_up_is_a_usage_error(tmp_path, args, env, said):
    done = run_crew(["ui", *args], env=crew_env(tmp_path / "home", **env), cwd=tmp_path)
    assert done.returncode == 2 and said in error_line(done.stderr)


def test_the_socket_is_the_users_alone(ui):
    path: Path = socket_path()
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_closed_ui_leaves_no_socket_and_no_thread(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    before = set(threading.enumerate())
    served = Ui(token=TOKEN)
    served.start()
    assert socket_path().exists() and BrowserChannel("20250101-000000-abc123").available()
    started = set(threading.enumerate()) - before
    assert "crew-ui-desk" in {thread.name for thread in started}
    served.close()
    assert not socket_path().exists() and not BrowserChannel("20250101-000000-abc123").available()
    for thread in started:
        thread.join(10)
    assert [thread.name for thread in started if thread.is_alive()] == []
