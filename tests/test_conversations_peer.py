"""The live peer (crewbridge/conversations/peer.py, over crewbridge/conversations/transport.py): a
long-lived JSON-lines CLI driven through Child, and the one read loop every live conversation
shares — requests matched to answers by id, the CLI's requests answered by their routes (params
typed at the boundary, a handler's bug raised as one), turns read to their end, the run's deadline
on every exchange and every wait across threads, and messages from other threads answered on the
reading thread — against a small fake CLI that speaks JSON-RPC and logs every line crew sends it."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import TypedDict

import pytest
from crewbridge.providers.base import JsonLineDecoder, Provider, Turn

from crewbridge import providers
from crewbridge.base.decoded import Done, Failure, Notice, OwnCall, Text, Usage
from crewbridge.conversations import transport
from crewbridge.conversations.claude import ClaudeLiveConversation
from crewbridge.conversations.codex import CodexLiveConversation
from crewbridge.conversations.peer import Peer
from crewbridge.conversations.transport import LiveProcess
from crewbridge.errors import CLINotFound, CrewTimeout, MaxTurnsReached, ProviderError
from crewbridge.protocol.jsonrpc import METHOD_NOT_FOUND, Route, RpcError, notification

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
            process.write({"n": n, "text": "héllo\nworld"}, None)
            assert process.read(time.monotonic() + 10) == {"echo": {"n": n, "text": "héllo\nworld"}}
    finally:
        process.close()


def test_lines_that_arrive_together_are_read_one_by_one(tmp_path):
    process = live(
        tmp_path, "import json\nfor n in range(500): print(json.dumps({'n': n}))\nimport time; time.sleep(30)"
    )
    try:
        assert [process.read(time.monotonic() + 10)["n"] for _ in range(500)] == list(range(500))
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


@pytest.mark.slow
def test_a_deadline_ends_the_whole_process_group(tmp_path):
    script = (
        "import json, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(json.dumps({'pid': child.pid}), flush=True)\n"
        "time.sleep(60)"
    )
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


def test_end_lets_the_cli_end_by_itself_first(tmp_path):
    # as claude does: stdin's end ends it, after a shutdown that takes a while (its telemetry's
    # flush: up to 2 s); a SIGTERM half a second in, as close() sent before, cut that short
    script = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "sys.stdin.read()\n"
        "time.sleep(1.0)\n"
        f"open({str(tmp_path / 'flushed')!r}, 'w').close()\n"
    )
    process = live(tmp_path, script)
    process.end()
    assert (tmp_path / "flushed").exists() and gone(process.pid)


def test_a_cli_that_goes_on_after_its_stdin_ends_is_ended_at_end_wait(tmp_path, monkeypatch):
    monkeypatch.setattr(transport, "END_WAIT", 0.3)
    process = live(tmp_path, "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)")
    began = time.monotonic()
    process.end()
    assert gone(process.pid) and time.monotonic() - began < 2.5  # 0.3 s, then SIGTERM's 0.5 s; not the 3 s default


def test_decode_object_turns_an_object_into_events_and_a_bad_shape_into_a_notice():
    class Decoder(JsonLineDecoder):
        def event(self, obj):
            return [Text(obj["text"])]

    assert Decoder().decode_object({"text": "hi"}) == [Text("hi")]
    [notice] = Decoder().decode_object({"other": 1})
    assert notice.kind == "corrupt" and "unexpected event shape" in notice.detail
    corrupt = Notice("corrupt", "x")
    assert Decoder().decode_object(corrupt) == [corrupt]


@pytest.mark.parametrize("live_class, provider", [(ClaudeLiveConversation, "claude"), (CodexLiveConversation, "codex")])
def test_a_cli_that_is_not_installed_says_how_to_install_it(live_class, provider, tmp_path):
    conversation = live_class(providers.load(provider), Turn(prompt=""), cwd=tmp_path, env={"PATH": str(tmp_path)})
    with pytest.raises(CLINotFound, match=f"'{provider}' not found on PATH; install it with: npm install -g"):
        list(conversation.send("hi", None))


# A JSON-RPC CLI that logs what it reads (argv[1]). Its requests are answered {"method": …}, but
# "silent" (never answered) and "refuse" (an error). A "prompt" request is a turn: its params.steps
# are done in order — say a text; use one of its own tools; ask crew a request (id, method, params)
# and say its answer; wait for a notification from crew; exit with a line on stderr — and the turn
# ends with a "done" notification carrying its usage.
FAKE = r"""
import json, sys
log = open(sys.argv[1], "a")
def out(obj):
    print(json.dumps(obj), flush=True)
def read():
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    log.write(line); log.flush()
    return json.loads(line)
while True:
    obj = read()
    method, rid, params = obj.get("method"), obj.get("id"), obj.get("params") or {}
    if rid is None or method is None:
        continue
    if method == "prompt":
        for step in params["steps"]:
            if "say" in step:
                out({"method": "say", "params": {"text": step["say"]}})
            elif "use" in step:
                out({"method": "used", "params": {"ref": step["use"]}})
            elif "ask" in step:
                out({"jsonrpc": "2.0", "id": step["ask"], "method": step["method"], "params": step.get("params", {})})
                got = read()
                while got.get("id") != step["ask"] or "method" in got:
                    got = read()
                out({"method": "say", "params": {"text": json.dumps(got)}})
            elif "wait" in step:
                while read().get("method") != step["wait"]:
                    pass
            elif "exit" in step:
                sys.stderr.write(step["exit"] + "\n")
                sys.exit(7)
        out({"method": "done", "params": {"usage": [3, 4]}})
    elif method == "refuse":
        out({"jsonrpc": "2.0", "id": rid, "error": {"code": 1, "message": "not now"}})
    elif method != "silent":
        out({"jsonrpc": "2.0", "id": rid, "result": {"method": method}})
"""


class Said(JsonLineDecoder):
    def event(self, obj):
        if obj["method"] == "say":
            return [Text(obj["params"]["text"])]
        if obj["method"] == "done":
            return [Usage(*obj["params"]["usage"]), Done()]
        if obj["method"] == "used":
            return [OwnCall(obj["params"]["ref"], "Bash", {"command": "true"})]
        return [Notice("unknown", obj["method"])]


class FakeProvider(Provider):
    name = "fake"


class FakePeer(Peer):
    """A turn's message is the JSON list of its steps."""

    decoder = Said

    def __init__(self, tmp_path, handlers=(), answer=None):
        self.handlers = {
            method: handler if isinstance(handler, Route) else Route(handler)
            for method, handler in dict(handlers).items()
        }
        super().__init__(
            FakeProvider(), Turn(prompt=""), [sys.executable, "-c", FAKE, str(tmp_path / "log")], cwd=tmp_path
        )
        self.answer_elsewhere = answer  # answers MCP messages from other threads (as gemini's server does)
        self.ask = None

    def routes(self):
        return self.handlers

    def set_up(self):
        if self.answer_elsewhere is not None:
            self.ask = self.on_loop(self.answer_elsewhere)

    def begin(self, message):
        self.request("prompt", {"steps": json.loads(message)})
        return []

    def interrupt(self):
        self.write(notification("cancel"))

    def sent(self):
        return [json.loads(line) for line in (self.cwd / "log").read_text().splitlines()]


@pytest.fixture
def peer(tmp_path):
    made = []

    def make(**kwargs):
        made.append(FakePeer(tmp_path, **kwargs))
        return made[-1]

    yield make
    for one in made:
        one.close()


class Channel:
    """A loop's channel (crewbridge.toolkit.native.Channel): the handlers only pass it on here."""


class Owned(Channel):
    """A channel that records what the CLI reported of its own tools."""

    def __init__(self):
        self.owned = []

    def own(self, event):
        self.owned.append(event)


def turn(peer, *steps, deadline=None):
    return list(peer.send(json.dumps(steps), deadline))


