"""A long-lived JSON-lines CLI driven through Child, and how a provider picks its conversation."""
from __future__ import annotations

import os
import sys
import time

import pytest

from crewbridge import providers
from crewbridge.errors import CLINotFound, CrewTimeout, ProviderError
from crewbridge.events import Notice, Text
from crewbridge.providers.base import JsonLineDecoder, Turn
from crewbridge.providers.live_claude import ClaudeLiveConversation
from crewbridge.providers.live_codex import CodexLiveConversation
from crewbridge.providers.live_process import LiveProcess

# Answers each JSON line on stdin with {"echo": …}; "slow" lines are answered after a pause.
ECHO = """
import json, sys, time
for line in sys.stdin:
    obj = json.loads(line)
    if obj.get("slow"):
        time.sleep(obj["slow"])
    print(json.dumps({"echo": obj}), flush=True)
"""


def live(tmp_path, script):
    return LiveProcess([sys.executable, "-c", script], env=dict(os.environ), cwd=tmp_path)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is as good as gone
        return stat.read().split(")")[1].split()[0] == "Z"


def test_a_line_sent_is_answered_on_the_same_running_process(tmp_path):
    process = live(tmp_path, ECHO)
    try:
        for n in range(3):
            process.write({"n": n, "text": "héllo\nworld"})
            assert process.read(time.monotonic() + 10) == {"echo": {"n": n, "text": "héllo\nworld"}}
    finally:
        process.close()


def test_lines_that_arrive_together_are_read_one_by_one(tmp_path):
    process = live(tmp_path, "import json\nfor n in range(500): print(json.dumps({'n': n}))\n"
                             "import time; time.sleep(30)")
    try:
        assert [process.read(time.monotonic() + 10)["n"] for _ in range(500)] == list(range(500))
    finally:
        process.close()


def test_read_until_sets_aside_what_comes_before(tmp_path):
    process = live(tmp_path, ECHO)
    try:
        for n in range(3):
            process.write({"n": n})
        assert process.read_until(lambda obj: obj["echo"]["n"] == 2, time.monotonic() + 10) == {"echo": {"n": 2}}
    finally:
        process.close()


def test_a_line_that_is_not_a_json_object_is_a_notice(tmp_path):
    process = live(tmp_path, "print('Warning: colours'); print('[1, 2]'); print('{}'); import time; time.sleep(30)")
    try:
        deadline = time.monotonic() + 10
        first, second = process.read(deadline), process.read(deadline)
        assert isinstance(first, Notice) and first.kind == "corrupt" and "Warning: colours" in first.detail
        assert isinstance(second, Notice) and "not a JSON object" in second.detail
        assert process.read(deadline) == {}
    finally:
        process.close()


def test_a_deadline_ends_the_whole_process_group(tmp_path):
    script = ("import json, subprocess, sys, time\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              "print(json.dumps({'pid': child.pid}), flush=True)\n"
              "time.sleep(60)")
    process = live(tmp_path, script)
    grandchild = process.read(time.monotonic() + 10)["pid"]
    with pytest.raises(CrewTimeout, match="gave no complete reply in time"):
        process.read(time.monotonic() + 0.3)
    assert process.child.proc.poll() is not None
    deadline = time.monotonic() + 5
    while not gone(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(grandchild)


def test_a_cli_that_exits_is_a_provider_error_with_its_status_and_last_stderr_line(tmp_path):
    process = live(tmp_path, "import sys; sys.stderr.write('starting\\nbad key\\n'); sys.exit(3)")
    with pytest.raises(ProviderError, match="exited with status 3: bad key"):
        process.read(time.monotonic() + 10)
    process.close()


def test_close_ends_a_running_process(tmp_path):
    process = live(tmp_path, ECHO)
    process.close()
    assert gone(process.pid)
    process.close()  # twice is harmless


def test_decode_object_turns_an_object_into_events_and_a_bad_shape_into_a_notice():
    class Decoder(JsonLineDecoder):
        def event(self, obj):
            return [Text(obj["text"])]

    assert Decoder().decode_object({"text": "hi"}) == [Text("hi")]
    [notice] = Decoder().decode_object({"other": 1})
    assert notice.kind == "corrupt" and "unexpected event shape" in notice.detail
    corrupt = Notice("corrupt", "x")
    assert Decoder().decode_object(corrupt) == [corrupt]


@pytest.mark.parametrize("live_class, provider", [(ClaudeLiveConversation, "claude"),
                                                  (CodexLiveConversation, "codex")])
def test_a_cli_that_is_not_installed_says_how_to_install_it(live_class, provider, tmp_path):
    conversation = live_class(providers.load(provider), Turn(prompt=""), cwd=tmp_path, env={"PATH": str(tmp_path)})
    with pytest.raises(CLINotFound, match=f"'{provider}' not found on PATH; install it with: npm install -g"):
        list(conversation.send("hi", None))
