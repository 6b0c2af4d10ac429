"""Figure 13: crew ui, in Debian's Chromium (tests/browser.py). From a tool call's start (its
`call` event, written down by the run's record as the caller emits it) to its row on an open
run page (a MutationObserver in the page notes when the row appears; both clocks are this
machine's); the runs page's load with 1,000 runs in the list, from navigation to every row shown,
the first load after `crew ui` starts (nothing read yet) and loads after it; a finished run's page
with 1,000 events in its record, from navigation to its last event shown; and, for the server
both faces share (crewbridge.protocol.webserver), a token holder's request to `crew mcp --http` while 32
strangers hold every slot of theirs, trickling header bytes (issue 31's slowloris)."""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.common import REPO, Row, Settings, kill_group, median, spread
from bench.mcp import INITIALIZE

CALL_TARGET = 250.0  # ms
LIST_TARGET = 500.0  # ms
PAGE_TARGET = 1000.0  # ms
EVENTS = 1000  # of the run whose page loads
SLOWLORIS_TARGET = 1000.0  # ms
RUNS = 1000
TOKEN = "bench-ui-token-0123456789abcdef"
SEEN = """() => { window.seen = {}; new MutationObserver(() => {
  for (const node of document.querySelectorAll('[data-tool-call^="bench_"]')) {
    const name = node.getAttribute('data-tool-call'); if (!(name in window.seen)) window.seen[name] = Date.now();
  } }).observe(document.body, {childList: true, subtree: true}); }"""
ALL_ROWS = "(runs) => document.querySelectorAll('[data-run-id]').length >= runs"
ENDED = """(calls) => document.querySelectorAll('[data-tool-call="read_file"]').length >= calls
  && [...document.querySelectorAll('[data-kind="notice"]')].some((n) => n.textContent.startsWith('ended:'))"""


def run(settings: Settings) -> list[Row]:
    from browser import chromium, missing  # tests/: the tests' browser

    if missing():
        raise SystemExit(f"bench ui: {missing()}")
    with tempfile.TemporaryDirectory(prefix="crew-bench-ui-") as scratch:
        state = Path(scratch, "state")
        env = {**os.environ, "XDG_STATE_HOME": str(state), "CREW_UI_TOKEN": TOKEN}
        kept = os.environ.get("XDG_STATE_HOME")
        os.environ["XDG_STATE_HOME"] = str(state)  # this process's transcripts attend the bench's crew ui only
        try:
            with chromium() as browser:
                rows = [_tool_call_to_row(browser, state, env, settings.repeats(40, 12))]
                rows.append(_run_page_load(browser, state, env, settings.repeats(9, 3)))
                rows += _list_load(browser, state, env, settings.repeats(9, 3))
        finally:
            if kept is None:
                os.environ.pop("XDG_STATE_HOME", None)
            else:
                os.environ["XDG_STATE_HOME"] = kept
    rows.append(_slowloris(settings.repeats(9, 3)))
    return rows


