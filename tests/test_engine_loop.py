"""The agent loop, driven by a scripted conversation (a small, honest fake of a CLI session)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from dataclasses import replace

import pytest
from crewbridge.providers.base import Turn

from crewbridge.base.decoded import Done, Failure, MessageEnd, OwnCall, OwnResult, Text
from crewbridge.base.jsonio import MAX_DEPTH
from crewbridge.config import AgentSpec
from crewbridge.conversations import EXACT, FULL, LOST
from crewbridge.engine.loop import AgentLoop
from crewbridge.errors import CrewError, MaxTurnsReached, ProviderError
from crewbridge.record import events as ev
from crewbridge.record.stream import Record
from crewbridge.record.transcript import Transcript, read_run
from crewbridge.toolkit.functions import tool
from crewbridge.toolkit.registry import ToolFailure, ToolRegistry
from crewbridge.work.policy import Policy


def block(name, **data):
    return "```json\n" + json.dumps({"type": "tool_use", "name": name, "input": data}) + "\n```\n"


class Script:
    """A conversation whose replies are scripted. Records what was sent, stopped and kept."""

    def __init__(self, *replies, holds=None):
        self.replies = list(replies)
        self.sent: list[str] = []
        self.consumed: list[int] = []  # how many events of each reply the loop read
        self.stops = 0
        self.kept: list[tuple[str, bool]] = []
        self.holds = holds
        self.session_id = "sess-1"
        self.closed = False
        self.reported = None
        self.late: list = []  # usage reported after the loop stopped reading a reply
        self.base = Turn(prompt="")  # what its CLI is started with (the model asked for: none)

    def serve(self, channel):
        return False

    def late_usage(self):
        late, self.late = self.late, []
        return late

    def send(self, message, deadline):
        self.sent.append(message)
        self.consumed.append(0)
        for event in self.replies[len(self.sent) - 1]:
            self.consumed[-1] += 1
            yield event

    def stop(self):
        self.stops += 1

    def keep(self, kept, stopped):
        self.kept.append((kept, stopped))
        return self.holds or (LOST if stopped else FULL)

    def close(self):
        self.closed = True


def text(*chunks):
    return [Text(c) for c in chunks] + [MessageEnd(), Done()]


@pytest.fixture
def registry(tmp_path):
    reg = ToolRegistry("crew")
    log: list[str] = []

    @tool(
        schema={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "additionalProperties": False,
        },
        read_only=True,
    )
    def read_file(ctx, path: str) -> dict:
        """Read a file."""
        log.append(f"read {path}")
        try:
            return {"content": (ctx.workdir / path).read_text()}
        except FileNotFoundError:
            raise ToolFailure(f"no file '{path}'") from None

    @tool(
        schema={
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        }
    )
    def write_file(ctx, path: str, content: str) -> dict:
        """Write a file."""
        log.append(f"write {path}")
        (ctx.workdir / path).write_text(content)
        return {"written": len(content)}

    reg.register(read_file)
    reg.register(write_file)
    reg.log = log
    (tmp_path / "notes.txt").write_text("the secret is 42")
    return reg


def make_loop(script, registry, tmp_path, mode="query", **kw):
    return AgentLoop("claude", script, registry, Policy(AgentSpec("claude", "claude"), mode), workdir=tmp_path, **kw)


def watched() -> tuple[Record, list[ev.Event]]:
    """A run's record (kept nowhere) and the events it was given."""
    record, seen = Record(), []
    record.attach(seen.append)
    return record, seen


def test_each_call_has_an_id_in_the_record_that_its_result_and_the_answer_carry(registry, tmp_path):
    record, seen = watched()
    reply = text("Reading.\n", block("crew:read_file", path="notes.txt") + block("crew:read_file", path="gone.txt"))
    result = make_loop(Script(reply, text("ok")), registry, tmp_path, record=record).run("t")
    calls = [e for e in seen if isinstance(e, ev.Call)]
    results = {e.call: e for e in seen if isinstance(e, ev.Result)}
    assert [(c.call, c.input, c.turn, c.via) for c in calls] == [
        ("c1", {"path": "notes.txt"}, 1, "text"),
        ("c2", {"path": "gone.txt"}, 1, "text"),
    ]
    assert (results["c1"].success, results["c1"].data) == (True, {"content": "the secret is 42"})
    assert (results["c2"].success, results["c2"].error) == (False, "no file 'gone.txt'")
    assert [record.call for record in result.tool_calls] == ["c1", "c2"]
    [answer] = [e for e in seen if isinstance(e, ev.Answer)]
    assert (answer.text, answer.calls, answer.turns, answer.session) == ("ok", ["c1", "c2"], 2, "sess-1")
    turns = [e for e in seen if isinstance(e, ev.Turn)]
    assert [(e.turn, e.agent) for e in turns] == [(1, "claude"), (2, "claude")]
    assert turns[1].prompt.startswith("[crew tool results]")  # the message crew sent, whole
    shown = "".join(e.visible for e in seen if isinstance(e, ev.Text) and e.agent == "claude")
    assert "Reading." in shown and "tool_use" not in shown  # what a person sees: never a call's JSON


def test_a_reply_without_calls_is_the_answer(registry, tmp_path):
    script = Script(text("Just ", "an answer."))
    result = make_loop(script, registry, tmp_path).run("hi")
    assert result.answer == "Just an answer."
    assert result.tool_calls == [] and result.turns == 1 and result.session == "sess-1"
    assert len(script.sent) == 1 and "hi" in script.sent[0] and "crew:read_file" in script.sent[0]
    assert script.closed


def test_the_first_message_offers_only_the_modes_tools(registry, tmp_path):
    query, execute = Script(text("a")), Script(text("a"))
    make_loop(query, registry, tmp_path).run("t")
    make_loop(execute, registry, tmp_path, mode="execute").run("t")
    assert "crew:write_file" not in query.sent[0]
    assert "crew:write_file" in execute.sent[0]


def test_a_call_runs_and_its_result_goes_back(registry, tmp_path):
    script = Script(text("Reading.\n", block("crew:read_file", path="notes.txt")), text("It says 42."))
    result = make_loop(script, registry, tmp_path).run("what does notes.txt say?")
    assert result.answer == "It says 42."
    assert [(c.name, c.input, c.result.success) for c in result.tool_calls] == [
        ("crew:read_file", {"path": "notes.txt"}, True)
    ]
    follow_up = script.sent[1]
    assert "the secret is 42" in follow_up and '"success": true' in follow_up
    assert script.stops == 0  # the reply ended on its own after the block


def test_prose_after_the_call_stops_the_reply_and_is_never_shown_as_real(registry, tmp_path):
    invented = "The file says the secret is 7."
    reply = [
        Text("Reading.\n" + block("crew:read_file", path="notes.txt")),
        Text(invented),
        Text(" more"),
        MessageEnd(),
        Done(),
    ]
    script = Script(reply, text("It says 42."))
    result = make_loop(script, registry, tmp_path).run("what does notes.txt say?")
    assert script.stops == 1 and script.consumed[0] == 2  # nothing read after the stop
    kept, stopped = script.kept[0]
    assert stopped and kept == "Reading.\n" + block("crew:read_file", path="notes.txt")
    follow_up = script.sent[1]
    assert invented not in follow_up
    assert "Your previous reply was stopped" in follow_up and kept.rstrip() in follow_up  # restated (LOST)
    assert result.answer == "It says 42."


def test_when_the_history_holds_the_whole_reply_the_tail_is_named_as_not_acted_on(registry, tmp_path):
    reply = text("Reading.\n" + block("crew:read_file", path="notes.txt") + "It says 7.")
    script = Script(reply, text("42."), holds=FULL)
    make_loop(script, registry, tmp_path).run("t")
    assert "It says 7." in script.sent[1] and "NOT acted on" in script.sent[1]
    assert "Your previous reply was stopped" not in script.sent[1]


def test_an_exact_history_needs_neither_restatement_nor_note(registry, tmp_path):
    reply = text("Reading.\n" + block("crew:read_file", path="notes.txt") + "It says 7.")
    script = Script(reply, text("42."), holds=EXACT)
    make_loop(script, registry, tmp_path).run("t")
    assert "It says 7." not in script.sent[1] and "previous reply" not in script.sent[1]


