"""What a person sees, and what a script reads, while agents work.

Three outputs, chosen by `Renderer(output=…)`:

``text`` (the default), for a person.
  stdout carries the model's words. On a terminal, with one agent, they stream as they arrive,
  without the fenced crew tool-call blocks, and without anything a reply says after its calls (crew
  stops such a reply: that text is the model guessing results it has not seen). What is shown is
  what the extractor decided (a text event's `shown`, crewbridge.toolkit.extract.Shown): one
  grammar. The final answer is the last reply's streamed text, so it is not printed again. When
  stdout is not a terminal, or several agents run at once, stdout gets only the final answers,
  each once: `crew query … > a.md` holds the answer and nothing else. Several agents' answers
  each follow a `── @agent ──` header, on a terminal as each agent finishes, otherwise in the order
  of the mentions.
  stderr carries what crew does: a line per tool call (`→ crew:read_file notes.txt`) and one per
  result (`  ✓ 3 lines`, `  ✗ no file 'x'`), labelled `@agent` when several agents run, and errors.
  On a terminal a status line (spinner, what each agent waits for: the model, or the tool it runs
  and for how long) shows while nothing else moves, wiped before an approval question is asked;
  colours only on a terminal and never with NO_COLOR set. Model text on a terminal has its control
  characters escaped, so a reply cannot drive the terminal.

``json``: one object on stdout at the end (crewbridge/engine/outputs.py, docs/schemas/outcome.json);
  ``jsonl``: the run's record as it happens, one event a line (crewbridge.record.events,
  docs/schemas/event.json).

With ``replay`` (`crew log show`) a finished run's record goes through the same renderer, stdout and
stderr on one stream, with its start, each turn and its end named.

With ``verbose`` each command crew runs (`$`), every line it reads from the CLI (`>`) and sends it
(`<`) go to stderr, in every output, with secrets redacted as in transcripts (crewbridge.base.redact:
`secrets` are the variables crew.yaml's providers set).
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from crewbridge.base.redact import Redactor
from crewbridge.engine.outputs import json_line, outcomes_record
from crewbridge.errors import CrewError
from crewbridge.system.approval import isatty, terminal  # an approval question owns the terminal while it waits
from crewbridge.system.process import LOGGER as PROCESS_LOGGER
from crewbridge.terminal.failure import silence
from crewbridge.toolkit.verdict import Finding

if TYPE_CHECKING:
    from crewbridge.api import Outcome
    from crewbridge.record import events as ev

OUTPUTS = ("text", "json", "jsonl")
ABOUT_THE_RUN = ("warning", "sandbox")  # notices shown on stderr with --json too, as fallbacks, resumes, disarms
TRACE_CHARS = 1000  # a --verbose line is cut after this many characters
CREW_LINE = 2000  # characters of a `crew:` line of crew's own (a bound for what it quotes, not a width)
SHOWN_CHANGES = 20  # files listed per agent after a --worktree run
CHECK_LINES = 5  # lines of a failing check's output shown (the agent is given more)
STATUS_IDLE = 0.3  # seconds without output before the status line shows
TICK = 0.1

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # all but tab and newline
_ANY_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_COLORS = ("36", "35", "33", "34", "32")  # agent labels: cyan, magenta, yellow, blue, green


@dataclass
class Style:
    """How a stream may be written to: colours, a live status line, symbols, width."""

    color: bool = False
    live: bool = False
    unicode: bool = True
    width: int = 120

    @classmethod
    def of(cls, stream: IO[str], env: Mapping[str, str]) -> Style:
        tty = isatty(stream)
        dumb = env.get("TERM", "") == "dumb"
        width = 120
        if tty:
            import shutil  # 3 ms to import (it loads bz2, lzma…): only for a terminal

            width = shutil.get_terminal_size((120, 24)).columns
        try:
            "→✓✗⠋─".encode(getattr(stream, "encoding", None) or "utf-8")
            unicode = True
        except (UnicodeEncodeError, LookupError):
            unicode = False
        return cls(
            color=tty and not dumb and not env.get("NO_COLOR"),
            live=tty and not dumb,
            unicode=unicode,
            width=max(width, 20),
        )

    def paint(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color and text else text

    def symbol(self, name: str) -> str:
        return (_UNICODE if self.unicode else _ASCII)[name]


_UNICODE = {"call": "→", "ok": "✓", "fail": "✗", "rule": "─", "spin": "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"}
_ASCII = {"call": "->", "ok": "ok", "fail": "x", "rule": "-", "spin": "|/-\\"}


@dataclass
class _Agent:
    name: str
    label: str  # "" with one agent
    state: str = "starting"
    turn: int = 0
    since: float = field(default_factory=time.monotonic)
    answered: bool = False  # its answer is on stdout
    tokens: int = 0  # used in this run so far (the status line shows them)
    half: str = ""  # the first half of a surrogate pair, waiting for the second
    reviewing: bool = False  # its part is a review's: its words are its verdict, not the run's answer
    running: dict[str, tuple[str, float]] = field(default_factory=dict)  # its tools running: id → name, since

    def doing(self, now: float) -> str:
        """What the agent does now, for the status line: the tool it waits for, or its state."""
        if self.running:
            name, since = next(iter(self.running.values()))
            more = f" (+{len(self.running) - 1} more)" if len(self.running) > 1 else ""
            return f"running {name}{more} {now - since:.0f}s"
        return f"{self.state}" + (f" (turn {self.turn})" if self.turn > 1 else "") + f" {now - self.since:.0f}s"


class Renderer:
    """Turns a run's record (and the outcomes at the end) into output. Thread-safe: several agents
    report at once. Use as a context manager, or call `close()`."""

    def __init__(
        self,
        *,
        output: str = "text",
        agents: Sequence[str] = (),
        verbose: bool = False,
        out: IO[str] | None = None,
        err: IO[str] | None = None,
        env: Mapping[str, str] | None = None,
        secrets: Mapping[str, str] | None = None,
        replay: bool = False,
    ) -> None:
        if output not in OUTPUTS:
            raise ValueError(f"output '{output}' is not one of {', '.join(OUTPUTS)}")
        env = os.environ if env is None else env
        self.output = output
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.style = Style.of(self.err, env)
        self.out_style = Style.of(self.out, env)
        self.labelled = len(agents) > 1
        self.replay = replay
        self.streaming = output == "text" and not self.labelled and (replay or isatty(self.out))
        self.shared_tty = _same_terminal(self.out, self.err)
        width = max((len(a) for a in agents), default=0)
        self.agents: dict[str, _Agent] = {}
        for index, name in enumerate(agents):
            self._agent(name, index, width)
        self._lock = threading.RLock()
        self._column = 0  # characters on stdout's current line (0: at a line start)
        self._blank = 0  # newlines held back (not shown at the end of an answer)
        self._fresh = True  # nothing of the current reply shown yet: leading newlines are dropped
        self._status = False  # the status line is drawn
        self._quiet_since = time.monotonic()
        self._last_line: str | None = None  # the call id of the last call line
        self._calls: dict[str, ev.Call] = {}  # the calls started, by id
        self._dropped: set[str] = set()  # calls of a reply stopped before their results came (idle)
        self._unasked: set[str] = set()  # the CLI's own calls it ran without asking crew: shown at their result
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._trace: logging.Handler | None = None
        self._redactor = Redactor(env, provided=secrets)
        if verbose:
            self._trace = _TraceHandler(self)
            process_log = logging.getLogger(PROCESS_LOGGER)
            process_log.addHandler(self._trace)
            process_log.setLevel(logging.DEBUG)
        if output == "text" and self.style.live and not replay:
            self._ticker = threading.Thread(target=self._tick, name="crew-status", daemon=True)
            self._ticker.start()

    def __enter__(self) -> Renderer:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: object) -> None:
        verbose = self._trace is not None
        self.close()
        if verbose and isinstance(error, Exception) and not isinstance(error, CrewError):
            # a bug in crew (the command says so in one line): --verbose shows where it is
            import traceback

            self.err.write("".join(traceback.format_exception(error)))

    def close(self) -> None:
        """Stop the status line and the --verbose trace."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        with self._lock:
            self._clear_status()
            self._end_line()
        if self._trace is not None:
            process_log = logging.getLogger(PROCESS_LOGGER)
            process_log.removeHandler(self._trace)
            process_log.setLevel(logging.NOTSET)

    # -- events ---------------------------------------------------------------------------------

    def progress(self, event: ev.Event) -> None:
        """One event of the run's record (the record's sink)."""
        with self._lock:
            agent = self._agent(event.agent) if event.agent else None
            if self.output == "jsonl":
                self._write_out(json_line(event))
            elif self.output == "text" or _about_the_run(event):  # stderr, with --json too
                show = getattr(self, f"_on_{event.kind}", None)
                if show is not None:
                    show(agent, event)
            if agent is not None:
                self._follow(agent, event)

    def _follow(self, agent: _Agent, event: ev.Event) -> None:
        """What the status line says of `agent`, after `event`."""
        kind = event.kind
        if kind == "part":
            agent.reviewing = getattr(event, "role", "") == "reviewer"
        elif kind == "turn":
            agent.turn, agent.state, agent.since = getattr(event, "turn", 0), "waiting for the model", time.monotonic()
            agent.answered = agent.answered and agent.turn > 1  # turn 1: a new task (crew chat)
        elif kind == "text":
            agent.state = "writing"
        elif kind == "answer":
            agent.state = "done"
        elif kind == "usage":
            agent.tokens += getattr(event, "input_tokens", 0) + getattr(event, "output_tokens", 0)

    def replayed(self, events: Iterable[ev.Event]) -> None:
        """A finished run's record, shown as it was shown live (`crew log show`)."""
        for event in events:
            self.progress(event)
        self.close()

    def _on_start(self, agent: _Agent | None, event: ev.Start) -> None:
        if self.replay:
            who = " ".join(f"@{name}" for name in event.agents)
            resumed = f", continuing run {event.resumed_from}" if event.resumed_from else ""
            head = f"run {event.run}: crew {event.command} {who}, {event.at}, in {event.cwd}{resumed}"
            self._write_err(self.style.paint(one_line(head, CREW_LINE), "1") + "\n")
            if event.task:
                self._write_err(f"task: {one_line(event.task, CREW_LINE)}\n")

    def _on_turn(self, agent: _Agent | None, event: ev.Turn) -> None:
        self._fresh, self._blank = True, 0
        if self.replay and agent is not None:
            self._end_line()
            self._write_err(
                self.style.paint(
                    f"── {_seconds(event.t)} {agent.name}, turn {event.turn}: crew sent {sent(event.prompt)}", "2"
                )
                + "\n"
            )

    def _on_text(self, agent: _Agent | None, event: ev.Text) -> None:
        if self.streaming and agent is not None and not agent.reviewing:
            # a character split into two halves between events is shown whole
            text, agent.half = agent.half + event.visible, ""
            if text and "\ud800" <= text[-1] <= "\udbff":
                text, agent.half = text[:-1], text[-1]
            self._show(text)

    def _on_call(self, agent: _Agent | None, event: ev.Call) -> None:
        assert agent is not None
        self._calls[event.call] = event
        if event.via == "own":  # shown with crew's decision on it
            return
        agent.running[event.call] = (event.name, time.monotonic())
        self._err_line(agent, self.style.paint(f"{self.style.symbol('call')} {self._subject(event)}", "36"))
        self._last_line = event.call

    def _on_decision(self, agent: _Agent | None, event: ev.Decision) -> None:
        call = self._calls.get(event.call)
        if agent is None or call is None or call.via != "own":
            return
        if event.by == "cli":  # crew was not asked: the line comes with the result, which says how it went
            self._unasked.add(event.call)
            return
        said = f"refused, {event.reason}" if event.reason else "allowed"
        self._own_line(agent, call, said)

    def _own_line(self, agent: _Agent, call: ev.Call, said: str) -> None:
        shown = f"{call.name} {brief(call.input, 120)}".rstrip()
        self._err_line(agent, self.style.paint(f"  {one_line(f'{shown}: {said}')}", "2"))

    def _on_result(self, agent: _Agent | None, event: ev.Result) -> None:
        assert agent is not None
        agent.running.pop(event.call, None)
        if event.call in self._dropped:  # its reply was stopped and the person is at the prompt again
            return
        call = self._calls.get(event.call)
        if call is not None and call.via == "own":
            if event.call in self._unasked:
                said = "ran" if event.success else f"failed, {event.error}"
                self._own_line(agent, call, f"{said} (crew was not asked: the CLI's own rules)")
            return
        subject = "" if self._last_line == event.call or call is None else self._subject(call) + ": "
        truncated = bool(event.metadata.get("truncated"))
        if event.success and not killed(event.data):
            mark, detail, code = self.style.symbol("ok"), summary(event.data, truncated), "32"
        elif event.success:  # a command that did not end on its own (crew ended it, or a signal did)
            mark, detail, code = self.style.symbol("fail"), summary(event.data, truncated), "31"
        else:
            mark, detail, code = self.style.symbol("fail"), one_line(str(event.error)), "31"
        self._err_line(agent, f"  {self.style.paint(mark, code)} {subject}{detail}")
        self._last_line = None

    def _on_answer(self, agent: _Agent | None, event: ev.Answer) -> None:
        assert agent is not None
        if agent.reviewing:
            return
        if self.streaming:
            agent.answered = True
            self._end_line()
        elif self.labelled and (self.replay or isatty(self.out)):
            self._answer(agent, event.text)

    def _on_fallback(self, agent: _Agent | None, event: ev.Fallback) -> None:
        assert agent is not None
        agent.state = "failed"
        self._crew_line(f"@{agent.name} cannot answer ({event.reason}); @{event.to} takes over")

    def _on_resume(self, agent: _Agent | None, event: ev.Resume) -> None:
        if event.text:
            self._crew_line(event.text)

    def _on_notice(self, agent: _Agent | None, event: ev.Notice) -> None:
        if event.about in ABOUT_THE_RUN:
            self._crew_line(event.text)
        elif agent is not None:
            self._err_line(agent, self.style.paint(f"  {one_line(event.text)}", "2"))
        else:
            self._crew_line(event.text)

    def _crew_line(self, text: str) -> None:
        """crew's own words, whole (a path or a command in them is what the person acts on)."""
        self._end_line()
        self._write_err(self.style.paint(f"crew: {one_line(text, CREW_LINE)}", "33") + "\n")

    def _on_disarmed(self, agent: _Agent | None, event: ev.Disarmed) -> None:
        self._end_line()
        who = f"@{agent.name}: " if agent is not None else ""
        lines = [one_line(line) for line in event.text.splitlines()]
        self._write_err(self.style.paint("\n".join(f"crew: {who}{line}" for line in lines), "33") + "\n")

    def _on_egress(self, agent: _Agent | None, event: ev.Egress) -> None:
        if self._trace is not None:  # a refused connection: recorded always, shown with --verbose
            who = f"@{agent.name}: " if agent is not None else ""
            self._end_line()
            self._write_err(self.style.paint(f"crew: {who}{one_line(event.text, CREW_LINE)}", "33") + "\n")

    def _on_review(self, agent: _Agent | None, event: ev.Review) -> None:
        assert agent is not None
        verdict = "approved" if event.verdict == "approve" else "asks for changes"
        self._crew_line(f"review {event.round} of {event.rounds} by @{agent.name}: {verdict}")
        for n, finding in enumerate(event.findings, 1):
            self._write_err(f"  {n}. {one_line(Finding.of(finding).shown())}\n")

    def _on_check(self, agent: _Agent | None, event: ev.Check) -> None:
        who = f"@{agent.name}: " if agent is not None else ""
        said = "passed" if event.passed else f"failed, exit status {event.exit_code}"
        head = f"crew: {who}check {event.round}/{event.rounds} {said}: {one_line(event.command)} ({_seconds(event.ms)})"
        self._end_line()
        self._write_err(self.style.paint(head, "32" if event.passed else "31") + "\n")
        if not event.passed:  # the end of what it said, as the agent is given it whole
            tail = [one_line(line) for line in event.output.rstrip().splitlines()[-CHECK_LINES:]]
            self._write_err("".join(self.style.paint(f"  {line}", "2") + "\n" for line in tail))

    def _on_pull(self, agent: _Agent | None, event: ev.Pull) -> None:
        what = "merge request" if event.forge == "gitlab" else "pull request"
        done = "opened" if event.opened else "updated"
        self._crew_line(f"{'draft ' if event.draft else ''}{what} {done}: {event.url} ({event.branch})")

    def _on_error(self, agent: _Agent | None, event: ev.Error) -> None:
        if self.replay:  # live, the outcomes say it once the run is over (finish)
            who = f"@{agent.name}: " if agent is not None and not event.message.startswith("@") else ""
            self._end_line()
            self._write_err(self.style.paint(f"crew: error: {who}{one_line(event.message, CREW_LINE)}", "31") + "\n")

    def _on_unreadable(self, agent: _Agent | None, event: ev.Unreadable) -> None:
        self._crew_line(f"line {event.line} of the transcript could not be read: {event.error}")

    def _on_end(self, agent: _Agent | None, event: ev.End) -> None:
        if self.replay:
            self._end_line()
            calls = _count(event.calls, "tool call")
            self._write_err(
                self.style.paint(
                    f"── end, {_seconds(event.t)}: {event.status}, {calls}, {_count(event.errors, 'error')}", "1"
                )
                + "\n"
            )

    def finish(self, outcomes: Sequence[Outcome]) -> None:
        """The run is over: answers not shown yet, errors, and the --json object."""
        with self._lock:
            self._clear_status()
            self._end_line()
            for outcome in outcomes:
                agent = self._agent(outcome.agent)
                if self.output == "text" and not agent.answered and outcome.result is not None:
                    self._answer(agent, outcome.result.answer, header=self.labelled or bool(outcome.fell_back_from))
                if outcome.error is not None:  # with a result too: a review that did not approve
                    self.failed(outcome.agent, outcome.error, recorded=True)
            self._worktrees(outcomes)
            if self.output == "json":
                self._write_out(json_line(outcomes_record(outcomes)))

    def _worktrees(self, outcomes: Sequence[Outcome]) -> None:
        """Where each agent worked with --worktree and what it changed: lines on stderr (the record's
        `worktree` events have it for --jsonl)."""
        placed = [o for o in outcomes if o.worktree is not None]
        if not placed:
            return
        from crewbridge.system.git import summary  # for start-up speed: it loads subprocess and tempfile

        for outcome in placed:
            assert outcome.worktree is not None
            if self.output == "text":
                changes = outcome.changes
                what = "its changes are unknown (see crew log)" if changes is None else summary(changes)
                self._write_err(
                    f"crew: @{outcome.agent}: {what}, on branch {outcome.worktree.branch} in {outcome.worktree.path}\n"
                )
                for change in (changes or [])[:SHOWN_CHANGES]:
                    self._write_err(f"  {one_line(change.line())}\n")
                if changes and len(changes) > SHOWN_CHANGES:
                    self._write_err(f"  … and {len(changes) - SHOWN_CHANGES} more\n")
        if self.output == "text":
            run = placed[0].worktree.run_id  # type: ignore[union-attr]
            self._write_err(
                f"crew: take an agent's changes into your checkout with `crew apply {run} AGENT`; "
                f"`crew worktrees clean {run}` removes the worktrees\n"
            )

    def failed(self, name: str, error: Exception, recorded: bool = False) -> None:
        """An agent's run ended with `error`: said on stderr (and in the jsonl stream, unless the
        run's record had it: `recorded`)."""
        with self._lock:
            self._agent(name).state = "failed"
            if self.output == "jsonl" and not recorded:
                from crewbridge.record.events import Error

                self._write_out(
                    json_line(Error(agent=name, message=str(error), exit_code=getattr(error, "exit_code", 1)))
                )
            message = str(error)
            if self.labelled and not message.startswith(f"@{name}"):
                message = f"@{name}: {message}"
            self._end_line()
            self._write_err(self.style.paint(f"crew: error: {message}", "31") + "\n")

    def idle(self) -> None:
        """Nothing runs now (crew chat, before it reads the next message): no status line, and the
        output ends at a line start."""
        with self._lock:
            for agent in self.agents.values():
                agent.state = "idle"
                self._dropped.update(agent.running)  # a stopped reply's: their results, late, are the record's
                agent.running.clear()
            self._clear_status()
            self._end_line()
            self._fresh = True

    # -- writing --------------------------------------------------------------------------------

    def _agent(self, name: str, index: int | None = None, width: int = 0) -> _Agent:
        agent = self.agents.get(name)
        if agent is None:
            index = len(self.agents) if index is None else index
            label = (
                self.style.paint(f"@{name}".ljust(width + 1), _COLORS[index % len(_COLORS)] + ";1")
                if self.labelled
                else ""
            )
            agent = self.agents[name] = _Agent(name, label)
        return agent

    def _subject(self, call: ev.Call) -> str:
        name = call.name or "(a call crew could not read)"
        arg = brief(call.input, max(self.style.width - len(name) - 20, 20))
        return f"{name} {arg}" if arg else name

    def _answer(self, agent: _Agent, answer: str, header: bool | None = None) -> None:
        """A whole answer on stdout (not streamed), with a header when several agents run (or
        another agent took the task over)."""
        agent.answered = True
        if self.labelled if header is None else header:
            rule = self.out_style.symbol("rule") * 2
            self._write_out(self.out_style.paint(f"{rule} @{agent.name} {rule}", "1") + "\n")
        self._write_out(self._safe(answer) + "\n" if answer else "")

    def _show(self, text: str) -> None:
        """Streamed model text on stdout: leading newlines of a reply dropped, blank lines held
        until more text follows (so an answer never ends in blank lines)."""
        if not text or not self.streaming:
            return
        text = text.replace("\r\n", "\n")
        if self._fresh:
            text = text.lstrip("\r\n")
            if not text:
                return
            self._fresh = False
            if self._column:
                text = "\n" + text
        body = text.rstrip("\n")
        trailing = len(text) - len(body)
        if body:
            body, self._blank = "\n" * self._blank + body, 0
            self._write_out(self._safe(body))
            self._column = len(body) - body.rfind("\n") - 1
        if trailing:
            if self._column:
                self._write_out("\n")
                self._column = 0
                trailing -= 1
            self._blank += trailing

    def _end_line(self) -> None:
        """Finish a streamed line, so what follows starts at a line start."""
        self._blank = 0
        if self._column:
            self._write_out("\n")
            self._column = 0

    def _err_line(self, agent: _Agent, text: str) -> None:
        if self.output != "text":
            return
        if self.shared_tty and self._column:
            self._end_line()
        self._write_err(f"{agent.label} {text}\n" if agent.label else text + "\n")

    def _safe(self, text: str) -> str:
        """Model text for stdout: control characters escaped on a terminal, as written elsewhere."""
        if not isatty(self.out):
            return text
        return _CONTROL.sub(_escape, text)

    def _write_out(self, text: str) -> None:
        if not text:
            return
        self._clear_status()
        self._quiet_since = time.monotonic()
        try:
            self.out.write(_encodable(text, self.out))
            self.out.flush()
        except BrokenPipeError:  # the reader left (`| head`): the run goes on, its output goes nowhere
            silence(self.out)

    def _write_err(self, text: str) -> None:
        """A line on stderr (the status line, if drawn, wiped first); while a person is asked an
        approval question, it is held and written after the question (nothing waits for them)."""
        self._quiet_since, self._last_line = time.monotonic(), None

        def write() -> None:
            self._clear_status()
            try:
                self.err.write(_encodable(text, self.err))
                self.err.flush()
            except BrokenPipeError:
                silence(self.err)

        terminal.write(write)

    def trace(self, line: str, whole: bool = False) -> None:
        """A --verbose line on stderr: cut after TRACE_CHARS characters (saying how many more there
        were), or `whole` (a command crew runs: a person needs all of it to run it again)."""
        with self._lock:
            if self.shared_tty and self._column:
                self._end_line()
            cut = not whole and len(line) > TRACE_CHARS
            text = self._redactor.head(line, TRACE_CHARS) if cut else self._redactor.text(line)
            shown = _ANY_CONTROL.sub(_escape, text)
            if cut:
                shown += f"… ({len(line) - TRACE_CHARS:,} more characters)"
            self._write_err(self.style.paint(shown, "2") + "\n")

    # -- the status line ------------------------------------------------------------------------

    def _tick(self) -> None:
        frame = 0
        while not self._stop.wait(TICK):
            with self._lock:
                frame += 1
                self.draw_status(frame)

    def draw_status(self, frame: int = 0) -> None:
        """Draw (or clear) the status line: on a terminal, while an agent works and nothing else moves."""
        if not self.style.live:
            return
        busy = [a for a in self.agents.values() if a.state in ("starting", "waiting for the model", "writing")]
        if (
            not busy
            or (self.shared_tty and self._column)
            or (not self._status and time.monotonic() - self._quiet_since < STATUS_IDLE)
        ):
            self._clear_status()
            return
        spin = self.style.symbol("spin")
        now = time.monotonic()
        parts = [f"@{a.name} {a.doing(now)}" + (f", {a.tokens:,} tokens" if a.tokens else "") for a in busy]
        line = one_line(f"{spin[frame % len(spin)]} " + "  ".join(parts), self.style.width - 1)

        def write() -> None:
            self.err.write("\r\x1b[2K" + self.style.paint(line, "2") + "\r")
            self.err.flush()
            self._status = True

        # A tool that asks a person first wipes it (crewbridge.system.approval.Floor.take): never under a question.
        terminal.write_if_free(write, wipe=self._clear_status)

    def _clear_status(self) -> None:
        if self._status:
            self._status = False
            self.err.write("\r\x1b[2K")
            self.err.flush()


class _TraceHandler(logging.Handler):
    def __init__(self, renderer: Renderer) -> None:
        super().__init__(logging.DEBUG)
        self.renderer = renderer

    def emit(self, record: logging.LogRecord) -> None:
        self.renderer.trace(record.getMessage(), whole=getattr(record, "whole", False))


def summary(data: Any, truncated: bool = False) -> str:
    """A few words on a tool's result data: `3 lines`, `12 entries`, `exit 0, 4 lines`."""
    cut = " (truncated)" if truncated else ""
    if isinstance(data, dict):
        if isinstance(data.get("exit_code"), int):
            code = data["exit_code"]
            how = f"killed by {_signal_name(-code)}" if killed(data) else f"exit {code}"
            return f"{how}, {_count(len(str(data.get('output', '')).splitlines()), 'line')}{cut}"
        if isinstance(data.get("content"), str):
            lines = _count(len(data["content"].splitlines()), "line")
            total = data.get("total_lines")
            return (f"{lines} of {total}" if "next_offset" in data and total else lines) + cut
        if isinstance(data.get("bytes"), int):
            return (
                f"{'created' if data.get('created') else 'wrote'} {data.get('path', '')}, "
                f"{_count(data['bytes'], 'byte')}{cut}"
            )
        if isinstance(data.get("line"), int):
            return f"edited {data.get('path', '')} at line {data['line']}{cut}"
        for key, value in data.items():
            if isinstance(value, list):
                return f"{len(value)} {key if len(value) != 1 else _singular(key)}{cut}"
        return "done" + cut
    if isinstance(data, list):
        return _count(len(data), "item") + cut
    if isinstance(data, str):
        return _count(len(data.splitlines()), "line") + cut
    return "done" + cut if data is None else one_line(json.dumps(data), 60) + cut


