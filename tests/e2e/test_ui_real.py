"""`crew ui` in a real browser (Debian's Chromium, driven by Playwright) against runs of the real
claude CLI on the mock model server: the list shows a finished run, a live run's text appears while
it streams, an approval answered on the page decides the write, a cancel ends the run as Ctrl-C
does, and the page refuses what a stranger or another site sends."""

from __future__ import annotations

import hashlib
import http.client
import http.server
import itertools
import json
import math
import re
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from browser import chromium, missing
from crewcli import end_group, processes_in, run_crew, start_crew, tool_block, write_config
from gitrepo import make_repo
from mockserver import error, reply, tool_call

pytestmark = pytest.mark.e2e
TOKEN = "ui-e2e-token-0123456789abc"
WAIT = 120_000  # ms: under load the CLIs take seconds to start


@pytest.fixture
def env(cli_env):
    """The environment of claude's runs and of crew ui alike (the same state folder)."""
    return {**cli_env("claude"), "CREW_UI_TOKEN": TOKEN}


LINK = re.compile(r"crew ui: open (http://127\.0\.0\.1:\d+)(/sign-in/[\w-]+)\n")


@pytest.fixture
def served(env, tmp_path):
    """`crew ui` serving for the test's user: its address, and the sign-in link it printed."""
    proc = start_crew(["ui", "--listen", "127.0.0.1:0"], env=env, cwd=tmp_path)
    line = proc.stdout.readline()
    found = LINK.fullmatch(line)
    assert found, line + proc.stderr.read() if proc.poll() is not None else line
    yield found.group(1), found.group(1) + found.group(2)
    end_group(proc)


@pytest.fixture
def ui(served):
    """crew ui's address."""
    return served[0]


def new_link(env, cwd) -> str:
    """A fresh sign-in link to the crew ui that serves, as a second `crew ui` prints it."""
    done = run_crew(["ui"], env=env, cwd=cwd)
    found = LINK.fullmatch(done.stdout)
    assert done.returncode == 0 and found, done
    return found.group(1) + found.group(2)


@pytest.fixture
def page(served):
    """A browser page signed in to the UI with the link crew ui printed."""
    if missing():
        pytest.fail(missing(), pytrace=False)
    ui, link = served
    with chromium() as browser:
        page = browser.new_page()
        page.set_default_timeout(WAIT)
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(link)
        assert page.url == f"{ui}/"  # signed in, and the address holds no code
        yield page
        assert errors == [], errors


def runs_in(env) -> list[Path]:
    return sorted((Path(env["XDG_STATE_HOME"]) / "crewbridge" / "runs").glob("*.jsonl"))


def started_run(env, timeout: float = 120.0) -> str:
    """The id of the run that started (the first transcript to appear)."""
    deadline = time.monotonic() + timeout
    while not runs_in(env):
        assert time.monotonic() < deadline, "no run started"
        time.sleep(0.05)
    return runs_in(env)[0].stem


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    """The run's exit code and output once it ended by itself (ended at once when the test failed)."""
    if sys.exc_info()[0] is not None:
        end_group(proc)
    try:
        out, err = proc.communicate(timeout=180)
    finally:
        end_group(proc)
    return proc.returncode, out, err


def test_the_list_shows_a_finished_run(page, ui, env, workdir, mock_server):
    mock_server.script(reply("Let me look.\n", tool_block("crew:list_files")), reply("One file: notes.txt."))
    (workdir / "notes.txt").write_text("hi\n")
    code, _, err = finish(start_crew(["query", "@claude what is here?"], env=env, cwd=workdir))
    assert code == 0, err
    run = runs_in(env)[0].stem
    page.goto(f"{ui}/")
    row = page.locator(f'[data-run-id="{run}"]')
    row.locator('[data-status="done"]').wait_for()
    # Its text as written, not as laid out: a row is `content-visibility: auto`, and one the browser
    # has not yet laid out has no rendered text (inner_text() gave "" once, under load).
    text = row.text_content() or ""
    assert "what is here?" in text and "@claude" in text
    row.click()
    page.locator('[data-tool-call="list_files"] [data-result="ok"]').wait_for()
    assert page.locator('[data-kind="answer"]').inner_text().endswith("One file: notes.txt.")
    # issue 40: the model's lead-in shows above the call it preceded, and the header's tokens are
    # the usage the page lists (the record's usage events, summed)
    items = page.locator(".log .item").evaluate_all("nodes => nodes.map(n => n.dataset.kind)")
    said, called = items.index("reply"), items.index("call")
    assert said < called and "Let me look." in page.locator('[data-kind="reply"]').first.inner_text()
    header = int(page.locator(".meta [data-tokens]").get_attribute("data-tokens"))
    events = [json.loads(line) for line in runs_in(env)[0].read_text().splitlines()]
    used = sum(e.get("input_tokens", 0) + e.get("output_tokens", 0) for e in events if e["kind"] == "usage")
    assert header == used > 0


