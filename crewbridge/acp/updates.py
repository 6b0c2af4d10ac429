"""A run's record as ACP `session/update`s, live and replayed alike: the model's text as
`agent_message_chunk` (what a person sees of it: never a tool call's JSON), each tool call as
`tool_call` then `tool_call_update`, matched by the record's call id (a diff for every write), a
review's rounds as `plan` entries, each run of the check as a finished `tool_call` of kind execute
(its output in it), a pull request as a line of text, usage as `usage_update`. A tool call's title
says in words what it does ("Edit greet.py", "Run `ls -la`"), drawn so that nothing in it hides; a
permission request carries the diff the write or edit asks for, and a finished call's `rawOutput`
the text the model was given of its result."""

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
from crewbridge.record import events as ev
from crewbridge.system.approval import Question
from crewbridge.toolkit.preview import PATH_KEYS, asked_change, path_of
from crewbridge.toolkit.registry import Files, ToolContext, ToolResult

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
    files: Files | None = None  # where crew's file tools read a file's text (the editor's buffers)
    roots: tuple[Path, ...] = ()  # the session's additional directories
    _workdirs: dict[str, Path] = field(default_factory=dict)  # each agent's (a worktree's, a subfolder)
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
            if event.workdir:
                self._workdirs[agent] = Path(event.workdir)
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
        content = self._asked_diff(found)
        if len(visible(self._heading(found))) > TITLE:  # a title that had to be cut: the whole input is said
            text = json.dumps(found.input, ensure_ascii=False, default=str)
            content.append(tool_content(text_block(visible(text, SHOWN_OUTPUT))))
        return ToolCallUpdate(
            tool_call_id=found.id,
            title=self._title(found),
            kind=kind(found.name),  # type: ignore[arg-type]
            status="pending",
            raw_input=found.input,
            locations=self._locations(found.input, workdir=self._workdir(found.agent)),
            content=content or None,
        )

    def _asked_diff(self, call: Call) -> list[Any]:
        """The diff a write or edit asks for (the one its finished update shows), before it runs:
        crew's from the file and the input, the CLI's own from its input alone."""
        workdir = self._workdir(call.agent)
        if call.name.startswith("native:"):
            return _native_diff(workdir, call.input) or []
        context = ToolContext(workdir=workdir, files=self.files, roots=self.roots)
        change = asked_change(context, call.name.removeprefix(f"{self.prefix}:"), call.input)
        return [tool_diff_content(change.path, change.new, change.old)] if change is not None else []

    def _workdir(self, agent: str) -> Path:
        return self._workdirs.get(agent, self.workdir)

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
            locations=self._locations(event.input, workdir=self._workdir(agent)),
            raw_input=event.input,
            content=_native_diff(self._workdir(agent), event.input) if own else None,
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
        diff = _native_diff(self._workdir(call.agent), call.input) if call.own and event.success else None
        return [
            update_tool_call(
                call.id,
                status="completed" if event.success else "failed",
                content=diff or _content(result, change),
                locations=self._locations(call.input, change, event.data, self._workdir(call.agent)),
                raw_output=_said(result),
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
        who = f"@{call.agent} " if self.several else ""
        name = call.name.removeprefix(f"{self.prefix}:").removeprefix("native:")
        return who + words(name, call.input, self._workdir(call.agent))

    def _locations(
        self, data: Any, change: ev.Change | None = None, out: Any = None, workdir: Path | None = None
    ) -> list[ToolCallLocation] | None:
        """Where a call reads or writes: absolute paths, lines from 1."""
        if not isinstance(data, dict):
            return None
        paths = [data[key] for key in PATH_KEYS if isinstance(data.get(key), str)]
        if change is not None:
            paths = [change.path]
        out = out if isinstance(out, dict) else {}
        line = out.get("line") or out.get("start_line") or data.get("offset")
        return [
            ToolCallLocation(
                path=os.path.join(workdir or self.workdir, path), line=line if isinstance(line, int) else None
            )
            for path in paths
        ] or None


def _content(result: ToolResult, change: ev.Change | None) -> list[Any]:
    """What a finished call shows: a diff for a write or edit, else its text (or its error)."""
    if change is not None:
        return [tool_diff_content(change.path, change.new, change.old)]
    return [tool_content(text_block(_said(result)))]


def _said(result: ToolResult) -> str:
    """A result as the model was given it, in text (bounded): the text read, a command's output,
    the error; else its data as JSON. Never crew's envelope around it."""
    data = result.data
    if not result.success:
        text = result.error or "failed"
    elif isinstance(data, dict) and isinstance(data.get("content"), str):
        text = data["content"]
    elif isinstance(data, dict) and isinstance(data.get("output"), str):
        text = data["output"] + (f"\n(exit code {data['exit_code']})" if data.get("exit_code") else "")
    elif isinstance(data, str):
        text = data
    else:
        text = json.dumps(data, ensure_ascii=False, indent=2, default=str)
    if len(text) > SHOWN_OUTPUT:
        text = text[:SHOWN_OUTPUT] + f"\n[… {len(text) - SHOWN_OUTPUT:,} more characters]"
    return text


# what a tool does, in a word, by the kind of its name (a title's verb)
VERBS = {"read": "Read", "edit": "Edit", "execute": "Run", "search": "Search", "fetch": "Fetch"}


def words(name: str, data: Any, workdir: Path) -> str:
    """What a call does, in words: "Read notes.txt", "Edit greet.py", "Write new.py", "Run `ls -la`",
    "Search for `TODO` in src", "List src", "Fetch https://…"; the tool's name and its input
    where its kind says nothing (an MCP server's tool)."""
    data = data if isinstance(data, dict) else {}
    path = path_of(data)
    path = None if path is None else _relative(path, workdir)
    command, pattern = data.get("command") or data.get("cmd"), data.get("pattern") or data.get("query")
    url = data.get("url")
    changes: list[Any] = data["changes"] if isinstance(data.get("changes"), list) else []
    patched = [_relative(c["path"], workdir) for c in changes if isinstance(c, dict) and isinstance(c.get("path"), str)]
    verb = VERBS.get(kind(name))
    if command is not None:
        return f"Run `{' '.join(map(str, command)) if isinstance(command, list) else command}`"
    if isinstance(pattern, str):
        where = f" in {path}" if path else ""
        return f"Search {'the web ' if 'web' in name.lower() else ''}for `{pattern}`{where}"
    if isinstance(url, str) and url:
        return f"Fetch {url}"
    if patched:
        return f"Edit {', '.join(patched)}"
    if path is not None:
        if "list" in name.lower() or name.lower() in ("ls", "glob"):
            return f"List {path}"
        if verb == "Edit" and "content" in data:
            return f"Write {path}"
        return f"{verb or name} {path}"
    detail = json.dumps(data, ensure_ascii=False, default=str) if data else ""
    return f"{name} {detail}".strip()


def _relative(path: str, workdir: Path) -> str:
    """A path as a title shows it: relative to the agent's folder when inside it."""
    return os.path.relpath(path, workdir) if os.path.isabs(path) and Path(path).is_relative_to(workdir) else path


def _native_diff(workdir: Path, data: Any) -> list[Any] | None:
    """The diff a CLI's own write or edit asks for, from its input alone (so a replay shows what
    the run showed): claude's Write, Edit and MultiEdit, gemini's write_file and replace (a file's
    text, or the strings replaced), codex's apply_patch (each file added, deleted, or changed by
    hunks: each hunk's lines before and after)."""
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("changes"), list):
        return [part for change in data["changes"] for part in _patch_diff(workdir, change)] or None
    path = path_of(data)
    if path is None:
        return None
    path = os.path.join(workdir, path)
    if isinstance(data.get("content"), str):
        return [tool_diff_content(path, data["content"])]
    edits: list[Any] = data["edits"] if isinstance(data.get("edits"), list) else [data]
    replaced = [(e.get("old_string"), e.get("new_string")) for e in edits if isinstance(e, dict)]
    shown = [
        tool_diff_content(path, new, old) for old, new in replaced if isinstance(old, str) and isinstance(new, str)
    ]
    return shown or None


def _patch_diff(workdir: Path, change: Any) -> list[Any]:
    """One file of codex's patch (`{path, kind: {type: add|delete|update}, diff}`) as diffs."""
    if not isinstance(change, dict) or not isinstance(change.get("path"), str):
        return []
    path, diff = os.path.join(workdir, change["path"]), change.get("diff")
    kind = change["kind"].get("type") if isinstance(change.get("kind"), dict) else change.get("kind")
    if kind == "delete":
        return [tool_content(text_block(f"Delete {path}"))]
    if not isinstance(diff, str):
        return []
    if kind == "add":
        return [tool_diff_content(path, diff)]
    hunks: list[tuple[list[str], list[str]]] = []
    for line in diff.splitlines(keepends=True):
        if line.startswith("@@"):
            hunks.append(([], []))
        elif hunks and line[:1] in (" ", "-", "+"):
            before, after = hunks[-1]
            if line[0] != "+":
                before.append(line[1:])
            if line[0] != "-":
                after.append(line[1:])
    return [tool_diff_content(path, "".join(after), "".join(before)) for before, after in hunks]


def replayed(events: Iterable[ev.Event], workdir: Path) -> list[Update]:
    """A past run's record as the updates that showed it live, the task first."""
    updates = Updates(workdir)
    out: list[Update] = []
    for event in events:
        if isinstance(event, ev.Start):
            out.append(user_message(event.task))
        out += updates.of(event)
    return out
