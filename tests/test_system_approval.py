"""crewbridge.system.approval: a person's yes or no on a real pseudo-terminal, one question at a time across
agents, waiting only until the run's deadline or until the question is withdrawn; crew's other lines
wait for the question, never the other way round."""

from __future__ import annotations

import functools
import io
import threading
import time

import pytest
from crewbridge.tools import builtin_registry

from crewbridge.config import AgentSpec
from crewbridge.system.approval import Answer, Approver, Question, terminal
from crewbridge.work.policy import Policy
from ttys import Terminal, close_terminals  # noqa: F401 - a fixture

DECLINED = "the user declined this call to 'read_file'; it was not run. Ask or try another way."
NO_ANSWER = "no one answered in time whether 'read_file' may run; it was not run"


@pytest.fixture
def read_file():
    return builtin_registry().resolve("read_file")


def asking(tty: Terminal, agent: str = "claude") -> Policy:
    spec = AgentSpec(id=agent, provider="claude", approval=["*"])
    return Policy(spec, "execute", approver=Approver(stdin=tty.stdin, stderr=tty.stderr))


def in_thread(check) -> tuple[threading.Thread, list[str | None]]:
    """Run `check()` (a policy check that asks) in a thread; → the thread and, once it ended, its
    outcome: why the call may not run (None: it may)."""
    outcome: list[str | None] = []
    thread = threading.Thread(target=lambda: outcome.append(check().refusal))
    thread.start()
    return thread, outcome


def test_the_default_approver_asks_only_when_stdin_and_stderr_are_terminals():
    assert not Approver(io.StringIO(), io.StringIO()).interactive
    assert not Approver(Terminal().stdin, Terminal(tty=False).stderr).interactive
    assert Approver(Terminal().stdin, Terminal().stderr).interactive


def test_parallel_agents_never_interleave_their_questions(read_file):
    """Two agents ask at once on one terminal: the second question appears once the first was answered."""
    tty = Terminal()
    asks = [
        in_thread(functools.partial(asking(tty, name).check, read_file, {"path": "x"})) for name in ("claude", "gemini")
    ]
    first = tty.read(until="Allow?")
    assert first.count("Allow?") == 1  # the other agent waits for the terminal
    tty.type("y")
    assert tty.read(until=first + "@").count("Allow?") == 2
    tty.type("n")
    for thread, _ in asks:
        thread.join()
    assert {outcome for _, [outcome] in asks} == {None, DECLINED}


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("ls -la" + " " * 220 + "; echo owned > pwned.txt", "ls -la⟨220 spaces⟩; echo owned > pwned.txt"),
        ("ls\necho owned > pwned.txt", "ls\\necho owned > pwned.txt"),
        ("ls \x1b[8m; echo owned\x1b[0m", "ls \\u001b[8m; echo owned\\u001b[0m"),
        ("echo safe #\u202e; echo owned\u200b", "echo safe #\\u202e; echo owned\\u200b"),
        ("x" * 3000 + "; echo owned", "x" * 1987 + "… (1,027 more characters)"),  # 2,000 shown
    ],
)
def test_the_question_on_the_terminal_shows_the_whole_command(command, shown):
    tty = Terminal()
    run_command = builtin_registry().resolve("run_command")
    thread, outcome = in_thread(lambda: asking(tty).check(run_command, {"command": command}))
    asked = tty.read(until="Allow?")
    tty.type("n")
    thread.join()
    assert outcome == ["the user declined this call to 'run_command'; it was not run. Ask or try another way."]
    assert f'@claude wants to run run_command {{"command": "{shown}' in asked
    assert "\x1b" not in asked and "\u202e" not in asked and "    " not in asked


@pytest.mark.slow
def test_an_unanswered_question_is_abandoned_at_the_deadline(read_file):
    tty = Terminal()
    refusal = asking(tty).check(read_file, {"path": "x"}, deadline=time.monotonic() + 0.5).refusal
    assert refusal == NO_ANSWER
    assert tty.read().endswith("Allow? [y/N/a=always] (no answer before the run's time was up)\n")


@pytest.mark.slow
def test_a_question_waiting_for_the_terminal_waits_only_until_its_own_deadline(read_file):
    tty = Terminal()
    thread, outcome = in_thread(lambda: asking(tty).check(read_file, {"path": "a"}))
    tty.read(until="Allow?")
    assert asking(tty, "gemini").check(read_file, {"path": "b"}, deadline=time.monotonic() + 0.3).refusal == NO_ANSWER
    assert "gemini" not in tty.read()  # it never asked
    tty.type("y")
    thread.join()
    assert outcome == [None]


def test_a_withdrawn_question_ends_at_once_and_later_ones_ask_once_reopened(read_file):
    tty = Terminal()
    policy = asking(tty)
    thread, outcome = in_thread(
        lambda: policy.check(read_file, {"path": "a"})
    )  # no deadline: only a withdrawal ends it
    tty.read(until="Allow?")
    policy.withdraw()  # the reply was stopped (Ctrl-C in crew chat), or its run ended
    thread.join()
    assert outcome == [NO_ANSWER] and tty.read().endswith("(withdrawn)\n")
    assert policy.check(read_file, {"path": "b"}).refusal == NO_ANSWER and tty.read().count("Allow?") == 1  # not asked
    policy.reopen()  # the next message
    tty.type("y")  # what is typed now answers the next question
    assert policy.check(read_file, {"path": "c"}).refusal is None


