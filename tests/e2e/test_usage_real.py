"""Usage through the `crew` command against the real CLIs and the mock model server: each run's
tokens (cached ones too) and the cost the CLI reports reach the record, `crew log` shows them
per run, and `crew log --since … --by agent` sums them over runs."""

from __future__ import annotations

import json

import pytest

from crewbridge.base import prices
from crewcli import error_line, only_result, run_crew, tool_block, write_config
from mockserver import reply

pytestmark = pytest.mark.e2e

USAGE = {"input_tokens": 100, "output_tokens": 10, "cached_tokens": 40}  # each model reply reports this


def test_usage_is_recorded_per_run_and_summed_per_agent_over_runs(cli, crew, mock_server, notes):
    mock_server.script(
        reply(tool_block("crew:read_file", path="notes.txt"), **USAGE),
        reply("The code is 7-4-1.", **USAGE),
        reply("Yes.", **USAGE),
    )
    first = crew(cli, "query", "--json", f"@{cli} what does notes.txt say?")
    second = crew(cli, "query", "--json", f"@{cli} are you sure?")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    usage = only_result(first.stdout)["usage"]
    assert (usage["input_tokens"], usage["cached_tokens"], usage["output_tokens"]) == (200, 80, 20)
    # claude reports its cost; gemini's model (gemini-2.5-pro) is priced by crew's dated table; the
    # model codex runs here is not in the table: no cost, never a guess
    assert (usage["cost_usd"] is not None) == (cli != "codex")
    if cli == "gemini":
        assert usage["cost_usd"] == prices.cost("gemini-2.5-pro", 200, 20, 80)

    runs = [json.loads(line) for line in crew(cli, "log", "--json").stdout.splitlines()]
    used = [(run["task"], run["usage"][cli]["input_tokens"], run["usage"][cli]["output_tokens"]) for run in runs]
    assert used == [("are you sure?", 100, 10), ("what does notes.txt say?", 200, 20)]
    assert [(run["tokens"], run["usage"][cli]["turns"], run["status"]) for run in runs] == [
        (110, 1, "done"),
        (220, 2, "done"),
    ]
    assert runs[1]["cost"] == usage["cost_usd"]
    listed = crew(cli, "log").stdout.splitlines()
    assert "220 tokens" in listed[1] and f"@{cli}" in listed[1]

    (row,) = [
        json.loads(line) for line in crew(cli, "log", "--since", "1d", "--by", "agent", "--json").stdout.splitlines()
    ]
    assert row == {
        "agent": cli,
        "runs": 2,
        "turns": 3,
        "input_tokens": 300,
        "output_tokens": 30,
        "cached_tokens": 120,
        "cost_usd": None if cli == "codex" else round(usage["cost_usd"] + runs[0]["cost"], 8),
    }
    table = crew(cli, "log", "--since", "1d", "--by", "agent").stdout.splitlines()
    assert table[0].split() == ["AGENT", "RUNS", "TURNS", "INPUT", "CACHED", "OUTPUT", "COST"]
    assert table[1].split()[:6] == [f"@{cli}", "2", "3", "300", "120", "30"]


@pytest.mark.parametrize("limit", ["--max-tokens", "agent"])
def test_a_budget_stops_a_tool_loop_before_its_next_turn(limit, cli, crew, mock_server, workdir, notes):
    if limit == "agent":
        write_config(workdir / "crew.yaml", agents={cli: {"max_tokens": 150}})
    mock_server.script(
        reply(tool_block("crew:read_file", path="notes.txt"), **USAGE), reply(tool_block("crew:list_files"), **USAGE)
    )  # a third reply is never asked for
    args = ["--max-tokens", "150"] if limit == "--max-tokens" else []
    done = crew(cli, "query", *args, f"@{cli} what does notes.txt say?")
    assert done.returncode == 5, done.stderr
    name = "--max-tokens" if limit == "--max-tokens" else f"agents.{cli}.max_tokens"
    assert error_line(done.stderr) == (
        f"crew: error: @{cli} was stopped after turn 2: the run used 220 tokens, past {name} 150; the tools of "
        "its last reply ran, no further turn was sent (raise the limit, or go on with --continue)"
    )
    assert len(mock_server.requests) == 2
    events = [json.loads(line) for line in crew(cli, "log", "show", "--json", "last").stdout.splitlines()]
    assert [e["name"] for e in events if e["kind"] == "result"] == ["crew:read_file", "crew:list_files"]
    assert [e["message"] for e in events if e["kind"] == "error"] == [error_line(done.stderr)[len("crew: error: ") :]]
    assert events[-1]["status"] == "failed"


def test_codex_exec_resume_reports_its_threads_totals_and_each_reply_is_counted_once(cli_env, workdir, mock_server):
    env = {**cli_env("codex"), "CREW_LIVE": "0"}  # a codex exec per turn, continued by `exec resume`
    mock_server.script(reply("First.", **USAGE), reply("Second.", **USAGE), reply("Third.", **USAGE))
    runs = [
        run_crew(["query", "--json", *(["--continue"] if n else []), f"@codex question {n}"], env=env, cwd=workdir)
        for n in range(3)
    ]
    assert all(run.returncode == 0 for run in runs), [run.stderr for run in runs]
    said = [text for role, text in mock_server.requests[-1].messages() if role == "user"]
    assert said[-1] == "question 2" and any("question 0" in text for text in said)  # one thread, resumed
    events = [
        json.loads(line)
        for line in run_crew(["log", "show", "--json", "last"], env=env, cwd=workdir).stdout.splitlines()
    ]
    # the thread's total, as codex reported it (what a resumed thread's next reply is counted from)
    assert [e["reported"]["input_tokens"] for e in events if e["kind"] == "session" and e.get("reported")] == [300]
    assert [e["input_tokens"] for e in events if e["kind"] == "usage"] == [100]  # this run's share
    assert [only_result(run.stdout)["usage"]["input_tokens"] for run in runs] == [100, 100, 100]
    (row,) = map(json.loads, run_crew(["log", "--by", "agent", "--json"], env=env, cwd=workdir).stdout.splitlines())
    assert (row["runs"], row["input_tokens"], row["cached_tokens"], row["output_tokens"]) == (3, 300, 120, 30)
