"""Asking agents from outside a run (crewbridge.engine.asking): the asked agents get `crew:ask` to ask one
more agent, no deeper than the limit; the depth reaches their CLIs through CREW_ASK_DEPTH."""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import pytest
from crewbridge.providers.generic import GenericSpec

from crewbridge import sandbox
from crewbridge.api import Outcome
from crewbridge.config import AgentSpec, Config, default_agents
from crewbridge.engine.asking import Asker, asked, current_depth
from crewbridge.engine.loop import RunResult
from crewbridge.errors import ProviderError, UsageError
from crewbridge.sandbox import Sandboxing

# A model that calls crew:ask once with the task given as its argument, then answers with the result;
# it records the CREW_ASK_DEPTH its CLI was started with.
ASKS = textwrap.dedent("""
    import json, os, re, sys
    prompt = sys.stdin.read()
    open(sys.argv[2], "a").write(os.environ.get("CREW_ASK_DEPTH", "-") + "\\n")
    results = re.findall(r"^```+json\\n(.*)$", prompt, re.M)
    if "[crew tool results]" in prompt:
        print("The tool said: " + json.dumps(json.loads(results[-1])))
    else:
        print("```json")
        print(json.dumps({"type": "tool_use", "name": "crew:ask", "input": {"task": sys.argv[1]}}))
        print("```")
""")


@pytest.fixture(autouse=True)
def scratch_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.delenv("CREW_ASK_DEPTH", raising=False)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    (path / "notes.txt").write_text("Buy milk.\n")
    return path


def config(tmp_path: Path, task: str) -> Config:
    script = tmp_path / "asks.py"
    script.write_text(ASKS)
    command = [sys.executable, str(script), task, str(tmp_path / "depths")]
    agents = {**default_agents(), "asker": AgentSpec(id="asker", provider="asker")}
    asker = GenericSpec(name="asker", command=command, state_dirs=[str(tmp_path)])  # it records depths there
    return Config(agents=agents, providers={"asker": asker}, transcripts=False)


@pytest.mark.slow
def test_an_asked_agent_asks_another_with_crews_ask(tmp_path: Path, workdir: Path) -> None:
    answer = Asker(config(tmp_path, "@demo what is in notes.txt?"), workdir).ask("@asker find out")
    assert not answer.failed
    assert answer.data["results"][0]["tool_calls"] == [
        {"name": "crew:ask", "input": {"task": "@demo what is in notes.txt?"}, "success": True, "error": None}
    ]
    assert "Buy milk." in answer.text  # the demo agent's answer, handed back by crew:ask
    assert (tmp_path / "depths").read_text().split() == ["1", "1"]  # the asked CLI runs one ask deep