def said(events):
    return "".join(event.text for event in events if isinstance(event, Text))


def test_a_turn_streams_its_events_up_to_done(peer):
    conversation = peer()
    assert turn(conversation, {"say": "Hello "}, {"say": "there."}) == [
        Text("Hello "),
        Text("there."),
        Usage(3, 4),
        Done(),
    ]
    assert said(turn(conversation, {"say": "Again."})) == "Again."  # the same process
    assert [line["method"] for line in conversation.sent()] == ["prompt", "prompt"]


def test_a_cli_whose_replies_were_read_ends_by_itself_and_one_in_the_midst_of_a_reply_at_once(peer):
    finished = peer()
    turn(finished, {"say": "done"})
    finished.close()
    assert finished.process.child.proc.returncode == 0  # its stdin ended: it exited as it does
    cut = peer()
    events = cut.send(json.dumps([{"say": "a"}, {"wait": "never"}]), None)
    assert next(events) == Text("a")
    began = time.monotonic()
    cut.close()  # a cancel: the reply is not waited for
    assert cut.process.child.proc.returncode == -signal.SIGTERM and time.monotonic() - began < 2


def test_a_request_from_the_cli_is_answered_by_its_handler_on_the_reading_thread(peer):
    seen = []

    def look(request, channel):
        seen.append((request.params, channel, threading.current_thread()))
        return {"looked": True}

    conversation, channel = peer(handlers={"look": look}), Channel()
    conversation.serve(channel)
    events = turn(conversation, {"ask": 5, "method": "look", "params": {"at": "a"}}, {"say": "On."})
    assert json.loads(said(events)[:-3]) == {"jsonrpc": "2.0", "id": 5, "result": {"looked": True}}
    assert seen == [({"at": "a"}, channel, threading.current_thread())]


def test_a_request_without_a_handler_or_a_channel_is_refused_and_the_turn_goes_on(peer):
    handled = peer(handlers={"look": lambda request, channel: {}})
    handled.serve(Channel())
    events = turn(handled, {"ask": 1, "method": "nope"}, {"say": "On."})
    assert json.loads(said(events)[:-3])["error"] == {"code": -32601, "message": "crew does not handle nope"}
    unserved = peer(handlers={"look": lambda request, channel: {}})  # never given a channel: nothing to ask
    events = turn(unserved, {"ask": 1, "method": "look"})
    assert json.loads(said(events))["error"]["message"] == "crew does not handle look"


def test_a_handler_that_refuses_says_why(peer):
    def look(request, channel):
        raise RpcError(METHOD_NOT_FOUND, "crew looks at nothing here")

    conversation = peer(handlers={"look": look})
    conversation.serve(Channel())
    assert json.loads(said(turn(conversation, {"ask": 1, "method": "look"})))["error"] == {
        "code": -32601,
        "message": "crew looks at nothing here",
    }


def test_an_error_that_ends_the_run_is_the_clis_answer_and_is_raised_at_once(peer):
    def look(request, channel):
        raise MaxTurnsReached("too many calls")

    conversation = peer(handlers={"look": look})
    conversation.serve(Channel())
    with pytest.raises(MaxTurnsReached, match="too many calls"):
        turn(conversation, {"ask": 1, "method": "look"}, {"say": "never read"})
    answer = conversation.process.read(time.monotonic() + 10)["params"]["text"]  # what the CLI was told
    assert json.loads(answer) == {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "too many calls"}}


class Look(TypedDict):
    path: str


class Stat(TypedDict):
    size: int


