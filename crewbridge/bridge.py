"""The Python API's entry point, a thin facade over a run's context (crewbridge.engine.context): run a task
on one or more agents at once (crewbridge.engine.parallel), reviewed (crewbridge.engine.review), or talk with one
(crewbridge.engine.dialogue)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.base.mentions import parse_mentions
from crewbridge.base.modes import Mode
from crewbridge.base.options import RunOptions
from crewbridge.config import Config
from crewbridge.engine.context import RunContext, found_skills
from crewbridge.errors import UsageError
from crewbridge.sandbox import Sandboxing

# For start-up speed, what a run needs only once its CLIs have started (crew query starts them
# through Bridge.start, before its run) and what only the Python API uses (function tools, event
# streams, chats) is imported where it is used.
if TYPE_CHECKING:
    from crewbridge.api import EventStream, Outcome
    from crewbridge.base.skills import Found
    from crewbridge.base.stop import Stop
    from crewbridge.engine.context import Observer
    from crewbridge.engine.dialogue import Chat
    from crewbridge.engine.loop import RunResult
    from crewbridge.providers.base import Image, McpServer
    from crewbridge.record.events import Parent
    from crewbridge.record.stream import Sink
    from crewbridge.record.trace import Tracing
    from crewbridge.system.approval import Channel
    from crewbridge.toolkit.registry import Files, Tool, ToolRegistry


class Bridge:
    def __init__(
        self,
        config: Config | None = None,
        workdir: Path | None = None,
        env: dict[str, str] | None = None,
        tools: list[Tool] | None = None,
        sandboxing: Sandboxing | None = None,
        approvals: Sequence[Channel] = (),
        files: Files | None = None,
        mcp_servers: Sequence[McpServer] = (),
        observers: Sequence[Observer] = (),
        tracing: Tracing | None = None,
        roots: Sequence[Path] = (),
    ) -> None:
        """`config`: default crew.yaml found as the command finds it; `workdir`: default here; `env`:
        added to the environment of the CLIs it starts; `tools`: added to the configured ones;
        `sandboxing`: the machine's sandbox as another Bridge detected it (or is detecting it);
        `approvals`: channels besides the terminal that ask a person about a call (an editor over
        ACP, the browser of `crew ui`; crewbridge.system.approval); `files`: where the file tools read and
        write text instead of the disk (an editor's buffers over ACP); `mcp_servers`: given to each
        CLI that takes them (Provider.mcp_via), besides crew's own tools (an editor's, over ACP);
        `observers`: join each run's record (crewbridge.engine.context.Observer: the browser's link);
        `tracing`: the runs are traced (their trace ids chosen as their CLIs start: the exporter of
        crewbridge.telemetry is among the observers).
        `roots`: folders besides `workdir` that crew's path rules and the sandbox treat as they treat
        it (an editor's additional directories, over ACP)."""
        self.context = RunContext.of(
            config,
            workdir,
            env=dict(env or {}),
            tools=tools or (),
            sandboxing=Sandboxing() if sandboxing is None else sandboxing,
            approvals=list(approvals),
            files=files,
            mcp_servers=tuple(mcp_servers),
            observers=tuple(observers),
            tracing=tracing,
            roots=tuple(roots),
        )

    @property
    def config(self) -> Config:
        return self.context.config

    @property
    def workdir(self) -> Path:
        return self.context.workdir

    @property
    def env(self) -> dict[str, str]:
        return self.context.env

    @property
    def sandboxing(self) -> Sandboxing:
        return self.context.sandboxing

    @property
    def registry(self) -> ToolRegistry:
        """Built-in, configured and plugin tools, and those given to this Bridge."""
        return self.context.registry

    def tool(
        self,
        func: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        read_only: bool = False,
        needs_approval: bool = False,
        timeout: float | None = None,
    ) -> Any:
        """Offer a plain typed function to the agents as a tool: its input schema comes from the type
        hints, its description from the docstring (crewbridge.toolkit.functions). `bridge.tool(func)`, or as
        a decorator, `@bridge.tool` / `@bridge.tool(read_only=True)`; the function is returned as it was.
        A function already declared with @crewbridge.tool is registered as declared."""
        from crewbridge.toolkit.functions import function_tool

        def register(target: Callable[..., Any]) -> Callable[..., Any]:
            declared = hasattr(target, "__crew_tool__")
            self.registry.register(
                target
                if declared
                else function_tool(
                    target, name=name, read_only=read_only, needs_approval=needs_approval, timeout=timeout
                )
            )
            return target

        return register if func is None else register(func)

    def run(
        self,
        text: str,
        mode: Mode = "query",
        *,
        options: RunOptions | None = None,
        context: str | None = None,
        on_progress: Sink | None = None,
        stop: Stop | None = None,
        run: str | None = None,
        command: str | None = None,
        parent: Parent | None = None,
        images: Sequence[Image] = (),
        **values: Any,
    ) -> list[Outcome]:
        """Run the task in `text` ("@agent[:model] … task") on every mentioned agent at once, with
        `options` and any RunOptions given by name (`max_turns=3`, `tools_via="native"`; see
        crewbridge.base.options). `max_cost` (dollars) and `max_tokens` bound the whole run, every agent's
        usage summed: past one, each agent stops before its next tool turn (BudgetExceeded). `resume`:
        the id of an earlier run whose agents' conversations the task continues (crewbridge.work.sessions).
        `context` is added to the task; `stop`, when set from another thread, ends the run
        (crewbridge.base.stop.Stop); `on_progress` gets each event of the run's record as it happens
        (crewbridge.record.events). The record has the id `run` (default: a new one), says `command`
        (default: the mode) and what the run is part of (`parent`: an editor's session, a batch).
        `images` go with the task to each agent's model (crewbridge.providers.base.Image)."""
        from crewbridge.engine.parallel import run_task

        ctx = self.context.reporting(on_progress, stop)
        return run_task(
            ctx,
            text,
            mode,
            options,
            context=context,
            run=run,
            command=command,
            parent=parent,
            images=tuple(images),
            **values,
        )

    def ask(self, text: str, mode: Mode = "query", **options: Any) -> RunResult:
        """Run a task on one agent ("@agent task") and return its result; an error is raised
        (a CrewError). Takes the options of `run`, e.g. on_progress=print."""
        mentions, _ = parse_mentions(text)
        if len(mentions) != 1:
            raise UsageError(f"ask() runs one agent, and {len(mentions)} are mentioned; use run() for several")
        outcome = self.run(text, mode, **options)[0]
        if outcome.error is not None:
            raise outcome.error
        assert outcome.result is not None
        return outcome.result

    def stream(self, text: str, mode: Mode = "query", **options: Any) -> EventStream:
        """Run a task in the background and iterate over its record's events as they happen (text,
        call, result, turn: crewbridge.record.events); `.outcomes` holds the results once the
        iteration ends. Leaving the loop early stops the run. Takes the options of `run`."""
        from crewbridge.api import EventStream

        given: Stop | None = options.pop("stop", None)

        def start(emit: Sink, stop: Stop) -> list[Outcome]:
            if given is not None:
                given.on_set(stop.set)
            return self.run(text, mode, on_progress=emit, stop=stop, **options)

        return EventStream(start)

    def chat(
        self,
        agent: str,
        mode: Mode = "query",
        *,
        options: RunOptions | None = None,
        on_progress: Sink | None = None,
        **values: Any,
    ) -> Chat:
        """A conversation with one agent ("@claude", "@claude:haiku" or "claude") that goes on across
        messages: `chat.ask(text)` for each, `chat.close()` at the end. Its CLI starts now. Takes the
        options of `run`; with `resume`, the conversation continues that run's with the agent."""
        from crewbridge.engine.dialogue import open_chat

        return open_chat(self.context.reporting(on_progress), agent, mode, options, **values)

    def start(self, text: str, mode: Mode = "query", options: RunOptions | None = None) -> None:
        """Start the CLIs of the agents `text` mentions now, for the next run of this Bridge with the
        same mode, `tools_via` and `sandbox` options to take (RunContext.start); close() ends those
        no run took."""
        self.context.start(text, mode, options)

    def close(self) -> None:
        """End the CLIs start() started that no run took."""
        self.context.close_started()

    def first_prompt(self, text: str, mode: Mode = "query", context: str | None = None) -> str:
        """The exact first message the (first) mentioned agent would be sent, catalogue (and
        `context`, as run() adds it) included."""
        return self.context.first_prompt(text, mode, context)

    def skills_section(self, text: str) -> str:
        """The catalogue's skills section for the (first) agent `text` mentions ("" without skills)."""
        from crewbridge.toolkit.catalogue import skills_section

        skills = self.context.skills(self.config.agent(parse_mentions(text)[0][0].agent))
        return skills_section(self.registry, list(skills.values()))

    def found_skills(self, workdir: Path | None = None) -> Found:
        """Every skill folder found from `workdir` (default the Bridge's) (crewbridge.engine.context.found_skills)."""
        return found_skills(self.config, workdir or self.workdir)
