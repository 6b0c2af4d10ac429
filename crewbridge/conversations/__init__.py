"""A conversation with one CLI, turn by turn. The loop talks to this; how a turn reaches the CLI
(a new process per turn with the CLI's own resume, a replayed transcript, or a live process) is here."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Generator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Protocol

from crewbridge.base.decoded import Event, Failure, Session, Text, Usage
from crewbridge.errors import CrewError, UsageError
from crewbridge.providers.base import Provider, Turn, cli_environment
from crewbridge.system.process import Child

if TYPE_CHECKING:
    from crewbridge.toolkit.native import Channel
    from crewbridge.work.sessions import Prior

EXACT, LOST, FULL = "exact", "lost", "full"
LIVE_ENV = "CREW_LIVE"  # "0" makes every provider start a fresh CLI process per turn


class Conversation(Protocol):
    session_id: str | None
    reported: Usage | None  # the session's totals as the CLI last reported them (cumulative usage)
    base: Turn  # how its CLI starts, the sandbox it runs in among it

    def serve(self, channel: Channel) -> bool:
        """Take the loop's channel, before the first message: crew decides on the CLI's own tools
        where the CLI asks its client, and — when the turn asked for native tools and this
        conversation has a native channel — crew's tools are offered through it. Whether they are
        (else the loop sends the catalogue)."""

    def start(self) -> None:
        """Start the CLI now, before the first message is known, where the CLI can wait for it: it
        boots while crew builds the catalogue. A no-op where it cannot; a CLI that fails to start
        is reported by send()."""

    def send(self, message: str, deadline: float | None) -> Generator[Event, None, None]:
        """Start a turn with `message`; the events of the model's reply as they stream."""

    def stop(self) -> None:
        """Stop the current reply now: the loop has acted on it and wants no more of it."""

    def keep(self, kept: str, stopped: bool) -> str:
        """Record that the reply is `kept` (cut at its last tool block) and say what the CLI's own
        history now holds: EXACT (that text, nothing after it), LOST (none of the reply: the
        follow-up restates it) or FULL (the whole reply, tail included: the stop came too late, so
        the follow-up says which part was acted on)."""

    def late_usage(self) -> list[Usage]:
        """Usage the CLI reported for a reply after the loop stopped reading it (read by keep())."""

    def resume(self, prior: Prior) -> bool:
        """Continue `prior`, an earlier run's conversation, before start(): by the CLI's own session,
        or with its history given to the CLI (injected, or replayed each turn). False when the CLI no
        longer holds that session: the first message must then replay the history (replay())."""

    def close(self) -> None:
        """End anything still running."""