def test_a_request_or_an_answer_of_another_shape_is_refused_or_misread_at_the_boundary_and_the_turn_goes_on(peer):
    looked = []
    conversation = peer(handlers={"look": Route(lambda request, channel: looked.append(request.params) or {}, Look)})
    conversation.serve(Channel())
    conversation.start()
    answers = []
    conversation.request("stat", {}, lambda reply: answers.append(reply) or [], Stat)  # the answer has no size
    events = turn(conversation, {"ask": 1, "method": "look", "params": {"path": 7}}, {"say": "On."})
    assert looked == []  # its handler never sees what it cannot read
    error = json.loads(said(events)[: -len("On.")])["error"]
    assert error == {
        "code": -32602,
        "message": "crew could not read the look request (Expected `str`, got `int` - at `$.path`)",
    }
    [reply] = answers
    assert reply.misread and reply.result is None
    assert reply.error["message"] == "crew could not read the answer to stat (Object missing required field `size`)"
    with pytest.raises(ProviderError, match=r"^fake: crew could not read the answer to stat \(Object missing"):
        conversation.call("stat", {}, Stat)
    assert turn(conversation, {"ask": 2, "method": "look", "params": {"path": "a"}}) and looked == [{"path": "a"}]


def test_a_bug_in_a_handler_or_in_what_acts_on_an_answer_is_raised_as_a_bug_not_set_aside(peer):
    def look(request, channel):
        return {"path": request.params["path"]}  # crew's bug: its route reads no path

    handled = peer(handlers={"look": look})
    handled.serve(Channel())
    with pytest.raises(KeyError, match="path"):
        turn(handled, {"ask": 1, "method": "look"}, {"say": "never read"})
    answered = peer()
    answered.start()
    answered.request("stat", {}, lambda reply: reply.result["size"])  # crew's bug: it asked for no shape
    with pytest.raises(KeyError, match="size"):
        turn(answered, {"say": "never read"})


def test_answers_are_matched_to_their_requests_by_id(peer):
    conversation = peer()
    turn(conversation, {"say": "up"})
    late = []
    conversation.request("silent", {}, lambda reply: late.append(reply) or [])  # never answered
    assert conversation.call("look", {}) == {"method": "look"}
    assert late == []
    with pytest.raises(ProviderError, match="fake refused refuse: not now"):
        conversation.call("refuse", {})
    assert conversation.exchange("refuse", {}).error == {"code": 1, "message": "not now"}


def test_a_stopped_reply_is_read_to_its_end_before_the_next_turn_and_its_usage_comes_late(peer):
    conversation = peer()
    events = conversation.send(json.dumps([{"say": "a"}, {"say": "b"}]), None)
    assert next(events) == Text("a")
    conversation.stop()
    conversation.stop()  # once is enough
    events.close()
    assert conversation.late_usage() == []
    assert said(turn(conversation, {"say": "next"})) == "next"
    assert conversation.late_usage() == [Usage(3, 4)]
    assert [line["method"] for line in conversation.sent()] == ["prompt", "cancel", "prompt"]


def test_the_clis_own_tools_used_in_a_stopped_reply_reach_the_channel_as_it_is_read_to_its_end(peer):
    conversation = peer()
    channel = Owned()
    conversation.serve(channel)
    events = conversation.send(json.dumps([{"say": "a"}, {"say": "b"}, {"use": "t1"}]), None)
    assert next(events) == Text("a")
    conversation.stop()
    events.close()
    assert said(turn(conversation, {"say": "next"})) == "next"
    assert channel.owned == [OwnCall("t1", "Bash", {"command": "true"})]  # the record has it, as crew read it


def test_a_cli_that_exits_is_the_turns_failure_also_while_a_stopped_reply_is_read_to_its_end(peer):
    cli = os.path.basename(sys.executable)
    events = turn(peer(), {"say": "Hi"}, {"exit": "boom: lost the connection"})
    assert events == [Text("Hi"), Failure(f"{cli} exited with status 7: boom: lost the connection")]
    conversation = peer()
    events = conversation.send(json.dumps([{"say": "a"}, {"exit": "gone"}]), None)
    next(events)
    conversation.stop()
    events.close()
    assert turn(conversation, {"say": "next"}) == [Failure(f"{cli} exited with status 7: gone")]