def _ui(env: dict[str, str]) -> tuple[subprocess.Popen[str], str, str]:
    """A crew ui: its process, its address and the sign-in link it printed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "crewbridge", "ui", "--listen", "127.0.0.1:0"],
        env=env,
        cwd=REPO,
        stderr=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    line = proc.stdout.readline() if proc.stdout else ""
    found = re.match(r"crew ui: open ((http://\S+)/sign-in/\S+)", line)
    if not found:
        _end(proc)
        raise SystemExit(f"bench ui: crew ui did not start: {line}")
    return proc, found.group(2), found.group(1)


def _cookie(link: str) -> str:
    """The session cookie a sign-in link gives, taken without a browser."""
    address = urlsplit(link)
    connection = http.client.HTTPConnection(address.hostname or "127.0.0.1", address.port, timeout=30)
    connection.request("GET", address.path)
    answer = connection.getresponse()
    answer.read()
    connection.close()
    return (answer.getheader("Set-Cookie") or "").partition(";")[0].partition("=")[2]


def _started(runs: Path, task: str) -> Any:
    """A run's record, written down in folder `runs`, its start emitted as crew's is."""
    from crewbridge.record.events import Start
    from crewbridge.record.stream import Record, now
    from crewbridge.record.transcript import Transcript

    record = Record()
    record.keep(Transcript.create(record.run, runs))
    fields = {"command": "query", "mode": "query", "agents": ["claude"], "task": task, "cwd": str(runs)}
    record.emit(Start(run=record.run, at=now(), pid=os.getpid(), **fields))
    return record


def _tool_call_to_row(browser: Any, state: Path, env: dict[str, str], calls: int) -> Row:
    from crewbridge.record.events import Call, Result

    proc, url, link = _ui(env)
    record = _started(state / "crewbridge" / "runs", "bench")
    try:
        page = browser.new_page()
        page.goto(link)
        page.goto(f"{url}/runs/{record.run}")
        page.wait_for_selector(".meta .status")
        page.evaluate(SEEN)
        took = []
        for number in range(calls):
            time.sleep(random.uniform(0.05, 0.15))  # calls land anywhere in the server's look at the file
            started = time.time() * 1000
            call, name = record.next_call(), f"crew:bench_{number}"
            record.emit(Call(agent="claude", call=call, name=name, input={"n": number}))
            page.wait_for_function("(n) => window.seen['bench_' + n] !== undefined", arg=number)
            took.append(page.evaluate("(n) => window.seen['bench_' + n]", number) - started)
            record.emit(Result(agent="claude", call=call, name=name, success=True))
        page.close()
    finally:
        record.end("done")
        _end(proc)
    return Row(
        "13 ui",
        "a tool call's start (its transcript event) → its row on an open run page",
        median(took),
        "ms",
        target=CALL_TARGET,
        spread=spread(took, " ms"),
    )


def _run_page_load(browser: Any, state: Path, env: dict[str, str], loads: int) -> Row:
    """A finished run of EVENTS events (turns, the model's text, tool calls with their decisions
    and results, usage) whose page is loaded: navigation → its end shown (each load a new page)."""
    from crewbridge.record import events as ev
    from crewbridge.ui.server import COOKIE

    record = _started(state / "crewbridge" / "runs", "a long run")
    calls = (EVENTS - 3) // 5  # start, answer, end, and five events a round
    for turn in range(calls):
        call = record.next_call()
        record.emit(ev.Text(agent="claude", text=f"Reading part {turn}.\n"))
        record.emit(ev.Call(agent="claude", call=call, name="crew:read_file", input={"path": f"part{turn}.txt"}))
        record.emit(ev.Decision(agent="claude", call=call, decision="allowed"))
        data = {"path": f"part{turn}.txt", "content": "line\n" * 20}
        record.emit(ev.Result(agent="claude", call=call, name="crew:read_file", success=True, data=data))
        record.emit(ev.Usage(agent="claude", turn=turn + 1, input_tokens=1200, output_tokens=40, cost_usd=0.0003))
    record.emit(ev.Answer(agent="claude", text="Read every part."))
    record.end("done")
    took = []
    proc, url, link = _ui(env)
    try:
        for _ in range(loads):
            page = browser.new_page()
            page.context.add_cookies([{"name": COOKIE, "value": _cookie(link), "url": url}])
            page.goto(f"{url}/runs/{record.run}")
            page.wait_for_function(ENDED, arg=calls, polling="raf")
            took.append(page.evaluate("() => performance.now()"))
            page.close()
            url, link = _again(env)
    finally:
        _end(proc)
    return Row(
        "13 ui",
        f"a run's page, {EVENTS:,} events in its record: navigation → its end shown",
        median(took),
        "ms",
        target=PAGE_TARGET,
        spread=spread(took, " ms"),
    )


def _again(env: dict[str, str]) -> tuple[str, str]:
    """The address of the crew ui that serves, and a new sign-in link to it (a link works once)."""
    done = subprocess.run(
        [sys.executable, "-m", "crewbridge", "ui"], env=env, cwd=REPO, capture_output=True, text=True, timeout=60
    )
    found = re.match(r"crew ui: open ((http://\S+)/sign-in/\S+)", done.stdout)
    if not found:
        raise SystemExit(f"bench ui: no new sign-in link: {done.stdout}{done.stderr}")
    return found.group(2), found.group(1)


def _list_load(browser: Any, state: Path, env: dict[str, str], loads: int) -> list[Row]:
    from crewbridge.record import events as ev
    from crewbridge.ui.server import COOKIE

    runs = state / "crewbridge" / "runs"
    for number in range(RUNS):  # as crew writes them: a turn, a tool call, usage, the answer
        record = _started(runs, f"task number {number}")
        record.emit(ev.Turn(agent="claude", turn=1, prompt="[crew tools] " + "x" * 2000))
        record.emit(ev.Call(agent="claude", call="c1", name="crew:read_file", input={"path": "notes.txt"}))
        record.emit(ev.Result(agent="claude", call="c1", name="crew:read_file", success=True, data="hi"))
        record.emit(ev.Usage(agent="claude", turn=1, input_tokens=11, output_tokens=7, cost_usd=0.0002))
        record.emit(ev.Answer(agent="claude", text="done"))
        record.end("done")
    first, again = [], []
    for _ in range(loads):
        proc, url, link = _ui(env)  # a fresh crew ui: nothing of the runs read yet
        try:
            page = browser.new_page()  # with the cookie a sign-in gives: the list is its first request
            page.context.add_cookies([{"name": COOKIE, "value": _cookie(link), "url": url}])
            for into in (first, again, again):
                page.goto(f"{url}/")
                page.wait_for_function(ALL_ROWS, arg=RUNS, polling="raf")
                into.append(page.evaluate("() => performance.now()"))  # since the navigation began
            page.close()
        finally:
            _end(proc)
    return [
        Row(
            "13 ui",
            f"runs page with {RUNS:,} runs: navigation → every row shown, crew ui's first load",
            median(first),
            "ms",
            target=LIST_TARGET,
            spread=spread(first, " ms"),
        ),
        Row(
            "13 ui",
            f"runs page with {RUNS:,} runs: navigation → every row shown, later loads",
            median(again),
            "ms",
            target=LIST_TARGET,
            spread=spread(again, " ms"),
        ),
    ]


def _slowloris(samples: int) -> Row:
    from crewbridge.protocol.webserver import MAX_PENDING

    env = {**os.environ, "CREW_MCP_TOKEN": TOKEN}
    with tempfile.TemporaryDirectory(prefix="crew-bench-web-") as scratch:
        env["XDG_STATE_HOME"] = scratch
        proc = subprocess.Popen(
            [sys.executable, "-m", "crewbridge", "mcp", "--http", "127.0.0.1:0"],
            env=env,
            cwd=scratch,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            line = proc.stderr.readline() if proc.stderr else ""
            port = int(re.search(r"127\.0\.0\.1:(\d+)/mcp", line).group(1))  # type: ignore[union-attr]
            took = []
            strangers: list[socket.socket] = []
            for _ in range(samples):
                while len(strangers) < MAX_PENDING:  # refill: each token holder drops the oldest
                    stranger = socket.create_connection(("127.0.0.1", port), timeout=30)
                    stranger.sendall(b"P")
                    strangers.append(stranger)
                started = time.perf_counter()
                status = _initialize(port)
                took.append((time.perf_counter() - started) * 1000)
                if status != 200:
                    raise SystemExit(f"bench ui: a token holder got {status} under the slowloris")
                strangers.pop(0).close()
            for stranger in strangers:
                stranger.close()
        finally:
            _end(proc)
    return Row(
        "13 ui",
        f"crew mcp --http: a token holder's initialize while {MAX_PENDING} strangers trickle header bytes",
        median(took),
        "ms",
        target=SLOWLORIS_TARGET,
        spread=spread(took, " ms"),
    )


def _initialize(port: int) -> int:
    body = json.dumps(INITIALIZE)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request(
        "POST",
        "/mcp",
        body,
        {
            "Authorization": f"Bearer {TOKEN}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
    )
    status = connection.getresponse().status
    connection.close()
    return status


def _end(proc: subprocess.Popen[str]) -> None:
    kill_group(proc.pid)
    proc.wait()
