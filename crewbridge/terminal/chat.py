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
from typing import IO, TYPE_CHECKING, Any

from crewbridge.api import Outcome
from crewbridge.base.mentions import parse_agent
from crewbridge.base.modes import Mode
from crewbridge.base.options import RunOptions
from crewbridge.bridge import Bridge
from crewbridge.config import state_dir
from crewbridge.engine.dialogue import Chat
from crewbridge.errors import CLINotFound, CrewError
from crewbridge.system.approval import isatty
from crewbridge.terminal.render import Renderer

if TYPE_CHECKING:
    from crewbridge.record.events import Ended

HISTORY_FILE = "chat_history"
HISTORY_LENGTH = 1000
PROMPT = "> "
HELP = "/exit (or Ctrl-D) leaves; Ctrl-C stops a reply; anything else goes to the agent"
_COMMAND = re.compile(r"/[A-Za-z]+")


def run_chat(
    bridge: Bridge,
    agent: str,
    *,
    mode: Mode = "query",
    options: RunOptions | None = None,
    verbose: bool = False,
    stdin: IO[str] | None = None,
    history: Path | None = None,
) -> None:
    """The chat on this terminal (or on piped stdin, one message a line, no prompt). With
    `options.resume`, the id of an earlier run, the chat continues that run's conversation with the agent."""
    name = parse_agent(agent).agent
    with Renderer(agents=[name], verbose=verbose, secrets=bridge.config.provider_env()) as renderer:
        chat = bridge.chat(agent, mode, options=options, on_progress=renderer.progress)
        reader = LineReader(stdin or sys.stdin, history or state_dir() / HISTORY_FILE)
        tools = "read-only tools" if mode == "query" else "every tool policy allows"
        converse(chat, reader, renderer, f"crew chat with @{name} ({mode} mode: {tools}).")


def converse(chat: Chat, reader: LineReader, renderer: Renderer, greeting: str) -> None:
    """Read messages and answer them until /exit or the end of input; then end the conversation."""
    reader.say(f"{greeting} {HELP}.")
    renderer.idle()  # the CLI boots while the person types: no status line over the prompt
    status: Ended = "done"
    try:
        for text in reader:
            if _COMMAND.fullmatch(text):
                if text in ("/exit", "/quit"):
                    break
                reader.say(HELP if text == "/help" else f"unknown command {text}; {HELP}")
                continue
            _turn(chat, text, renderer, reader.say)
    except BaseException as exc:
        status = chat.loop.record.fail(exc)  # cancelled (Ctrl-C), or failed, its error recorded
        raise
    finally:
        chat.close(status)


def _turn(chat: Chat, text: str, renderer: Renderer, say: Callable[[str], None]) -> None:
    """One message and its answer; an error or a Ctrl-C ends only this reply."""
    agent = chat.agent
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
        chat.failed(exc)
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
