"""`crew ui` in a real browser (Debian's Chromium, driven by Playwright) against runs of the real
claude CLI on the mock model server: the list shows a finished run, a live run's text appears while
it streams, an approval answered on the page decides the write, a cancel ends the run as Ctrl-C
does, and the page refuses what a stranger or another site sends."""

from __future__ import annotations

import http.server
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from browser import chromium, missing
from crewcli import end_group, processes_in, run_crew, start_crew, tool_block, write_config
from gitrepo import make_repo
from mockserver import reply, tool_call

pytestmark = pytest.mark.e2e
TOKEN = "ui-e2e-token-0123456789abc"
WAIT = 120_000  # ms: under load the CLIs take seconds to start


@pytest.fixture
def env(cli_env):
    """The environment of claude's runs and of crew ui alike (the same state folder)."""
    return {**cli_env("claude"), "CREW_UI_TOKEN": TOKEN}


@pytest.fixture
def ui(env, tmp_path):
    """`crew ui` serving for the test's user: its address (without the token)."""
    proc = start_crew(["ui", "--listen", "127.0.0.1:0"], env=env, cwd=tmp_path)
    line = proc.stderr.readline()
    found = re.match(r"crew ui: open (http://127\.0\.0\.1:\d+)/\?token=", line)
    assert found, line
    yield found.group(1)
    end_group(proc)


@pytest.fixture
def page(ui):
    """A browser page signed in to the UI (its cookie set by the token's address)."""
    if missing():
        pytest.fail(missing(), pytrace=False)
    with chromium() as browser:
        page = browser.new_page()
        page.set_default_timeout(WAIT)
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"{ui}/?token={TOKEN}")
        assert page.url == f"{ui}/"  # the token left the address
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
    assert "what is here?" in row.inner_text() and "@claude" in row.inner_text()
    row.click()
    page.locator('[data-tool-call="list_files"] [data-result="ok"]').wait_for()
    assert page.locator('[data-kind="answer"]').inner_text().endswith("One file: notes.txt.")


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
    events = [json.loads(line) for line in runs_in(env)[0].read_text().splitlines()]
    assert [e["source"] for e in events if e["kind"] == "cancel"] == ["browser"]
    assert events[-1]["kind"] == "end" and events[-1]["status"] == "cancelled"
    assert processes_in(workdir) == []  # claude ended too


def test_without_the_token_the_page_answers_401(ui):
    if missing():
        pytest.fail(missing(), pytrace=False)
    with chromium() as browser:
        page = browser.new_page()
        assert page.goto(f"{ui}/").status == 401
        assert page.goto(f"{ui}/?token=not-{TOKEN}").status == 401
        assert page.goto(f"{ui}/api/runs").status == 401


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
    assert "2/2 finished" in batch.inner_text() and "add todo.md" in batch.inner_text()
    for repo in repos:
        row = batch.locator(f'[data-repo="{repo}"]')
        assert "done" in row.inner_text() and "crew/batch-two/claude" in row.inner_text()


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
