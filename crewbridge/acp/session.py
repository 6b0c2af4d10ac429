"""One ACP session: the folder it works in (its crew.yaml and trust apply), the choices the editor
shows as pickers (agent, model, mode, reviewer, worktree, and crew.yaml's check when it has one),
and its runs.

A session is crew runs: each prompt is one (`command: acp` in its record, whose `parent` names the
session), continuing the last one's conversations by the CLI's own resume (`resumed_from`), so a
session survives a restart of the editor and of crew: loading it replays its transcripts and the
next prompt continues where it ended. The first prompt's run has the session's id. A review starts
afresh each prompt (as `crew execute --review` does)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp.schema import (
    SessionConfigOptionBoolean,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionInfo,
    SessionMode,
    SessionModeState,
    ToolCallUpdate,
)

from crewbridge.acp.editor import EditorChannel, EditorFiles
from crewbridge.acp.updates import Updates, message, replayed
from crewbridge.base.mentions import parse_mentions
from crewbridge.base.options import RunOptions
from crewbridge.base.stop import Stop
from crewbridge.bridge import Bridge
from crewbridge.errors import (
    BudgetExceeded,
    ConfigError,
    CrewError,
    Interrupted,
    MaxTurnsReached,
    SandboxUnavailable,
    UsageError,
)
from crewbridge.record.events import Parent
from crewbridge.record.ids import new_run_id
from crewbridge.record.index import Row, Runs
from crewbridge.record.trace import carried
from crewbridge.record.transcript import read_run
from crewbridge.telemetry.exporter import exporter
from crewbridge.ui.link import attend

if TYPE_CHECKING:
    from crewbridge.acp.wire import Courier
    from crewbridge.api import Outcome
    from crewbridge.config import Config
    from crewbridge.providers.base import Image, McpServer
    from crewbridge.record.events import Event
    from crewbridge.sandbox import Sandboxing
    from crewbridge.system.approval import Question

COMMAND = "acp"  # the records' command: what makes a run a session's
MODE_NAMES = {"query": "Query (read-only)", "execute": "Execute (may write and run commands)"}
TITLE = 80  # characters of the first task that name a session in a list
TOOLS_VIA = {  # how crew's tools reach the agent (crewbridge.toolkit.native)
    "default": "the agent's setting (crew.yaml tools_via)",
    "text": "text: a catalogue in the prompt",
    "native": "native: the CLI's own tool channel",
}


@dataclass
class Choices:
    """What the next prompt runs with: what the editor shows as pickers."""

    agent: str
    model: str = "default"  # the agent's own (crew.yaml's, else its CLI's)
    mode: str = "query"
    reviewer: str = "off"
    rounds: str = "3"  # a review's rounds at most
    worktree: str = "off"
    tools: str = "default"  # how crew's tools reach the agent: the agent's own setting, text or native
    check: str = "on"  # crew.yaml's check: on each execute prompt's change (offered when it has one)


@dataclass(frozen=True)
class Serving:
    """What `crew acp`'s options set for every session."""

    timeout: float = 300.0
    max_turns: int = 10


