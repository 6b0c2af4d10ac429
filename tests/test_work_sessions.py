"""Which run --continue and --resume name, each agent's earlier conversation read back from the
records of that run and the runs it continued, and how a resumed agent goes on (in the new run's
record)."""

from __future__ import annotations

import os

import pytest

from crewbridge.base.decoded import Usage
from crewbridge.errors import UsageError
from crewbridge.record import events as ev
from crewbridge.record.stream import Record, now
from crewbridge.record.transcript import Transcript
from crewbridge.work.sessions import Prior, Resumed, priors, run_to_resume


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def a_run(command="query", resumed_from=None, cwd=None, **agents):
    """A finished run: for each agent, a list of its events (their agent is set here)."""
    record = Record()
    record.keep(Transcript.create(record.run))
    mode = "execute" if command == "execute" else "query"
    where = str(cwd or os.getcwd())
    start = ev.Start(run=record.run, at=now(), command=command, mode=mode, agents=list(agents), task="t", cwd=where)
    start.resumed_from = resumed_from
    record.emit(start)
    for agent, events in agents.items():
        for event in events:
            event.agent = agent
            record.emit(event)
    record.end("done")
    return record.run


def test_an_agents_history_session_and_mode_come_from_the_chain_of_runs():
    first = a_run(
        claude=[
            ev.Turn(turn=1, prompt="[crew tools] … task one"),
            ev.Session(session="S1"),
            ev.Reply(turn=1, text="```json call```"),
            ev.Turn(turn=2, prompt="results"),
            ev.Answer(text="answer one"),
            ev.Usage(input_tokens=5),
            ev.Session(session="S1", reported={"input_tokens": 50, "output_tokens": 5}),
        ],
        gemini=[ev.Turn(turn=1, prompt="only gemini"), ev.Answer(text="g")],
    )
    second = a_run(
        "execute",
        resumed_from=first,
        claude=[
            ev.Resume(of=first, how="continued"),
            ev.Turn(turn=1, prompt="task two"),
            ev.Session(session="S2"),
            ev.Answer(text="answer two"),
        ],
    )
    found = priors(second)
    claude = found["claude"]
    assert claude.history == [
        ("user", "[crew tools] … task one"),
        ("assistant", "```json call```"),
        ("user", "results"),
        ("assistant", "answer one"),
        ("user", "task two"),
        ("assistant", "answer two"),
    ]
    assert (claude.run_id, claude.session_id, claude.mode) == (second, "S2", "execute")
    assert claude.reported == Usage(50, 5, None, 0)
    assert found["gemini"].history == [("user", "only gemini"), ("assistant", "g")]
    assert found["gemini"].mode == "query"  # its last run


def test_an_agent_that_said_nothing_in_the_run_has_no_conversation_to_continue():
    run = a_run(claude=[ev.Turn(turn=1, prompt="task"), ev.Error(message="429")])
    assert priors(run) == {}
    run = a_run(claude=[ev.Turn(turn=1, prompt="task"), ev.Answer(text="a"), ev.Turn(turn=1, prompt="unanswered")])
    assert priors(run)["claude"].history == [("user", "task"), ("assistant", "a")]


def test_continue_takes_the_most_recent_run_in_this_directory(tmp_path):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    here_old = a_run(cwd=tmp_path / "a", claude=[])
    a_run(cwd=tmp_path / "b", claude=[])
    a_run("mcp", cwd=tmp_path / "a", claude=[])  # crew mcp's record is no conversation to continue
    assert run_to_resume(True, None, tmp_path / "a") == here_old
    chat = a_run("chat", cwd=tmp_path / "a", claude=[])
    assert run_to_resume(True, None, tmp_path / "a") == chat
    assert run_to_resume(False, here_old, tmp_path / "b") == here_old  # --resume takes any run
    assert run_to_resume(False, None, tmp_path / "a") is None


def test_continue_and_resume_say_what_is_wrong(tmp_path):
    with pytest.raises(UsageError, match=r"^no earlier run in .* to continue; `crew log` lists runs"):
        run_to_resume(True, None, tmp_path)
    with pytest.raises(UsageError, match="--continue and --resume were both given; choose one"):
        run_to_resume(True, "20250101", tmp_path)
    with pytest.raises(UsageError, match="run 'abc' not found"):
        run_to_resume(False, "abc", tmp_path)


def test_a_resumed_agent_says_in_the_new_runs_record_how_it_goes_on():
    prior = Prior("R1", "claude", session_id="S1", history=[("user", "t"), ("assistant", "a")])
    codex = Prior("R1", "codex", history=prior.history)
    resumed = Resumed("R1", {"claude": prior, "codex": codex}, [True, False, False])
    record, seen = Record(), []
    record.attach(seen.append)
    assert resumed.of(0, "claude", record) == (prior, True)
    assert resumed.of(1, "codex", record) == (codex, False)
    assert resumed.of(2, "gemini", record) == (None, False)
    assert [(e.agent, e.of, e.how, e.session) for e in seen] == [
        ("claude", "R1", "continued", "S1"),
        ("codex", "R1", "replay", None),
        ("gemini", "R1", "fresh", None),
    ]
    assert seen[0].text == ""  # nothing to say: its CLI holds the conversation
    assert seen[1].text == "@codex's CLI named no session in run R1: crew replays the conversation from its transcript"
    assert seen[2].text == "@gemini was not in run R1: it starts a fresh conversation"
