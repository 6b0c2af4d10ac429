"""`crew log` (crewbridge.terminal.runlog): the runs index as lines, and `crew log show`, a finished run's
record replayed through the terminal renderer that showed it live — the run named, what crew sent
each turn (what a prompt repeats named, not shown again), the model's words, each tool line, the
CLI's own tools and crew's decision, errors, the end — with nothing that can drive the terminal;
`--json` the events as written."""

from __future__ import annotations

import io
import json
import os

import pytest

from crewbridge.record import events as ev
from crewbridge.record.index import Runs
from crewbridge.record.stream import Record
from crewbridge.record.transcript import Transcript
from crewbridge.terminal.runlog import line, show
from crewcli import crew_env, run_crew

CATALOGUE = "[crew tools]\n" + "a tool\n" * 300


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state" / "crewbridge" / "runs"


def recorded(*events: ev.Event, agents: list[str] | None = None, status: str = "done", **start) -> str:
    """A finished run whose record holds `events`; its id."""
    record = Record()
    record.keep(Transcript.create(record.run))
    fields = {"at": "2026-11-28T18:20:22.950+00:00", "command": "query", "cwd": "/w", "task": "when?", **start}
    record.emit(ev.Start(run=record.run, agents=agents or ["claude"], **fields))
    for event in events:
        record.emit(event)
    record.end(status)
    return record.run


def shown(run_id: str, out: io.StringIO | None = None) -> list[str]:
    out = out or io.StringIO()
    show(run_id, out)
    return out.getvalue().splitlines()


def test_a_run_reads_as_it_was_shown_live_in_order():
    run = recorded(
        ev.Part(agent="claude", part=1, provider="claude"),
        ev.Turn(agent="claude", turn=1, prompt=f"{CATALOGUE}\n[task]\nwhen?"),
        ev.Text(agent="claude", text="Let me look.\n"),
        ev.Text(agent="claude", text='```json\n{"type": "tool_use"}\n```\n', shown=""),
        ev.Call(agent="claude", call="c1", name="crew:read_file", input={"path": "notes.txt"}),
        ev.Decision(agent="claude", call="c1", decision="allowed"),
        ev.Result(agent="claude", call="c1", name="crew:read_file", success=True, data={"content": "a\nb\n"}),
        ev.Turn(agent="claude", turn=2, prompt="[crew tool results]\nResult of crew:read_file {}:"),
        ev.Usage(agent="claude", turn=2, input_tokens=1850, cached_tokens=1200, output_tokens=45),
        ev.Text(agent="claude", text="Tuesday.\n"),
        ev.Answer(agent="claude", text="Tuesday."),
    )
    lines = shown(run)
    assert lines[0] == f"run {run}: crew query @claude, 2026-11-28T18:20:22.950+00:00, in /w"
    assert lines[1] == "task: when?"
    assert lines[2].startswith("── ") and lines[2].endswith(
        f"s claude, turn 1: crew sent crew's tool catalogue ({len(CATALOGUE):,} characters), the message: when?"
    )
    assert lines[3:6] == ["Let me look.", "→ crew:read_file notes.txt", "  ✓ 2 lines"]
    assert lines[6].endswith("s claude, turn 2: crew sent the results of 1 tool call (48 characters)")
    assert lines[7] == "Tuesday."
    assert lines[8].startswith("── end, ") and lines[8].endswith("s: done, 1 tool call, 0 errors")
    assert len(lines) == 9 and "tool_use" not in "\n".join(lines)  # a call's JSON, as live: never shown


def test_a_replayed_conversation_is_named_not_shown_again():
    replayed = f"[crew conversation so far — you are the assistant; continue it]\n{CATALOGUE}\n[new message]\nand who?"
    run = recorded(ev.Turn(agent="llm", turn=1, prompt=replayed), agents=["llm"])
    assert shown(run)[2].endswith(
        f"crew sent the conversation so far, replayed ({len(replayed) - len('and who?') - 15:,} characters), "
        "the message: and who?"
    )