def test_a_live_runs_text_appears_while_it_streams(page, ui, env, workdir, mock_server):
    # The reply streams a word a second for 20 s: its first words show long before its end.
    mock_server.script(reply("Streaming words arrive ", *[f"word{n} " for n in range(20)], delay=1.0))
    proc = start_crew(["query", "@claude tell me slowly"], env=env, cwd=workdir)
    try:
        run = started_run(env)
        page.goto(f"{ui}/runs/{run}")
        page.locator('[data-kind="streaming"]', has_text="Streaming words arrive").wait_for()
        assert proc.poll() is None  # the run still streams
        page.locator('[data-kind="streaming"]', has_text="word3").wait_for()
        assert proc.poll() is None
    finally:
        code, _, err = finish(proc)
    assert code == 0, err
    page.locator('[data-kind="answer"]', has_text="word19").wait_for()  # the whole reply, once read


def write_run(env, workdir, mock_server):
    """`crew execute` writing a.txt where crew.yaml asks a person first, without a terminal."""
    write_config(workdir / "crew.yaml", agents={"claude": {"approval": ["write_file"]}})
    mock_server.script(
        reply("Writing it.\n", tool_block("crew:write_file", path="a.txt", content="hello\n")),
        reply("Done."),
    )
    return start_crew(["execute", "--timeout", "240", "@claude write hello to a.txt"], env=env, cwd=workdir)


@pytest.mark.parametrize(("action", "verdict"), [("allow", "yes"), ("deny", "no")])
def test_an_approval_answered_on_the_page_decides_the_write(page, ui, env, workdir, mock_server, action, verdict):
    proc = write_run(env, workdir, mock_server)
    try:
        question = page.locator('[data-approval-id][data-state="open"]')
        question.wait_for()
        assert "@claude wants to run write_file" in question.inner_text() and "hello" in question.inner_text()
        assert not (workdir / "a.txt").exists()  # it waits for the page
        question.locator(f'[data-action="{action}"]').click()
        page.locator(f'[data-approval-id][data-state="answered"] [data-answer="{verdict}"]').wait_for()
    finally:
        code, _, err = finish(proc)
    assert code == 0, err
    if action == "allow":
        assert (workdir / "a.txt").read_text() == "hello\n"
    else:
        assert not (workdir / "a.txt").exists()
        assert "the user declined this call to 'write_file'" in mock_server.requests[-1].text()
    events = [json.loads(line) for line in runs_in(env)[0].read_text().splitlines()]
    [approval] = [event for event in events if event["kind"] == "approval"]
    assert (approval["answer"], approval["source"]) == (verdict, "browser")


def test_an_approval_on_the_page_shows_the_whole_command(page, ui, env, workdir, mock_server):
    """Issue 39: `ls -la` + 220 spaces + `; echo owned > pwned.txt` (and a line break, an ANSI
    sequence, a bidi override): the page shows every part, the tail in sight; denied, nothing ran."""
    write_config(workdir / "crew.yaml", agents={"claude": {"approval": ["run_command"]}})
    command = "ls -la" + " " * 220 + "; echo owned > pwned.txt\n\x1b[8mtouch also.txt\u202e"
    mock_server.script(reply("Listing.\n", tool_block("crew:run_command", command=command)), reply("Done."))
    proc = start_crew(["execute", "--timeout", "240", "@claude list the files"], env=env, cwd=workdir)
    try:
        question = page.locator('[data-approval-id][data-state="open"]')
        question.wait_for()
        shown = question.locator("pre.shown")
        assert "ls -la⟨220 spaces⟩; echo owned > pwned.txt\\n\\u001b[8mtouch also.txt\\u202e" in shown.inner_text()
        assert shown.evaluate("pre => pre.scrollWidth <= pre.clientWidth")  # wrapped: nothing out of sight
        question.locator('[data-action="deny"]').click()
        page.locator('[data-approval-id][data-state="answered"] [data-answer="no"]').wait_for()
    finally:
        code, _, err = finish(proc)
    assert code == 0, err
    assert not (workdir / "pwned.txt").exists() and not (workdir / "also.txt").exists()


