"""crewbridge.mcp.stdio: `crew mcp` on stdio, a JSON-RPC message a line, fed raw lines a client
should never send; every request read gets its answer, also when stdin ends while it runs; calls
run on a bounded number of threads; stopping ends everything it started."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from crewbridge.mcp.stdio import BACKLOG, MAX_LINE, WORKERS
from crewbridge.protocol.mcp import (
    BUSY,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NOT_INITIALIZED,
    PARSE_ERROR,
)
from crewcli import CREW, end_group, start_crew
from mcpfakes import env_for, gone, mcp_project, slow_pid

INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}
GATED = "while [ ! -e gate ]; do sleep 0.05; done; echo open"  # a command that ends once ./gate exists


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return mcp_project(tmp_path)


def call(rid, name, **arguments):
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def exchange(project: Path, tmp_path: Path, lines: list[str | bytes], *args: str) -> list[dict]:
    """Feed `lines` to `crew mcp ARGS` and close stdin: every answer it wrote, in order."""
    data = b"".join((line if isinstance(line, bytes) else line.encode()) + b"\n" for line in lines)
    done = subprocess.run(
        [*CREW, "mcp", *args], input=data, capture_output=True, env=env_for(tmp_path), cwd=project, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def code(answer):
    return answer.get("error", {}).get("code")


@pytest.mark.slow
def test_what_is_not_a_request_gets_an_error_answer_and_the_server_lives_on(project, tmp_path):
    lines = [
        json.dumps(call(1, "read_file", path="notes.txt")),  # before initialize
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}),  # ping is fine before it
        json.dumps(INITIALIZE),
        "not json",
        "[" * 1000 + "]" * 1000,  # 2 KB nested 1,000 deep
        json.dumps([{"jsonrpc": "2.0", "id": 3, "method": "ping"}]),  # a batch
        "[]",
        json.dumps({"jsonrpc": "2.0", "id": 4}),
        json.dumps({"jsonrpc": "2.0", "id": 99, "result": {}}),  # a client's response: no answer
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),  # no answer
        json.dumps({"jsonrpc": "2.0", "id": 5, "method": "nope"}),
        json.dumps({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"arguments": {}}}),
        json.dumps({"jsonrpc": "2.0", "id": 7, "method": "ping"}),
    ]
    answers = exchange(project, tmp_path, lines)
    by_id = {a["id"]: code(a) for a in answers if a["id"] is not None}  # calls run on threads: any order
    assert by_id == {
        1: NOT_INITIALIZED,
        2: None,
        0: None,
        4: INVALID_REQUEST,
        5: METHOD_NOT_FOUND,
        6: INVALID_PARAMS,
        7: None,
    }
    unnamed = [a["error"] for a in answers if a["id"] is None]
    assert [error["code"] for error in unnamed] == [PARSE_ERROR, PARSE_ERROR, INVALID_REQUEST, INVALID_REQUEST]
    assert "send one JSON-RPC message a line" in unnamed[0]["message"]
    assert "nested more than 100 levels" in unnamed[1]["message"]
    assert "batch" in unnamed[2]["message"] and "batch" in unnamed[3]["message"]
    assert len(answers) == 11  # the response and the notification got none


@pytest.mark.slow
def test_a_lone_surrogate_or_bytes_that_are_not_utf8_never_break_an_answer(project, tmp_path):
    lines = [
        json.dumps(INITIALIZE),
        json.dumps(call(1, "\udc80tool")),  # answers that echo a lone surrogate
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "\ud800"}),
        b'{"jsonrpc": "2.0", "id": 3, "method": "ping", "x": "\xff\xfe"}',
    ]
    answers = {answer["id"]: answer for answer in exchange(project, tmp_path, lines)}
    assert set(answers) == {0, 1, 2, None}
    assert code(answers[1]) == INVALID_PARAMS and "\udc80tool" in answers[1]["error"]["message"]
    assert code(answers[2]) == METHOD_NOT_FOUND and "\ud800" in answers[2]["error"]["message"]
    assert code(answers[None]) == PARSE_ERROR


@pytest.mark.slow
def test_a_line_past_the_bound_is_skipped_unread_with_an_error(project, tmp_path):
    huge = '{"jsonrpc": "2.0", "id": 1, "method": "ping", "pad": "' + "x" * MAX_LINE + '"}'
    answers = exchange(
        project, tmp_path, [json.dumps(INITIALIZE), huge, json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"})]
    )
    assert [a["id"] for a in answers] == [0, None, 2]
    assert code(answers[1]) == INVALID_REQUEST and "longer than" in answers[1]["error"]["message"]


@pytest.mark.slow
def test_a_call_running_when_stdin_ends_is_still_answered(project, tmp_path):
    proc = start_crew(["mcp", "--execute"], env=env_for(tmp_path), cwd=project, stdin=subprocess.PIPE)
    try:
        proc.stdin.write(json.dumps(INITIALIZE) + "\n" + json.dumps(call(1, "run_command", command=GATED)) + "\n")
        proc.stdin.close()  # the call cannot end before ./gate exists
        assert json.loads(proc.stdout.readline())["id"] == 0
        (project / "gate").touch()
        answer = json.loads(proc.stdout.readline())
        assert proc.wait(60) == 0
    finally:
        end_group(proc)
    assert answer["id"] == 1 and json.loads(answer["result"]["content"][0]["text"])["output"] == "open\n"


@pytest.mark.slow
def test_a_call_still_running_past_the_timeout_after_stdin_ends_is_ended(project, tmp_path):
    # the command writes its pid outside the project, for the test to find: no sandbox here
    proc = start_crew(
        ["mcp", "--execute", "--timeout", "1", "--sandbox", "off"],
        env=env_for(tmp_path),
        cwd=project,
        stdin=subprocess.PIPE,
    )
    try:
        command = f"echo $$ > {tmp_path / 'pids' / 'slow'}; exec sleep 600"
        proc.stdin.write(json.dumps(INITIALIZE) + "\n" + json.dumps(call(1, "run_command", command=command)) + "\n")
        proc.stdin.flush()
        pid = slow_pid(tmp_path)
        proc.stdin.close()
        assert proc.wait(60) == 0
        assert gone(pid)
    finally:
        end_group(proc)


@pytest.mark.slow
def test_calls_run_on_a_bounded_number_of_threads_and_the_rest_wait_or_are_told_to(project, tmp_path):
    total = WORKERS + BACKLOG + 20
    proc = start_crew(["mcp", "--execute"], env=env_for(tmp_path), cwd=project, stdin=subprocess.PIPE)
    try:
        proc.stdin.write(json.dumps(INITIALIZE) + "\n")
        proc.stdin.write(
            "".join(json.dumps(call(rid, "run_command", command=GATED)) + "\n" for rid in range(1, total + 1))
        )
        proc.stdin.flush()
        answers = [json.loads(proc.stdout.readline()) for _ in range(21)]  # initialize, and 20 told to wait
        threads = int(
            next(
                line.split()[1]
                for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
                if line.startswith("Threads:")
            )
        )
        (project / "gate").touch()
        proc.stdin.close()
        answers += [json.loads(line) for line in proc.stdout]
        assert proc.wait(60) == 0
    finally:
        end_group(proc)
    # per running call a worker and its command's helpers (output reader, exit waiter), and a few more:
    # far from one per call (284)
    assert threads <= 4 * WORKERS
    assert sorted(a["id"] for a in answers) == list(range(total + 1))  # each answered, once
    busy = [a for a in answers[1:] if code(a) == BUSY]
    assert answers[1:21] == busy[:20] and 20 <= len(busy) <= 20 + WORKERS
    assert all(
        json.loads(a["result"]["content"][0]["text"])["output"] == "open\n"
        for a in answers
        if "result" in a and a["id"]
    )


@pytest.mark.parametrize("how", ["stdin closes", "SIGTERM"])
@pytest.mark.slow
def test_the_server_ends_every_child_when_it_stops(how, project, tmp_path):
    proc = start_crew(["mcp"], env=env_for(tmp_path), cwd=project, stdin=subprocess.PIPE)
    try:
        ask = call(1, "ask", task="@slow hello", background=True)
        proc.stdin.write(json.dumps(INITIALIZE) + "\n" + json.dumps(ask) + "\n")
        proc.stdin.flush()
        pid = slow_pid(tmp_path)
        if how == "SIGTERM":
            proc.send_signal(signal.SIGTERM)
        else:
            proc.stdin.close()
        proc.wait(timeout=30)
        assert proc.returncode == (143 if how == "SIGTERM" else 0), proc.stderr.read()
        assert gone(pid)
    finally:
        end_group(proc)
