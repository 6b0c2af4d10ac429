"""`crew log show` as a person reads it (crewbridge.runlog): a line per event, what a prompt repeats
named rather than shown, long text cut, nothing that can drive the terminal; `--json` the events."""

from __future__ import annotations

import json

from crewbridge.runlog import SHOWN_LINES, lines
from crewcli import crew_env, run_crew

CATALOGUE = "[crew tools]\n" + "a tool\n" * 300


def event(kind: str, ms: float = 1500.0, **fields: object) -> dict:
    return {"kind": kind, "time": "2026-11-28T18:20:22.950+00:00", "ms": ms, **fields}


def test_a_run_reads_as_what_happened_in_order():
    shown = list(
        lines(
            [
                event("start", 0.3, run_id="R1", command="query", agents=["claude"], cwd="/w", task="when?"),
                event("prompt", 360, agent="claude", turn=1, text=f"{CATALOGUE}\n[task]\nwhen?"),
                event("tool_call", 770, agent="claude", name="crew:read_file", input={"path": "notes.txt"}),
                event(
                    "tool_result",
                    820,
                    agent="claude",
                    name="crew:read_file",
                    result={"success": True, "data": {"content": "a\nb\n"}, "error": None, "metadata": {}},
                ),
                event("prompt", 830, agent="claude", turn=2, text="[crew tool results]\nResult of crew:read_file {}:"),
                event("usage", 1000, agent="claude", turn=2, input_tokens=1850, cached_tokens=1200, output_tokens=45),
                event("answer", 1010, agent="claude", text="Tuesday.\n"),
                event("end", 1011, status="ok", tool_calls=1, errors=0),
            ]
        )
    )
    assert shown == [
        "run R1: crew query @claude, 2026-11-28T18:20:22.950+00:00, in /w",
        "task: when?",
        "   0.36s  @claude turn 1: crew sent",
        f"            (crew's tool catalogue: {len(CATALOGUE):,} characters; the task:)",
        "            when?",
        "   0.77s  @claude → crew:read_file notes.txt",
        "   0.82s  @claude   ✓ crew:read_file: 2 lines",
        "   0.83s  @claude turn 2: crew sent",
        "            (the results of 1 tool call: 48 characters)",
        "   1.00s  @claude usage, turn 2: 1,850 tokens in (1,200 cached), 45 out",
        "   1.01s  @claude answered:",
        "            Tuesday.",
        "end, 1.01s: ok, 1 tool calls, 0 errors",
    ]


def test_a_replayed_conversation_is_named_not_shown_again():
    replayed = f"[crew conversation so far — you are the assistant; continue it]\n{CATALOGUE}\n[new message]\nand who?"
    assert list(lines([event("prompt", agent="llm", turn=1, text=replayed)]))[1:] == [
        f"            (the conversation so far, replayed: {len(replayed) - len('and who?') - 15:,} characters)",
        "            and who?",
    ]


def test_long_text_is_cut_and_control_characters_cannot_reach_the_terminal():
    answer = "\x1b]0;owned\x07" + "".join(f"line {n}\n" for n in range(40))
    shown = list(lines([event("answer", agent="x", text=answer), event("error", agent="x", message="bad\x1b[2J")]))
    assert shown[1] == "            \\x1b]0;owned\\x07line 0"
    assert (
        shown[SHOWN_LINES + 1] == f"            … {40 - SHOWN_LINES:,} more lines (crew log show --json has them all)"
    )
    assert shown[-1] == "   1.50s  @x error: bad\\x1b[2J"
    assert not any("\x1b" in line for line in shown)


def test_a_failed_call_a_refused_native_tool_and_an_unknown_event_each_take_a_line():
    shown = list(
        lines(
            [
                event("tool_result", agent="a", name="crew:grep", result={"success": False, "error": "bad pattern"}),
                event(
                    "native_tool", agent="a", tool="Bash", input={"command": "rm x"}, decision="refused", reason="no"
                ),
                event("budget", agent="a", turn=3, reason="50,000 tokens"),
                {"kind": "corrupt", "line": 7, "error": "not a JSON object", "text": "[]"},
            ]
        )
    )
    assert shown == [
        "   1.50s  @a   ✗ crew:grep: bad pattern",
        "   1.50s  @a native:Bash rm x: refused: no",
        '   1.50s  @a budget: {"turn": 3, "reason": "50,000 tokens"}',
        "line 7 could not be read: not a JSON object",
    ]


def test_crew_log_show_reads_a_real_run_and_json_gives_its_events(tmp_path):
    (tmp_path / "notes.txt").write_text("hi\n")
    env = crew_env(tmp_path / "home")
    assert run_crew(["query", "@demo what is in notes.txt?"], env=env, cwd=tmp_path).returncode == 0
    shown = run_crew(["log", "show", "last"], env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "@demo → crew:read_file notes.txt" in shown.stdout and "crew's tool catalogue" in shown.stdout
    assert "Decision guide" not in shown.stdout  # the catalogue itself is not repeated
    events = [
        json.loads(line)
        for line in run_crew(["log", "show", "--json", "last"], env=env, cwd=tmp_path).stdout.splitlines()
    ]
    assert [e["kind"] for e in events][:2] == ["start", "prompt"] and events[-1]["kind"] == "end"
