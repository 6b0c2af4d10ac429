"""The agent loop: send, read the reply as it streams, run each tool call the moment its block
closes, stop the reply where it starts talking past its calls, send the results back, repeat."""

from __future__ import annotations

import json
import queue
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, wait
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.base import jsonio
from crewbridge.base.availability import unavailable
from crewbridge.base.decoded import Failure, MessageEnd, OwnCall, OwnResult, Session, Text, Usage
from crewbridge.base.globs import NATIVE
from crewbridge.base.skills import SKILL_TOOL, Skill
from crewbridge.base.templates import render
from crewbridge.base.usage import Budget, Tally
from crewbridge.conversations import FULL, LOST, Conversation, replay
from crewbridge.errors import (
    BudgetExceeded,
    CrewError,
    CrewTimeout,
    Interrupted,
    MaxTurnsReached,
    ProviderError,
    ProviderUnavailable,
)
from crewbridge.record import events as ev
from crewbridge.record.stream import Record
from crewbridge.system.gitguard import Armed, Watch, summary
from crewbridge.toolkit.catalogue import build_prompt, offered_tools, render_catalogue, skills_section
from crewbridge.toolkit.extract import Extractor, Shown, ToolCall
from crewbridge.toolkit.hooks import Hooks
from crewbridge.toolkit.paths import resolve_inside
from crewbridge.toolkit.preview import PATH_KEYS
from crewbridge.toolkit.registry import TIMEOUT_GRACE, Files, Tool, ToolContext, ToolFailure, ToolRegistry, ToolResult
from crewbridge.work.caller import Caller
from crewbridge.work.policy import Policy, Ruling, Unasked

if TYPE_CHECKING:
    from crewbridge.base.stop import Stop
    from crewbridge.sandbox import Sandbox
    from crewbridge.sandbox.proxy import Refused
    from crewbridge.work.sessions import Prior

REPEAT_LIMIT = 3  # the same failing call this many times ends the run
CALLS_PER_TURN = 5  # native calls a run may make per --max-turns (one reply may make several)
MAX_REPLY = 8 << 20  # characters of one reply; past this the CLI is stopped (memory stays bounded)


@dataclass
class CallRecord:
    name: str
    input: Any
    result: ToolResult
    call: str = ""  # its id in the run's record


@dataclass
class RunResult:
    agent: str
    answer: str
    tool_calls: list[CallRecord] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    session: str | None = None
    turns: int = 0
    needed_approval: list[Unasked] = field(default_factory=list)  # refused: nobody could be asked


@dataclass
class Reply:
    text: str
    calls: list[ToolCall]
    ids: list[str]  # each call's id in the run's record
    pending: list[Future[ToolResult]]
    stopped: bool