def killed(data: Any) -> bool:
    """Whether a command's result says a signal ended it (a negative exit code, as Python gives it)."""
    return isinstance(data, dict) and isinstance(data.get("exit_code"), int) and data["exit_code"] < 0


def _signal_name(number: int) -> str:
    import signal  # for start-up speed: only a killed command names its signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def brief(data: Any, width: int = 80) -> str:
    """A call's input in a few characters: its values, long texts as their length."""
    if data is None or data == {}:
        return ""
    if not isinstance(data, dict):
        return one_line(json.dumps(data, ensure_ascii=False), width)
    parts = []
    for key, value in data.items():
        if isinstance(value, str):
            parts.append(value if len(value) <= 60 and "\n" not in value else f"({len(value)} characters)")
        elif isinstance(value, (dict, list)):
            parts.append(f"{key}={one_line(json.dumps(value, ensure_ascii=False), 40)}")
        else:
            parts.append(f"{key}={json.dumps(value)}")
    return one_line(" ".join(parts), width)


def one_line(text: str, width: int = 200) -> str:
    """`text` on one line, control characters (newlines too) escaped, cut to `width` characters."""
    text = _ANY_CONTROL.sub(_escape, text)
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _encodable(text: str, stream: Any) -> str:
    """`text` as `stream` can encode it: surrogate halves joined (a lone one replaced), characters
    its encoding lacks escaped."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
        return text
    except (UnicodeEncodeError, LookupError):
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        try:
            return text.encode(encoding, "backslashreplace").decode(encoding)
        except LookupError:
            return text


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _singular(noun: str) -> str:
    """entries → entry, matches → match, files → file (for a count of one)."""
    for plural, single in (("ies", "y"), ("ches", "ch"), ("shes", "sh"), ("xes", "x"), ("sses", "ss"), ("s", "")):
        if noun.endswith(plural):
            return noun[: -len(plural)] + single
    return noun


def _escape(match: re.Match[str]) -> str:
    return repr(match.group())[1:-1]


def _about_the_run(event: ev.Event) -> bool:
    """Whether `event` is shown on stderr with --json too: a fallback, a resume, a disarm, a check, a
    pull request, a warning."""
    kind = event.kind
    return kind in ("fallback", "resume", "disarmed", "egress", "check", "pull") or (
        kind == "notice" and getattr(event, "about", "") in ABOUT_THE_RUN
    )


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.2f}s"


TASK = "\n[task]\n"  # where the catalogue ends in a first message (prompts/prompt.md)
REPLAYED = "[crew conversation so far"  # a replayed conversation (prompts/replay.md) …
NEW_MESSAGE = "\n[new message]\n"  # … and where the new message starts
RESULTS = "[crew tool results]"  # a message of tool results (prompts/tool_results.md)


def sent(prompt: str) -> str:
    """What a message crew sent holds, in a few words: what it repeats is named, not shown again
    (crew's tool catalogue, a replayed conversation, the results shown above with their calls)."""
    notes = []
    if prompt.startswith(REPLAYED) and NEW_MESSAGE in prompt:
        earlier, _, prompt = prompt.rpartition(NEW_MESSAGE)
        notes.append(f"the conversation so far, replayed ({len(earlier):,} characters)")
    if TASK in prompt:
        catalogue, _, prompt = prompt.partition(TASK)
        notes.append(f"crew's tool catalogue ({len(catalogue):,} characters)")
    elif prompt.startswith(RESULTS):
        count = prompt.count("\nResult of ")
        return f"the results of {_count(count, 'tool call')} ({len(prompt):,} characters)"
    task = one_line(prompt.strip(), 200)
    return ", ".join([*notes, f"the message: {task}" if task else "an empty message"])


def _same_terminal(a: Any, b: Any) -> bool:
    """Whether two streams are the same terminal (so one's status line may cover the other's text)."""
    if not (isatty(a) and isatty(b)):
        return False
    try:
        return os.path.samestat(os.fstat(a.fileno()), os.fstat(b.fileno()))
    except (AttributeError, OSError, ValueError):
        return True  # terminals we cannot look into: assume the usual, one screen
