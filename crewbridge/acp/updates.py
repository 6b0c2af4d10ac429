"""crew's Progress events as ACP `session/update`s: the model's text as `agent_message_chunk` (what a
person sees of it: never a tool call's JSON), each tool call as `tool_call` then `tool_call_update`
(a diff for every write), a review's rounds as `plan` entries, usage as `usage_update`."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable, Iterator
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

from crewbridge.loop import PATH_KEYS, CallRecord, Progress
from crewbridge.registry import ToolResult
from crewbridge.visible import visible

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
    """A tool call shown to the editor: its id and what was asked."""

    id: str
    agent: str
    name: str  # crew's qualified name (crew:read_file), or native:NAME
    input: Any


@dataclass
class Updates:
    """One prompt's Progress events turned into updates. `workdir` makes paths absolute; `several`:
    more than one agent answers (their text is headed by who speaks); `rounds`: the review's, if any."""

    workdir: Path
    prefix: str = "crew"
    several: bool = False
    rounds: int = 0
    writer: str = ""
    reviewer: str = ""
    numbers: Iterator[int] = field(default_factory=itertools.count)  # the session's: tool call ids stay unique
    _open: list[Call] = field(default_factory=list)  # calls started, not finished
    _speaking: str = ""
    _plan: list[PlanEntry] = field(default_factory=list)

    def opening(self) -> list[Update]:
        """The updates a prompt starts with: a review's plan, its first round in progress."""
        if not self.rounds:
            return []
        self._plan = [self._round(1, "in_progress")]
        return [update_plan(self._plan)]

    def of(self, progress: Progress) -> list[Update]:
        """The updates one Progress event stands for (none for most of crew's notices)."""
        kind_ = progress.kind
        if kind_ == "text":
            return self._text(progress.agent, progress.shown)
        if kind_ == "call" and progress.call is not None:
            return [self.start(progress.agent, progress.call.name, progress.call.input)]
        if kind_ == "result" and progress.call is not None:
            return self._result(progress.agent, progress.call)
        if kind_ == "native" and progress.data is not None:
            return self._native(progress.agent, progress.data)
        if kind_ == "usage" and progress.usage is not None:
            cost = progress.usage.cost_usd
            return [
                UsageUpdate(
                    session_update="usage_update",
                    used=progress.usage.tokens,
                    size=progress.usage.context_window or 0,  # 0: the CLI does not say it (gemini)
                    cost=Cost(amount=cost, currency="USD") if cost is not None else None,
                )
            ]
        if kind_ == "review" and progress.data is not None:
            return self._review(progress.agent, progress.data)
        if kind_ in ("fallback", "resume", "notice", "warning", "sandbox") and progress.text:
            return [message(f"\n_crew: {progress.text}_\n")]
        return []

    def start(self, agent: str, name: str, data: Any, native: bool = False) -> ToolCallStart:
        """A new tool call, shown in progress: its kind, title, where it reads or writes."""
        call = Call(f"{agent}-{next(self.numbers)}", agent, name, data)
        self._open.append(call)
        return start_tool_call(
            call.id,
            self._title(call),
            kind=kind(name),  # type: ignore[arg-type]  # one of the kinds ACP names
            status="in_progress",
            locations=self._locations(data),
            raw_input=data,
            content=_native_diff(self.workdir, data) if native else None,
        )

    def find(self, agent: str, name: str, data: Any = ...) -> Call | None:
        """The open call of `agent` to `name` with `data` (any, when not given): the oldest, as calls
        finish in order."""
        short = name.rsplit(":", 1)[-1]
        return next(
            (
                c
                for c in self._open
                if c.agent == agent and c.name.rsplit(":", 1)[-1] == short and (data is ... or c.input == data)
            ),
            None,
        )

    def asked(self, agent: str, name: str, data: Any) -> tuple[ToolCallUpdate, ToolCallStart | None]:
        """The call a permission request is about: the open one (crew's tool `name`, or
        native:NAME), else one started now (the CLIs' own tools are asked about before they show)."""
        call = self.find(agent, name, data)
        started = None
        if call is None:
            native = name.startswith("native:")
            started = self.start(agent, name if native else f"{self.prefix}:{name}", data, native=native)
            call = self._open[-1]
        whole: list[Any] | None = None  # a title that had to be cut: the whole input is said in the body
        if len(visible(self._heading(call))) > TITLE:
            whole = [tool_content(text_block(visible(json.dumps(data, ensure_ascii=False, default=str), SHOWN_OUTPUT)))]
        shown = ToolCallUpdate(
            tool_call_id=call.id,
            title=self._title(call),
            kind=kind(call.name),  # type: ignore[arg-type]
            status="pending",
            raw_input=data,
            locations=self._locations(data),
            content=whole,
        )
        return shown, started

    def finish(self, call: Call, result: ToolResult) -> ToolCallProgress:
        """The call done: completed or failed, with what it shows (a diff for a write)."""
        self._open.remove(call)
        return update_tool_call(
            call.id,
            status="completed" if result.success else "failed",
            content=_content(result),
            locations=self._locations(call.input, result),
            raw_output=result.to_dict(),
        )

    def finish_native(self, agent: str) -> list[Update]:
        """The CLI's own calls still open are done: the model goes on talking after them."""
        done = [c for c in self._open if c.agent == agent and c.name.startswith("native:")]
        self._open = [c for c in self._open if c not in done]
        return [update_tool_call(c.id, status="completed") for c in done]

    def _text(self, agent: str, shown: str) -> list[Update]:
        if not shown:
            return []
        updates = self.finish_native(agent)
        if self.several and agent != self._speaking:
            shown = f"\n\n**@{agent}:** {shown}"
        self._speaking = agent
        return [*updates, message(shown)]

    def _result(self, agent: str, record: CallRecord) -> list[Update]:
        call = self.find(agent, record.name, record.input)
        started: list[Update] = []
        if call is None:  # not shown when it started: shown whole now
            started.append(self.start(agent, record.name, record.input))
            call = self._open[-1]
        return [*started, self.finish(call, record.result)]

    def _native(self, agent: str, data: dict[str, Any]) -> list[Update]:
        name = f"native:{data['tool']}"
        refusal = data.get("refusal")
        call = self.find(agent, name, data["input"])  # asked about already (an approval)
        updates: list[Update] = [] if call is not None else [self.start(agent, name, data["input"], native=True)]
        call = call or self._open[-1]
        if refusal:
            self._open.remove(call)
            updates.append(update_tool_call(call.id, status="failed", content=[tool_content(text_block(refusal))]))
        return updates

    def _review(self, reviewer: str, data: dict[str, Any]) -> list[Update]:
        number, verdict = int(data.get("round", 0)), str(data.get("verdict", ""))
        findings = data.get("findings") or []
        if 0 < number <= len(self._plan):
            said = verdict + (f", {len(findings)} finding(s)" if findings else "")
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

    def _locations(self, data: Any, result: ToolResult | None = None) -> list[ToolCallLocation] | None:
        """Where a call reads or writes: absolute paths, lines from 1."""
        if not isinstance(data, dict):
            return None
        paths = [data[key] for key in PATH_KEYS if isinstance(data.get(key), str)]
        if result is not None and result.change is not None:
            paths = [result.change.path]
        out = result.data if result is not None and isinstance(result.data, dict) else {}
        line = out.get("line") or out.get("start_line") or data.get("offset")
        return [
            ToolCallLocation(path=os.path.join(self.workdir, path), line=line if isinstance(line, int) else None)
            for path in paths
        ] or None


