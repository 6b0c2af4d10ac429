"""crewbridge.ui.runs: what `crew ui` shows of the runs index — the list, filtered as the page asks,
and usage over time, summed as `crew log --by agent` sums (the index itself: test_record_index)."""

from __future__ import annotations

from crewbridge.record.index import Runs
from crewbridge.ui.runs import listed, usage
from runfiles import write_run


def test_the_list_is_newest_first_and_filtered_by_agent_status_and_text(tmp_path):
    write_run(tmp_path, "20250101-000000-aaa111", agents=["claude"], task="read the notes", end="ok")
    write_run(tmp_path, "20250102-000000-bbb222", agents=["gemini"], task="fix the date", end="error")
    write_run(tmp_path, "20250103-000000-ccc333", agents=["claude", "codex"], task="review", end="interrupted")
    runs = Runs(tmp_path, index=None)
    assert [(row["run_id"][-6:], row["status"]) for row in listed(runs)] == [
        ("ccc333", "cancelled"),
        ("bbb222", "failed"),
        ("aaa111", "done"),
    ]
    assert [row["run_id"][-6:] for row in listed(runs, agent="claude")] == ["ccc333", "aaa111"]
    assert [row["run_id"][-6:] for row in listed(runs, status="failed")] == ["bbb222"]
    assert [row["run_id"][-6:] for row in listed(runs, text="NOTES")] == ["aaa111"]
    assert "pid" not in listed(runs)[0]  # the process is the index's business, not the page's


def test_usage_is_summed_per_day_agent_and_model_and_per_agent_as_crew_log_sums_it(tmp_path):
    write_run(
        tmp_path, "20250101-000000-aaa111", agents=["claude"], tokens=(100, 20), cost=0.01, models={"claude": "opus"}
    )
    write_run(
        tmp_path, "20250101-120000-bbb222", agents=["claude"], tokens=(1, 2), cost=0.02, models={"claude": "opus"}
    )
    write_run(tmp_path, "20250102-000000-ccc333", agents=["claude", "gemini"], tokens=(5, 5), cost=None)
    write_run(tmp_path, "20250103-000000-ddd444", agents=["codex"], end=None, pid=(1 << 22) + 1)  # no end: no usage
    shown = usage(Runs(tmp_path, index=None))
    assert {(s["day"], s["agent"], s["model"], s["tokens"], s["cost_usd"]) for s in shown["series"]} == {
        ("2025-01-01", "claude", "opus", 123, 0.03),
        ("2025-01-02", "claude", "default", 10, None),
        ("2025-01-02", "gemini", "default", 10, None),
    }
    assert [(a["agent"], a["runs"], a["input_tokens"], a["output_tokens"]) for a in shown["agents"]] == [
        ("claude", 3, 106, 27),
        ("gemini", 1, 5, 5),
    ]
