import json
import os
import stat
import subprocess
import sys
import threading

import pytest

from crewbridge.approval import Answer, Question
from crewbridge.errors import UsageError
from crewbridge.jsonio import MAX_DEPTH
from crewbridge.transcript import MAX_RECORD, MAX_TEXT, Transcript, list_runs, read_run, runs_dir

SECRET = "s3cr3t-value-1234"
ENV = {
    "ANTHROPIC_API_KEY": SECRET,
    "GITHUB_TOKEN": "tok-abcdef",
    "DB_PASSWORD": "hunter22",
    "SHORT_KEY": "dummy",
    "HOME": "/home/someone",
    "EDITOR": "vim-editor",
}


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state" / "crewbridge" / "runs"


def lines(transcript: Transcript) -> list[dict]:
    return [json.loads(line) for line in transcript.path.read_text().splitlines()]


def test_the_default_transcript_discards_everything(state):
    transcript = Transcript()
    transcript.write("prompt", text="hi")
    transcript.close("ok")
    assert not state.exists() and transcript.path is None


def test_a_run_is_a_jsonl_file_under_the_user_state_dir(state):
    transcript = Transcript.open(command="query", agents=["claude"], task="what is in notes.txt?")
    assert transcript.path.parent == state == runs_dir()
    first = lines(transcript)[0]
    assert first["kind"] == "start" and first["run_id"] == transcript.run_id
    assert (first["command"], first["agents"], first["task"]) == ("query", ["claude"], "what is in notes.txt?")
    assert {"time", "ms", "pid", "cwd", "version"} <= set(first)


def test_every_event_is_on_disk_as_soon_as_it_is_written():
    transcript = Transcript.open()
    transcript.write("tool_call", agent="claude", name="crew:read_file", input={"path": "a"})
    assert [e["kind"] for e in lines(transcript)] == ["start", "tool_call"]  # before close
    transcript.write("tool_result", agent="claude", name="crew:read_file", result={"success": True})
    assert lines(transcript)[-1]["result"] == {"success": True}


def test_close_writes_the_end_with_counts_and_is_idempotent():
    transcript = Transcript.open()
    transcript.write("tool_call", name="a")
    transcript.write("tool_call", name="b")
    transcript.write("error", message="boom")
    transcript.close("error")
    transcript.close("ok")
    transcript.write("late", note="after close")
    end = lines(transcript)[-1]
    assert (end["kind"], end["status"], end["tool_calls"], end["errors"]) == ("end", "error", 2, 1)
    assert [e["kind"] for e in lines(transcript)][-2:] == ["error", "end"]


def test_nothing_follows_the_end_even_when_tools_still_report():
    transcript = Transcript.open()
    stop = threading.Event()

    def late_tool() -> None:
        while not stop.is_set():
            transcript.write("tool_result", name="slow")

    workers = [threading.Thread(target=late_tool) for _ in range(3)]
    for worker in workers:
        worker.start()
    while len(transcript.path.read_text().splitlines()) < 50:
        pass
    transcript.close("interrupted")
    stop.set()
    for worker in workers:
        worker.join()
    events = lines(transcript)
    assert events[-1]["kind"] == "end" and events[-1]["tool_calls"] == 0
    assert list_runs()[0].status == "interrupted"