def test_control_characters_in_the_record_cannot_reach_the_terminal(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")  # crew's own colours apart, no escape reaches the terminal
    answer = "\x1b]0;owned\x07" + "".join(f"line {n}\n" for n in range(3))
    run = recorded(
        ev.Turn(agent="x", turn=1, prompt="go\x1b[2J"),
        ev.Text(agent="x", text=answer),
        ev.Answer(agent="x", text=answer),
        ev.Error(agent="x", message="bad\x1b[2J"),
        agents=["x"],
        task="\x1b[31mred",
    )
    lines = shown(run, Terminal())
    assert "task: \\x1b[31mred" in lines and lines[3] == "\\x1b]0;owned\\x07line 0"
    assert "crew: error: @x: bad\\x1b[2J" in lines
    assert not any("\x1b" in text for text in lines)


def test_the_clis_own_tool_and_crews_decision_a_failed_call_and_an_unreadable_line_each_take_a_line(state):
    run = recorded(
        ev.Call(agent="a", call="c1", name="crew:grep", input={"pattern": "("}),
        ev.Result(agent="a", call="c1", name="crew:grep", success=False, error="bad pattern"),
        ev.Call(agent="a", call="c2", name="native:Bash", input={"command": "rm x"}, via="own"),
        ev.Decision(agent="a", call="c2", decision="refused", reason="no"),
        ev.Fallback(agent="a", to="b", reason="rate limited"),
        agents=["a"],
    )
    path = state / f"{run}.jsonl"
    first, *rest = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(first + b"[]\n" + b"".join(rest))
    assert shown(run)[2:8] == [
        "crew: line 2 of the transcript could not be read: not a JSON object",
        "→ crew:grep (",
        "  ✗ bad pattern",
        "  native:Bash rm x: refused, no",
        "crew: @a cannot answer (rate limited); @b takes over",
        shown(run)[7],
    ]
    assert shown(run)[7].startswith("── end")


def test_several_agents_replay_labelled_with_each_answer_under_its_name():
    run = recorded(
        ev.Turn(agent="claude", turn=1, prompt="hi"),
        ev.Turn(agent="gemini", turn=1, prompt="hi"),
        ev.Text(agent="gemini", text="G says hi."),
        ev.Answer(agent="gemini", text="G says hi."),
        ev.Text(agent="claude", text="C says hi."),
        ev.Answer(agent="claude", text="C says hi."),
        agents=["claude", "gemini"],
    )
    lines = shown(run)
    assert lines.index("── @gemini ──") + 1 == lines.index("G says hi.")
    assert lines.index("── @claude ──") + 1 == lines.index("C says hi.")
    assert lines.index("G says hi.") < lines.index("C says hi.")  # in the order they came


def test_crew_log_shows_a_run_on_one_line():
    run = recorded(
        ev.Call(agent="claude", call="c1", name="crew:read_file"),
        ev.Usage(agent="claude", input_tokens=1000, output_tokens=234, cost_usd=0.75),
        ev.Usage(agent="gemini", input_tokens=7, output_tokens=3),
        agents=["claude", "gemini"],
        task="compare\nsecond line",
    )
    assert line(Runs().row(run)) == (
        f"{run}  done         1 call      1,244 tokens   $0.7500  @claude @gemini  compare"
    )
    cancelled = recorded(agents=["claude"], status="cancelled")
    listed = line(Runs().row(cancelled))
    assert listed == f"{cancelled}  cancelled    0 calls         0 tokens         -  @claude  when?"


def test_crew_log_show_reads_a_real_run_and_json_gives_its_events(tmp_path):
    (tmp_path / "notes.txt").write_text("hi\n")
    env = crew_env(tmp_path / "home")
    assert run_crew(["query", "@demo what is in notes.txt?"], env=env, cwd=tmp_path).returncode == 0
    shown = run_crew(["log", "show", "last"], env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "→ crew:read_file notes.txt" in shown.stdout and "crew's tool catalogue" in shown.stdout
    assert "Decision guide" not in shown.stdout  # the catalogue itself is not repeated
    assert "notes.txt has 1 non-empty line" in shown.stdout  # the answer, as it streamed
    events = [
        json.loads(line)
        for line in run_crew(["log", "show", "--json", "last"], env=env, cwd=tmp_path).stdout.splitlines()
    ]
    assert [e["kind"] for e in events][:3] == ["start", "part", "turn"] and events[-1]["kind"] == "end"
    assert events[0]["cwd"] == os.path.realpath(tmp_path)  # the run's own folder
    listed = run_crew(["log"], env=env, cwd=tmp_path)
    assert listed.returncode == 0 and events[0]["run"] in listed.stdout and "done" in listed.stdout