def test_cancel_on_the_page_ends_the_run_as_ctrl_c_does(page, ui, env, workdir, mock_server):
    mock_server.script(reply("Thinking ", *["more " for _ in range(100)], delay=1.0))
    proc = start_crew(["query", "@claude think for a long time"], env=env, cwd=workdir)
    try:
        run = started_run(env)
        page.goto(f"{ui}/runs/{run}")
        page.locator('[data-kind="streaming"]', has_text="Thinking").wait_for()
        page.locator('[data-action="cancel"]').click()
        code, _, err = finish(proc)
    finally:
        end_group(proc)
    assert code == 130, err
    page.locator('.meta [data-status="cancelled"]').wait_for()
    page.locator('[data-kind="notice"]', has_text="ended: cancelled").wait_for()
    # issue 40: after the cancel nothing says it goes on, and the stop is no error of the agent's
    assert "cancelling…" not in page.inner_text("main") and "is writing…" not in page.inner_text("main")
    assert page.locator('[data-kind="error"]').count() == 0
    assert "0 errors" in page.locator('[data-kind="notice"]', has_text="ended: cancelled").inner_text()
    events = [json.loads(line) for line in runs_in(env)[0].read_text().splitlines()]
    assert [e["source"] for e in events if e["kind"] == "cancel"] == ["browser"]
    assert events[-1]["kind"] == "end" and events[-1]["status"] == "cancelled"
    assert processes_in(workdir) == []  # claude ended too


def test_without_a_sign_in_the_page_says_how_to_get_one_and_a_used_link_signs_in_nothing(served, env, tmp_path):
    if missing():
        pytest.fail(missing(), pytrace=False)
    ui, link = served
    with chromium() as browser:
        page = browser.new_page()
        answer = page.goto(f"{ui}/")
        assert answer.status == 401 and page.locator('[data-signed-out="out"]').inner_text().startswith("Sign in")
        assert page.goto(f"{ui}/?token={TOKEN}").status == 401  # the token signs in nothing in an address
        assert page.goto(f"{ui}/api/runs").status == 401
        assert page.goto(link).status == 200 and page.url == f"{ui}/"
        other = browser.new_page()  # a copy of the link (the history's): spent
        assert other.goto(link).status == 410 and other.locator('[data-signed-out="used"]').is_visible()
        assert "run crew ui again" in other.inner_text("main").lower()
        assert other.goto(new_link(env, tmp_path)).status == 200 and other.url == f"{ui}/"  # a second crew ui's
    with chromium() as browser:  # a tab told to sign in, then signed in from another tab: its way back
        context = browser.new_context()
        asked = context.new_page()
        assert asked.goto(f"{ui}/usage").status == 401
        assert context.new_page().goto(new_link(env, tmp_path)).status == 200
        with asked.expect_navigation() as back:
            asked.click("[data-back]")
        assert back.value.status == 200 and asked.url == f"{ui}/usage"
        asked.locator('[data-empty="usage"], .chart svg').first.wait_for()  # the usage page itself


def signs_in(url: str, cookie: str | None = None) -> int:
    """The status an address answers a stranger with (a cookie, when given); fails on a new cookie."""
    address = urlsplit(url)
    connection = http.client.HTTPConnection("127.0.0.1", address.port, timeout=30)
    headers = {"Cookie": f"crew_ui={cookie}"} if cookie else {}
    connection.request("GET", address.path + (f"?{address.query}" if address.query else ""), headers=headers)
    answer = connection.getresponse()
    answer.read()
    connection.close()
    assert answer.getheader("Set-Cookie") is None, url
    return answer.status


def stolen_cookie(profile: Path) -> str:
    """crew ui's cookie as an agent reads it from Chromium's store on Linux (no keyring: the key is
    Chromium's own, "peanuts"; AES-128-CBC, decrypted here with openssl)."""
    store = sqlite3.connect(profile / "Default" / "Cookies")
    host, encrypted = store.execute("SELECT host_key, encrypted_value FROM cookies WHERE name = 'crew_ui'").fetchone()
    store.close()
    key = hashlib.pbkdf2_hmac("sha1", b"peanuts", b"saltysalt", 1, 16)
    plain = subprocess.run(
        ["openssl", "enc", "-d", "-aes-128-cbc", "-K", key.hex(), "-iv", (b" " * 16).hex()],
        input=encrypted[3:],
        capture_output=True,
        check=True,
    ).stdout
    return plain.removeprefix(hashlib.sha256(host.encode()).digest()).decode()