class AgentLoop:
    def __init__(
        self,
        agent: str,
        conversation: Conversation,
        registry: ToolRegistry,
        policy: Policy,
        *,
        workdir: Path,
        hooks: Hooks | None = None,
        record: Record | None = None,
        max_turns: int = 10,
        timeout: float | None = 300.0,
        compact: bool | None = None,
        skills: dict[str, Skill] | None = None,
        budgets: list[Budget] | None = None,
        tools_via: str = "text",
        sandbox: Sandbox | None = None,
        files: Files | None = None,
        roots: tuple[Path, ...] = (),
    ) -> None:
        self.agent = agent
        self.conv = conversation
        self.registry = registry
        self.policy = policy
        self.skills = skills or {}
        self.offered = offered_tools(policy.offered(registry), self.skills)  # the tools the model is told of
        self.ctx = ToolContext(
            workdir=workdir, registry=self.offered, skills=self.skills, sandbox=sandbox, files=files, roots=roots
        )
        self.record = record or Record()
        hooks = hooks or Hooks()
        execute = policy.mode == "execute"
        # What the run leaves that would run code on the user's next git command is disarmed once
        # its CLI has ended (close), and after each call too where hooks, which run outside the
        # sandbox, may run git in between.
        self.guard = Watch(workdir) if execute else None
        self.disarmed: list[Armed] = []  # by the guard, in this loop's whole life (its Outcome's)
        self._guarding = threading.Lock()
        guarded = workdir if execute and any(hooks.specs.values()) else None
        self.caller = Caller(agent, registry, policy, hooks, self.record, guarded=guarded)
        self.max_turns = max_turns
        self.timeout = timeout
        self.compact = compact
        self.usage = Tally()  # this run's, so far
        self.model = conversation.base.model  # the one asked for, then the one the CLI says it runs (its price)
        self.turn = 0  # the current turn
        self.budgets = [budget for budget in budgets or [] if budget]  # checked before each tool turn
        self.failures: dict[str, int] = {}
        self.closed = False
        self._pool = _DaemonPool(4, f"crew-{agent}")
        self.deadline: float | None = None  # when the current message's run must be over
        self._prepared = False  # the opening of paths was readied (registry.prepare)
        self.channel = LoopChannel(self)
        self.native = conversation.serve(self.channel)  # crew's tools go natively, not as the catalogue
        if self.native:  # the CLI calls them while it streams: ready the opening of paths while it boots
            self._prepared = True
            self._pool.submit(self.registry.prepare)
        self.tools_via = tools_via

    def refused(self, refused: Refused) -> None:
        """A connection of the agent's sandbox that crew's proxy refused (told from the proxy's
        thread): in the run's record."""
        self.record.emit(
            ev.Egress(agent=self.agent, host=refused.host, port=refused.port, why=refused.why, process=refused.process)
        )

    def run(self, task: str, prior: Prior | None = None, held: bool = True) -> RunResult:
        """The task, catalogue first, to its answer; then the conversation ends. With `prior`, the
        task continues that earlier conversation (see opening())."""
        try:
            return self.converse(self.opening(task, prior, held))
        finally:
            self.close()

    def opening(self, task: str, prior: Prior | None = None, held: bool = True) -> str:
        """The first message: the catalogue and the task. Continuing `prior`, a conversation the CLI
        holds (`held`), the task alone, unless the mode changed (then the new catalogue comes too);
        one it does not hold, the earlier conversation replayed before them."""
        if prior is None:
            return self.first_message(task)
        if held:
            return task if prior.mode == self.policy.mode else self.first_message(task)
        return replay(prior.history, self.first_message(task))

    def first_message(self, task: str) -> str:
        if self.native:  # the model sees crew's tools through its CLI: only the skills need telling
            skills = list(self.skills.values())
            return build_prompt(skills_section(self.offered, skills) if SKILL_TOOL in self.offered else "", task)
        if self.tools_via == "native":
            text = (
                f"@{self.agent}'s CLI has no native tool channel crew can use here (its provider, "
                "its version, or CREW_LIVE=0): crew's tools go as the text catalogue"
            )
            self.record.emit(ev.Notice(agent=self.agent, text=text, about="tools"))
        catalogue = render_catalogue(
            self.offered, self.policy.mode, compact=self.compact, skills=list(self.skills.values())
        )
        return build_prompt(catalogue, task)

    def converse(self, message: str) -> RunResult:
        """Send `message`, run the calls of each reply, until a reply has none. The conversation
        stays open, so a next message continues it (crew chat). `timeout` bounds it all, tools
        included: past it, CrewTimeout."""
        self.deadline = time.monotonic() + self.timeout if self.timeout else None
        self.ctx.deadline = self.deadline
        self.policy.reopen()  # the last message's reply may have been stopped (crew chat)
        self.policy.take_unasked()  # an earlier message's (crew chat) are its own
        records: list[CallRecord] = []
        for turn in range(1, self.max_turns + 1):
            if self.closed:  # closed from another thread (Ctrl-C): no new turn, no new CLI
                raise Interrupted(f"@{self.agent} was stopped")
            self.turn = turn
            self.record.emit(ev.Turn(agent=self.agent, turn=turn, prompt=message))
            try:
                reply = self._reply(message)
                records += self.channel.take()
                if not reply.calls:
                    if not reply.text.strip():
                        raise ProviderError(
                            f"@{self.agent} ended its reply without a word (the CLI printed no "
                            "text); crew --verbose shows what it did print"
                        )
                    return self._answer(reply.text, records, turn)
                batch = self._collect(reply)
                if self.deadline is not None and time.monotonic() >= self.deadline:  # a tool was cut off by it
                    raise self._timed_out(batch[-1].name)
                records += batch
                if any(r.result.success and self.registry.resolve(r.name).ends_run for r in batch):
                    return self._answer(reply.text[: reply.calls[-1].end], records, turn)
                if turn == self.max_turns:
                    raise MaxTurnsReached(
                        f"@{self.agent} still called tools after {self.max_turns} turns; "
                        "raise --max-turns or narrow the task"
                    )
                message = self._follow_up(reply, batch)
                self._check_budgets(turn)
            finally:
                self._turn_done(turn)
        raise AssertionError("unreachable")

    def _answer(self, text: str, records: list[CallRecord], turn: int) -> RunResult:
        result = RunResult(
            self.agent,
            text.strip(),
            records,
            self.usage.to_dict(),
            self.conv.session_id,
            turn,
            self.policy.take_unasked(),
        )
        self.record.emit(
            ev.Answer(
                agent=self.agent,
                text=result.answer,
                turns=turn,
                session=result.session,
                calls=[record.call for record in records],
                needed_approval=[call.to_dict() for call in result.needed_approval],
            )
        )
        return result

    def _check_budgets(self, turn: int) -> None:
        """Stop before the next tool turn once a budget is passed (the last reply's tools have run)."""
        for usage in self.conv.late_usage():  # what a stopped reply cost is known once it was kept
            self._add_usage(usage)
        for budget in self.budgets:
            why = budget.passed()
            if why:
                raise BudgetExceeded(
                    f"@{self.agent} was stopped after turn {turn}: the run used {why}; the tools of "
                    "its last reply ran, no further turn was sent (raise the limit, or go on with "
                    "--continue)"
                )

    def _turn_done(self, turn: int) -> None:
        """Record what the CLI reported after the loop stopped reading, and its session's totals."""
        for usage in self.conv.late_usage():
            self._add_usage(usage)
        reported = self.conv.reported
        if reported:
            self.record.emit(
                ev.Session(
                    agent=self.agent, session=self.conv.session_id, reported=Tally.of(asdict(reported)).to_dict()
                )
            )

    def close(self) -> None:
        """End the conversation and drop tool calls that have not started; no turn starts after this."""
        self.closed = True
        self.policy.withdraw()  # an approval question still open: no one is there for it any more
        self.conv.close()
        self._pool.shutdown()
        self.ctx.groups.end()  # run_command's and command tools' process groups, whatever their threads do
        self.check_git()  # nothing of the run is left running to write more

    def check_git(self) -> list[Armed]:
        """Disarm what the run left that would run code on the user's next git command
        (crewbridge.system.gitguard), and name it: in the transcript, as a `disarmed` event, and in
        `disarmed` (shared with the run's Outcome)."""
        if self.guard is None:
            return []
        with self._guarding:  # close() may come from another thread (Ctrl-C) while run() closes too
            found = self.guard.disarm()
        if found:
            self.disarmed.extend(found)
            self.record.emit(
                ev.Disarmed(agent=self.agent, text=summary(found), found=[armed.to_dict() for armed in found])
            )
        return found

    def _reply(self, message: str) -> Reply:
        """Stream one reply, starting each tool as its block closes."""
        extractor = Extractor(self.registry, self.registry.prefix)
        shown = Shown(extractor)
        parts: list[str] = []
        calls: list[ToolCall] = []
        ids: list[str] = []
        pending: list[Future[ToolResult]] = []
        failure: Failure | None = None
        stopped = False
        size = 0
        events = self.conv.send(message, self.deadline)
        try:
            for event in events:
                new: list[ToolCall] = []
                if isinstance(event, Text):
                    size += len(event.text)
                    if size > MAX_REPLY:
                        self.conv.stop()
                        raise ProviderError(
                            f"@{self.agent}: the reply passed {MAX_REPLY >> 20} MB of text; crew "
                            "stopped the CLI (a runaway output, not an answer)"
                        )
                    parts.append(event.text)
                    new = extractor.feed(event.text)
                    visible = shown.take(event.text)
                    self.record.emit(
                        ev.Text(agent=self.agent, text=event.text, shown=None if visible == event.text else visible)
                    )
                    if extractor.in_block and not self._prepared:
                        # A block is streaming: ready the opening of paths while the rest arrives
                        # (a run that calls no tool never pays for ctypes).
                        self._prepared = True
                        self._pool.submit(self.registry.prepare)
                elif isinstance(event, MessageEnd):
                    new = extractor.end_message()
                    self._show(shown)
                elif isinstance(event, Failure):
                    failure = event
                elif isinstance(event, Usage):
                    self._add_usage(event)
                elif isinstance(event, Session):
                    self._session(event)
                elif isinstance(event, (OwnCall, OwnResult)):
                    self.channel.own(event)
                for call in new:
                    self._begin(call, calls, ids, pending)
                if calls and extractor.prose_after_calls:
                    self.conv.stop()  # the rest would be the model talking past its own calls
                    stopped = True
                    break
        finally:
            events.close()
        if not stopped:
            for call in extractor.finish():
                self._begin(call, calls, ids, pending)
            self._show(shown)
        if failure is not None and not calls:
            raise self._failed(failure)
        return Reply("".join(parts), calls, ids, pending, stopped)

    def _begin(self, call: ToolCall, calls: list[ToolCall], ids: list[str], pending: list[Future[ToolResult]]) -> None:
        """Give `call` its id in the run's record and start it (after the changes before it)."""
        calls.append(call)
        ids.append(self.record.next_call())
        pending.append(self._start(call, ids[-1], pending))

    def _failed(self, failure: Failure) -> ProviderError:
        """The error of a reply that failed before it made a call (its HTTP status, if any, on it):
        ProviderUnavailable when another agent could take the task over."""
        message = " ".join(failure.message.split())  # one line: gemini's 429 message has two
        if failure.status and str(failure.status) not in message:
            message += f" (HTTP {failure.status})"
        reason = unavailable(message, failure.status)
        error = (
            ProviderUnavailable(f"@{self.agent}: {message}", reason)
            if reason
            else ProviderError(f"@{self.agent}: {message}")
        )
        error.status = failure.status
        return error

    def _show(self, shown: Shown) -> None:
        """Report the text a message's end settled as shown (a held line, a block that held no call)."""
        text = shown.take()
        if text:
            self.record.emit(ev.Text(agent=self.agent, text="", shown=text))

    def _start(self, call: ToolCall, id_: str, earlier: list[Future[ToolResult]]) -> Future[ToolResult]:
        self.record.emit(ev.Call(agent=self.agent, call=id_, name=call.name, input=call.input, turn=self.turn))
        if call.error is not None:  # the model's error: its result says so, nothing runs
            result = ToolResult(False, error=call.error, tool=call.name)
            envelope = result.to_dict()
            self.record.emit(
                ev.Result(
                    agent=self.agent,
                    call=id_,
                    name=call.name,
                    success=False,
                    error=call.error,
                    metadata=envelope["metadata"],
                )
            )
            done: Future[ToolResult] = Future()
            done.set_result(result)
            return done
        read_only = self.registry.resolve(call.name).read_only  # a call without error names a tool
        if read_only and all(f.done() or getattr(f, "read_only", False) for f in earlier):
            future = self._pool.submit(lambda: self._execute(call, id_))
        else:  # a change runs after everything before it, and everything after waits for it
            snapshot = list(earlier)
            future = self._pool.submit(lambda: (wait(snapshot), self._execute(call, id_))[1])
        future.read_only = read_only  # type: ignore[attr-defined]
        return future

    def _execute(self, call: ToolCall, id_: str) -> ToolResult:
        return self.caller.call(call.name, call.input, self.ctx, id_)

    def _collect(self, reply: Reply) -> list[CallRecord]:
        batch = []
        for call, id_, future in zip(reply.calls, reply.ids, reply.pending, strict=True):
            # Tools are given what is left of the run and abandoned past it (+ grace); this wait is
            # bounded too, in case a hook or an approval question holds the call.
            wait_for = None if self.deadline is None else max(self.deadline - time.monotonic(), 0) + 2 * TIMEOUT_GRACE
            try:
                result = future.result(wait_for)
            except FutureTimeout:
                raise self._timed_out(call.name) from None
            batch.append(CallRecord(call.name, call.input, result, id_))
        return batch

    def _timed_out(self, name: str) -> CrewTimeout:
        return CrewTimeout(
            f"@{self.agent} did not finish in {self.timeout:g}s: {name} was still running; crew "
            "ended it and everything the run started (raise --timeout if the task needs longer)"
        )

    def _follow_up(self, reply: Reply, batch: list[CallRecord]) -> str:
        """The next message: every result, plus what the model must know about its own last reply."""
        end = reply.calls[-1].end
        kept, tail = reply.text[:end], reply.text[end:]
        self.record.emit(ev.Reply(agent=self.agent, turn=self.turn, text=kept))  # what the conversation keeps
        history = self.conv.keep(kept, reply.stopped)  # what the CLI's history now holds of the reply
        results = "\n".join(self._result_text(record) for record in batch)
        restate = render("restate.md", kept=kept.rstrip()) if history == LOST else ""
        tail_note = render("tail_ignored.md", tail=tail.strip()) if history == FULL and tail.strip() else ""
        return render("tool_results.md", restate=restate, results=results, tail=tail_note)

    def _result_text(self, record: CallRecord) -> str:
        envelope = json.dumps(record.result.to_dict(), ensure_ascii=False) + self.repeated(record)
        fence = "`" * max(3, _longest_backtick_run(envelope) + 1)
        return render(
            "tool_result.md",
            name=record.name,
            fence=fence,
            input=json.dumps(record.input, ensure_ascii=False),
            envelope=envelope,
        )

    def repeated(self, record: CallRecord) -> str:
        """For a failed call made before: a line telling the model to stop repeating it ("" else).
        The REPEAT_LIMIT-th time, the run ends (CrewError)."""
        if record.result.success:
            return ""
        key = record.name + json.dumps(record.input, sort_keys=True, default=str)
        self.failures[key] = seen = self.failures.get(key, 0) + 1
        if seen >= REPEAT_LIMIT:
            raise CrewError(
                f"@{self.agent} repeated the same failing call {record.name} {seen} times; "
                f"last error: {record.result.error}"
            )
        return "\n" + render("repeated_failure.md").strip() if seen > 1 else ""

    def _session(self, session: Session) -> None:
        """Record the session and model the CLI named (the model its usage is priced by)."""
        self.model = session.model or self.model
        self.record.emit(ev.Session(agent=self.agent, session=session.session_id, model=session.model))

    def _add_usage(self, usage: Usage) -> None:
        """Add a reply's usage (priced by crew's table when the CLI reported no cost) and record it."""
        priced = None
        if usage.cost_usd is None and (usage.input_tokens or usage.output_tokens):
            from crewbridge.base import prices  # for start-up speed: once a CLI reported tokens without a cost

            cost = prices.cost(self.model, usage.input_tokens, usage.output_tokens, usage.cached_tokens)
            if cost is not None:
                usage, priced = replace(usage, cost_usd=cost), prices.table().date
        self.usage.add(usage)
        for budget in self.budgets:
            budget.add(usage)
        self.record.emit(
            ev.Usage(
                agent=self.agent,
                turn=self.turn,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cached_tokens=usage.cached_tokens,
                cost_usd=usage.cost_usd,
                priced=priced,
                context_window=usage.context_window,
            )
        )


