"""crewbridge.engine.review: write, then review, in bounded rounds — with two scripted CLIs (crewcli.FakeModel,
run as crew runs any CLI) in a scratch git repository. The reviewer reads in query mode and answers
with crew:verdict; "changes" go back to the writer in its conversation; disputes reach the next
round; a reviewer that answers in prose is asked once more; the rounds end with exit 6."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from crewbridge.providers.generic import GenericSpec

from crewbridge.bridge import Bridge
from crewbridge.config import AgentSpec, Config, default_agents
from crewbridge.engine.review import MAX_DIFF
from crewbridge.errors import ReviewNotApproved, UsageError
from crewcli import FakeModel, tool_block
from gitrepo import make_repo, status

TASK = "set the deploy day to Tuesday"


@pytest.fixture(autouse=True)
def scratch_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"notes.txt": "deploy: Friday\nowner: dana\n"})


@pytest.fixture
def writer(tmp_path: Path) -> FakeModel:
    return FakeModel(tmp_path / "bin", "writer")  # outside the repository: its notes are no change


@pytest.fixture
def reviewer(tmp_path: Path) -> FakeModel:
    return FakeModel(tmp_path / "bin", "reviewer")


def bridge(repo: Path, *fakes: FakeModel, **settings: dict) -> Bridge:
    agents = {**default_agents(), **{f.name: AgentSpec(f.name, f.name, **settings.get(f.name, {})) for f in fakes}}
    providers = {f.name: GenericSpec(f.name, **f.provider()) for f in fakes}
    return Bridge(Config(agents=agents, providers=providers, transcripts=False), workdir=repo)


def verdict(kind: str, *findings: tuple[str, int, str, str]) -> str:
    listed = [{"path": p, "line": n, "severity": s, "message": m} for p, n, s, m in findings]
    return tool_block("crew:verdict", verdict=kind, **({"findings": listed} if findings else {}))


def write(content: str) -> str:
    return tool_block("crew:write_file", path="notes.txt", content=content)


TYPO = ("notes.txt", 1, "low", "'Tusday' is misspelled")


@pytest.mark.slow
def test_a_review_that_asks_for_changes_gets_them_and_approves(repo, writer, reviewer):
    writer.script(
        write("deploy: Tusday\nowner: dana\n"),
        "I set the day.",
        tool_block("crew:edit_file", path="notes.txt", old_string="Tusday", new_string="Tuesday"),
        "Fixed the spelling.",
    )
    reviewer.script(verdict("changes", TYPO), verdict("approve"))
    [outcome] = bridge(repo, writer, reviewer).run(f"@writer {TASK}", "execute", review="reviewer")
    assert outcome.error is None and outcome.result.answer == "Fixed the spelling."
    assert outcome.review.to_dict() == {
        "reviewer": "reviewer",
        "rounds": 2,
        "verdict": "approve",
        "findings": [],
        "disputed": [],
    }
    assert (repo / "notes.txt").read_text() == "deploy: Tuesday\nowner: dana\n"
    first, second = reviewer.prompts
    # the reviewer was given the task, the writer's answer and its diff, with read-only tools and verdict
    assert TASK in first and "I set the day." in first
    assert "-deploy: Friday\n+deploy: Tusday" in first and "1 file changed, +1 -1\nM notes.txt +1 -1" in first
    assert "crew:verdict" in first and "crew:read_file" in first
    assert "crew:write_file" not in first and "crew:dispute" not in first
    # the findings went to the writer, numbered, in the same conversation (its task is still in it)
    findings = writer.prompts[2]
    assert (
        "@reviewer reviewed your change (round 1 of 3) and asks for changes:\n1. [low] notes.txt:1: "
        "'Tusday' is misspelled"
        in findings
        and TASK in findings
    )
    assert "crew:dispute" in writer.prompts[0] and "crew:verdict" not in writer.prompts[0]
    # the second round sees the whole change since the start, and the first round's finding
    assert "-deploy: Friday\n+deploy: Tuesday" in second
    assert "Round 1:\n1. [low] notes.txt:1: 'Tusday' is misspelled" in second
    assert len(reviewer.prompts) == 2  # the verdict ended each reviewer's run: no turn after it


@pytest.mark.slow
def test_rounds_that_run_out_without_approval_end_with_exit_6_and_the_answer_kept(repo, writer, reviewer):
    writer.script(write("deploy: Tusday\nowner: dana\n"), "I set the day.", "I looked again; it is fine.")
    reviewer.script(verdict("changes", TYPO), verdict("changes", TYPO))
    [outcome] = bridge(repo, writer, reviewer).run(f"@writer {TASK}", "execute", review="reviewer", rounds=2)
    assert isinstance(outcome.error, ReviewNotApproved) and outcome.error.exit_code == 6
    assert str(outcome.error) == (
        "@writer's change was not approved by @reviewer in 2 rounds (1 finding left; "
        "--json shows them); raise --rounds, or take the change as it is"
    )
    assert outcome.result.answer == "I looked again; it is fine."
    assert outcome.review.to_dict()["rounds"] == 2 and outcome.review.to_dict()["verdict"] == "changes"
    assert outcome.review.to_dict()["findings"] == [
        {"path": "notes.txt", "line": 1, "severity": "low", "message": "'Tusday' is misspelled"}
    ]


@pytest.mark.slow
def test_a_disputed_finding_reaches_the_reviewer_with_its_reason(repo, writer, reviewer):
    reason = "the team's calendar spells it that way"
    writer.script(
        write("deploy: Tusday\nowner: dana\n"),
        "I set the day.",
        tool_block("crew:dispute", finding=1, reason=reason),
        "I disputed the spelling finding.",
    )
    reviewer.script(verdict("changes", TYPO), verdict("approve"))
    [outcome] = bridge(repo, writer, reviewer).run(f"@writer {TASK}", "execute", review="reviewer")
    assert outcome.error is None
    assert outcome.review.to_dict()["disputed"] == [
        {"round": 1, "finding": dict(zip(["path", "line", "severity", "message"], TYPO, strict=True)), "reason": reason}
    ]
    assert f"1. [low] notes.txt:1: 'Tusday' is misspelled\n   @writer disputed it: {reason}" in reviewer.prompts[1]
    assert '"disputed": 1' in writer.prompts[3]  # the tool's result went back to the writer


@pytest.mark.slow
def test_a_dispute_of_a_finding_not_given_goes_back_as_an_error(repo, writer, reviewer):
    writer.script(
        tool_block("crew:dispute", finding=1, reason="no"),
        write("deploy: Tuesday\nowner: dana\n"),
        "Done.",
        tool_block("crew:dispute", finding=3, reason="no"),
        "Done again.",
    )
    reviewer.script(verdict("changes", TYPO), verdict("approve"))
    bridge(repo, writer, reviewer).run(f"@writer {TASK}", "execute", review="reviewer")
    assert "there is no review finding to dispute now; do the task" in writer.prompts[1]
    assert "there is no finding 3; the review lists 1 to 1" in writer.prompts[4]


@pytest.mark.slow
def test_a_reviewer_answering_in_prose_is_asked_once_more_then_its_words_are_the_finding(repo, writer, reviewer):
    writer.script(write("deploy: Tuesday\nowner: dana\n"), "Done.", "Still done.")
    reviewer.script("Looks mostly fine, but say who approved it.", "I said what I think.")
    [outcome] = bridge(repo, writer, reviewer).run(f"@writer {TASK}", "execute", review="reviewer", rounds=2)
    assert "You answered without calling crew:verdict" in reviewer.prompts[1]
    assert outcome.review.last.called is False
    assert outcome.review.to_dict()["findings"] == [
        {"path": "", "line": 0, "severity": "medium", "message": "I said what I think."}
    ]
    assert "1. [medium] (no file): I said what I think." in writer.prompts[2]


@pytest.mark.slow
def test_the_reviewer_cannot_write_its_writes_are_refused(repo, writer, reviewer):
    writer.script(write("deploy: Tuesday\nowner: dana\n"), "Done.")
    reviewer.script(write("deploy: reviewer's day\n"), verdict("approve"))
    [outcome] = bridge(repo, writer, reviewer).run(f"@writer {TASK}", "execute", review="reviewer")
    assert outcome.error is None
    assert (repo / "notes.txt").read_text() == "deploy: Tuesday\nowner: dana\n"
    assert "tool 'write_file' is not available in query mode" in reviewer.prompts[1]


@pytest.mark.slow
def test_a_verdict_that_breaks_its_schema_goes_back_and_is_corrected(repo, writer, reviewer):
    writer.script(write("deploy: Tuesday\nowner: dana\n"), "Done.")
    reviewer.script(
        tool_block("crew:verdict", verdict="changes", findings=[]),
        tool_block("crew:verdict", verdict="maybe"),
        verdict("approve"),
    )
    [outcome] = bridge(repo, writer, reviewer).run(f"@writer {TASK}", "execute", review="reviewer")
    assert outcome.error is None and outcome.review.rounds == 1
    assert "invalid input for crew:verdict at $.findings: [] should be non-empty" in reviewer.prompts[1]
    assert (
        "invalid input for crew:verdict at $.verdict: 'maybe' is not one of ['approve', 'changes']"
        in reviewer.prompts[2]
    )


@pytest.mark.slow
def test_a_huge_diff_is_cut_with_a_marker(repo, writer, reviewer):
    writer.script(tool_block("crew:write_file", path="big.txt", content="line of text\n" * 20_000), "Wrote it.")
    reviewer.script(verdict("approve"))
    bridge(repo, writer, reviewer).run(f"@writer {TASK}", "execute", review="reviewer")
    prompt = reviewer.prompts[0]
    assert "[… crew cut the rest of the diff here: " in prompt and "; read the files for them]" in prompt
    assert MAX_DIFF < len(prompt) < MAX_DIFF + 10_000


@pytest.mark.slow
def test_with_a_worktree_the_checkout_is_untouched_and_the_reviewer_reads_the_writers_files(repo, writer, reviewer):
    writer.script(write("deploy: Tuesday\nowner: dana\n"), "Done.")
    reviewer.script(tool_block("crew:read_file", path="notes.txt"), verdict("approve"))
    [outcome] = bridge(repo, writer, reviewer).run(f"@writer {TASK}", "execute", review="reviewer", worktree=True)
    assert outcome.error is None and status(repo) == ""
    assert (repo / "notes.txt").read_text() == "deploy: Friday\nowner: dana\n"
    assert (outcome.worktree.path / "notes.txt").read_text() == "deploy: Tuesday\nowner: dana\n"
    assert [c.path for c in outcome.changes] == ["notes.txt"]
    assert "deploy: Tuesday" in reviewer.prompts[1]  # what its read_file gave


@pytest.mark.slow
def test_an_allow_list_does_not_hide_the_review_tools(repo, writer, reviewer):
    writer.script(write("deploy: Tuesday\nowner: dana\n"), "Done.")
    reviewer.script(verdict("approve"))
    made = bridge(repo, writer, reviewer, writer={"allow": ["write_file"]}, reviewer={"allow": ["read_file"]})
    [outcome] = made.run(f"@writer {TASK}", "execute", review="reviewer")
    assert outcome.error is None
    assert "crew:dispute" in writer.prompts[0] and "crew:verdict" in reviewer.prompts[0]


def test_one_writer_and_a_repository_are_needed(repo, writer, reviewer, tmp_path):
    with pytest.raises(UsageError, match="--review takes one writer, and 2 agents are mentioned; mention one"):
        bridge(repo, writer, reviewer).run(f"@writer @reviewer {TASK}", "execute", review="reviewer")
    elsewhere = tmp_path / "plain"
    elsewhere.mkdir()
    with pytest.raises(UsageError, match=f"--review needs a git repository, and {elsewhere} is not in one"):
        bridge(elsewhere, writer, reviewer).run(f"@writer {TASK}", "execute", review="reviewer")
    with pytest.raises(UsageError, match="agent 'nobody' not found"):
        bridge(repo, writer, reviewer).run(f"@writer {TASK}", "execute", review="nobody")
    assert writer.prompts == [] and reviewer.prompts == []


@pytest.mark.slow
def test_each_round_is_in_the_record(repo, writer, reviewer, tmp_path):
    writer.script(write("deploy: Tusday\nowner: dana\n"), "Set.", write("deploy: Tuesday\nowner: dana\n"), "Fixed.")
    reviewer.script(verdict("changes", TYPO), verdict("approve"))
    made = bridge(repo, writer, reviewer)
    made.config.transcripts = True
    events = []
    made.run(f"@writer {TASK}", "execute", review="reviewer", on_progress=events.append)
    reviews = [e for e in events if e.kind == "review"]
    assert [(r.agent, r.round, r.rounds, r.verdict, len(r.findings)) for r in reviews] == [
        ("reviewer", 1, 3, "changes", 1),
        ("reviewer", 2, 3, "approve", 0),
    ]
    said = {e.kind for e in events if e.agent == "reviewer"}
    assert said == {"part", "turn", "text", "call", "decision", "result", "answer", "review"}
    # its part is a reviewer's: its words are not the run's answer (the faces show the writer's)
    parts = [(e.agent, e.part, e.role, e.round) for e in events if e.kind == "part"]
    assert parts == [("writer", 1, "writer", 1), ("reviewer", 1, "reviewer", 1), ("reviewer", 2, "reviewer", 2)]
    runs = list((tmp_path / "xdg-state" / "crewbridge" / "runs").glob("*.jsonl"))
    logged = [json.loads(line) for line in runs[0].read_text().splitlines()]
    assert (logged[0]["kind"], logged[0]["agents"]) == ("start", ["writer", "reviewer"])
    assert [e["verdict"] for e in logged if e["kind"] == "review"] == ["changes", "approve"]
    assert logged[-1]["kind"] == "end" and logged[-1]["status"] == "done"