def test_consecutive_blocks_are_one_batch_and_all_results_go_back_together(registry, tmp_path):
    (tmp_path / "b.txt").write_text("bee")
    reply = text("Two.\n" + block("crew:read_file", path="notes.txt") + "\n" + block("crew:read_file", path="b.txt"))
    script = Script(reply, text("done"))
    result = make_loop(script, registry, tmp_path).run("t")
    assert [c.input["path"] for c in result.tool_calls] == ["notes.txt", "b.txt"]
    assert script.stops == 0
    assert script.sent[1].index("the secret is 42") < script.sent[1].index("bee")


def test_a_tool_starts_while_the_cli_is_still_talking(registry, tmp_path):
    started = threading.Event()
    original = registry.resolve("read_file").func

    def watched(ctx, path):
        started.set()
        return original(ctx, path)

    object.__setattr__(registry.resolve("read_file"), "func", watched)
    seen_before_end = []

    def reply():
        yield Text(block("crew:read_file", path="notes.txt"))
        seen_before_end.append(started.wait(2))  # the CLI is still "running" here
        yield MessageEnd()
        yield Done()

    script = Script(reply(), text("ok"))
    make_loop(script, registry, tmp_path).run("t")
    assert seen_before_end == [True]


def test_the_input_checks_are_readied_while_a_block_streams_and_only_then(registry, tmp_path, monkeypatch):
    prepared = threading.Event()
    monkeypatch.setattr(registry, "prepare", prepared.set)
    ready_before_close = []

    def reply():
        yield Text("Reading.\n```json\n")
        ready_before_close.append(prepared.wait(2))  # the block's body is still streaming here
        yield Text(block("crew:read_file", path="notes.txt").removeprefix("```json\n"))
        yield MessageEnd()
        yield Done()

    make_loop(Script(reply(), text("ok")), registry, tmp_path).run("t")
    assert ready_before_close == [True]
    prepared.clear()
    make_loop(Script(text("No tools: ```json is only mentioned.")), registry, tmp_path).run("t")
    assert not prepared.is_set()


def test_model_mistakes_go_back_as_errors_and_are_never_run(registry, tmp_path):
    reply = text(block("crew:read_fil", path="notes.txt") + block("crew:read_file", path=3))
    script = Script(reply, text("sorry"))
    result = make_loop(script, registry, tmp_path).run("t")
    assert [c.result.success for c in result.tool_calls] == [False, False]
    assert "did you mean 'crew:read_file'" in script.sent[1]
    assert "$.path" in script.sent[1]
    assert registry.log == []


def test_query_mode_refuses_a_write_tool_even_when_the_model_names_it(registry, tmp_path):
    script = Script(text(block("crew:write_file", path="x.txt", content="hi")), text("ok"))
    result = make_loop(script, registry, tmp_path).run("t")
    assert result.tool_calls[0].result.success is False
    assert "not available in query mode" in script.sent[1]
    assert not (tmp_path / "x.txt").exists() and registry.log == []


def test_execute_mode_runs_a_write_tool(registry, tmp_path):
    script = Script(text(block("crew:write_file", path="x.txt", content="hi")), text("ok"))
    make_loop(script, registry, tmp_path, mode="execute").run("t")
    assert (tmp_path / "x.txt").read_text() == "hi"


def test_a_write_waits_for_reads_before_it_and_reads_after_it_wait_for_the_write(registry, tmp_path):
    reply = text(
        block("crew:read_file", path="notes.txt")
        + block("crew:write_file", path="notes.txt", content="new")
        + block("crew:read_file", path="notes.txt")
    )
    script = Script(reply, text("ok"))
    result = make_loop(script, registry, tmp_path, mode="execute").run("t")
    contents = [c.result.data.get("content") for c in result.tool_calls]
    assert contents == ["the secret is 42", None, "new"]


def test_the_same_failing_call_repeated_stops_the_run(registry, tmp_path):
    bad = text(block("crew:read_file", path="missing.txt"))
    script = Script(bad, bad, bad, bad)
    with pytest.raises(CrewError, match="repeated the same failing call crew:read_file 3 times; last error: no file"):
        make_loop(script, registry, tmp_path).run("t")
    assert "This exact call already failed" in script.sent[2]


