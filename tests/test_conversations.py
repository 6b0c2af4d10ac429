"""ProcessConversation against small fake CLIs (real processes, honest about what they do), and which
conversation a provider gets."""

from __future__ import annotations

import sys

import pytest
from crewbridge.providers.base import Turn
from crewbridge.providers.generic import GenericProvider, GenericSpec

from crewbridge import providers
from crewbridge.base.decoded import Failure, Session, Text
from crewbridge.conversations import EXACT, FULL, LOST, ProcessConversation, live_enabled, new_conversation
from crewbridge.conversations.claude import ClaudeLiveConversation
from crewbridge.conversations.codex import CodexLiveConversation
from crewbridge.conversations.gemini import GeminiSessionConversation
from crewbridge.errors import CLINotFound
from crewbridge.work.sessions import Prior

# A CLI with sessions: prints its session id, then what it was asked and which session it resumed.
SESSION_CLI = """
import json, sys
resumed = sys.argv[sys.argv.index('--resume') + 1] if '--resume' in sys.argv else None
print(json.dumps({'session': resumed or 'S1'}))
print(json.dumps({'text': 'got ' + sys.stdin.read() + ' resumed=' + str(resumed)}))
"""


def texts(events):
    return "".join(e.text for e in events if isinstance(e, Text))


def session_cli(tmp_path):
    """A CLI that names its session and resumes one given with --resume."""
    return conversation(
        tmp_path,
        [sys.executable, "-c", SESSION_CLI],
        format="jsonl",
        text_key="text",
        session_key="session",
        resume=["--resume", "{session}"],
    )


def conversation(tmp_path, command, **spec):
    provider = GenericProvider(GenericSpec(name="fake", command=command, **spec))
    return ProcessConversation(provider, Turn(prompt=""), cwd=tmp_path)


@pytest.mark.slow
def test_a_cli_without_resume_is_continued_by_replaying_the_transcript(tmp_path):
    conv = conversation(tmp_path, [sys.executable, "-c", "import sys; print(sys.stdin.read())"])
    assert texts(conv.send("first question", None)).strip() == "first question"
    assert conv.keep("first answer", stopped=False) == EXACT
    second = texts(conv.send("second", None))
    assert "[user]\nfirst question" in second and "[assistant]\nfirst answer" in second
    assert second.rstrip().endswith("second")


@pytest.mark.slow
def test_a_replayed_transcript_holds_an_answer_the_loop_did_not_keep(tmp_path):
    """A reply without tool calls is the answer: the loop keeps nothing of it, and the next message
    of a chat replays it whole."""
    conv = conversation(tmp_path, [sys.executable, "-c", "import sys; print('answer to', sys.stdin.read())"])
    assert texts(conv.send("first question", None)) == "answer to first question\n"
    second = texts(conv.send("second", None))
    assert "[user]\nfirst question\n[assistant]\nanswer to first question\n" in second


def test_a_cli_without_resume_and_bad_jsonl_says_so_with_a_sample_line(tmp_path):
    conv = conversation(
        tmp_path, [sys.executable, "-c", 'print(\'{"msg": "hi"}\')'], format="jsonl", text_key="message.text"
    )
    [failure] = [e for e in conv.send("q", None) if isinstance(e, Failure)]
    assert failure.message == (
        "provider 'fake': no line of its output has text at text_key 'message.text' (format: jsonl); "
        'a line it wrote: {"msg": "hi"}; fix format or text_key in crew.yaml'
    )


@pytest.mark.slow
def test_a_cli_with_resume_is_continued_by_its_own_session(tmp_path):
    conv = session_cli(tmp_path)
    events = list(conv.send("one", None))
    assert Session("S1") in events and conv.session_id == "S1"
    assert conv.keep("answer", stopped=False) == FULL
    assert texts(conv.send("two", None)) == "got two resumed=S1"