def test_transcripts_are_private_to_the_user(state):
    transcript = Transcript.open()
    assert stat.S_IMODE(transcript.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(state.stat().st_mode) == 0o700


def test_secrets_are_redacted_before_they_reach_the_disk():
    transcript = Transcript.open(env=ENV, argv=["crew", "query", f"--key={SECRET}"])
    transcript.write(
        "tool_result",
        result={
            "data": {
                "output": f"export ANTHROPIC_API_KEY={SECRET}\ntoken tok-abcdef, pw hunter22",
                SECRET: ["nested", "dummy"],
            }
        },
    )
    transcript.close("ok")
    text = transcript.path.read_text()
    assert SECRET not in text and "tok-abcdef" not in text and "hunter22" not in text
    result = lines(transcript)[1]["result"]
    assert result["data"]["output"] == (
        "export ANTHROPIC_API_KEY=[REDACTED:ANTHROPIC_API_KEY]\n"
        "token [REDACTED:GITHUB_TOKEN], pw [REDACTED:DB_PASSWORD]"
    )
    assert result["data"]["[REDACTED:ANTHROPIC_API_KEY]"] == ["nested", "dummy"]  # short values stay
    assert lines(transcript)[0]["argv"][2] == "--key=[REDACTED:ANTHROPIC_API_KEY]"


def test_parallel_writers_never_mix_their_lines():
    transcript = Transcript.open()

    def agent(name: str) -> None:
        for i in range(200):
            transcript.write("text", agent=name, text=f"{name} line {i} " + "x" * 500)

    threads = [threading.Thread(target=agent, args=(f"agent{n}",)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    transcript.close("ok")
    events = lines(transcript)  # every line parses
    assert len(events) == 2 + 6 * 200
    assert all(sum(1 for e in events if e.get("agent") == f"agent{n}") == 200 for n in range(6))


@pytest.mark.slow
def test_a_run_that_dies_loses_nothing_it_wrote_and_shows_as_unfinished(tmp_path):
    script = (
        "import os, sys\n"
        "from crewbridge.transcript import Transcript\n"
        "t = Transcript.open(command='query')\n"
        "for i in range(50):\n"
        "    t.write('tool_call', name=f'call{i}')\n"
        "os.kill(os.getpid(), 9)\n"
    )
    subprocess.run([sys.executable, "-c", script], env=os.environ, check=False, start_new_session=True)
    (run,) = list_runs()
    assert run.status == "unfinished" and run.end == {} and run.fields["command"] == "query"
    assert [e["name"] for e in read_run(run.run_id)[1:]] == [f"call{i}" for i in range(50)]


def test_using_it_as_a_context_manager_closes_with_the_outcome():
    with Transcript.open() as ok:
        pass
    with pytest.raises(ValueError), Transcript.open() as failed:
        raise ValueError("bad input")
    with pytest.raises(KeyboardInterrupt), Transcript.open() as stopped:
        raise KeyboardInterrupt
    assert lines(ok)[-1]["status"] == "ok"
    assert [(e["kind"], e.get("message")) for e in lines(failed)[-2:]] == [("error", "bad input"), ("end", None)]
    assert lines(failed)[-1]["status"] == "error"
    assert lines(stopped)[-1]["status"] == "interrupted"


# --- crew log ---------------------------------------------------------------------------------------

# --- one record is bounded ------------------------------------------------------------------------


def test_a_100_mb_argument_is_stored_cut_with_its_size_and_reads_back():
    transcript = Transcript.open()
    transcript.write("tool_call", agent="a", name="crew:write_file", input={"path": "a", "content": "x" * 100_000_000})
    transcript.close("ok")
    assert transcript.path.stat().st_size < MAX_RECORD + 1000
    [_, call, end] = read_run(transcript.run_id)
    content = call["input"]["content"]
    assert (
        content == "x" * MAX_TEXT + f"…[crew cut this text: 100,000,000 characters in all, the first {MAX_TEXT:,} kept]"
    )
    assert (call["input"]["path"], end["kind"], end["tool_calls"]) == ("a", "end", 1)
    assert list_runs()[0].tool_calls == 1


def test_a_secret_across_the_cut_is_redacted_not_kept_in_part():
    transcript = Transcript.open(env=ENV)
    transcript.write("tool_result", result="y" * (MAX_TEXT - 5) + SECRET + "z" * MAX_TEXT)
    transcript.close("ok")
    assert SECRET[:5].encode() not in transcript.path.read_bytes()
    assert lines(transcript)[1]["result"].startswith("y" * (MAX_TEXT - 5) + "[REDA")


@pytest.mark.slow
def test_a_record_of_many_strings_each_under_the_limit_leaves_its_largest_fields_out():
    result = {"data": ["m" * 100_000] * 100}
    transcript = Transcript.open()
    transcript.write("tool_result", agent="a", name="crew:grep", result=result, small="kept")
    transcript.close("ok")
    record = lines(transcript)[1]
    assert len(json.dumps(record)) < MAX_RECORD
    size = len(json.dumps(result))
    assert record["result"] == {"cut": f"crew left this field out: {size:,} bytes made the record too large"}
    assert (record["kind"], record["agent"], record["name"], record["small"]) == (
        "tool_result",
        "a",
        "crew:grep",
        "kept",
    )


def test_nesting_past_the_limit_is_stored_as_a_note():
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    transcript = Transcript.open()
    transcript.write("tool_call", input=deep)
    transcript.close("ok")
    record = lines(transcript)[1]  # the record's own object is the first level
    note = f"[crew left this out: nested more than {MAX_DEPTH} levels deep]"
    assert json.dumps(record["input"]) == "[" * (MAX_DEPTH - 2) + json.dumps([note]) + "]" * (MAX_DEPTH - 2)


def test_text_that_is_not_utf8_is_written_escaped_and_reads_back_the_same():
    transcript = Transcript.open()
    transcript.write("tool_call", input={"path": "caf\udce9.txt", "pair": "\ud83d"})
    transcript.close("ok")
    raw = transcript.path.read_bytes()
    raw.decode("utf-8")  # the file is UTF-8
    assert b'"caf\\udce9.txt"' in raw
    assert read_run(transcript.run_id)[1]["input"] == {"path": "caf\udce9.txt", "pair": "\ud83d"}


def test_values_that_are_not_json_are_recorded_as_their_text(tmp_path):
    transcript = Transcript.open()
    transcript.write("error", where=tmp_path, exc=ValueError("boom"), pair=(1, 2))
    transcript.close("ok")
    assert lines(transcript)[1] | {"time": 0, "ms": 0} == {
        "kind": "error",
        "time": 0,
        "ms": 0,
        "where": str(tmp_path),
        "exc": "boom",
        "pair": [1, 2],
    }


def test_a_line_longer_than_any_record_is_skipped_and_the_rest_is_read(state):
    (run_id,) = make_runs(1)
    path = state / f"{run_id}.jsonl"
    first, *rest = path.read_bytes().splitlines(keepends=True)
    huge = b'{"kind": "tool_call", "input": "' + b"h" * (MAX_RECORD * 2) + b'"}\n'
    path.write_bytes(first + huge + b"".join(rest))
    events = read_run(run_id)
    assert [e["kind"] for e in events] == ["start", "corrupt", "tool_call", "end"]
    assert events[1]["error"] == f"a record of {len(huge):,} bytes, more than crew writes ({MAX_RECORD:,}); not read"
    assert list_runs()[0].status == "ok"


@pytest.mark.parametrize("line", [b"[" * 5000 + b"]" * 5000, b"[1, 2]", b"\xff\xfe"])
def test_a_line_that_is_not_a_record_is_reported_and_the_rest_is_read(state, line):
    (run_id,) = make_runs(1)
    path = state / f"{run_id}.jsonl"
    first, *rest = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(first + line + b"\n" + b"".join(rest))
    events = read_run(run_id)
    assert [e["kind"] for e in events] == ["start", "corrupt", "tool_call", "end"] and events[1]["error"]


def make_runs(count: int) -> list[str]:
    ids = []
    for n in range(count):
        transcript = Transcript.open(command="query", task=f"task {n}")
        transcript.write("tool_call", name="x")
        transcript.close("ok")
        ids.append(transcript.run_id)
    return ids


def test_list_runs_gives_the_newest_first_up_to_the_limit(state):
    for n, run_id in enumerate(make_runs(3)):  # ids sort by start time; make the order certain
        os.rename(state / f"{run_id}.jsonl", state / f"2030010{n}-000000-{run_id[-6:]}.jsonl")
    runs = list_runs(limit=2)
    assert [r.fields["task"] for r in runs] == ["task 2", "task 1"]
    assert (runs[0].status, runs[0].tool_calls) == ("ok", 1) and runs[0].seconds >= 0
    assert list_runs(limit=0) == []


def test_list_runs_without_any_runs_is_empty():
    assert list_runs() == []


def test_read_run_by_id_prefix_or_last():
    (run_id,) = make_runs(1)
    events = read_run(run_id)
    assert [e["kind"] for e in events] == ["start", "tool_call", "end"]
    assert read_run(run_id[:17]) == events == read_run("last")


def test_read_run_reports_a_half_written_last_line(state):
    (run_id,) = make_runs(1)
    with open(state / f"{run_id}.jsonl", "a") as handle:
        handle.write('{"kind": "tool_ca')
    assert read_run(run_id)[-1] == {
        "kind": "corrupt",
        "line": 4,
        "text": '{"kind": "tool_ca',
        "error": "Unterminated string starting at: line 1 column 10 (char 9)",
    }


def test_read_run_errors_name_the_problem_and_the_next_step(state):
    with pytest.raises(UsageError, match="no runs recorded yet"):
        read_run("last")
    ids = make_runs(2)
    with pytest.raises(UsageError, match=r"run 'ffff' not found in .*; `crew log` lists runs"):
        read_run("ffff")
    common = os.path.commonprefix(ids)  # noqa: RUF071 - the ids' common characters: they are not paths
    with pytest.raises(UsageError, match=f"run id '{common}' matches 2 runs"):
        read_run(common)


@pytest.mark.parametrize("bad", ["../../etc/passwd", "/etc/passwd", "x.jsonl", ""])
def test_read_run_refuses_anything_but_a_run_id(bad):
    make_runs(1)
    with pytest.raises(UsageError, match="is not valid; `crew log` lists runs"):
        read_run(bad)


def test_the_end_event_sums_each_agents_usage_and_crew_log_shows_it(state):
    transcript = Transcript.open(command="query", agents=["claude", "gemini"], task="compare\nsecond line")
    transcript.write(
        "usage", agent="claude", turn=1, input_tokens=100, output_tokens=10, cached_tokens=80, cost_usd=0.5
    )
    transcript.write("usage", agent="claude", turn=2, input_tokens=50, output_tokens=5, cached_tokens=0, cost_usd=0.25)
    transcript.write("usage", agent="gemini", turn=1, input_tokens=7, output_tokens=3, cached_tokens=0, cost_usd=None)
    transcript.close("ok")
    (run,) = list_runs()
    assert run.usage == {
        "claude": {"turns": 2, "input_tokens": 150, "output_tokens": 15, "cached_tokens": 80, "cost_usd": 0.75},
        "gemini": {"turns": 1, "input_tokens": 7, "output_tokens": 3, "cached_tokens": 0, "cost_usd": None},
    }
    assert run.total.tokens == 175
    assert run.line().endswith("ok            0 calls       175 tokens   $0.7500  @claude @gemini  compare")
    assert run.to_dict()["cost_usd"] == 0.75 and run.to_dict()["input_tokens"] == 157


def test_list_runs_since_a_moment_leaves_out_older_runs(state):
    from datetime import datetime, timezone

    for n, run_id in enumerate(make_runs(3)):
        os.rename(state / f"{run_id}.jsonl", state / f"2030010{n + 1}-120000-{run_id[-6:]}.jsonl")
    runs = list_runs(None, since=datetime(2030, 1, 2, 11, tzinfo=timezone.utc))
    assert [r.fields["task"] for r in runs] == ["task 2", "task 1"]


def test_runs_started_in_one_second_sort_by_their_start(monkeypatch):
    from crewbridge import transcript as module

    moments = iter([1_700_000_000.999, 1_700_000_000.5, 1_700_000_000.001])
    monkeypatch.setattr(module.time, "time", lambda: next(moments))
    ids = [module.new_run_id() for _ in range(3)]
    assert [i[:16] for i in ids] == ["20231114-221320-"] * 3
    assert sorted(ids) == ids[::-1]  # .001 < .5 < .999


def test_an_approval_answer_is_recorded_with_where_it_came_from():
    transcript = Transcript.open()
    transcript.answered(Question("claude", "write_file", {"path": "a"}), Answer("no", "browser"))
    transcript.answered(Question("claude", "native:Bash", {"command": "ls"}), None)
    events = [event for event in read_run(transcript.run_id) if event["kind"] == "approval"]
    assert [(e["name"], e["input"], e["answer"], e["source"]) for e in events] == [
        ("write_file", {"path": "a"}, "no", "browser"),
        ("native:Bash", {"command": "ls"}, None, None),
    ]
