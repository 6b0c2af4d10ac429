"""Which run --continue and --resume name, and each agent's earlier conversation read back from the
transcripts of that run and the runs it continued."""

from __future__ import annotations

import os

import pytest

from crewbridge.errors import UsageError
from crewbridge.events import Usage
from crewbridge.sessions import priors, run_to_resume
from crewbridge.transcript import Transcript


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def a_run(command="query", resumed_from=None, cwd=None, **agents):
    """A finished run: for each agent, a list of (kind, fields) events."""
    here = os.getcwd()
    if cwd:
        os.chdir(cwd)
    try:
        transcript = Transcript.open(command=command, agents=list(agents), task="t", resumed_from=resumed_from)
    finally:
        os.chdir(here)
    for agent, events in agents.items():
        for kind, fields in events:
            transcript.write(kind, agent=agent, **fields)
    transcript.close("ok")
    return transcript.run_id


def test_an_agents_history_session_and_mode_come_from_the_chain_of_runs():
    first = a_run(
        claude=[
            ("prompt", {"turn": 1, "text": "[crew tools] … task one"}),
            ("session", {"session": "S1"}),
            ("reply", {"text": "```json call```"}),
            ("prompt", {"turn": 2, "text": "results"}),
            ("answer", {"text": "answer one"}),
            ("usage", {"input_tokens": 5, "reported": {"input_tokens": 50, "output_tokens": 5}}),
        ],
        gemini=[("prompt", {"text": "only gemini"}), ("answer", {"text": "g"})],
    )
    second = a_run(
        "execute",
        resumed_from=first,
        claude=[
            ("resume", {"how": "continued"}),
            ("prompt", {"text": "task two"}),
            ("session", {"session": "S2"}),
            ("answer", {"text": "answer two"}),
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
    run = a_run(claude=[("prompt", {"text": "task"}), ("error", {"message": "429"})])
    assert priors(run) == {}
    run = a_run(claude=[("prompt", {"text": "task"}), ("answer", {"text": "a"}), ("prompt", {"text": "unanswered"})])
    assert priors(run)["claude"].history == [("user", "task"), ("assistant", "a")]


def test_continue_takes_the_most_recent_run_in_this_directory(tmp_path):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    here_old = a_run(cwd=tmp_path / "a", claude=[])
    a_run(cwd=tmp_path / "b", claude=[])
    assert run_to_resume(True, None, tmp_path / "a") == here_old
    assert run_to_resume(False, here_old, tmp_path / "b") == here_old  # --resume takes any run
    assert run_to_resume(False, None, tmp_path / "a") is None


def test_continue_and_resume_say_what_is_wrong(tmp_path):
    with pytest.raises(UsageError, match=r"^no earlier run in .* to continue; `crew log` lists runs"):
        run_to_resume(True, None, tmp_path)
    with pytest.raises(UsageError, match="--continue and --resume were both given; choose one"):
        run_to_resume(True, "20250101", tmp_path)
    with pytest.raises(UsageError, match="run 'abc' not found"):
        run_to_resume(False, "abc", tmp_path)