class ProcessConversation:
    """A new CLI process per turn, continued by the CLI's own resume, or by replaying the
    transcript for CLIs that have none. Stopping a reply kills the process group."""

    def __init__(self, provider: Provider, base: Turn, *, cwd: Path, env: dict[str, str] | None = None) -> None:
        self.provider = provider
        self.base = base
        self.cwd = cwd
        self.env, self.passed = cli_environment(provider, base, env)
        self.session_id: str | None = None
        self.reported: Usage | None = None
        self.history: list[tuple[str, str]] = []  # (role, text), for replay
        self.answer = ""  # the text of the last reply, for replay when it was an answer (no keep)
        self.child: Child | None = None
        self.finished_before_stop = False
        self._early: Child | None = None  # the first turn's CLI, started before its prompt was known

    def _prompt(self, message: str) -> str:
        if self.provider.resumable or not self.history:
            return message
        return replay(self.history, message)

    def resume(self, prior: Prior) -> bool:
        if not self.provider.resumable:
            self.history = list(prior.history)  # replayed at each turn
            return True
        if prior.session_id is None or not self.provider.has_session(prior.session_id, self.env, self.cwd):
            return False
        self.session_id, self.reported = prior.session_id, prior.reported
        return True

    def serve(self, channel: Channel) -> bool:
        return False  # a CLI run per turn asks its client nothing

    def start(self) -> None:
        """Start the first turn's CLI when its prompt goes on stdin: the CLI reads stdin to its end
        before it does anything, so send() can write the prompt once it is built."""
        if self.child is not None or self.history or not self.provider.prompt_on_stdin:
            return
        try:
            self.child = self._early = self._child(
                replace(self.base, prompt="", session_id=self.session_id), None, keep_stdin=True
            )
        except CrewError:
            pass  # not installed: send() tries again and reports it

    def _child(self, turn: Turn, stdin: str | None, keep_stdin: bool = False) -> Child:
        return Child(
            self.provider.argv(turn),
            env=self.env,
            cwd=self.cwd,
            stdin=stdin,
            keep_stdin=keep_stdin,
            install_hint=self.provider.install_hint,
            sandbox=turn.sandbox,
            passed=self.passed,
        )

    def send(self, message: str, deadline: float | None) -> Generator[Event, None, None]:
        if self.history and self.history[-1][0] == "user":  # the last reply was an answer: keep it all
            self.history.append(("assistant", self.answer))
        self.answer = ""
        prompt = self._prompt(message)
        self.history.append(("user", message))
        stdin = prompt if self.provider.prompt_on_stdin else None
        if self._early is not None:
            self.child, self._early = self._early, None
            self.child.feed(stdin)
        else:
            turn = replace(self.base, prompt=prompt, session_id=self.session_id if self.provider.resumable else None)
            self.child = self._child(turn, stdin)
        turn_session = self.session_id if self.provider.resumable else None
        child = self.child
        decoder = self.provider.decoder()
        failed: Failure | None = None
        try:
            for line in child.lines(deadline):
                for event in decoder.decode(line):
                    if isinstance(event, Session) and event.session_id:
                        self.session_id = event.session_id
                    elif isinstance(event, Text):
                        self.answer += event.text
                    if isinstance(event, Usage) and event.cumulative:
                        event = self._share(event, resumed=turn_session is not None)
                    failed = event if isinstance(event, Failure) else failed
                    yield event
            code = child.wait()
            status = self.provider.api_status(code) if failed is not None and failed.status is None else None
            if status is not None and failed is not None:  # the exit code says what the message did not
                yield replace(failed, status=status)
            elif code != 0 and failed is None:
                yield Failure(child.failure(self.provider.name))
            elif not failed:
                yield from decoder.end()
        finally:
            child.close()

    def _share(self, totals: Usage, resumed: bool) -> Usage:
        """This reply's part of the session's `totals` (the CLI reports the session so far)."""
        before = self.reported if resumed and self.reported is not None else Usage()
        self.reported = replace(totals, cumulative=False)
        return Usage(
            max(totals.input_tokens - before.input_tokens, 0),
            max(totals.output_tokens - before.output_tokens, 0),
            None if totals.cost_usd is None else max(totals.cost_usd - (before.cost_usd or 0.0), 0.0),
            max(totals.cached_tokens - before.cached_tokens, 0),
        )

    def late_usage(self) -> list[Usage]:
        return []  # a stopped CLI process is killed: it reports nothing more

    def stop(self) -> None:
        if self.child is not None:
            self.finished_before_stop = self.child.proc.poll() is not None
            self.child.kill()

    def keep(self, kept: str, stopped: bool) -> str:
        self.history.append(("assistant", kept))
        if not self.provider.resumable:
            return EXACT  # crew replays its own transcript, which holds exactly `kept`
        if stopped and not self.finished_before_stop:
            return LOST  # a killed CLI does not store the reply it was writing
        return FULL

    def close(self) -> None:
        if self.child is not None:
            self.child.close()


def replay(history: list[tuple[str, str]], message: str) -> str:
    """`message` after the conversation so far, for a CLI that does not hold it."""
    from crewbridge.base.templates import render  # for start-up speed: string.Template, not needed to start a CLI

    return render("replay.md", history="\n".join(f"[{role}]\n{text}" for role, text in history), message=message)


def live_enabled(env: dict[str, str] | None) -> bool:
    """Whether live continuation is on (CREW_LIVE unset or not "0", in `env` or the environment)."""
    return {**os.environ, **(env or {})}.get(LIVE_ENV, "1").strip() != "0"


def refuse_images(provider: Provider) -> NoReturn:
    """A task with images for a CLI crew cannot give them to."""
    able = ", ".join(f"@{name}" for name in ("claude", "gemini", "codex"))
    why = "not with CREW_LIVE=0 (a process per turn)" if provider.images_via else "it takes no images from crew"
    raise UsageError(f"{provider.name} cannot be given the prompt's images ({why}); send them to {able}, or send text")


def new_conversation(provider: Provider, base: Turn, cwd: Path, env: dict[str, str] | None = None) -> Conversation:
    """How crew talks to this provider's CLI across turns: the provider's `live` conversation (exact
    continuation, in one process where the CLI allows; its `native` one when the turn asks for
    native tools and it has one, or gives it MCP servers its native session takes), else — and
    always with CREW_LIVE=0 — a new process per turn, continued by the CLI's resume or a replayed
    transcript."""
    native = (
        base.native
        or (bool(base.mcp_servers) and provider.mcp_via == "session")
        or (bool(base.images) and provider.images_via == "native")
    )
    target = provider.native if native and provider.native else provider.live
    if base.images and (not provider.images_via or not live_enabled(env)):
        refuse_images(provider)
    if target and live_enabled(env):
        module, _, name = target.partition(":")
        live: Callable[..., Conversation] = getattr(importlib.import_module(module), name)
        return live(provider, base, cwd=cwd, env=env)
    return ProcessConversation(provider, base, cwd=cwd, env=env)