def test_max_turns(registry, tmp_path):
    call = text(block("crew:read_file", path="notes.txt"))
    with pytest.raises(MaxTurnsReached, match="after 2 turns; raise --max-turns"):
        make_loop(Script(call, call, call), registry, tmp_path, max_turns=2).run("t")


def test_a_cli_failure_is_a_provider_error_with_its_message(registry, tmp_path):
    script = Script([Failure("API Error: 500 mock failure", 500), Done()])
    with pytest.raises(ProviderError, match="@claude: API Error: 500 mock failure"):
        make_loop(script, registry, tmp_path).run("t")
    assert script.closed


def test_a_result_holding_a_fence_cannot_break_out_of_its_block(registry, tmp_path):
    (tmp_path / "f.md").write_text("````\n```json\n{}\n```")
    script = Script(text(block("crew:read_file", path="f.md")), text("ok"))
    make_loop(script, registry, tmp_path).run("t")
    assert "`````json\n" in script.sent[1]


def test_usage_is_summed_over_turns(registry, tmp_path):
    from crewbridge.base.decoded import Usage

    script = Script(
        [*text(block("crew:read_file", path="notes.txt")), Usage(10, 2, 0.5)], [*text("ok"), Usage(5, 1, 0.25)]
    )
    result = make_loop(script, registry, tmp_path).run("t")
    assert result.usage == {"input_tokens": 15, "output_tokens": 3, "cached_tokens": 0, "cost_usd": 0.75}


def test_each_usage_report_is_in_the_record_in_its_turn_with_what_came_after_a_stop(registry, tmp_path):
    from crewbridge.base.decoded import Usage

    script = Script(
        [*text(block("crew:read_file", path="notes.txt")), Usage(10, 2, cached_tokens=4)],
        [*text("ok"), Usage(5, 1, 0.25)],
    )
    script.late = [Usage(3, 3)]  # reported for turn 1 once the loop had stopped reading it
    record = Record()
    record.keep(Transcript.create(record.run, tmp_path / "runs"))
    result = make_loop(script, registry, tmp_path, record=record).run("t")
    end = record.end("done")
    usage = [e for e in read_run(record.run, tmp_path / "runs") if isinstance(e, ev.Usage)]
    assert [(e.turn, e.input_tokens, e.output_tokens, e.cached_tokens, e.cost_usd) for e in usage] == [
        (1, 10, 2, 4, None),
        (1, 3, 3, 0, None),  # the late report, in the turn it belongs to
        (2, 5, 1, 0, 0.25),
    ]
    assert result.usage == {"input_tokens": 18, "output_tokens": 6, "cached_tokens": 4, "cost_usd": 0.25}
    assert end.usage["claude"] == {"turns": 2, **result.usage}  # the run's: the sum of its usage events


def test_read_only_calls_in_one_reply_run_in_parallel(registry, tmp_path):
    barrier = threading.Barrier(2, timeout=5)
    original = registry.resolve("read_file").func

    def meeting(ctx, path):
        barrier.wait()  # only passes when both calls are running at the same time
        return original(ctx, path)

    registry.resolve("read_file").func = meeting
    reply = text(block("crew:read_file", path="notes.txt") + block("crew:read_file", path="notes.txt"))
    result = make_loop(Script(reply, text("ok")), registry, tmp_path).run("t")
    assert [c.result.success for c in result.tool_calls] == [True, True]


def test_an_empty_reply_is_a_failure_not_an_empty_answer(registry, tmp_path):
    with pytest.raises(ProviderError, match="@claude ended its reply without a word"):
        make_loop(Script(text("  \n")), registry, tmp_path).run("t")