@dataclass
class _Own:
    """One of the CLI's own calls in the record: its id there, what crew knows of it so far."""

    call: str
    name: str  # as recorded: native:TOOL
    decided: bool = False
    done: bool = False  # its result was recorded


class LoopChannel:
    """The loop's native channel (crewbridge.toolkit.native.Channel): crew's tools called through the CLI
    take a text call's path — schema, hooks, policy, approval, transcript, the tool line — and the
    CLI's own tools are decided by the agent's policy where the CLI asks, and recorded all the same
    where it does not.

    Each of the CLI's own calls is one `call` in the record (via "own", `ref` the CLI's id for it),
    whichever crew hears of first: the CLI's question (permit) or its report of the call (own:
    the decoder's OwnCall); the other links to it by `ref` (a question that names no call, codex's
    about an MCP server's tool, links to the oldest call of that tool still undecided). Its
    `decision` is crew's policy's where the CLI asked, else `allowed` by `cli` once its result
    comes (crew was not asked: the CLI ran it under its own rules); its `result` is what the CLI
    reported. All of it happens on the thread that reads the CLI (crewbridge.conversations.peer);
    the lock guards the links all the same."""

    def __init__(self, loop: AgentLoop) -> None:
        self.loop = loop
        self.calls = 0
        self._records: list[CallRecord] = []
        self._own: dict[str, _Own] = {}  # the CLI's own calls by its id for them
        self._unnamed: list[_Own] = []  # those it asked about without naming the call
        self._lock = threading.Lock()

    def tools(self) -> list[Tool]:
        return list(self.loop.offered)

    def call(self, name: str, arguments: Any, stop: Stop | None = None) -> ToolResult:
        loop = self.loop
        limit = loop.max_turns * CALLS_PER_TURN
        with self._lock:
            self.calls += 1
            if self.calls > limit:
                raise MaxTurnsReached(
                    f"@{loop.agent} made more than {limit} native tool calls ({CALLS_PER_TURN} per turn "
                    "of --max-turns); raise --max-turns or narrow the task"
                )
        qualified = loop.registry.qualified(name)
        call = loop.record.next_call()
        loop.record.emit(
            ev.Call(agent=loop.agent, call=call, name=qualified, input=arguments, turn=loop.turn, via="native")
        )
        result = loop.caller.call(qualified, arguments, loop.ctx if stop is None else loop.ctx.stoppable(stop), call)
        record = CallRecord(qualified, arguments, result, call)
        with self._lock:
            self._records.append(record)
        note = loop.repeated(record)
        return replace(result, error=f"{result.error}{note}") if note else result

    def decides(self) -> bool:
        return self.loop.policy.decides_native()

    def permit(self, tool: str, arguments: Any, read_only: bool, ref: str | None = None) -> str | None:
        """Why the CLI may not run its own tool `tool` (`ref`: the CLI's id for the call), or None."""
        loop = self.loop
        data = arguments if isinstance(arguments, dict) else {"input": arguments}
        with self._lock:
            own = self._own.get(ref) if ref is not None else self._undecided(NATIVE + tool)
            if own is None:
                own = self._start(NATIVE + tool, arguments, ref)
            own.decided = True
        paths = [data[key] for key in PATH_KEYS if isinstance(data.get(key), str)]
        refusal = next(filter(None, (_outside(loop.ctx.workdir, path, loop.ctx.roots) for path in paths)), None)
        try:
            jsonio.check_depth(data)  # a CLI's line is not bounded as it is decoded (providers.base)
        except jsonio.TooDeep as exc:
            refusal = refusal or f"crew does not run {tool} with this input: {exc}"
        ruling = (
            Ruling(refusal) if refusal else loop.policy.check_native(tool, data, read_only, loop.deadline, own.call)
        )
        loop.record.emit(
            ev.Decision(agent=loop.agent, call=own.call, decision=ruling.decision, by=ruling.by, reason=ruling.refusal)
        )
        return ruling.refusal

    def own(self, event: OwnCall | OwnResult) -> None:
        """What the CLI reported of one of its own calls: its use (a new call in the record, unless
        the CLI asked about it first), or its result (the call's `result`; its decision first, the
        CLI's, if crew was never asked)."""
        loop = self.loop
        with self._lock:
            if isinstance(event, OwnCall):
                if event.ref not in self._own:
                    self._unnamed.append(self._start(NATIVE + event.name, event.input, event.ref))
                return
            own = self._own.get(event.ref)
            if own is None or own.done:  # not one crew heard of starting (crew's own, or a repeat)
                return
            own.done = True
            decide, own.decided = not own.decided, True
        if decide:
            loop.record.emit(ev.Decision(agent=loop.agent, call=own.call, decision="allowed", by="cli"))
        result = ev.Result(agent=loop.agent, call=own.call, name=own.name, success=event.ok)
        if event.ok:
            exit_code = {} if event.exit_code is None else {"exit_code": event.exit_code}
            result.data = {"output": event.output, **exit_code}
        else:
            result.error = event.output or "the CLI reported that it failed"
        if event.truncated:
            result.metadata = {"truncated": True}
        loop.record.emit(result)

    def _start(self, name: str, arguments: Any, ref: str | None) -> _Own:
        """A new call of the CLI's own in the record (under the lock)."""
        loop = self.loop
        own = _Own(loop.record.next_call(), name)
        if ref is not None:
            self._own[ref] = own
        loop.record.emit(
            ev.Call(agent=loop.agent, call=own.call, name=name, input=arguments, turn=loop.turn, via="own", ref=ref)
        )
        return own

    def _undecided(self, name: str) -> _Own | None:
        """The oldest call of `name` the CLI reported that waits for its decision (under the lock)."""
        self._unnamed = [own for own in self._unnamed if not own.decided]
        return next((own for own in self._unnamed if own.name == name), None)

    def take(self) -> list[CallRecord]:
        """The native calls made since the last take."""
        with self._lock:
            records, self._records = self._records, []
        return records