def _content(result: ToolResult) -> list[Any]:
    """What a finished call shows: a diff for a write or edit, else its text (or its error)."""
    if result.change is not None:
        return [tool_diff_content(result.change.path, result.change.new, result.change.old)]
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


def replayed(events: Iterable[dict[str, Any]], workdir: Path) -> list[Update]:
    """A past run's transcript events as the updates that showed it: the task, each tool call and
    its result, each answer, each review round."""
    updates = Updates(workdir)
    out: list[Update] = []
    start = True
    for event in events:
        kind_, agent = event.get("kind"), str(event.get("agent", ""))
        if kind_ == "start" and start:
            out.append(user_message(str(event.get("task", ""))))
            start = False
        elif kind_ == "tool_call":
            out.append(updates.start(agent, str(event.get("name")), event.get("input")))
        elif kind_ == "tool_result" and isinstance(event.get("result"), dict):
            call = updates.find(agent, str(event.get("name")))
            envelope = event["result"]
            if call is not None:
                out.append(
                    updates.finish(
                        call, ToolResult(envelope.get("success") is True, envelope.get("data"), envelope.get("error"))
                    )
                )
        elif kind_ == "review" and isinstance(event.get("round"), int):
            out.append(message(f"\n_review round {event['round']}: @{agent}: {event.get('verdict')}_\n"))
        elif kind_ == "answer":
            out.append(message(str(event.get("text", ""))))
    return out
