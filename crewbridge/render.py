"""What a person sees, and what a script reads, while agents work.

Three outputs, chosen by `Renderer(output=…)`:

``text`` (the default), for a person.
  stdout carries the model's words. On a terminal, with one agent, they stream as they arrive,
  without the fenced crew tool-call blocks, and without anything a reply says after its calls (crew
  stops such a reply: that text is the model guessing results it has not seen). What is shown is
  what the extractor decided (a text event's `shown`, crewbridge.extract.Shown): one grammar. The final answer is
  the last reply's streamed text, so it is not printed again. When stdout is not a terminal, or
  several agents run at once, stdout gets only the final answers, each once: `crew query … > a.md`
  holds the answer and nothing else. Several agents' answers each follow a `── @agent ──` header,
  on a terminal as each agent finishes, otherwise in the order of the mentions.
  stderr carries what crew does: a line per tool call (`→ crew:read_file notes.txt`) and one per
  result (`  ✓ 3 lines`, `  ✗ no file 'x'`), labelled `@agent` when several agents run, and errors.
  On a terminal a status line (spinner, what each agent waits for: the model, or the tool it runs
  and for how long) shows while nothing else moves, wiped before an approval question is asked;
  colours only on a terminal and never with NO_COLOR set. Model text on a terminal has its control
  characters escaped, so a reply cannot drive the terminal.

``json``: one object on stdout at the end; ``jsonl``: the event stream, one object per line as it
  happens. Their shapes are crewbridge/outputs.py's (and docs/schemas/).

With ``verbose`` each command crew runs (`$`), every line it reads from the CLI (`>`) and sends it
(`<`) go to stderr, in every output, with secrets redacted as in transcripts (crewbridge.redact:
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from crewbridge.approval import isatty, terminal  # an approval question owns the terminal while it waits
from crewbridge.errors import CrewError
from crewbridge.outputs import error_record, event_record, json_line, outcomes_record, worktree_record
from crewbridge.process import LOGGER as PROCESS_LOGGER
from crewbridge.redact import Redactor
from crewbridge.verdict import Finding

STDERR_TOO = ("fallback", "resume", "warning", "sandbox", "disarmed")  # events shown on stderr with --json too

if TYPE_CHECKING:
    from crewbridge.api import Outcome
    from crewbridge.loop import CallRecord, Progress

OUTPUTS = ("text", "json", "jsonl")
RUN_EVENTS = ("fallback", "resume", "warning", "sandbox", "disarmed")  # shown on stderr with --json too
TRACE_CHARS = 1000  # a --verbose line is cut after this many characters
CREW_LINE = 2000  # characters of a `crew:` line of crew's own (a bound for what it quotes, not a width)
SHOWN_CHANGES = 20  # files listed per agent after a --worktree run
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
    calls: int = 0  # call lines shown
    results: int = 0  # result lines shown
    answered: bool = False  # its answer is on stdout
    tokens: int = 0  # used in this run so far (the status line shows them)
    half: str = ""  # the first half of a surrogate pair, waiting for the second
    running: list[tuple[str, float]] = field(default_factory=list)  # its tools running: name, since when

    def doing(self, now: float) -> str:
        """What the agent does now, for the status line: the tool it waits for, or its state."""
        if self.running:
            name, since = self.running[0]
            more = f" (+{len(self.running) - 1} more)" if len(self.running) > 1 else ""
            return f"running {name}{more} {now - since:.0f}s"
        return f"{self.state}" + (f" (turn {self.turn})" if self.turn > 1 else "") + f" {now - self.since:.0f}s"


class Renderer:
    """Turns the loop's Progress events (and the outcomes at the end) into output. Thread-safe:
    several agents report at once. Use as a context manager, or call `close()`."""

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
        self.streaming = output == "text" and not self.labelled and isatty(self.out)
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
        self._last_line: tuple[str, int] | None = None  # (agent, call number) of the last call line
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._trace: logging.Handler | None = None
        self._redactor = Redactor(env, provided=secrets)
        if verbose:
            self._trace = _TraceHandler(self)
            process_log = logging.getLogger(PROCESS_LOGGER)
            process_log.addHandler(self._trace)
            process_log.setLevel(logging.DEBUG)
        if output == "text" and self.style.live:
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

    def progress(self, event: Progress) -> None:
        """One event from an agent loop (the loop's `on_progress`)."""
        with self._lock:
            agent = self._agent(event.agent)
            if self.output == "jsonl":
                if event.kind != "text" or event.text:  # not a text event that only settles what is shown
                    self._write_out(json_line(event_record(event)))
            elif self.output == "text" or event.kind in (
                "fallback",
                "resume",
                "warning",
                "sandbox",
                "disarmed",
                "egress",
            ):  # stderr, --json too
                getattr(self, f"_on_{event.kind}", self._on_notice)(agent, event)
            if event.kind == "turn":
                agent.turn, agent.state, agent.since = _int(event.text), "waiting for the model", time.monotonic()
                agent.answered = agent.answered and agent.turn > 1  # turn 1: a new task (crew chat)
            elif event.kind == "text":
                agent.state = "writing"
            elif event.kind == "answer":
                agent.state = "done"
            elif event.kind == "usage" and event.usage is not None:
                agent.tokens = event.usage.tokens

    def _on_turn(self, agent: _Agent, event: Progress) -> None:
        self._fresh, self._blank = True, 0

    def _on_text(self, agent: _Agent, event: Progress) -> None:
        if self.streaming:  # a character split into two halves between events is shown whole
            text, agent.half = agent.half + event.shown, ""
            if text and "\ud800" <= text[-1] <= "\udbff":
                text, agent.half = text[:-1], text[-1]
            self._show(text)

    def _on_call(self, agent: _Agent, event: Progress) -> None:
        assert event.call is not None
        agent.calls += 1
        agent.running.append((event.call.name, time.monotonic()))
        self._err_line(agent, self.style.paint(f"{self.style.symbol('call')} {self._subject(event.call)}", "36"))
        self._last_line = (agent.name, agent.calls)

    def _on_result(self, agent: _Agent, event: Progress) -> None:
        assert event.call is not None
        agent.results += 1
        names = [name for name, _ in agent.running]
        if event.call.name in names:
            del agent.running[names.index(event.call.name)]
        result = event.call.result
        subject = "" if self._last_line == (agent.name, agent.results) else self._subject(event.call) + ": "
        if result.success and not killed(result.data):
            mark, detail, code = self.style.symbol("ok"), summary(result.data, result.truncated), "32"
        elif result.success:  # a command that did not end on its own (crew ended it, or a signal did)
            mark, detail, code = self.style.symbol("fail"), summary(result.data, result.truncated), "31"
        else:
            mark, detail, code = self.style.symbol("fail"), one_line(str(result.error)), "31"
        self._err_line(agent, f"  {self.style.paint(mark, code)} {subject}{detail}")
        self._last_line = None

    def _on_usage(self, agent: _Agent, event: Progress) -> None:
        pass  # the status line shows it

    def _on_answer(self, agent: _Agent, event: Progress) -> None:
        if self.streaming:
            agent.answered = True
            self._end_line()
        elif self.labelled and isatty(self.out):
            self._answer(agent, event.text)

    def _on_fallback(self, agent: _Agent, event: Progress) -> None:
        agent.state = "failed"
        self._on_resume(agent, event)

    def _on_resume(self, agent: _Agent, event: Progress) -> None:
        self._end_line()
        # crew's own words, whole (a path or a command in them is what the person acts on)
        self._write_err(self.style.paint(f"crew: {one_line(event.text, CREW_LINE)}", "33") + "\n")

    _on_warning = _on_sandbox = _on_resume  # about the run, not one agent: a `crew:` line

    def _on_disarmed(self, agent: _Agent, event: Progress) -> None:
        self._end_line()
        lines = [one_line(line) for line in event.text.splitlines()]
        self._write_err(self.style.paint("\n".join(f"crew: @{agent.name}: {line}" for line in lines), "33") + "\n")

    def _on_egress(self, agent: _Agent, event: Progress) -> None:
        if self._trace is not None:  # a refused connection: recorded always, shown with --verbose
            self._end_line()
            self._write_err(self.style.paint(f"crew: @{agent.name}: {one_line(event.text, CREW_LINE)}", "33") + "\n")

    def _on_notice(self, agent: _Agent, event: Progress) -> None:
        self._err_line(agent, self.style.paint(f"  {one_line(event.text)}", "2"))

    def _on_review(self, agent: _Agent, event: Progress) -> None:
        data = event.data or {}
        verdict = "approved" if data.get("verdict") == "approve" else "asks for changes"
        self._end_line()
        self._write_err(
            self.style.paint(
                f"crew: review {data.get('round')} of {data.get('rounds')} by @{agent.name}: {verdict}", "33"
            )
            + "\n"
        )
        for n, finding in enumerate(data.get("findings") or [], 1):
            self._write_err(f"  {n}. {one_line(Finding.of(finding).shown())}\n")

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
                    self.failed(outcome.agent, outcome.error)
            self._worktrees(outcomes)
            if self.output == "json":
                self._write_out(json_line(outcomes_record(outcomes)))

    def _worktrees(self, outcomes: Sequence[Outcome]) -> None:
        """Where each agent worked with --worktree and what it changed: lines on stderr, or jsonl events."""
        placed = [o for o in outcomes if o.worktree is not None]
        if not placed:
            return
        from crewbridge.git import summary  # for start-up speed: it loads subprocess and tempfile

        for outcome in placed:
            assert outcome.worktree is not None
            if self.output == "jsonl":
                self._write_out(json_line(worktree_record(outcome)))
            elif self.output == "text":
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

    def failed(self, name: str, error: Exception) -> None:
        """An agent's run ended with `error`: said on stderr (and in the jsonl stream)."""
        with self._lock:
            self._agent(name).state = "failed"
            if self.output == "jsonl":
                self._write_out(json_line(error_record(name, error)))
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
                agent.state, agent.results = "idle", agent.calls  # a cancelled reply's results never come
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

    def _subject(self, call: CallRecord) -> str:
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
            _silence(self.out)

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
                _silence(self.err)

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

        # A tool that asks a person first wipes it (crewbridge.approval.Floor.take): never under a question.
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


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


def _same_terminal(a: Any, b: Any) -> bool:
    """Whether two streams are the same terminal (so one's status line may cover the other's text)."""
    if not (isatty(a) and isatty(b)):
        return False
    try:
        return os.path.samestat(os.fstat(a.fileno()), os.fstat(b.fileno()))
    except (AttributeError, OSError, ValueError):
        return True  # terminals we cannot look into: assume the usual, one screen


def _silence(stream: Any) -> None:
    """Point a stream whose reader left at /dev/null, so later writes and the exit flush pass."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass
