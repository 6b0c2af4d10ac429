"""A run's record as ACP `session/update`s, live and replayed alike: the model's text as
`agent_message_chunk` (what a person sees of it: never a tool call's JSON), each tool call as
`tool_call` then `tool_call_update`, matched by the record's call id (a diff for every write), a
review's rounds as `plan` entries, each run of the check as a finished `tool_call` of kind execute
(its output in it), a pull request as a line of text, usage as `usage_update`."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import plan_entry, start_tool_call, text_block, tool_content, tool_diff_content, update_plan, update_tool_call
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    Cost,
    PlanEntry,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    UsageUpdate,
    UserMessageChunk,
)

from crewbridge.base.visible import visible
from crewbridge.engine.loop import PATH_KEYS
from crewbridge.record import events as ev
from crewbridge.system.approval import Question
from crewbridge.toolkit.registry import ToolResult

Update = AgentMessageChunk | UserMessageChunk | ToolCallStart | ToolCallProgress | AgentPlanUpdate | UsageUpdate
SHOWN_OUTPUT = 20_000  # characters of a tool's result shown in its tool_call_update
TITLE = 200  # characters of a tool call's title; a longer one says how many more there are
# a tool's kind by the words of its name (crew's tools and the CLIs' own), the first that matches
KINDS = (
    ("fetch", ("fetch", "web")),
    ("search", ("grep", "search", "glob", "find")),
    ("edit", ("write", "edit", "replace", "patch")),
    ("execute", ("bash", "shell", "command", "exec")),
    ("read", ("read", "list", "ls", "view", "cat")),
)


def message(text: str) -> AgentMessageChunk:
    return AgentMessageChunk(session_update="agent_message_chunk", content=text_block(text))


def user_message(text: str) -> UserMessageChunk:
    return UserMessageChunk(session_update="user_message_chunk", content=text_block(text))


def kind(tool: str) -> str:
    """The ACP kind of a tool (crew's `crew:read_file`, claude's `Read`, gemini's `run_shell_command`)."""
    words = tool.rsplit(":", 1)[-1].lower()
    return next((name for name, parts in KINDS if any(part in words for part in parts)), "other")


@dataclass
class Call:
    """A tool call shown to the editor: its id there and in the run's record, and what was asked."""

    id: str  # the editor's: the run's id and the record's call id
    agent: str
    name: str  # crew's qualified name (crew:read_file), or native:NAME
    input: Any
    own: bool = False  # one of the CLI's own tools


@dataclass
class Updates:
    """A run's record turned into updates, live or replayed alike. `workdir` makes paths absolute;
    `several`: more than one agent answers (their text is headed by who speaks); `rounds`: the
    review's, if any."""

    workdir: Path
    prefix: str = "crew"
    several: bool = False
    rounds: int = 0
    writer: str = ""
    reviewer: str = ""
    run: str = ""  # the run's id (its `start` event's): tool call ids are unique in the session
    _open: dict[str, Call] = field(default_factory=dict)  # calls started, not finished, by record id
    _reviewing: set[str] = field(default_factory=set)  # agents whose part is a review's
    _used: dict[str, int] = field(default_factory=dict)  # tokens per agent so far
    _cost: dict[str, float] = field(default_factory=dict)
    _speaking: str = ""
    _plan: list[PlanEntry] = field(default_factory=list)
    _checks: int = 0  # check runs shown (each a tool call of its own)

    def opening(self) -> list[Update]:
        """The updates a prompt starts with: a review's plan, its first round in progress."""
        if not self.rounds:
            return []
        self._plan = [self._round(1, "in_progress")]
        return [update_plan(self._plan)]

    def of(self, event: ev.Event) -> list[Update]:
        """The updates one event of the record stands for (none for most of crew's notices)."""
        agent = event.agent or ""
        if isinstance(event, ev.Start):
            self.run = event.run
        elif isinstance(event, ev.Part):
            (self._reviewing.add if event.role == "reviewer" else self._reviewing.discard)(agent)
        elif isinstance(event, ev.Text):
            return [] if agent in self._reviewing else self._text(agent, event.visible)
        elif isinstance(event, ev.Call):
            return [self._start(agent, event)]
        elif isinstance(event, ev.Decision):
            return self._decided(event)
        elif isinstance(event, ev.Result):
            return self._result(event)
        elif isinstance(event, ev.Usage):
            return [self._usage(agent, event)]
        elif isinstance(event, ev.Review):
            return self._review(agent, event)
        elif isinstance(event, ev.Check):
            return [self._check(event)]
        elif isinstance(event, ev.Pull):
            what = "merge request" if event.forge == "gitlab" else "pull request"
            return [message(f"\n_crew: {what} {'opened' if event.opened else 'updated'}: {event.url}_\n")]
        elif isinstance(event, ev.Fallback):
            return [message(f"\n_crew: @{agent} cannot answer ({event.reason}); @{event.to} takes over_\n")]
        elif isinstance(event, (ev.Notice, ev.Resume)) and event.text:
            return [message(f"\n_crew: {event.text}_\n")]
        return []

    def asked(self, question: Question) -> ToolCallUpdate:
        """The call a permission request is about, as pending: the open one of the record (the
        question's `call`), else one named by the question alone."""
        found = self._open.get(question.call) if question.call else None
        if found is None:
            found = Call(f"{self.run}:ask-{len(self._open)}", question.agent, question.tool, question.input)
        whole: list[Any] | None = None  # a title that had to be cut: the whole input is said in the body
        if len(visible(self._heading(found))) > TITLE:
            text = json.dumps(found.input, ensure_ascii=False, default=str)
            whole = [tool_content(text_block(visible(text, SHOWN_OUTPUT)))]
        return ToolCallUpdate(
            tool_call_id=found.id,
            title=self._title(found),
            kind=kind(found.name),  # type: ignore[arg-type]
            status="pending",
            raw_input=found.input,
            locations=self._locations(found.input),
            content=whole,
        )

    def _start(self, agent: str, event: ev.Call) -> ToolCallStart:
        """A new tool call, shown in progress: its kind, title, where it reads or writes."""
        own = event.via == "own"
        call = Call(f"{self.run}:{event.call}", agent, event.name, event.input, own)
        self._open[event.call] = call
        return start_tool_call(
            call.id,
            self._title(call),
            kind=kind(call.name),  # type: ignore[arg-type]  # one of the kinds ACP names
            status="in_progress",
            locations=self._locations(event.input),
            raw_input=event.input,
            content=_native_diff(self.workdir, event.input) if own else None,
        )

    def _decided(self, event: ev.Decision) -> list[Update]:
        """A refused call of the CLI's own is over (crew's own calls end with their result)."""
        call = self._open.get(event.call)
        if call is None or not call.own or not event.reason:
            return []
        del self._open[event.call]
        return [update_tool_call(call.id, status="failed", content=[tool_content(text_block(event.reason))])]

    def _result(self, event: ev.Result) -> list[Update]:
        """The call done: completed or failed, with what it shows (a diff for a write)."""
        call = self._open.pop(event.call, None)
        if call is None:  # not seen starting (an event dropped by a bounded sink): nothing to finish
            return []
        result = ToolResult(event.success, event.data, event.error)
        change = event.change
        # the CLI's own write or edit that went well: the diff its input asked for, shown when it started
        diff = _native_diff(self.workdir, call.input) if call.own and event.success else None
        return [
            update_tool_call(
                call.id,
                status="completed" if event.success else "failed",
                content=diff or _content(result, change),
                locations=self._locations(call.input, change, event.data),
                raw_output={"success": event.success, "data": event.data, "error": event.error},
            )
        ]

    def finish_native(self, agent: str) -> list[Update]:
        """The CLI's own calls still open are done: the model goes on talking after them (the CLI
        reports each one's result, which finishes it first; this finishes any it did not)."""
        done = [key for key, c in self._open.items() if c.agent == agent and c.own]
        return [update_tool_call(self._open.pop(key).id, status="completed") for key in done]

    def _text(self, agent: str, shown: str) -> list[Update]:
        if not shown:
            return []
        updates = self.finish_native(agent)
        if self.several and agent != self._speaking:
            shown = f"\n\n**@{agent}:** {shown}"
        self._speaking = agent
        return [*updates, message(shown)]

    def _usage(self, agent: str, event: ev.Usage) -> UsageUpdate:
        self._used[agent] = self._used.get(agent, 0) + event.tokens
        if event.cost_usd is not None:
            self._cost[agent] = self._cost.get(agent, 0.0) + event.cost_usd
        cost = self._cost.get(agent)
        return UsageUpdate(
            session_update="usage_update",
            used=self._used[agent],
            size=event.context_window or 0,  # 0: the CLI does not say it (gemini)
            cost=Cost(amount=round(cost, 8), currency="USD") if cost is not None else None,
        )

    def _check(self, event: ev.Check) -> ToolCallStart:
        """A run of the check, as a finished command of crew's own (the editor shows its output)."""
        self._checks += 1
        said = "passed" if event.passed else f"failed, exit status {event.exit_code}"
        return start_tool_call(
            f"{self.run}:check-{self._checks}",
            visible(f"check {event.round}/{event.rounds}: {event.command} ({said})", TITLE),
            kind="execute",
            status="completed" if event.passed else "failed",
            content=[tool_content(text_block(event.output))] if event.output else None,
            raw_input={"command": event.command},
            raw_output={"exit_code": event.exit_code, "passed": event.passed},
        )

    def _review(self, reviewer: str, event: ev.Review) -> list[Update]:
        number, verdict = event.round, event.verdict
        if not self._plan:  # replayed: the plan is made as the rounds come
            self.rounds = max(self.rounds, event.rounds)
            self._plan = [self._round(n, "completed") for n in range(1, number + 1)]
        if 0 < number <= len(self._plan):
            said = verdict + (f", {len(event.findings)} finding(s)" if event.findings else "")
            self._plan[number - 1] = self._round(number, "completed", f"@{reviewer}: {said}")
        if verdict != "approve" and number < self.rounds:
            self._plan.append(self._round(number + 1, "in_progress"))
        return [update_plan(self._plan)]

    def _round(self, number: int, status: str, verdict: str = "") -> PlanEntry:
        """A review round's plan entry: who writes, who reviews, and the verdict once given."""
        reviewed = verdict or f"@{self.reviewer} reviews"
        return plan_entry(f"Round {number}: @{self.writer} writes; {reviewed}", status=status)  # type: ignore[arg-type]

    def _title(self, call: Call) -> str:
        """What the call does, in one line an editor shows whole: nothing hidden, and a cut says so."""
        return visible(self._heading(call), TITLE)

    def _heading(self, call: Call) -> str:
        data = call.input if isinstance(call.input, dict) else {}
        detail = (
            data.get("command")
            or data.get("pattern")
            or next((data[key] for key in PATH_KEYS if isinstance(data.get(key), str)), "")
        )
        detail = " ".join(detail) if isinstance(detail, list) else str(detail)
        name = call.name.removeprefix(f"{self.prefix}:")
        who = f"@{call.agent} " if self.several else ""
        return f"{who}{name} {detail}".strip()

    def _locations(self, data: Any, change: ev.Change | None = None, out: Any = None) -> list[ToolCallLocation] | None:
        """Where a call reads or writes: absolute paths, lines from 1."""
        if not isinstance(data, dict):
            return None
        paths = [data[key] for key in PATH_KEYS if isinstance(data.get(key), str)]
        if change is not None:
            paths = [change.path]
        out = out if isinstance(out, dict) else {}
        line = out.get("line") or out.get("start_line") or data.get("offset")
        return [
            ToolCallLocation(path=os.path.join(self.workdir, path), line=line if isinstance(line, int) else None)
            for path in paths
        ] or None


def _content(result: ToolResult, change: ev.Change | None) -> list[Any]:
    """What a finished call shows: a diff for a write or edit, else its text (or its error)."""
    if change is not None:
        return [tool_diff_content(change.path, change.new, change.old)]
    if not result.success:
        return [tool_content(text_block(result.error or "failed"))]
    data = result.data
    if isinstance(data, dict) and isinstance(data.get("content"), str):
        text = data["content"]
    elif isinstance(data, dict) and isinstance(data.get("output"), str):
        text = data["output"] + (f"\n(exit code {data['exit_code']})" if data.get("exit_code") else "")
    else:
        text = json.dumps(data, ensure_ascii=False, indent=2, default=str)
    if len(text) > SHOWN_OUTPUT:
        text = text[:SHOWN_OUTPUT] + f"\n[… {len(text) - SHOWN_OUTPUT:,} more characters]"
    return [tool_content(text_block(text))]


def _native_diff(workdir: Path, data: Any) -> list[Any] | None:
    """The diff a CLI's own write or edit asks for, from its input (claude's Write and Edit,
    gemini's write_file and replace), when it names one file and its text."""
    if not isinstance(data, dict):
        return None
    path = next((data[key] for key in PATH_KEYS if isinstance(data.get(key), str)), None)
    if path is None:
        return None
    path = os.path.join(workdir, path)
    if isinstance(data.get("content"), str):
        return [tool_diff_content(path, data["content"])]
    old, new = data.get("old_string"), data.get("new_string")
    if isinstance(old, str) and isinstance(new, str):
        return [tool_diff_content(path, new, old)]
    return None


def replayed(events: Iterable[ev.Event], workdir: Path) -> list[Update]:
    """A past run's record as the updates that showed it live, the task first."""
    updates = Updates(workdir)
    out: list[Update] = []
    for event in events:
        if isinstance(event, ev.Start):
            out.append(user_message(event.task))
        out += updates.of(event)
    return out