@pytest.mark.slow
def test_every_exchange_waits_only_as_long_as_the_run(peer):
    conversation = peer()
    turn(conversation, {"say": "booted"})
    turn(conversation, {"say": "quick"}, deadline=time.monotonic() + 2)  # this run has two seconds
    with pytest.raises(CrewTimeout, match="gave no complete reply in time"):
        conversation.call("silent", {})  # as keep() does after the reply
    assert conversation.process.child.proc.poll() is not None  # ended


def test_messages_from_other_threads_are_answered_on_the_reading_thread_in_order(peer):
    answered = []

    def answer(message):
        answered.append((message["id"], threading.current_thread()))
        if message["id"] == "last":  # the CLI waits for this before it goes on
            conversation.write(notification("go on"))
        return {"jsonrpc": "2.0", "id": message["id"], "result": {}}

    conversation = peer(answer=answer)
    got = []
    events = conversation.send(json.dumps([{"say": "waiting"}, {"wait": "go on"}, {"say": "done"}]), None)
    assert next(events) == Text("waiting")  # the process is set up: ask() is there
    caller = threading.Thread(target=lambda: got.extend(conversation.ask({"id": n}) for n in [1, 2, 3, "last"]))
    caller.start()
    assert said(events) == "done"
    caller.join()
    assert answered == [(n, threading.current_thread()) for n in [1, 2, 3, "last"]]
    assert [answer["id"] for answer in got] == [1, 2, 3, "last"]


def test_a_message_from_another_thread_that_ends_the_run_ends_it_at_once(peer):
    def answer(message):
        raise MaxTurnsReached("too many native calls")

    conversation = peer(answer=answer)
    events = conversation.send(json.dumps([{"say": "waiting"}, {"wait": "never"}]), None)
    next(events)
    got = []
    caller = threading.Thread(target=lambda: got.append(conversation.ask({"id": 9, "method": "tools/call"})))
    caller.start()
    with pytest.raises(MaxTurnsReached, match="too many native calls"):
        next(events)  # raised while the CLI says nothing: not at its next line
    caller.join()
    assert got == [{"jsonrpc": "2.0", "id": 9, "error": {"code": -32603, "message": "too many native calls"}}]
    conversation.close()
    assert conversation.ask({"id": 10}) == {
        "jsonrpc": "2.0",
        "id": 10,
        "error": {"code": -32603, "message": "the conversation has ended"},
    }
    assert conversation.ask({"method": "notifications/initialized"}) is None


def test_a_notification_from_another_thread_is_taken_at_once_so_a_cancellation_reaches_a_running_call(peer):
    cancelled = threading.Event()

    def answer(message):
        if "id" not in message:  # notifications/cancelled
            cancelled.set()
            return None
        return {"jsonrpc": "2.0", "id": message["id"], "result": {"cancelled": cancelled.wait(30)}}

    conversation = peer(answer=answer)
    events = conversation.send(json.dumps([{"say": "waiting"}, {"wait": "go on"}]), None)
    assert next(events) == Text("waiting")
    got = []
    caller = threading.Thread(target=lambda: got.append(conversation.ask({"id": "long"})))
    caller.start()
    reader = threading.Thread(target=lambda: next(events, None))  # runs the call, until it is cancelled
    reader.start()
    assert conversation.ask({"method": "notifications/cancelled", "params": {"requestId": "long"}}) is None
    caller.join(30)
    assert got == [{"jsonrpc": "2.0", "id": "long", "result": {"cancelled": True}}]
    conversation.close()
    reader.join(30)


@pytest.mark.slow
def test_a_message_from_another_thread_waits_no_longer_than_the_run(peer):
    conversation = peer(answer=lambda message: {"jsonrpc": "2.0", "id": message["id"], "result": {}})
    turn(conversation, {"say": "up"}, deadline=time.monotonic() + 1)
    # the turn is over: nothing reads the CLI, so nothing can answer before the run's end
    assert conversation.ask({"id": 1}) == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32603, "message": "the run's --timeout passed before crew could answer"},
    }