@pytest.mark.slow
def test_the_asks_of_one_asker_detect_the_sandbox_once(
    tmp_path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    detections: list[object] = []

    def counted(env: object) -> object:
        detections.append(env)
        return quick(env)

    quick = sandbox.quick
    monkeypatch.setattr(sandbox, "quick", counted)
    sandboxing = Sandboxing()
    asker = Asker(config(tmp_path, "@demo what is in notes.txt?"), workdir, sandboxing=sandboxing)
    for _ in range(2):  # each ask: the asker's CLI, then the agent it asks through crew:ask
        assert not asker.ask("@asker find out").failed
    assert len(detections) == 1  # found once: not per ask, nor per asked agent
    mechanism = sandboxing.detection.mechanism
    assert mechanism is None or not mechanism.unproven  # proven by the first CLI it started, not again


@pytest.mark.slow
def test_at_the_depth_limit_the_asked_agent_gets_no_ask(tmp_path: Path, workdir: Path) -> None:
    answer = Asker(config(tmp_path, "@demo hi"), workdir, max_depth=0).ask("@asker find out")
    call = answer.data["results"][0]["tool_calls"][0]
    assert (call["name"], call["success"]) == ("crew:ask", False)
    assert call["error"].startswith("unknown tool 'crew:ask'")


def test_an_ask_for_a_model_that_would_read_as_an_option_is_refused_before_any_cli_starts(
    tmp_path: Path, workdir: Path
) -> None:
    with pytest.raises(UsageError, match="starts with '-', so the CLI would read it as an option"):
        Asker(config(tmp_path, "@demo hi"), workdir).ask("@asker:--dangerously-skip-permissions find out")
    assert not (tmp_path / "depths").exists()  # the asker's CLI never started
    answer = Asker(config(tmp_path, "@demo:--yolo hi"), workdir).ask("@asker find out")  # an agent asks so
    call = answer.data["results"][0]["tool_calls"][0]
    assert (call["name"], call["success"]) == ("crew:ask", False)
    assert "the model in '@demo:--yolo' starts with '-'" in call["error"]


def test_an_ask_past_the_limit_is_refused_before_any_cli_starts(tmp_path: Path, workdir: Path) -> None:
    with pytest.raises(UsageError, match=re.escape("refused 2 asks deep (the limit is 1")):
        Asker(config(tmp_path, "@demo hi"), workdir, depth=2).ask("@asker find out")
    assert not (tmp_path / "depths").exists()


@pytest.mark.parametrize(
    "task, message",
    [
        ("what is in notes.txt?", "no agent mentioned"),
        ("@demo", "no task after @demo"),
        ("@nobody hi", "agent 'nobody' not found"),
    ],
)
def test_a_task_without_agent_or_words_is_refused(task: str, message: str, workdir: Path) -> None:
    with pytest.raises(UsageError, match=message):
        Asker(Config(agents=default_agents()), workdir).check(task)


def test_answers_are_labelled_when_several_agents_answer_or_one_fails() -> None:
    one = asked([Outcome("a", result=RunResult("a", "yes"))])
    assert (one.text, one.failed, one.data["results"][0]["answer"]) == ("yes", False, "yes")
    two = asked([Outcome("a", result=RunResult("a", "yes")), Outcome("b", error=ProviderError("quota"))])
    assert two.text == "@a: yes\n\n@b: failed: quota" and two.failed
    assert [r["agent"] for r in two.data["results"]] == ["a", "b"]


def test_the_depth_is_read_from_the_environment() -> None:
    assert current_depth({}) == 0
    assert current_depth({"CREW_ASK_DEPTH": "2"}) == 2
    assert current_depth({"CREW_ASK_DEPTH": "x"}) == 0
    assert json.dumps(current_depth({"CREW_ASK_DEPTH": " 1 "})) == "1"


@pytest.mark.slow
def test_an_ask_in_a_worktree_with_a_review_says_where_the_change_is_and_what_the_reviewer_decided(
    tmp_path: Path,
) -> None:
    from crewcli import FakeModel, tool_block
    from gitrepo import make_repo, status

    repo = make_repo(tmp_path / "repo", {"notes.txt": "deploy: Friday\n"})
    writer, reviewer = FakeModel(tmp_path / "bin", "writer"), FakeModel(tmp_path / "bin", "reviewer")
    writer.script(tool_block("crew:write_file", path="notes.txt", content="deploy: Tuesday\n"), "Set.", "Still set.")
    reviewer.script(tool_block("crew:verdict", verdict="approve"))
    agents = {**default_agents(), **{f.name: AgentSpec(f.name, f.name) for f in (writer, reviewer)}}
    providers = {f.name: GenericSpec(f.name, **f.provider()) for f in (writer, reviewer)}
    asker = Asker(Config(agents=agents, providers=providers, transcripts=False), repo)
    answer = asker.ask("@writer set the deploy day to Tuesday", "execute", worktree=True, review="reviewer")
    assert not answer.failed and status(repo) == ""
    run, path = answer.data["results"][0]["run_id"], answer.data["results"][0]["worktree"]
    assert answer.text == (
        f"Set.\n[crew: @reviewer approved the change in round 1]\n[crew: the changes (1 file "
        f"changed, +1 -1) are in {path} on branch crew/{run}/writer; `crew apply {run} writer` "
        "takes them into the checkout]"
    )
    assert (
        answer.data["results"][0]["review"]["verdict"] == "approve"
        and answer.data["results"][0]["branch"] == f"crew/{run}/writer"
    )

    reviewer.script(
        tool_block(
            "crew:verdict",
            verdict="changes",
            findings=[{"path": "notes.txt", "line": 1, "severity": "low", "message": "say why"}],
        )
    )
    answer = asker.ask("@writer set the deploy day to Tuesday", "execute", review="reviewer", worktree=False)
    assert answer.failed and answer.data["results"][0]["exit_code"] == 6
    assert "[crew: @reviewer did not approve the change in 3 rounds: [low] notes.txt:1: say why]" in answer.text