@pytest.mark.slow
def test_a_tool_call_that_never_returns_does_not_hold_up_the_exit() -> None:
    # A call blocked where no tool timeout reaches (an approval question no one answers, a hook) is
    # left behind at exit: ThreadPoolExecutor's workers would be joined and Python would never exit.
    script = (
        "import threading\n"
        "from crewbridge.engine.loop import _DaemonPool\n"
        "pool = _DaemonPool(4, 'test')\n"
        "future = pool.submit(threading.Event().wait)\n"
        "print('submitted', flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout) == (0, "submitted\n")


def test_jobs_run_in_order_and_those_not_started_are_cancelled_at_shutdown() -> None:
    from crewbridge.engine.loop import _DaemonPool

    pool = _DaemonPool(1, "test")
    release = threading.Event()
    first = pool.submit(lambda: release.wait(5) and "first")
    second = pool.submit(lambda: "second")
    pool.shutdown()
    release.set()
    assert first.result(5) == "first" and second.cancelled()
    assert pool.submit(lambda: "late").cancelled()


def test_a_job_goes_to_an_idle_worker_and_to_a_new_thread_only_when_every_worker_is_busy() -> None:
    from crewbridge.engine.loop import _DaemonPool

    pool = _DaemonPool(4, "test")
    assert [pool.submit(lambda: threading.current_thread().name).result(5) for _ in range(3)] == ["test-0"] * 3
    started, release = threading.Event(), threading.Event()
    busy = pool.submit(lambda: (started.set(), release.wait(5), threading.current_thread().name)[2])
    started.wait(5)
    other = pool.submit(lambda: threading.current_thread().name).result(5)
    release.set()
    assert {busy.result(5), other} == {"test-0", "test-1"}
    pool.shutdown()


def test_a_budget_passed_stops_the_run_before_its_next_tool_turn(registry, tmp_path):
    from crewbridge.base.decoded import Usage
    from crewbridge.base.usage import Budget
    from crewbridge.errors import BudgetExceeded

    call = [*text(block("crew:read_file", path="notes.txt")), Usage(100, 10)]
    script = Script(call, call, [*text("never asked"), Usage(100, 10)])
    record, seen = watched()
    loop = make_loop(script, registry, tmp_path, record=record, budgets=[Budget(None, 150)])
    with pytest.raises(
        BudgetExceeded,
        match=r"^@claude was stopped after turn 2: the run used 220 tokens, "
        r"past --max-tokens 150; the tools of its last reply ran",
    ):
        loop.run("t")
    assert len(script.sent) == 2  # the second reply's call ran, and no third turn was sent
    assert [e.name for e in seen if isinstance(e, ev.Result)] == ["crew:read_file"] * 2
    assert [e.turn for e in seen if isinstance(e, ev.Turn)] == [1, 2]
    assert not any(isinstance(e, ev.Answer) for e in seen)


def test_the_opening_message_of_a_continued_conversation(registry, tmp_path):
    from crewbridge.work.sessions import Prior

    loop = make_loop(Script(), registry, tmp_path)
    prior = Prior("R1", "claude", mode="query", session_id="S1", history=[("user", "old task"), ("assistant", "old")])
    assert loop.opening("new task", prior, held=True) == "new task"  # the CLI's history has the catalogue
    assert loop.opening("new task", replace(prior, mode="execute"), held=True) == loop.first_message("new task")
    replayed = loop.opening("new task", prior, held=False)
    assert (
        replayed.index("[user]\nold task")
        < replayed.index("[assistant]\nold")
        < replayed.index(loop.first_message("new task"))
    )
    assert loop.opening("new task") == loop.first_message("new task")


# --- native tool calls (crewbridge.toolkit.native): the conversation calls the loop's channel ---------------


class NativeScript(Script):
    """A conversation with a native channel: each reply is a list of events and of actions — a
    ("call", name, input) or ("permit", tool, input, read_only) made on the channel, whose outcome
    is recorded as the CLI would hand it to the model."""

    def __init__(self, *replies, native=True):
        super().__init__(*replies)
        self.native = native
        self.channel = None
        self.outcomes: list = []

    def serve(self, channel):
        self.channel = channel
        return self.native

    def send(self, message, deadline):
        self.sent.append(message)
        for item in self.replies[len(self.sent) - 1]:
            if isinstance(item, tuple) and item[0] == "call":
                self.outcomes.append(self.channel.call(item[1], item[2]))
            elif isinstance(item, tuple):
                self.outcomes.append(self.channel.permit(*item[1:]))
            else:
                yield item


def test_with_a_native_channel_the_task_goes_alone_and_native_calls_take_a_text_calls_path(registry, tmp_path):
    record, events = watched()
    script = NativeScript([("call", "read_file", {"path": "notes.txt"}), *text("It says 42.")])
    result = make_loop(script, registry, tmp_path, record=record).run("what is the secret?")
    assert script.sent == ["what is the secret?"]  # no catalogue
    assert [tool["name"] for tool in map(vars, script.channel.tools())] == ["read_file"]  # query mode's tools
    assert script.outcomes[0].success and script.outcomes[0].data == {"content": "the secret is 42"}
    assert result.answer == "It says 42." and result.turns == 1
    assert [(c.name, c.result.success) for c in result.tool_calls] == [("crew:read_file", True)]
    call, decision, answered = [e for e in events if e.kind in ("call", "decision", "result")]
    assert (call.call, call.name, call.via, call.turn) == ("c1", "crew:read_file", "native", 1)
    assert (decision.call, decision.decision, answered.call, answered.success) == ("c1", "allowed", "c1", True)
    assert result.tool_calls[0].call == "c1"


def test_a_native_call_that_breaks_the_schema_gets_crews_message_and_policy_applies(registry, tmp_path):
    script = NativeScript(
        [
            ("call", "read_file", {"paht": "x"}),
            ("call", "write_file", {"path": "a", "content": "b"}),
            *text("I could not."),
        ]
    )
    make_loop(script, registry, tmp_path).run("go")
    bad_input, not_allowed = script.outcomes
    assert bad_input.error.startswith("invalid input for crew:read_file")
    assert "not available in query mode" in not_allowed.error and registry.log == []


def deep(levels: int) -> list:
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_a_native_input_nested_past_the_limit_is_an_error_and_a_refusal_and_the_run_goes_on(registry, tmp_path):
    # a CLI's line is decoded without counting its nesting (providers.base.parse_object): the channel bounds it
    script = NativeScript(
        [
            ("call", "read_file", {"path": deep(900)}),
            ("permit", "Bash", {"command": deep(900)}, True),
            *text("I will send flatter input."),
        ]
    )
    result = make_loop(script, registry, tmp_path).run("go")
    call, permit = script.outcomes
    assert (
        call.error
        == f"invalid input for crew:read_file: JSON nested more than {MAX_DEPTH} levels deep; send flatter data"
    )
    assert (
        permit
        == f"crew does not run Bash with this input: JSON nested more than {MAX_DEPTH} levels deep; send flatter data"
    )
    assert result.answer == "I will send flatter input." and registry.log == []


def test_the_same_failing_native_call_is_flagged_then_ends_the_run(registry, tmp_path):
    script = NativeScript([("call", "read_file", {"path": "gone.txt"})] * 3 + text("never"))
    with pytest.raises(CrewError, match="repeated the same failing call crew:read_file 3 times"):
        make_loop(script, registry, tmp_path).run("go")
    first, second = script.outcomes  # the third ended the run
    assert "already failed" not in first.error and "This exact call already failed" in second.error


def test_native_calls_are_bounded_by_max_turns(registry, tmp_path):
    script = NativeScript([("call", "read_file", {"path": "notes.txt"})] * 6 + text("never"))
    with pytest.raises(MaxTurnsReached, match="more than 5 native tool calls"):
        make_loop(script, registry, tmp_path, max_turns=1).run("go")


def test_the_clis_own_tools_are_decided_by_the_policy_and_recorded(registry, tmp_path):
    script = NativeScript(
        [
            ("permit", "Bash", {"command": "make"}, False, "toolu_1"),
            ("permit", "Read", {"file_path": str(tmp_path / "notes.txt")}, True),
            ("permit", "Read", {"file_path": "/etc/passwd"}, True),
            *text("done"),
        ]
    )
    record, events = watched()
    make_loop(script, registry, tmp_path, record=record).run("go")
    bash, inside, outside = script.outcomes
    assert "query mode" in bash and inside is None and "outside the working directory" in outside
    # what every face shows of each (crew acp's tool calls): the tool, its input, crew's decision and why
    calls = [e for e in events if isinstance(e, ev.Call)]
    assert [(c.call, c.name, c.input, c.via, c.ref, c.turn) for c in calls] == [
        ("c1", "native:Bash", {"command": "make"}, "own", "toolu_1", 1),
        ("c2", "native:Read", {"file_path": str(tmp_path / "notes.txt")}, "own", None, 1),
        ("c3", "native:Read", {"file_path": "/etc/passwd"}, "own", None, 1),
    ]
    decisions = [(d.call, d.decision, d.by, d.reason) for d in events if isinstance(d, ev.Decision)]
    assert decisions == [
        ("c1", "refused", "policy", bash),
        ("c2", "allowed", "policy", None),
        ("c3", "refused", "policy", outside),
    ]


def own_record(events):
    """The record's events about the CLI's own calls, in order, as tuples."""
    shown = []
    for e in events:
        if isinstance(e, ev.Call):
            shown.append(("call", e.call, e.name, e.input, e.via, e.ref))
        elif isinstance(e, ev.Decision):
            shown.append(("decision", e.call, e.decision, e.by))
        elif isinstance(e, ev.Result):
            shown.append(("result", e.call, e.success, e.data, e.error))
    return shown


def test_a_tool_the_cli_ran_without_asking_is_a_call_the_cli_allowed_with_its_result(registry, tmp_path):
    # a CLI run per turn asks crew nothing: codex exec runs its commands under its own sandbox's rules
    record, events = watched()
    script = Script(
        [
            OwnCall("item_0", "exec_command", {"command": "/bin/bash -lc 'make'"}),
            OwnResult("item_0", True, "built\n", exit_code=0),
            OwnCall("item_1", "exec_command", {"command": "/bin/bash -lc 'false'"}),
            OwnResult("item_1", False, "codex: failed", exit_code=1),
            *text("done"),
        ]
    )
    result = make_loop(script, registry, tmp_path, mode="execute", record=record).run("go")
    assert own_record(events) == [
        ("call", "c1", "native:exec_command", {"command": "/bin/bash -lc 'make'"}, "own", "item_0"),
        ("decision", "c1", "allowed", "cli"),  # crew was not asked: the record says who decided
        ("result", "c1", True, {"output": "built\n", "exit_code": 0}, None),
        ("call", "c2", "native:exec_command", {"command": "/bin/bash -lc 'false'"}, "own", "item_1"),
        ("decision", "c2", "allowed", "cli"),
        ("result", "c2", False, None, "codex: failed"),
    ]
    assert result.tool_calls == []  # crew's own calls only: the CLI's are in the record


def test_the_clis_question_and_its_report_of_a_call_are_one_call_whichever_comes_first(registry, tmp_path):
    record, events = watched()
    bash, write = {"command": "make"}, {"file_path": "a.txt", "content": "x"}
    script = NativeScript(
        [
            OwnCall("t1", "Bash", bash),  # claude reports the use, then asks
            ("permit", "Bash", bash, False, "t1"),
            OwnResult("t1", True, "built"),
            ("permit", "Write", write, False, "t2"),  # gemini asks, then reports the call as it ends
            OwnCall("t2", "Write", write),
            OwnResult("t2", False, "crew's policy does not allow it"),
            *text("done"),
        ]
    )
    make_loop(script, registry, tmp_path, mode="execute", record=record).run("go")
    assert own_record(events) == [
        ("call", "c1", "native:Bash", bash, "own", "t1"),
        ("decision", "c1", "allowed", "policy"),
        ("result", "c1", True, {"output": "built"}, None),
        ("call", "c2", "native:Write", write, "own", "t2"),
        ("decision", "c2", "allowed", "policy"),
        ("result", "c2", False, None, "crew's policy does not allow it"),
    ]


def test_a_question_that_names_no_call_decides_the_oldest_undecided_call_of_its_tool(registry, tmp_path):
    # codex asks about an MCP server's tool without naming its item
    record, events = watched()
    vault = "mcp__vault__launch_code"
    script = NativeScript(
        [
            OwnCall("i1", vault, {"which": 1}),
            OwnCall("i2", vault, {"which": 2}),
            ("permit", vault, {"which": 1}, False),
            OwnResult("i1", True, "7-4-1"),
            ("permit", vault, {"which": 2}, False),
            OwnResult("i2", True, "9-9-9"),
            *text("done"),
        ]
    )
    make_loop(script, registry, tmp_path, mode="execute", record=record).run("go")
    assert [(e[0], e[1]) for e in own_record(events)] == [
        ("call", "c1"),
        ("call", "c2"),
        ("decision", "c1"),
        ("result", "c1"),
        ("decision", "c2"),
        ("result", "c2"),
    ]
    assert {e[3] for e in own_record(events) if e[0] == "decision"} == {"policy"}


def test_a_result_of_a_call_crew_never_heard_of_starting_is_not_recorded(registry, tmp_path):
    record, events = watched()
    reported = [OwnResult("toolu_9", True, "x"), OwnCall("t1", "Read", {}), OwnResult("t1", True, "a")]
    script = Script([*reported, OwnResult("t1", True, "again"), *text("done")])
    make_loop(script, registry, tmp_path, record=record).run("go")
    assert [e[0] for e in own_record(events)] == ["call", "decision", "result"]  # one result, of t1


def test_without_a_native_channel_the_catalogue_goes_with_a_notice(registry, tmp_path):
    record, events = watched()
    script = NativeScript(text("hi"), native=False)
    make_loop(script, registry, tmp_path, tools_via="native", record=record).run("go")
    assert "[crew tools]" in script.sent[0]
    assert any(e.kind == "notice" and e.about == "tools" and "no native tool channel" in e.text for e in events)


# -- what a run leaves for git (crewbridge.system.gitguard)


def git_repo(folder):
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    return folder


class PlantingScript(Script):
    """A CLI whose own tools plant a repository in the project while its reply streams."""

    def send(self, message, deadline):
        if len(self.sent) == 0:
            subprocess.run(["git", "init", "-q", "planted"], cwd=self.workdir, check=True)
            subprocess.run(
                ["git", "-C", "planted", "config", "core.fsmonitor", "touch owned"], cwd=self.workdir, check=True
            )
        yield from super().send(message, deadline)


def test_in_execute_mode_what_the_run_left_for_git_is_disarmed_once_the_cli_ended(registry, tmp_path):
    work = git_repo(tmp_path / "work")
    script = PlantingScript(text("Done."))
    script.workdir = work
    record, events = watched()
    loop = make_loop(script, registry, work, mode="execute", record=record)
    loop.run("t")
    assert [(a.path, a.done.split(" ")[0]) for a in loop.disarmed] == [("planted/.git", "moved")]
    assert not (work / "planted/.git").exists() and script.closed
    [shown] = [e for e in events if isinstance(e, ev.Disarmed)]
    assert (shown.agent, shown.call) == ("claude", None)  # the run's, not a call's
    assert "planted/.git: a new git repository" in shown.text
    assert shown.found == [a.to_dict() for a in loop.disarmed] and shown.found[0]["path"] == "planted/.git"


def test_in_query_mode_nothing_is_watched(registry, tmp_path):
    work = git_repo(tmp_path / "work")
    script = PlantingScript(text("Done."))
    script.workdir = work
    loop = make_loop(script, registry, work)
    loop.run("t")
    assert loop.guard is None and loop.disarmed == [] and (work / "planted/.git").is_dir()


def test_with_hooks_each_writing_call_is_disarmed_before_the_hooks_see_it(registry, tmp_path):
    from crewbridge.toolkit.hooks import Hooks

    work = git_repo(tmp_path / "work")
    seen = []
    hooks = Hooks({"after_tool_call": [lambda payload: seen.append((work / ".gitattributes").read_text())]})
    attributes = "*.c filter=evil\n*.md text\n"
    script = Script(text(block("crew:write_file", path=".gitattributes", content=attributes)), text("ok"))
    result = make_loop(script, registry, work, mode="execute", hooks=hooks).run("t")
    assert seen == ["*.md text\n"]  # the hook, outside the sandbox, saw the file disarmed
    notices = result.tool_calls[0].result.to_dict()["metadata"]["notices"]
    assert ".gitattributes: names a driver it did not name before" in notices[0]
    assert "notices" in script.sent[1]  # the model is told too