def _outside(workdir: Path, path: str, roots: tuple[Path, ...]) -> str | None:
    """Why the CLI's own tool may not use `path`: it leads outside the working directory (and the
    additional directories `roots`)."""
    try:
        resolve_inside(workdir, path, roots)
    except ToolFailure as exc:
        return f"{exc} (crew lets the CLI's own tools use files inside it only)"
    return None


class _DaemonPool:
    """A few worker threads that take jobs in order. Unlike ThreadPoolExecutor's, they are daemons,
    not joined at exit: a tool that never returns holds up neither the run nor crew's exit. (A job
    that waits for earlier ones cannot deadlock: those were taken first.) A job goes to an idle
    worker when there is one: a new thread only when none is, up to `workers`."""

    def __init__(self, workers: int, name: str) -> None:
        self._workers = workers
        self._name = name
        self._threads: list[threading.Thread] = []
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # workers waiting for a job that no submit() has counted on yet
        self._closed = False

    def submit(self, job: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if self._closed:
                future.cancel()
                return future
            self._jobs.put((future, job))
            if self._idle:
                self._idle -= 1  # that worker takes it
            elif len(self._threads) < self._workers:
                thread = threading.Thread(target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                thread.start()
        return future

    def shutdown(self) -> None:
        """Cancel the jobs not started; running ones finish (or are abandoned) on their own."""
        with self._lock:
            self._closed = True
            while True:
                try:
                    item = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
            for _ in self._threads:
                self._jobs.put(None)

    def _work(self) -> None:
        while (item := self._jobs.get()) is not None:
            future, job = item
            if not future.set_running_or_notify_cancel():
                self._free()
                continue
            try:
                result = job()
            except BaseException as exc:  # handed to whoever waits for the future
                self._free()
                future.set_exception(exc)
            else:
                self._free()
                future.set_result(result)

    def _free(self) -> None:
        """Count this worker idle: before its job's future is done, so a job its waiter submits next finds it."""
        with self._lock:
            self._idle += 1


def _longest_backtick_run(text: str) -> int:
    return max(map(len, re.findall("`+", text)), default=0)
