"""crewbridge.engine.gate: the check an agent's change must pass — with a scripted CLI (crewcli.FakeModel,
run as crew runs any CLI) in a scratch git repository, and real commands as the check. A failing
check goes back to the same agent (command, exit status, the end of its output), its next answer is
checked again; still failing after the rounds, exit 9 with the answer kept; every run is a `check`
event; with --review the reviewer sees only a change that passed; the check runs in the sandbox."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from crewbridge.providers.generic import GenericSpec

from crewbridge.bridge import Bridge
from crewbridge.config import AgentSpec, Config, default_agents
from crewbridge.engine.gate import TAIL, Gate
from crewbridge.errors import CheckFailed, UsageError
from crewbridge.record import events as ev
from crewcli import FakeModel, tool_block
from gitrepo import make_repo

# The check: notes.txt must say Tuesday (it prints what it found, and fails otherwise).
CHECK = shlex.join(
    [
        sys.executable,
        "-c",
        "import sys; t = open('notes.txt').read(); print('found:', t.strip()); sys.exit(0 if 'Tuesday' in t else 3)",
    ]
)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch repository, with the user's folders (transcripts, trust) in scratch places too."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    return make_repo(tmp_path / "repo", {"notes.txt": "deploy: Friday\n"})


@pytest.fixture
def writer(tmp_path: Path) -> FakeModel:
    return FakeModel(tmp_path / "bin", "writer")  # outside the repository: its notes are no change


def bridge(repo: Path, *fakes: FakeModel, **config: object) -> Bridge:
    agents = {**default_agents(), **{f.name: AgentSpec(f.name, f.name) for f in fakes}}
    providers = {f.name: GenericSpec(f.name, **f.provider()) for f in fakes}
    return Bridge(Config(agents=agents, providers=providers, transcripts=False, **config), workdir=repo)  # type: ignore[arg-type]


def write(content: str) -> str:
    return tool_block("crew:write_file", path="notes.txt", content=content)


def checks(events: list[ev.Event]) -> list[tuple[int, bool, int | None]]:
    return [(e.round, e.passed, e.exit_code) for e in events if isinstance(e, ev.Check)]


@pytest.mark.slow
def test_a_failing_check_goes_back_to_the_agent_which_fixes_it_in_round_two(repo, writer):
    writer.script(write("deploy: Tusday\n"), "Set it.", write("deploy: Tuesday\n"), "Fixed the spelling.")
    events: list[ev.Event] = []
    [outcome] = bridge(repo, writer).run(
        "@writer set the deploy day to Tuesday", "execute", checks=[CHECK], on_progress=events.append
    )
    assert outcome.error is None and outcome.result.answer == "Fixed the spelling."
    assert checks(events) == [(1, False, 3), (2, True, 0)]
    assert [(c.round, c.passed) for c in outcome.checks] == [(1, False), (2, True)]
    told = writer.prompts[2]  # the same conversation: the task is still in it
    assert "set the deploy day to Tuesday" in told
    assert "crew ran the check on your change (round 1 of 3) and it failed:" in told
    assert f"$ {CHECK}\nexit status 3; the end of its output:\n```\nfound: deploy: Tusday\n\n```" in told
    assert (
        outcome.checks[0].output == "found: deploy: Tusday\n" and outcome.checks[1].output == "found: deploy: Tuesday\n"
    )
    # the check ran after each answer, never while the agent worked
    kinds = [e.kind for e in events if e.kind in ("answer", "check")]
    assert kinds == ["answer", "check", "answer", "check"]


@pytest.mark.slow
def test_a_check_that_still_fails_after_the_rounds_ends_with_exit_9_and_the_answer_kept(repo, writer):
    writer.script(write("deploy: Tusday\n"), "Set it.", "I see no problem.")
    events: list[ev.Event] = []
    [outcome] = bridge(repo, writer).run(
        "@writer set the day", "execute", checks=[CHECK, "true"], check_rounds=2, on_progress=events.append
    )
    assert isinstance(outcome.error, CheckFailed) and outcome.error.exit_code == 9
    assert str(outcome.error) == (
        f"@writer's change still fails its check after 2 rounds: `{CHECK}` (exit status 3); --json and `crew log "
        "show` have its output (raise --check-rounds, or take the change as it is)"
    )
    assert outcome.result.answer == "I see no problem."
    assert [(c.command, c.round, c.passed) for c in outcome.checks] == [
        (CHECK, 1, False),
        ("true", 1, True),
        (CHECK, 2, False),
        ("true", 2, True),
    ]
    assert len(writer.prompts) == 3  # told once: after the last round nobody asks for a fix
    assert [e.message for e in events if isinstance(e, ev.Error)] == [str(outcome.error)]


@pytest.mark.slow
def test_crew_yaml_s_check_and_rounds_apply_unless_the_run_says_otherwise(repo, writer):
    writer.script(write("deploy: Tusday\n"), "Set it.")
    configured = bridge(repo, writer, check=(CHECK,), check_rounds=1)
    [outcome] = configured.run("@writer set the day", "execute")
    assert [(c.round, c.passed) for c in outcome.checks] == [(1, False)] and isinstance(outcome.error, CheckFailed)
    writer.restart(write("deploy: Tusday\n"), "Set it.")
    [unchecked] = configured.run("@writer set the day", "execute", checks=())  # --no-check
    assert unchecked.error is None and unchecked.checks == []
    writer.restart("Nothing to do.")
    [query] = configured.run("@writer what day is it?", "query")  # query mode changes nothing to check
    assert query.error is None and query.checks == []


def test_a_check_goes_with_execute_only():
    with pytest.raises(UsageError, match="--check goes with crew execute only"):
        bridge(Path.cwd()).run("@demo hi", "query", checks=["true"])


@pytest.mark.slow
def test_the_agent_is_given_the_end_of_a_long_output_and_a_fence_its_text_cannot_close(repo, writer):
    noisy = shlex.join(
        [sys.executable, "-c", "print('x' * 50000); print('```'); print('the end'); raise SystemExit(1)"]
    )
    writer.script("Nothing to change.", "Still nothing.")
    [outcome] = bridge(repo, writer).run("@writer look", "execute", checks=[noisy], check_rounds=2)
    first = outcome.checks[0]
    assert first.exit_code == 1 and first.output.endswith("```\nthe end\n")
    assert len(first.output) <= TAIL + 50 and first.output.startswith("[… crew cut the output's start here]\n")
    told = writer.prompts[1]
    assert "\n````\n" in told and told.count("x" * 100) == TAIL // 100 - 1  # a longer fence; the tail only


@pytest.mark.slow
def test_a_review_sees_only_a_change_that_passed_the_check(repo, writer, tmp_path):
    reviewer = FakeModel(tmp_path / "bin", "reviewer")
    writer.script(write("deploy: Tusday\n"), "Set it.", write("deploy: Tuesday\n"), "Fixed.")
    reviewer.script(tool_block("crew:verdict", verdict="approve"))
    [outcome] = bridge(repo, writer, reviewer).run("@writer set the day", "execute", review="reviewer", checks=[CHECK])
    assert outcome.error is None and outcome.review.to_dict()["verdict"] == "approve"
    assert [(c.round, c.passed) for c in outcome.checks] == [(1, False), (2, True)]
    [seen] = reviewer.prompts
    assert "+deploy: Tuesday" in seen and "Tusday" not in seen


@pytest.mark.slow
def test_a_review_whose_writer_never_passes_the_check_is_not_reviewed(repo, writer, tmp_path):
    reviewer = FakeModel(tmp_path / "bin", "reviewer")
    writer.script(write("deploy: Tusday\n"), "Set it.", "No.")
    [outcome] = bridge(repo, writer, reviewer).run(
        "@writer set the day", "execute", review="reviewer", checks=[CHECK], check_rounds=2
    )
    assert isinstance(outcome.error, CheckFailed) and reviewer.prompts == []


@pytest.mark.slow
@pytest.mark.needs("bwrap")
def test_the_check_runs_in_the_agents_sandbox(repo, writer, tmp_path):
    home = Path.home() / f".crew-gate-test-{tmp_path.name}"  # read-only in the sandbox
    beside = tmp_path / "beside.txt"  # under /tmp: the sandbox's /tmp is its own
    escape = f"echo a > {shlex.quote(str(beside))}; echo b > {shlex.quote(str(home))}"
    writer.script("Nothing to change.")
    try:
        [outcome] = bridge(repo, writer).run("@writer look", "execute", checks=[escape], check_rounds=1)
        assert not beside.exists() and not home.exists()
    finally:
        home.unlink(missing_ok=True)
    assert outcome.checks[0].exit_code != 0 and isinstance(outcome.error, CheckFailed)
    assert "Read-only file system" in outcome.checks[0].output
    [ok] = bridge(repo, writer).run("@writer look", "execute", checks=["echo inside > here.txt"], check_rounds=1)
    assert ok.error is None and (repo / "here.txt").read_text() == "inside\n"  # its folder is writable


@pytest.mark.slow
def test_a_check_that_outlasts_the_runs_timeout_ends_it_with_exit_124(repo, writer):
    writer.script("Nothing to change.")
    [outcome] = bridge(repo, writer).run("@writer look", "execute", checks=["sleep 30"], timeout=3)
    assert outcome.error is not None and outcome.error.exit_code == 124
    assert "check passed --timeout" in str(outcome.error)


def test_a_gate_is_made_only_for_a_change_with_a_check(tmp_path):
    from crewbridge.base.options import RunOptions
    from crewbridge.base.usage import Budget
    from crewbridge.engine.context import RunContext, Work
    from crewbridge.record.stream import Record

    ctx = RunContext(Config(check=("make test",), check_rounds=5), tmp_path)

    def work(mode: str, **options: object) -> Work:
        return Work("t", mode, RunOptions(**options), Budget(None, None), Record())  # type: ignore[arg-type]

    gate = Gate.of(ctx, work("execute"), deadline=1.0)
    assert gate is not None and (gate.commands, gate.rounds, gate.deadline) == (("make test",), 5, 1.0)
    assert Gate.of(ctx, work("execute", checks=("a", "b"), check_rounds=2)).commands == ("a", "b")
    assert Gate.of(ctx, work("execute", checks=())) is None
    assert Gate.of(ctx, work("query")) is None
    assert Gate.of(RunContext(Config(), tmp_path), work("execute")) is None
