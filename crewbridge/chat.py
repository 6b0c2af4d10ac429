"""crew chat: a conversation with one agent, tools at hand, that keeps its context across messages.

One agent loop serves the whole chat and its conversation stays open: each message continues the
same CLI session (a live process, or the CLI's own resume, or crew's replayed transcript), so the
model remembers what was said and read. The first message carries the tool catalogue; later ones
are the person's words as typed. Ctrl-C stops the reply being written (the CLI is told to stop, or
its process group ended) and the chat goes on; /exit or Ctrl-D ends it. On a terminal, lines are
read with readline: editing, and a history kept in the state directory (chat_history, mode 600).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from crewbridge.api import Outcome
from crewbridge.approval import isatty
from crewbridge.bridge import Bridge, Resumed
from crewbridge.config import state_dir
from crewbridge.errors import CLINotFound, CrewError, UsageError
from crewbridge.loop import AgentLoop, Progress, RunResult
from crewbridge.mentions import Mention, parse_mentions
from crewbridge.modes import Mode
from crewbridge.render import Renderer
from crewbridge.sessions import Prior, priors
from crewbridge.transcript import Transcript
from crewbridge.usage import Budget

HISTORY_FILE = "chat_history"
HISTORY_LENGTH = 1000
PROMPT = "> "
HELP = "/exit (or Ctrl-D) leaves; Ctrl-C stops a reply; anything else goes to the agent"
_COMMAND = re.compile(r"/[A-Za-z]+")


class Chat:
    """The engine: messages in, answers out, one conversation throughout."""

    def __init__(self, loop: AgentLoop, prior: Prior | None = None, held: bool = True) -> None:
        self.loop = loop
        self.prior, self.held = prior, held  # the earlier conversation it continues, if any
        self.started = False  # a reply came back: the model has the catalogue

    def ask(self, text: str) -> RunResult:
        """Send a message; the answer once the model is done with its tools."""
        result = self.loop.converse(text if self.started else self.loop.opening(text, self.prior, self.held))
        self.started = True
        return result

    def cancel(self) -> None:
        """Stop the reply being written (after a Ctrl-C), and any approval question of its calls;
        the conversation goes on."""
        self.loop.policy.withdraw()
        self.loop.conv.stop()

    def close(self) -> None:
        self.loop.close()


def parse_agent(text: str) -> Mention:
    """`@claude` or `@claude:model` (the @ may be left out)."""
    spec = text if text.startswith("@") else "@" + text
    try:
        mentions, rest = parse_mentions(spec + " -")  # a stand-in task: only the mention is wanted
    except UsageError:
        mentions, rest = [], ""
    if len(mentions) != 1 or rest != "-":
        raise UsageError(f"'{text}' is not one agent mention; write e.g. crew chat @claude or @claude:haiku")
    return mentions[0]


def run_chat(
    bridge: Bridge,
    agent: str,
    *,
    mode: Mode = "query",
    max_turns: int = 10,
    timeout: float | None = 300.0,
    approve_all: bool = False,
    max_cost: float | None = None,
    max_tokens: int | None = None,
    resume: str | None = None,
    verbose: bool = False,
    stdin: IO[str] | None = None,
    history: Path | None = None,
    tools_via: str | None = None,
) -> None:
    """The chat on this terminal (or on piped stdin, one message a line, no prompt). `resume`: the id
    of an earlier run whose conversation with the agent the chat continues."""
    mention = parse_agent(agent)
    bridge.config.agent(mention.agent)  # an unknown agent fails before anything starts
    earlier = priors(resume) if resume else {}
    reader = LineReader(stdin or sys.stdin, history or state_dir() / HISTORY_FILE)
    transcript = (
        Transcript.open(
            command="chat",
            agents=[mention.agent],
            mode=mode,
            secrets=bridge.config.provider_env(),
            resumed_from=resume,
        )
        if bridge.config.transcripts
        else Transcript()
    )
    status = "interrupted"
    try:
        with Renderer(agents=[mention.agent], verbose=verbose) as renderer:
            conversation, held = bridge._conversation(
                mention, mode, prior=earlier.get(mention.agent), tools_via=tools_via
            )
            if isinstance(conversation, CrewError):
                raise conversation
            prior = None
            if resume:

                def say(kind: str, name: str, text: str) -> None:
                    renderer.progress(Progress(kind, name, text))

                prior, held = Resumed(resume, earlier, [held]).of(0, mention.agent, transcript, say)
            loop = bridge._loop(
                mention,
                mode,
                conversation=conversation,
                max_turns=max_turns,
                timeout=timeout,
                approve_all=approve_all,
                budget=Budget(max_cost, max_tokens),
                transcript=transcript,
                on_progress=renderer.progress,
                tools_via=tools_via,
            )
            tools = "read-only tools" if mode == "query" else "every tool policy allows"
            converse(
                Chat(loop, prior, held), reader, renderer, f"crew chat with @{mention.agent} ({mode} mode: {tools})."
            )
        status = "ok"
    finally:
        transcript.close(status)


def converse(chat: Chat, reader: LineReader, renderer: Renderer, greeting: str) -> None:
    """Read messages and answer them until /exit or the end of input; then end the conversation."""
    reader.say(f"{greeting} {HELP}.")
    try:
        for text in reader:
            if _COMMAND.fullmatch(text):
                if text in ("/exit", "/quit"):
                    break
                reader.say(HELP if text == "/help" else f"unknown command {text}; {HELP}")
                continue
            _turn(chat, text, renderer, reader.say)
    finally:
        chat.close()


def _turn(chat: Chat, text: str, renderer: Renderer, say: Callable[[str], None]) -> None:
    """One message and its answer; an error or a Ctrl-C ends only this reply."""
    agent = chat.loop.agent
    try:
        result = chat.ask(text)
        renderer.finish([Outcome(agent, result=result)])
    except KeyboardInterrupt:
        chat.cancel()
        renderer.idle()
        say("(reply stopped)")
    except CLINotFound:
        raise  # every message would fail the same way
    except CrewError as exc:
        chat.loop.transcript.write("error", agent=agent, message=str(exc))
        renderer.failed(agent, exc)
    finally:
        renderer.idle()


class LineReader:
    """The person's messages: readline with a history on a terminal, plain lines otherwise.
    Blank lines are skipped; Ctrl-C at the prompt clears the line; Ctrl-D ends."""

    def __init__(self, stdin: IO[str], history: Path | None) -> None:
        self.stdin = stdin
        self.interactive = isatty(stdin)
        self.history = history
        self.readline: Any = _readline() if self.interactive else None
        if self.readline is not None and history is not None:
            self._load_history(history)

    def __iter__(self) -> Iterator[str]:
        while True:
            try:
                line = self._read()
            except KeyboardInterrupt:
                sys.stderr.write("\n")
                continue
            if line is None:
                return
            line = line.strip()
            if line:
                self._remember()
                yield line

    def _read(self) -> str | None:
        if not self.interactive:
            line = self.stdin.readline()
            return line or None
        try:
            return input(PROMPT)
        except EOFError:
            sys.stderr.write("\n")
            return None

    def say(self, text: str) -> None:
        """A word from crew itself, to the person at the terminal (nothing when stdin is piped)."""
        if self.interactive:
            sys.stderr.write(text + "\n")
            sys.stderr.flush()

    def _load_history(self, path: Path) -> None:
        """Read the history; a file past HISTORY_LENGTH lines is cut to its last ones. Each line
        is then appended as it is entered (two chats at once both keep theirs)."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
            self.readline.read_history_file(str(path))
            self.readline.set_history_length(HISTORY_LENGTH)
            if self.readline.get_current_history_length() > HISTORY_LENGTH:
                self.readline.write_history_file(str(path))
        except OSError:
            self.history = None  # no history kept, but the chat works

    def _remember(self) -> None:
        if self.readline is not None and self.history is not None:
            try:
                self.readline.append_history_file(1, str(self.history))
            except OSError:
                pass


def _readline() -> Any:
    try:
        import readline  # for start-up speed: only an interactive chat edits its input lines
    except ImportError:  # a Python built without it: plain input() still works
        return None
    return readline