@pytest.mark.slow
def test_chromiums_history_and_cookie_store_hold_nothing_that_signs_in(tmp_path, monkeypatch):
    """Issue 39's attack: an agent read Chromium's History, signed in and approved its own write. A
    real Chromium profile on disk, signed in and used, then closed: every address its History
    holds signs in nothing, and the cookie its store holds (read and decrypted as an agent would)
    signs in nothing once the page has been closed for DETACHED seconds (here 2)."""
    if missing():
        pytest.fail(missing(), pytrace=False)
    from playwright.sync_api import sync_playwright

    from browser import ARGS, CHROMIUM
    from crewbridge.ui import signin
    from crewbridge.ui.server import Ui

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr(signin, "DETACHED", 2.0)
    ui = Ui(token=TOKEN)
    ui.start()
    profile = tmp_path / "profile"
    try:
        link = ui.sign_in_link()
        with sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, args=ARGS)
            page = context.new_page()
            page.goto(link)
            page.goto(f"{ui.url}/usage")
            page.locator("#main h1", has_text="Usage").wait_for()
            [cookie] = [c["value"] for c in context.cookies() if c["name"] == "crew_ui"]
            assert signs_in(f"{ui.url}/api/runs", cookie) == 200  # a copy works while the page is open (docs/ui.md)
            context.close()  # Chromium writes its History and cookies as it closes
        history = sqlite3.connect(profile / "Default" / "History")
        visited = [url for (url,) in history.execute("SELECT url FROM urls")]
        history.close()
        assert link in visited  # the attack's first step works: the link is there
        assert {url: signs_in(url) for url in visited} == {url: 410 if url == link else 401 for url in visited}
        assert stolen_cookie(profile) == cookie  # and so does its second: the cookie is in the store
        deadline = time.monotonic() + 30  # a bound: the page closed, its session ends DETACHED seconds later
        while signs_in(f"{ui.url}/api/runs", cookie) == 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert signs_in(f"{ui.url}/api/runs", cookie) == 401
    finally:
        ui.close()


class Elsewhere:
    """Another web site on this machine (another port: the same site to a cookie, another origin),
    whose page posts to crew ui as soon as it loads."""

    def __init__(self, target: str) -> None:
        page = (
            f'<form id="f" method="post" action="{target}"><input name="verdict" value="yes"></form>'
            "<script>document.getElementById('f').submit()</script>"
        ).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_post_from_another_site_is_refused(page, ui, env, workdir, mock_server):
    proc = write_run(env, workdir, mock_server)
    try:
        question = page.locator('[data-approval-id][data-state="open"]')
        question.wait_for()
        target = f"{ui}/api/questions/{question.get_attribute('data-approval-id')}"
        elsewhere = Elsewhere(target)
        try:
            with page.expect_response(target) as response:
                page.goto(elsewhere.url)
            assert response.value.status == 403
        finally:
            elsewhere.close()
        page.goto(f"{ui}/")
        page.locator('[data-approval-id][data-state="open"]').wait_for()  # still open: nothing was answered
        assert not (workdir / "a.txt").exists()
        page.locator('[data-approval-id][data-state="open"] [data-action="deny"]').click()
    finally:
        code, _, err = finish(proc)
    assert code == 0, err and not (workdir / "a.txt").exists()


def test_the_batches_page_shows_a_crew_batch_and_its_progress(page, ui, env, tmp_path, mock_server):
    repos = [make_repo(tmp_path / f"repo-{name}", {"notes.txt": f"repository {name}\n"}) for name in "ab"]
    write = tool_block("crew:write_file", path="todo.md", content="- ship it\n")
    mock_server.respond(lambda request: "Done." if '"success": true' in request.text() else write)
    done = run_crew(
        ["batch", "--id", "two", "@claude add todo.md", *map(str, repos)], env=env, cwd=tmp_path, timeout=300
    )
    assert done.returncode == 0, done.stderr
    page.goto(f"{ui}/batches")
    batch = page.locator('[data-batch-id="two"]')
    batch.wait_for()
    assert (
        batch.locator("[data-summary]").inner_text() == "2 done — 2 of 2 ended" and "add todo.md" in batch.inner_text()
    )
    assert batch.get_attribute("data-outcome") == "done"
    for repo in repos:
        row = batch.locator(f'[data-repo="{repo}"]')
        assert "done" in row.inner_text() and "crew/batch-two/claude" in row.inner_text()
        assert row.locator("[data-run-link]").get_attribute("href").startswith("/runs/")  # to its run