def test_withdrawing_one_agents_question_leaves_anothers_alone(read_file):
    tty = Terminal()
    first, second = asking(tty), asking(tty, "gemini")
    thread, outcome = in_thread(lambda: first.check(read_file, {"path": "a"}))
    tty.read(until="Allow?")
    waiting, waited = in_thread(lambda: second.check(read_file, {"path": "b"}))  # waits for the terminal
    second.withdraw()  # gemini's run ended
    waiting.join()
    assert waited == [NO_ANSWER] and "gemini" not in tty.read()
    tty.type("y")
    thread.join()
    assert outcome == [None]


def test_while_a_question_waits_crews_other_lines_follow_it_and_nothing_else_waits(read_file):
    tty = Terminal()
    thread, outcome = in_thread(lambda: asking(tty).check(read_file, {"path": "a"}))
    tty.read(until="Allow?")

    def line() -> None:
        tty.stderr.write("→ crew:grep x\n")
        tty.stderr.flush()

    terminal.write(line)  # returns at once: the asking thread writes it when the question is over
    assert "grep" not in tty.read()
    tty.type("y")
    thread.join()
    assert tty.read(until="grep").endswith("Allow? [y/N/a=always] → crew:grep x\n") and outcome == [None]


class Remote:
    """A channel that answers from another place (an editor, a browser): `verdict` after `after`
    seconds, or never (None); records what it was told."""

    source = "browser"

    def __init__(self, verdict: str | None, after: float = 0.0, available: bool = True) -> None:
        self.verdict, self.after, self._available = verdict, after, available
        self.asked: list[Question] = []
        self.settled_with: list[Answer] = []
        self._withdrawn = threading.Event()

    def available(self) -> bool:
        return self._available

    def ask(self, question: Question, deadline: float | None):
        self.asked.append(question)
        wait = self.after if self.verdict is not None else None
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic()) if wait is not None else deadline - time.monotonic()
        if self._withdrawn.wait(wait) or self.verdict is None:
            return None
        return self.verdict if deadline is None or time.monotonic() < deadline else None

    def withdraw(self) -> None:
        self._withdrawn.set()

    def reopen(self) -> None:
        self._withdrawn.clear()

    def settled(self, question: Question, answer: Answer) -> None:
        self.settled_with.append(answer)
        self.withdraw()


def remote_policy(tty: Terminal, *channels, asking=None, answered=None) -> Policy:
    spec = AgentSpec(id="claude", provider="claude", approval=["*"])
    approver = Approver(stdin=tty.stdin, stderr=tty.stderr, channels=channels, asking=asking, answered=answered)
    return Policy(spec, "execute", approver=approver)


def test_without_a_terminal_another_channel_makes_the_run_wait_for_its_answer(read_file):
    remote = Remote("yes", after=0.2)
    asked: list[Question] = []
    policy = remote_policy(Terminal(tty=False), remote, asking=asked.append)
    ruling = policy.check(read_file, {"path": "x"}, call="c3")
    assert (ruling.refusal, ruling.decision, ruling.by) == (None, "allowed", "browser")  # who decided
    assert [(q.agent, q.tool, q.input, q.call) for q in remote.asked] == [("claude", "read_file", {"path": "x"}, "c3")]
    assert asked == remote.asked  # the run's record hears the question before it is asked


def test_with_no_channel_that_reaches_anyone_the_call_is_refused_without_asking(read_file):
    remote = Remote("yes", available=False)
    asked: list[Question] = []
    ruling = remote_policy(Terminal(tty=False), remote, asking=asked.append).check(read_file, {"path": "x"})
    assert "nobody to ask (no terminal, no crew ui serving)" in ruling.refusal and ruling.by == "nobody"
    assert remote.asked == [] and asked == []


@pytest.mark.slow
def test_the_first_answer_wins_and_the_terminal_says_where_it_came_from(read_file):
    tty = Terminal()
    remote = Remote("no", after=0.3)
    answers: list[tuple[Question, Answer | None]] = []
    policy = remote_policy(tty, remote, answered=lambda q, a: answers.append((q, a)))
    thread, outcome = in_thread(lambda: policy.check(read_file, {"path": "a"}))
    tty.read(until="Allow?")
    thread.join()
    assert outcome == [DECLINED]
    assert tty.read().endswith("(answered on the browser: declined)\n")
    assert [(q.tool, a) for q, a in answers] == [("read_file", Answer("no", "browser"))]
    tty.type("y")  # the terminal asks again at the next question, and its answer counts there
    assert policy.check(read_file, {"path": "b"}).by == "terminal"
    assert answers[-1][1] == Answer("yes", "terminal") and remote.settled_with == [Answer("yes", "terminal")]


@pytest.mark.slow
def test_a_question_no_channel_answers_ends_at_the_deadline_everywhere(read_file):
    tty = Terminal()
    remote = Remote(None)
    answers: list = []
    policy = remote_policy(tty, remote, answered=lambda q, a: answers.append(a))
    assert policy.check(read_file, {"path": "a"}, deadline=time.monotonic() + 0.4).refusal == NO_ANSWER
    assert answers == [None] and tty.read().endswith("(no answer before the run's time was up)\n")


def test_withdrawing_ends_the_question_on_every_channel(read_file):
    tty = Terminal()
    remote = Remote(None)
    policy = remote_policy(tty, remote)
    thread, outcome = in_thread(lambda: policy.check(read_file, {"path": "a"}))
    tty.read(until="Allow?")
    policy.withdraw()
    thread.join()
    assert outcome == [NO_ANSWER] and tty.read().endswith("(withdrawn)\n")
    assert policy.check(read_file, {"path": "b"}).refusal == NO_ANSWER and len(remote.asked) == 1  # not asked again