def test_stopping_a_resumable_cli_mid_reply_loses_the_reply(tmp_path):
    script = "import time\nprint('{\"text\": \"part one\\\\n\"}', flush=True)\ntime.sleep(30)\nprint('invented tail')"
    conv = conversation(
        tmp_path, [sys.executable, "-c", script], format="jsonl", resume=["--resume", "{session}"], session_key="x"
    )
    events = conv.send("q", None)
    assert next(events) == Text("part one\n")
    conv.stop()
    events.close()
    assert conv.child.proc.poll() is not None  # ended by the stop, not after its 30 s
    assert conv.keep("part one\n", stopped=True) == LOST


def test_a_failing_cli_reports_its_status_and_last_stderr_line(tmp_path):
    script = "import sys; sys.stderr.write('boom: no key\\n'); sys.exit(3)"
    conv = conversation(tmp_path, [sys.executable, "-c", script])
    failures = [e for e in conv.send("q", None) if isinstance(e, Failure)]
    assert failures == [Failure("fake exited with status 3: boom: no key")]


def test_the_prompt_goes_in_argv_when_the_template_asks_for_it(tmp_path):
    conv = conversation(tmp_path, [sys.executable, "-c", "import sys; print(sys.argv[1])", "{prompt}"])
    assert texts(conv.send("in argv", None)).strip() == "in argv"


def test_the_cli_runs_in_the_agents_working_directory(tmp_path):
    conv = conversation(tmp_path, [sys.executable, "-c", "import os; print(os.getcwd())"])
    assert texts(conv.send("q", None)).strip() == str(tmp_path)


# Prints its pid, then what it read on stdin.
PID_CLI = "import os, sys; print(os.getpid()); print(sys.stdin.read())"


@pytest.mark.slow
def test_the_first_turns_cli_starts_early_and_gets_its_prompt_when_it_is_sent(tmp_path):
    conv = conversation(tmp_path, [sys.executable, "-c", PID_CLI])
    conv.start()  # as crew does, before it builds the catalogue: the CLI waits for stdin's end
    early = conv.child
    assert early is not None and early.proc.poll() is None
    pid, text = texts(conv.send("the prompt", None)).split("\n", 1)
    assert int(pid) == early.proc.pid and text.strip() == "the prompt"
    conv.keep("answer", stopped=False)
    pid, _ = texts(conv.send("next", None)).split("\n", 1)
    assert int(pid) != early.proc.pid  # a new process per turn after the first


def test_a_cli_that_takes_the_prompt_in_argv_is_not_started_early(tmp_path):
    conv = conversation(tmp_path, [sys.executable, "-c", "import sys; print(sys.argv[1])", "{prompt}"])
    conv.start()
    assert conv.child is None
    assert texts(conv.send("in argv", None)).strip() == "in argv"


def test_closing_a_conversation_started_early_ends_its_cli(tmp_path):
    conv = conversation(tmp_path, [sys.executable, "-c", PID_CLI])
    conv.start()
    conv.close()
    assert conv.child.proc.poll() is not None


def test_a_cli_that_is_not_installed_is_reported_by_the_first_turn_not_by_start(tmp_path):
    conv = conversation(tmp_path, ["no-such-cli-for-crew"])
    conv.start()
    assert conv.child is None
    with pytest.raises(CLINotFound, match="'no-such-cli-for-crew' not found on PATH"):
        list(conv.send("q", None))


@pytest.mark.parametrize("value, enabled", [(None, True), ("1", True), ("yes", True), ("0", False), (" 0 ", False)])
def test_crew_live_0_turns_live_continuation_off(value, enabled, monkeypatch):
    monkeypatch.delenv("CREW_LIVE", raising=False)
    assert live_enabled(None if value is None else {"CREW_LIVE": value}) is enabled
    if value is not None:
        monkeypatch.setenv("CREW_LIVE", value)
        assert live_enabled({}) is enabled


