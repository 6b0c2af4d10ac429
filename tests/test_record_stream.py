"""A run's record (crewbridge.record.stream): one stream of events in one order for the transcript
and every sink, stamped with the run's clock; call ids unique in the run; held until it is written
down; cancelled once; ended once, with its calls, errors and each agent's usage summed."""

import json
import threading

import pytest

from crewbridge.errors import Interrupted
from crewbridge.record import events as ev
from crewbridge.record.stream import Record
from crewbridge.record.transcript import Transcript, read_run


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state" / "crewbridge" / "runs"


def kept() -> Record:
    record = Record()
    record.keep(Transcript.create(record.run))
    return record


def written(record: Record) -> list[dict]:
    return [json.loads(line) for line in record.transcript.path.read_text().splitlines()]


def usage(agent: str, turn: int, tokens_in: int, tokens_out: int, cost: float | None = None) -> ev.Usage:
    return ev.Usage(agent=agent, turn=turn, input_tokens=tokens_in, output_tokens=tokens_out, cost_usd=cost)


def test_a_record_that_is_not_kept_writes_nothing_and_still_tells_its_sinks(state):
    record, seen = Record(), []
    record.attach(seen.append)
    record.emit(ev.Text(agent="claude", text="hi"))
    record.end("done")
    assert not state.exists() and not record.kept and record.transcript is None
    assert [e.kind for e in seen] == ["text", "end"]


def test_call_ids_are_unique_in_the_run_under_threads():
    record = Record()
    ids: list[str] = []

    def take() -> None:
        for _ in range(500):
            ids.append(record.next_call())

    threads = [threading.Thread(target=take) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(ids)) == len(ids) == 4000
    assert set(ids) == {f"c{n}" for n in range(1, 4001)}
    assert Record().next_call() == "c1"  # another run counts its own