def test_the_clis_own_tools_show_with_who_decided_and_their_result(page, ui, env, workdir, mock_server):
    (workdir / "notes.txt").write_text("the code is 7-4-1\n")
    mock_server.script(
        tool_call("Bash", {"command": "echo made > made.txt"}),  # claude asks crew: crew's policy allows it
        tool_call("Read", {"file_path": "notes.txt"}),  # inside the project: claude reads without asking
        reply("Done."),
    )
    code, _, err = finish(start_crew(["execute", "@claude make made.txt"], env=env, cwd=workdir))
    assert code == 0, err
    page.goto(f"{ui}/runs/{runs_in(env)[0].stem}")
    bash, read = page.locator('[data-tool-call="Bash"]'), page.locator('[data-tool-call="Read"]')
    bash.locator('[data-result="ok"]').wait_for()
    assert bash.locator('[data-result="allowed"]').inner_text() == "allowed (policy)"
    read.locator('[data-result="ok"]').wait_for()
    assert read.locator('[data-result="allowed"]').inner_text() == "run by the CLI (crew was not asked)"
    assert "the code is 7-4-1" in read.inner_text()


PHONE = {"width": 390, "height": 760}


def round_tick(value: float) -> bool:
    """A step between ticks: 1, 2, 2.5 or 5 × 10^n."""
    if value == 0:
        return True
    mantissa = value / 10 ** math.floor(math.log10(value))
    return any(math.isclose(mantissa, m) for m in (1, 2, 2.5, 5, 10))


def test_on_a_phone_no_page_scrolls_sideways_and_a_failed_batch_says_so(served, env, tmp_path, workdir, mock_server):
    """At 390 px: the runs (with their folders), a run, a batch with a failed repository (said in
    text and in red, its rows linked to their runs), usage (round ticks, text at its size), and a
    page crew ui has not (with the way back)."""
    if missing():
        pytest.fail(missing(), pytrace=False)
    repos = [make_repo(tmp_path / f"repo-{name}", {"notes.txt": f"repository {name}\n"}) for name in "ab"]
    write = tool_block("crew:write_file", path="todo.md", content="- ship it\n")

    def answer(request):
        if "repo-b" in json.dumps(request.body):
            return error(400, "this repository's request is refused")
        return "Done." if '"success": true' in request.text() else write

    mock_server.respond(answer)
    done = run_crew(
        ["batch", "--id", "mixed", "@claude add todo.md", *map(str, repos)], env=env, cwd=tmp_path, timeout=300
    )
    assert done.returncode == 7, done.stdout + done.stderr  # a repository failed
    ui, link = served
    with chromium() as browser:
        page = browser.new_page(viewport=PHONE, device_scale_factor=2)
        page.set_default_timeout(WAIT)
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(link)

        def fits(path: str) -> None:
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"], f"{path} is {width} px wide on a {PHONE['width']} px phone"

        page.locator("[data-run-id]").nth(1).wait_for()
        fits("/")
        folders = page.locator("[data-run-id] .folder").all_inner_texts()
        assert sorted(set(folders)) == ["repo-a (batch mixed)", "repo-b (batch mixed)"]  # b: tried twice

        page.goto(f"{ui}/batches")
        batch = page.locator('[data-batch-id="mixed"]')
        batch.wait_for()
        fits("/batches")
        assert batch.get_attribute("data-outcome") == "failed"
        assert batch.locator("[data-summary]").inner_text() == "1 done, 1 failed — 2 of 2 ended"
        red = batch.locator('[data-part="failed"]').evaluate("node => getComputedStyle(node).backgroundColor")
        green = batch.locator('[data-part="done"]').evaluate("node => getComputedStyle(node).backgroundColor")
        assert red != green and batch.locator('[data-part="failed"]').bounding_box()["width"] > 0
        failed = batch.locator(f'[data-repo="{repos[1]}"]')
        assert "failed" in failed.inner_text()
        failed.locator("[data-run-link]").click()
        page.locator('[data-kind="error"]').wait_for()
        fits("/runs/…")

        page.goto(f"{ui}/usage")
        page.locator(".chart svg").wait_for()
        fits("/usage")
        ticks = [float(t) for t in page.locator("[data-tick]").evaluate_all("nodes => nodes.map(n => n.dataset.tick)")]
        steps = {round(b - a, 9) for a, b in itertools.pairwise(ticks)}
        assert ticks[0] == 0 and len(ticks) >= 3 and len(steps) == 1 and round_tick(steps.pop()), ticks
        size = page.locator("[data-tick]").first.evaluate("node => node.getBoundingClientRect().height")
        assert size >= 10  # drawn at its size: not a 900 px chart shrunk to fit
        page.goto(f"{ui}/nothing/here")
        fits("/nothing/here")
        page.get_by_text("Back to the runs").click()
        page.locator("[data-run-id]").first.wait_for()
        assert errors == [], errors