@pytest.mark.parametrize(
    "name, live_class",
    [("claude", ClaudeLiveConversation), ("codex", CodexLiveConversation), ("gemini", GeminiSessionConversation)],
)
def test_each_provider_talks_live_unless_crew_live_is_0(name, live_class, tmp_path, monkeypatch):
    monkeypatch.delenv("CREW_LIVE", raising=False)
    provider = providers.load(name)
    conversation = new_conversation(provider, Turn(prompt=""), tmp_path, {})
    assert type(conversation) is live_class
    fallback = new_conversation(provider, Turn(prompt=""), tmp_path, {"CREW_LIVE": "0"})
    assert type(fallback) is ProcessConversation


def test_a_provider_without_a_live_mode_gets_a_process_per_turn(tmp_path):
    conversation = new_conversation(providers.load("demo"), Turn(prompt=""), tmp_path)
    assert type(conversation) is ProcessConversation


# A codex-like CLI: `exec … [resume ID] -`; its turn.completed usage is the thread's total so far.
CUMULATIVE_CLI = """
import json, sys
resumed = sys.argv[sys.argv.index('resume') + 1] if 'resume' in sys.argv else None
turns = 1 + (int(resumed[1:]) if resumed else 0)
print(json.dumps({'type': 'thread.started', 'thread_id': f'T{turns}'}))
print(json.dumps({'type': 'item.completed', 'item': {'type': 'agent_message', 'text': 'ok'}}))
usage = {'input_tokens': 100 * turns, 'cached_input_tokens': 10 * turns, 'output_tokens': 5 * turns}
print(json.dumps({'type': 'turn.completed', 'usage': usage}))
"""


@pytest.mark.slow
def test_usage_reported_as_the_sessions_total_is_counted_once(tmp_path):
    from crewbridge.providers.codex import CodexProvider

    from crewbridge.base.decoded import Usage

    provider = CodexProvider()
    provider.binary = str(tmp_path / "codex")
    (tmp_path / "codex").write_text(f"#!{sys.executable}\n{CUMULATIVE_CLI}")
    (tmp_path / "codex").chmod(0o755)
    conv = ProcessConversation(provider, Turn(prompt=""), cwd=tmp_path)
    shares = []
    for message in ("one", "two", "three"):
        shares += [e for e in conv.send(message, None) if isinstance(e, Usage)]
        conv.keep("ok", stopped=False)
    assert shares == [Usage(100, 5, cached_tokens=10)] * 3  # totals 100, 200, 300: 100 each
    assert conv.reported == Usage(300, 15, cached_tokens=30)


def test_resuming_a_cli_without_sessions_replays_the_earlier_history_at_each_turn(tmp_path):
    conv = conversation(tmp_path, [sys.executable, "-c", "import sys; print(sys.stdin.read())"])
    assert conv.resume(Prior("R1", "fake", history=[("user", "earlier question"), ("assistant", "earlier answer")]))
    sent = texts(conv.send("new question", None))
    assert "[user]\nearlier question" in sent and "[assistant]\nearlier answer" in sent
    assert sent.rstrip().endswith("new question")


def test_resuming_continues_the_clis_session_while_the_cli_has_it(tmp_path):
    conv = session_cli(tmp_path)
    assert conv.resume(Prior("R1", "fake", session_id="S7", history=[("user", "q"), ("assistant", "a")]))
    conv.start()  # the CLI started early resumes the session too
    assert texts(conv.send("two", None)) == "got two resumed=S7"


def test_a_session_the_cli_no_longer_has_is_not_resumed(tmp_path):
    from crewbridge.providers.codex import CodexProvider

    conv = ProcessConversation(CodexProvider(), Turn(prompt=""), cwd=tmp_path, env={"CODEX_HOME": str(tmp_path)})
    assert not conv.resume(Prior("R1", "codex", session_id="gone", history=[("user", "q")]))
    assert conv.session_id is None
    assert not conv.resume(Prior("R1", "codex", session_id=None, history=[("user", "q")]))