def test_every_sink_and_the_transcript_see_one_order_stamped_with_a_time_that_never_goes_back():
    record = kept()
    first: list[ev.Event] = []
    second: list[ev.Event] = []
    record.attach(first.append)
    record.attach(second.append)

    def agent(name: str) -> None:
        for i in range(300):
            record.emit(ev.Text(agent=name, text=f"{i}"))

    threads = [threading.Thread(target=agent, args=(f"a{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    record.end("done")
    assert [id(e) for e in first] == [id(e) for e in second] and len(first) == 1201
    on_disk = written(record)
    assert [(e["agent"], e["text"]) for e in on_disk[:-1]] == [(e.agent, e.text) for e in first[:-1]]
    times = [e["t"] for e in on_disk]
    assert times == sorted(times) and times[0] >= 0
    for n in range(4):  # each agent's own events keep the order it made them in
        assert [e.text for e in first if e.agent == f"a{n}"] == [f"{i}" for i in range(300)]


def test_a_sink_may_emit_in_turn_and_its_event_follows_the_one_it_saw():
    record, seen = Record(), []

    def noticing(event: ev.Event) -> None:
        seen.append(event.kind)
        if isinstance(event, ev.Call):
            record.emit(ev.Notice(text=f"saw {event.call}"))

    record.attach(noticing)
    record.emit(ev.Call(call="c1", name="x"))
    assert seen == ["call", "notice"]


def test_a_sink_that_raises_stops_the_thread_that_emitted_and_is_told_nothing_more():
    record, told, others = kept(), [], []

    def gone(event: ev.Event) -> None:
        told.append(event.kind)
        raise BrokenPipeError("the reader stopped reading")

    record.attach(gone)
    record.attach(others.append)
    with pytest.raises(BrokenPipeError):
        record.emit(ev.Text(text="hi"))
    assert written(record)[-1]["text"] == "hi"  # the transcript had it first
    record.emit(ev.Error(agent="claude", message="@claude was stopped"))  # the run records how it ends
    assert record.end("cancelled").status == "cancelled"
    assert told == ["text"] and [e.kind for e in others] == ["error", "end"]
    assert [e["kind"] for e in written(record)] == ["text", "error", "end"]


def test_an_end_a_sink_refuses_is_still_the_end_and_closes_the_transcript():
    record = kept()

    def refusing(event: ev.Event) -> None:
        if event.kind == "end":
            raise BrokenPipeError

    record.attach(refusing)
    with pytest.raises(BrokenPipeError):
        record.end("done")
    assert record.ended is not None and record.end("failed").status == "done"
    assert written(record)[-1]["kind"] == "end"
    record.emit(ev.Text(text="late"))  # ignored: the run ended
    assert written(record)[-1]["kind"] == "end"


def test_a_pending_record_holds_its_events_until_it_is_kept_and_writes_them_first(state):
    record, seen = Record(pending=True), []
    record.attach(seen.append)
    record.emit(ev.Start(run=record.run, command="query"))
    record.emit(ev.Notice(text="booting"))
    assert not state.exists() and [e.kind for e in seen] == ["start", "notice"]  # the sinks hear them at once
    record.keep(Transcript.create(record.run))
    record.emit(ev.Turn(agent="claude", turn=1))
    record.end("done")
    assert [e["kind"] for e in written(record)] == ["start", "notice", "turn", "end"]
    assert [e.kind for e in read_run(record.run)] == ["start", "notice", "turn", "end"]


def test_a_pending_record_kept_nowhere_drops_what_it_held(state):
    record = Record(pending=True)
    record.emit(ev.Start(run=record.run))
    record.keep(None)
    record.emit(ev.Notice(text="later"))
    record.end("done")
    assert not state.exists() and not record.kept


def test_the_end_counts_calls_and_errors_and_sums_each_agents_usage_events():
    record = kept()
    record.emit(ev.Turn(agent="claude", turn=1))
    record.emit(ev.Call(agent="claude", call=record.next_call(), name="a"))
    record.emit(usage("claude", 1, 100, 10, 0.5))
    record.emit(ev.Turn(agent="claude", turn=2))
    record.emit(ev.Call(agent="claude", call=record.next_call(), name="b"))
    record.emit(usage("claude", 2, 50, 5, 0.25))
    record.emit(ev.Turn(agent="gemini", turn=1))
    record.emit(usage("gemini", 1, 7, 3))
    record.emit(ev.Error(agent="gemini", message="boom"))
    end = record.end("failed")
    assert (end.status, end.calls, end.errors) == ("failed", 2, 1)
    assert end.usage == {
        "claude": {"turns": 2, "input_tokens": 150, "output_tokens": 15, "cached_tokens": 0, "cost_usd": 0.75},
        "gemini": {"turns": 1, "input_tokens": 7, "output_tokens": 3, "cached_tokens": 0, "cost_usd": None},
    }
    events = read_run(record.run)
    for agent, total in end.usage.items():  # the end's usage is the sum of the agent's usage events
        mine = [e for e in events if isinstance(e, ev.Usage) and e.agent == agent]
        assert total["input_tokens"] == sum(e.input_tokens for e in mine)
        assert total["output_tokens"] == sum(e.output_tokens for e in mine)
    assert written(record)[-1]["usage"] == end.usage


def test_the_end_is_written_once_and_nothing_follows_it_even_when_tools_still_report():
    record = kept()
    stop = threading.Event()

    def late_tool() -> None:
        while not stop.is_set():
            record.emit(ev.Result(call="c1", name="slow", success=True))

    workers = [threading.Thread(target=late_tool) for _ in range(3)]
    for worker in workers:
        worker.start()
    while len(record.transcript.path.read_text().splitlines()) < 50:
        pass
    end = record.end("cancelled")
    assert record.end("done") is end  # a second end does nothing
    stop.set()
    for worker in workers:
        worker.join()
    events = written(record)
    assert events[-1]["kind"] == "end" and events[-1]["status"] == "cancelled"
    assert [e["kind"] for e in events].count("end") == 1


def test_each_agent_has_its_parts_numbered_from_one():
    record = Record()
    assert [record.part("claude"), record.part("gemini"), record.part("claude")] == [1, 1, 2]


def test_a_cancel_is_recorded_once_and_ends_every_loop_once():
    record, ended = kept(), []
    record.on_cancel(lambda: ended.append("claude"))
    record.on_cancel(lambda: ended.append("gemini"))
    record.cancel("browser")
    record.cancel("terminal")  # a second cancel changes nothing
    record.on_cancel(lambda: ended.append("late"))  # a loop made after the cancel is ended at once
    assert ended == ["claude", "gemini", "late"]
    assert (record.cancelled, record.cancelled_by) == (True, "browser")
    assert record.end("failed").status == "cancelled"  # a cancelled run that did not finish
    assert [(e["kind"], e.get("source")) for e in written(record)] == [("cancel", "browser"), ("end", None)]


def test_a_cancelled_run_that_finished_all_the_same_is_done():
    record = Record()
    record.cancel("editor")
    assert record.end("done").status == "done"


def test_a_cancel_after_the_end_changes_nothing():
    record, ended = Record(), []
    record.on_cancel(lambda: ended.append(1))
    record.end("done")
    record.cancel("browser")
    assert (ended, record.cancelled) == ([], False)


@pytest.mark.parametrize(
    ("exc", "status", "errors"),
    [
        (ValueError("bad input"), "failed", ["bad input"]),
        (KeyboardInterrupt(), "cancelled", []),
        (Interrupted("@claude was stopped"), "cancelled", []),
    ],
)
def test_a_run_that_an_exception_ended_fails_or_is_cancelled(exc, status, errors):
    record = kept()
    end = record.end(record.fail(exc))
    assert end.status == status and end.status in ev.ENDED
    assert [e["message"] for e in written(record) if e["kind"] == "error"] == errors
    assert end.errors == len(errors)


def test_a_run_that_failed_before_it_was_written_down_drops_what_it_held(state):
    record = Record(pending=True)
    record.emit(ev.Start(run=record.run))
    assert record.fail(RuntimeError("no CLI")) == "failed"
    record.end("failed")
    assert not state.exists()


def test_the_status_words_are_one_set():
    assert ev.STATUSES == ("running", "waiting", "done", "failed", "cancelled", "unfinished")
    assert set(ev.ENDED) < set(ev.STATUSES)