class Session:
    """One ACP session. Its prompts run one at a time, each on a thread of its own."""

    def __init__(
        self,
        session_id: str,
        cwd: Path,
        config: Config,
        *,
        client: Any,
        courier: Courier,
        sandboxing: Sandboxing | None,
        serving: Serving,
        files: bool,
        last_run: str | None = None,
        mcp_servers: tuple[McpServer, ...] = (),
        roots: tuple[Path, ...] = (),
    ) -> None:
        self.id, self.cwd, self.config = session_id, cwd, config
        self.client, self.courier, self.serving = client, courier, serving
        self.choices = Choices("claude" if "claude" in config.agents else next(iter(config.agents)))
        self.last_run = last_run  # the run the next prompt continues
        self.closed = False
        self.stop: Stop | None = None  # the running prompt's
        self.lock = threading.Lock()
        self.files = EditorFiles(self) if files else None
        self.roots = roots
        self.updates = Updates(cwd, config.prefix, files=self.files, roots=roots)
        self.channel = EditorChannel(self)
        traced = exporter(config)  # the session's runs as traces, when telemetry is on
        self.bridge = Bridge(
            config,
            workdir=cwd,
            sandboxing=sandboxing,
            approvals=[self.channel],
            files=self.files,
            mcp_servers=mcp_servers,
            observers=[attend, *([traced.observe] if traced else [])],
            tracing=traced.tracing if traced else None,
            roots=roots,
        )

    # --- the choices ------------------------------------------------------------------------

    def options(self) -> list[SessionConfigOptionSelect | SessionConfigOptionBoolean]:
        """The pickers, each with its current value."""
        agents = list(self.config.agents)
        models = sorted({a.model for a in self.config.agents.values() if a.model})

        def select(
            key: str, name: str, values: list[tuple[str, str]], category: Any = None
        ) -> SessionConfigOptionSelect:
            return SessionConfigOptionSelect(
                id=key,
                name=name,
                type="select",
                category=category,
                current_value=getattr(self.choices, key),
                options=[SessionConfigSelectOption(value=value, name=label) for value, label in values],
            )

        pickers: list[SessionConfigOptionSelect | SessionConfigOptionBoolean] = [
            select("agent", "Agent", [(a, f"@{a} ({self.config.agents[a].provider})") for a in agents]),
            select("model", "Model", [("default", "the agent's default"), *((m, m) for m in models)], "model"),
            select("mode", "Mode", list(MODE_NAMES.items()), "mode"),
            select("reviewer", "Reviewer", [("off", "off"), *((a, f"@{a}") for a in agents)]),
            select("rounds", "Review rounds", [(str(n), f"{n} at most") for n in range(1, 6)]),
            select("worktree", "Worktree", [("off", "off"), ("on", "on: a git worktree per prompt")]),
            select("tools", "crew's tools", list(TOOLS_VIA.items())),
        ]
        if self.config.check:  # crew.yaml's, run on each execute prompt's change
            pickers.append(select("check", "Check", [("on", f"on: {' && '.join(self.config.check)}"), ("off", "off")]))
        return pickers

    def modes(self) -> SessionModeState:
        return SessionModeState(
            current_mode_id=self.choices.mode,
            available_modes=[SessionMode(id=mode, name=name) for mode, name in MODE_NAMES.items()],
        )

    def choose(self, key: str, value: str) -> None:
        """Set one choice (a picker's value); UsageError for one that is not offered."""
        offered = {option.id: [o.value for o in option.options] for option in self.options()}
        if key not in offered:
            raise UsageError(f"'{key}' is not one of crew's options: {', '.join(offered)}")
        if value not in offered[key] and not (key == "model" and value):
            raise UsageError(f"'{value}' is not a value of {key}: {', '.join(offered[key])}")
        self.choices = replace(self.choices, **{key: value}, **({"model": "default"} if key == "agent" else {}))

    # --- running a prompt -------------------------------------------------------------------

    def begin(self) -> Stop:
        """A prompt starts: the session is busy until it ends, and `cancel` stops it."""
        self.stop = Stop()
        return self.stop

    def run(
        self,
        text: str,
        context: str | None,
        stop: Stop,
        images: tuple[Image, ...] = (),
        meta: dict[str, Any] | None = None,
    ) -> str:
        """Run one prompt to its end (`stop`: begin()'s); → its ACP stop reason. Runs on a thread
        of its own. `meta`: the prompt's `_meta`, whose trace context its run continues when
        crew's telemetry is on."""
        choices = self.choices
        task = text if _mentions(text) else f"{self._mention()} {text}"
        options = self._run_options()
        outcomes: list[Outcome] = []
        try:
            mentions = parse_mentions(task)[0]
            writer = mentions[0].agent
            with self.lock:
                self.updates = Updates(
                    self.cwd,
                    self.config.prefix,
                    several=len(mentions) > 1,
                    rounds=options.rounds if options.review else 0,
                    writer=writer,
                    reviewer=choices.reviewer,
                    files=self.files,
                    roots=self.roots,
                )
                for update in self.updates.opening():
                    self.courier.notify(update)
            outcomes = self.bridge.run(
                task,
                choices.mode,  # type: ignore[arg-type]
                options=options,
                context=context,
                on_progress=self.show,
                stop=stop,
                run=None if self.last_run else self.id,  # the first prompt's run has the session's id
                command=COMMAND,
                parent=Parent(session=self.id, **carried(meta or {})),
                images=images,
            )
        except CrewError as exc:
            self.courier.notify(message(f"crew: {exc}"))
            return "refusal" if isinstance(exc, (ConfigError, SandboxUnavailable)) else "end_turn"
        finally:
            self.last_run = next((o.run for o in outcomes if o.run), None) or self.last_run
            self.stop = None
        return self._ended(outcomes, stop)

    def _ended(self, outcomes: list[Outcome], stop: Stop) -> str:
        """The stop reason, after saying what the answers did not: errors, worktrees."""
        if stop.is_set():
            return "cancelled"
        for outcome in outcomes:
            if outcome.error is not None and not isinstance(outcome.error, Interrupted):
                self.courier.notify(message(f"\n\ncrew: {outcome.error}"))
            if outcome.worktree is not None:
                tree = outcome.worktree
                self.courier.notify(
                    message(
                        f"\n\n@{outcome.agent} worked on branch `{tree.branch}` in {tree.path}; "
                        f"`crew apply {tree.run_id} {outcome.agent}` brings its changes into your checkout"
                    )
                )
        errors = [o.error for o in outcomes if o.error is not None]
        if any(isinstance(e, BudgetExceeded) for e in errors):
            return "max_tokens"
        if any(isinstance(e, MaxTurnsReached) for e in errors):
            return "max_turn_requests"
        return "end_turn"

    def show(self, event: Event) -> None:
        """An event of the run's record, sent to the editor as its updates (in order)."""
        with self.lock:
            for update in self.updates.of(event):
                self.courier.notify(update)

    def asked(self, question: Question) -> ToolCallUpdate:
        """The tool call a permission request is about (shown already: the record has its start)."""
        with self.lock:
            return self.updates.asked(question)

    def cancel(self) -> None:
        """Stop the running prompt: its CLIs' process groups are ended, its question withdrawn."""
        stop = self.stop
        if stop is not None:
            stop.set()

    def close(self) -> None:
        self.closed = True
        self.cancel()

    def _mention(self) -> str:
        model = self.choices.model
        return f"@{self.choices.agent}" + (f":{model}" if model != "default" else "")

    def _run_options(self) -> RunOptions:
        review = None if self.choices.reviewer == "off" else self.choices.reviewer
        return RunOptions(
            timeout=self.serving.timeout,
            max_turns=self.serving.max_turns,
            resume=None if review else self.last_run,
            worktree=self.choices.worktree == "on",
            review=review,
            rounds=int(self.choices.rounds),
            tools_via=None if self.choices.tools == "default" else self.choices.tools,
            checks=() if self.choices.check == "off" else None,  # None: crew.yaml's
        )

    def replay(self) -> None:
        """Send the session's history as updates (session/load)."""
        for run in runs_of(self.id):
            for update in replayed(read_run(run.run_id), self.cwd):
                self.courier.notify(update)