def test_a_first_runs_list_says_what_to_run(page, ui):
    empty = page.locator('[data-empty="none"]')
    empty.wait_for()
    assert 'crew query "@claude what does README.md say?"' in empty.inner_text()
    page.goto(f"{ui}/?status=failed")
    page.locator('[data-empty="filtered"]').wait_for()
    page.goto(f"{ui}/batches")
    assert "crew batch" in page.locator('[data-empty="batches"]').inner_text()


def test_a_runs_checks_show_on_its_page_each_with_its_output(page, ui, env, workdir, mock_server):
    make_repo(workdir, {"notes.txt": "deploy: Friday\n"})
    mock_server.script(
        tool_block("crew:write_file", path="notes.txt", content="deploy: Tusday\n"),
        "Set it.",
        tool_block("crew:write_file", path="notes.txt", content="deploy: Tuesday\n"),
        "Fixed.",
    )
    check = "grep -q Tuesday notes.txt || { echo 'still no Tuesday'; exit 1; }"
    code, _, err = finish(start_crew(["execute", "--check", check, "@claude set the day"], env=env, cwd=workdir))
    assert code == 0, err
    page.goto(f"{ui}/runs/{runs_in(env)[0].stem}")
    failed, passed = page.locator('[data-check="failed"]'), page.locator('[data-check="passed"]')
    passed.wait_for()
    assert "check 1/3 failed, exit status 1" in failed.inner_text() and "still no Tuesday" in failed.inner_text()
    assert "check 2/3 passed" in passed.inner_text() and check in passed.inner_text()


def test_the_batches_page_links_each_pull_request(page, ui, env, tmp_path, mock_server):
    from forgeserver import ForgeServer
    from gitrepo import git

    source = make_repo(tmp_path / "sources" / "repo-a", {"notes.txt": "repository a\n"})
    bare = tmp_path / "forge" / "o" / "repo-a.git"
    git(tmp_path, "clone", "-q", "--bare", str(source), str(bare))
    repo = tmp_path / "repo-a"
    git(tmp_path, "clone", "-q", str(bare), str(repo))
    git(repo, "remote", "set-url", "origin", "https://github.com/o/repo-a.git")  # the forge's, as configured
    rewrite = f"url.file://{tmp_path / 'forge'}/.insteadOf"
    git(tmp_path, "config", "--file", str(Path(env["HOME"]) / ".gitconfig"), rewrite, "https://github.com/")
    write = tool_block("crew:write_file", path="todo.md", content="- ship it\n")
    mock_server.respond(lambda request: "Done." if '"success": true' in request.text() else write)
    with ForgeServer({"o/repo-a": bare}, token="ui-forge-token") as forge:
        proposing = {**env, "GITHUB_API_URL": forge.url, "GH_TOKEN": "ui-forge-token"}
        done = run_crew(
            ["batch", "--id", "prs", "--pr", "@claude add todo.md", str(repo)], env=proposing, cwd=tmp_path, timeout=300
        )
    assert done.returncode == 0, done.stderr
    page.goto(f"{ui}/batches")
    link = page.locator('[data-batch-id="prs"] [data-pull] a')
    link.wait_for()
    assert link.get_attribute("href") == link.inner_text() == "https://github.com/o/repo-a/pull/1"