def _mentions(text: str) -> bool:
    """Whether `text` starts with agent mentions (it then runs those agents, as crew query does)."""
    try:
        parse_mentions(text)
    except UsageError:
        return False
    return True


def new_session_id() -> str:
    return new_run_id()


def runs_of(session_id: str) -> list[Row]:
    """The runs of session `session_id`, oldest first."""
    runs = [row for row in Runs().rows() if row.command == COMMAND and row.parent.get("session") == session_id]
    return sorted(runs, key=lambda run: run.run_id)


def sessions(cwd: str | None = None) -> list[SessionInfo]:
    """Every session crew has a record of (in folder `cwd`, when given: links resolved, as the
    runs' own folders are), the last one used first."""
    here = str(Path(cwd).resolve()) if cwd is not None else None
    found: dict[str, list[Row]] = {}
    for row in Runs().rows():
        session = row.parent.get("session")
        if row.command == COMMAND and session and (here is None or row.cwd == here):
            found.setdefault(session, []).append(row)
    listed = []
    for session, runs in found.items():
        first, last = min(runs, key=lambda r: r.run_id), max(runs, key=lambda r: r.run_id)
        title = (first.task.splitlines() or [""])[0][:TITLE]
        listed.append(SessionInfo(session_id=session, cwd=first.cwd, title=title, updated_at=last.started))
    return sorted(listed, key=lambda info: info.updated_at or "", reverse=True)
