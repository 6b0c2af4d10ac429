"""A run's context: one value holding what a run needs — the configuration, the working directory,
what is added to the CLIs' environment, the machine's sandboxing, the tools — and where the run
reports (the sinks its record is given), asks a person (its approval channels), is stopped from,
and keeps the text of files (an editor's buffers). It makes a run's parts: its record
(crewbridge.record), each agent's conversation (its CLI started at once), its loop.

The engine knows no face: every face makes a context and runs with it, attaching its own sink,
approval channels, observers (which join each run's record: the browser's link) and stop — the
command and the Python API through the facade crewbridge.bridge.Bridge, crew mcp's `ask`
(crewbridge.engine.asking), an editor's agent, a batch worker:
`crewbridge.engine.parallel.run_task(context, text, mode, options)` runs a task,
`crewbridge.engine.dialogue.open_chat(context, agent, mode, options)` opens a conversation. Copies made
with `reporting` share the tools and the CLIs started ahead (`start`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.base.mentions import Mention, parse_mentions
from crewbridge.base.modes import MODES, Mode
from crewbridge.base.options import RunOptions
from crewbridge.config import AgentSpec, Config, load_config
from crewbridge.conversations import Conversation, new_conversation
from crewbridge.errors import CrewError, UsageError
from crewbridge.providers.base import Image, McpServer, Provider, Turn
from crewbridge.sandbox import Sandboxing, level
from crewbridge.version import __version__

# For start-up speed, what a run needs only once the agents' CLIs have started (the loop, hooks,
# policy, catalogue, skills, the record and msgspec, usage, worktrees) is imported where it is used:
# it loads while those boot.
if TYPE_CHECKING:
    from crewbridge.base.skills import Found, Skill
    from crewbridge.base.stop import Stop
    from crewbridge.base.usage import Budget
    from crewbridge.engine.loop import AgentLoop
    from crewbridge.record import events as ev
    from crewbridge.record.events import Parent
    from crewbridge.record.stream import Record, Sink
    from crewbridge.record.trace import RunTrace, TraceParent, Tracing
    from crewbridge.sandbox.egress import Hosts
    from crewbridge.system.approval import Channel
    from crewbridge.toolkit.registry import Files, Tool, ToolRegistry
    from crewbridge.work.sessions import Prior
    from crewbridge.work.worktrees import Made, Worktree

Key = tuple[Mention, Mode, "str | None", "str | None", "str | None"]  # a CLI started ahead: for whom, how
# Joins a run's record once it is kept (it may attach sinks, hear a cancel), and gives the approval
# channels it adds for that run (the browser of a `crew ui` serving for this user).
Observer = Callable[["Record"], "Sequence[Channel]"]


class Tools:
    """A run's tools: the built-in, configured and plugin ones and those given. Built once, when a
    run first needs them (once its CLIs have started), and shared by every copy of the context."""

    def __init__(self, config: Config, given: Sequence[Tool] = ()) -> None:
        self._config = config
        self._given = list(given)
        self._registry: ToolRegistry | None = None

    @property
    def registry(self) -> ToolRegistry:
        if self._registry is None:
            self._registry = self._config.registry()
            self._registry.register_all(self._given)
        return self._registry

    def with_(self, extra: Sequence[Tool]) -> ToolRegistry:
        """These tools and `extra` (a run's own, such as a review's verdict), in a registry of their own."""
        if not extra:
            return self.registry
        registry = self.registry.subset(lambda tool: True)
        registry.register_all(extra)
        return registry


@dataclass
class Work:
    """What every agent of one task shares: its words, mode and options, the budget of the whole
    run, its record, and the approval channels its observers added."""

    task: str
    mode: Mode
    options: RunOptions
    budget: Budget
    record: Record
    channels: Sequence[Channel] = ()
    images: tuple[Image, ...] = ()  # given with the task's first message (an editor's prompt)


@dataclass(frozen=True)
class Named:
    """What names a run in its record: its id (None: a new one), its command, what it is part of."""

    run: str | None = None
    command: str = "query"
    parent: Parent | None = None


@dataclass
class RunContext:
    config: Config
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)  # added to the environment of the CLIs it starts
    sandboxing: Sandboxing = field(default_factory=Sandboxing)  # detected once, for every run
    tools: Tools | None = None  # the configured ones when not given
    emit: Sink | None = None  # the face's sink: every run's record is given it
    approvals: Sequence[Channel] = ()  # where a person is asked about a call, besides the terminal
    observers: Sequence[Observer] = ()  # join each run's record (crew ui's link)
    files: Files | None = None  # where the file tools read and write text instead of the disk (an editor's)
    mcp_servers: Sequence[McpServer] = ()  # given to each CLI that takes them, besides crew's tools (an editor's)
    roots: tuple[Path, ...] = ()  # folders used as the working directory is (an editor's additional directories)
    stop: Stop | None = None  # set from another thread, it ends the run
    started: dict[Key, Conversation] = field(default_factory=dict)  # start()'s CLIs, not yet taken
    tracing: Tracing | None = None  # its runs are traced (a face exports them: crewbridge.telemetry)
    trace: RunTrace | None = None  # this run's trace (traced()), its CLIs' spans in it

    def __post_init__(self) -> None:
        self.workdir = self.workdir.resolve()
        self.roots = tuple(root.resolve() for root in self.roots)
        if self.tools is None:
            self.tools = Tools(self.config)

    @classmethod
    def of(
        cls,
        config: Config | None = None,
        workdir: Path | None = None,
        *,
        tools: Sequence[Tool] = (),
        **fields: Any,
    ) -> RunContext:
        """A context for `config` (default: crew.yaml found as the command finds it) in `workdir`
        (default: here), the configured tools and `tools`."""
        config = config or load_config()
        return cls(config, workdir or Path.cwd(), tools=Tools(config, tools), **fields)

    def reporting(self, emit: Sink | None, stop: Stop | None = None) -> RunContext:
        """This context for one run that reports to `emit` and is stopped by `stop`."""
        return replace(self, emit=emit, stop=stop)

    def traced(self, parent: Parent | None = None) -> RunContext:
        """This context for one run whose trace is chosen now, before its CLIs start (when its runs
        are traced): the trace `parent` names (an editor's prompt, an MCP client's request; a batch's,
        made from its id), else the one the CLIs start() started for it are in, else a new one under
        the context's own parent (the TRACEPARENT crew was started with)."""
        if self.tracing is None or self.trace is not None:
            return self
        from crewbridge.record.trace import RunTrace, TraceParent, state_of

        given = TraceParent.parse(parent.traceparent) if parent is not None else None
        if given is not None:
            return replace(self, trace=RunTrace.begin(given, state_of(parent.tracestate) if parent else None))
        if parent is not None and parent.batch:  # a batch's repositories: its runs side by side in one trace
            from crewbridge.record.trace import trace_of_batch

            return replace(self, trace=RunTrace.begin(None, trace_id=trace_of_batch(parent.batch)))
        ahead = (trace_of(conversation) for conversation in self.started.values())
        started = next((found.trace_id for found in ahead if found is not None), None)
        return replace(self, trace=RunTrace.begin(self.tracing.parent, self.tracing.state, started))

    @property
    def registry(self) -> ToolRegistry:
        assert self.tools is not None
        return self.tools.registry

    # -- where and how an agent works

    def workdir_of(self, agent: AgentSpec) -> Path:
        return (self.workdir / agent.workdir).resolve() if agent.workdir else self.workdir

    def sandbox_level(self, options: RunOptions, agent: AgentSpec) -> str:
        """The agent's sandbox level: the run's (its option, else crew.yaml's), where the agent's own
        is not stricter (crewbridge.sandbox.level)."""
        return level(options.sandbox or self.config.sandbox, agent.sandbox)

    def check_sandbox(self, options: RunOptions, agents: list[AgentSpec], record: Record | None = None) -> None:
        """Refuse a run whose sandbox is required and not to be had here (SandboxUnavailable), before
        anything starts; say once, in the run's `record`, when `auto` finds none, and when the network
        is open."""
        levels = [self.sandbox_level(options, agent) for agent in agents]
        for wanted in levels:
            self.sandboxing.mechanism(wanted)
        said = self.sandboxing.notice(levels)
        if record is None:
            return
        from crewbridge.record.events import Notice

        if said:
            record.emit(Notice(agent=agents[0].id, text=said, about="sandbox"))
        if self.network(options) == "open" and any(wanted != "off" for wanted in levels):
            why = "--network open" if options.network == "open" else f"network: open in {self.config.shown}"
            text = f"the network is open ({why}): the CLIs and all they start reach any host"
            record.emit(Notice(agent=agents[0].id, text=text, about="warning"))

    def network(self, options: RunOptions) -> str:
        """The run's network: "allow" (only what is allowed, through crew's proxy) or "open"."""
        return options.network or self.config.network

    def hosts(self, options: RunOptions, provider: Provider | None = None) -> Hosts | None:
        """What an agent's CLI (its `provider`'s: its model API, from its environment, and crew.yaml's
        network: allow) or its commands (network: allow, where sandbox_network lets them use the
        network) may reach; None when the network is open."""
        from crewbridge.sandbox.egress import reaching  # for start-up speed: with a sandbox only

        return reaching(self.network(options), self.config.allowed, provider.endpoints if provider else None)

    def skills(self, agent: AgentSpec) -> dict[str, Skill]:
        """The skills `agent` gets: those found from its working directory, chosen by its `skills:` globs."""
        from crewbridge.base.skills import chosen

        return chosen(found_skills(self.config, self.workdir_of(agent)).skills, *agent.allow_lists("skills"))

    def first_prompt(self, text: str, mode: Mode = "query", context: str | None = None) -> str:
        """The exact first message the (first) mentioned agent would be sent, catalogue (and
        `context`, as a run adds it) included."""
        from crewbridge.base.piped import with_context
        from crewbridge.toolkit.catalogue import build_prompt, offered_tools, render_catalogue
        from crewbridge.work.policy import Policy

        mentions, task = parse_mentions(text)
        agent = self.config.agent(mentions[0].agent)
        skills = self.skills(agent)
        tools = offered_tools(Policy(agent, mode).offered(self.registry), skills)
        catalogue = render_catalogue(tools, mode, compact=self.config.compact_catalogue, skills=list(skills.values()))
        return build_prompt(catalogue, with_context(task, context))

    # -- a run's parts

    def record(
        self,
        command: str,
        mode: Mode,
        agents: list[str],
        task: str,
        *,
        resume: str | None = None,
        run: str | None = None,
        models: dict[str, str | None] | None = None,
        workdir: Path | None = None,
        parent: ev.Parent | None = None,
    ) -> Record:
        """A new run's record, its `start` emitted and the face's sink attached; its events are
        held until keep() writes them down (the run's CLIs start meanwhile)."""
        from crewbridge.record.events import Start
        from crewbridge.record.stream import Record, now

        record = Record(run, pending=True)
        if self.emit is not None:
            record.attach(self.emit)
        trace = self.trace
        continued = trace.parent if trace is not None else None
        if continued is not None or (parent is not None and parent.traceparent):
            # the record says what trace the run continues, as read (never what was given, unread)
            from msgspec.structs import replace as with_fields

            from crewbridge.record.events import Parent

            state = trace.state if trace is not None and continued is not None else None
            parent = with_fields(
                parent or Parent(), traceparent=continued.header if continued else None, tracestate=state
            )
        record.emit(
            Start(
                run=record.run,
                at=now(),
                version=__version__,
                command=command,
                mode=mode,
                agents=agents,
                models=models or {},
                task=task,
                cwd=str(workdir or self.workdir),
                pid=os.getpid(),
                resumed_from=resume,
                parent=parent,
                trace=trace.trace_id if trace else None,
                span=trace.span_id if trace else None,
            )
        )
        return record

    def keep(self, record: Record) -> Sequence[Channel]:
        """Write `record` down in a transcript (unless transcripts are off), let the observers join
        it, and give the approval channels they add."""
        from crewbridge.record.transcript import Transcript

        kept = Transcript.create(record.run, secrets=self.config.provider_env()) if self.config.transcripts else None
        record.keep(kept)
        return [channel for observer in self.observers for channel in observer(record)]

    def worktrees(self, mentions: list[Mention], options: RunOptions, run: str | None = None) -> Made:
        """A git worktree per mentioned agent, from HEAD of the checkout this context works in, its
        branches named by run `run` (default: a new id)."""
        from crewbridge.record.ids import new_run_id
        from crewbridge.work.worktrees import labels, make

        if options.resume:
            raise UsageError("--worktree starts afresh; it cannot go with --continue or --resume")
        return make(self.workdir, run or new_run_id(), labels(mentions))

    def placed(self, spec: AgentSpec, made: Made, worktree: Worktree) -> AgentSpec:
        """`spec` working in `worktree`: where its working directory is in it."""
        return replace(spec, workdir=str(made.place(worktree, self.workdir_of(spec))))

    def start(self, text: str, mode: Mode = "query", options: RunOptions | None = None) -> None:
        """Start the CLIs of the agents `text` mentions now, for the next run with the same mode,
        `tools_via` and `sandbox` options (a fresh conversation, not a resumed one) to take: they
        boot while the caller loads the rest. A sandbox that is required and not to be had raises
        SandboxUnavailable, nothing started; an agent that cannot start is left to that run to
        report. Those no run took are ended by close_started()."""
        options = options or RunOptions()
        mentions = parse_mentions(text)[0]
        self.check_sandbox(options, [self.config.agent(mention.agent) for mention in mentions])
        traced = self.traced()  # the next run's trace: its CLIs start in it
        for mention in mentions:
            key = (mention, mode, options.tools_via, options.sandbox, options.network)
            if key not in self.started:
                conversation, _ = traced.conversation(mention, mode, options)
                if not isinstance(conversation, CrewError):
                    self.started[key] = conversation

    def close_started(self) -> None:
        """End the CLIs start() started that no run took."""
        while self.started:
            self.started.popitem()[1].close()

    def conversation(
        self,
        mention: Mention,
        mode: Mode,
        options: RunOptions,
        spec: AgentSpec | None = None,
        prior: Prior | None = None,
        images: tuple[Image, ...] = (),
    ) -> tuple[Conversation | CrewError, bool]:
        """The agent's conversation, its CLI started where it can wait for the first message (or the
        error that stops this agent alone, such as an unknown provider). The options' `tools_via`
        replaces the agent's; `spec`: the agent's settings, when not the configured ones (a
        fallback's). With `prior`, the conversation continues that one; the flag says whether the
        CLI holds it (else the first message replays it); `images` go with the first message. The
        one start() started for the same, if there is one."""
        if self.started and prior is None and not images and (spec is None or spec == self.config.agent(mention.agent)):
            started = self.started.pop((mention, mode, options.tools_via, options.sandbox, options.network), None)
            if started is not None and _trace_id(trace_of(started)) == _trace_id(self.trace):
                return started, True
            if started is not None:  # started in another trace than this run's: its spans would be lost
                started.close()
        try:
            agent = spec or self.config.agent(mention.agent)
            provider = self.config.provider(agent.provider)
            workdir = self.workdir_of(agent)
            servers = tuple(self.mcp_servers) if provider.mcp_via else ()
            base = Turn(
                prompt="",
                mode=mode,
                model=mention.model or agent.model,
                system_prompt=agent.system_prompt,
                options=[*agent.options.get(mode, []), *provider.mcp_options(servers)],
                mcp_servers=servers,
                native=(options.tools_via or agent.tools_via) == "native",
                sandbox=self.sandboxing.cli(
                    self.sandbox_level(options, agent),
                    workdir,
                    mode,
                    provider.state,
                    agent.deny_commands,
                    hosts=self.hosts(options, provider),
                    hiding=self.config.hiding,
                    roots=self.roots,
                ),
                passed=tuple(self.config.env_pass),
                trace=tuple(self.trace.env(self.trace.child()).items()) if self.trace else (),
                images=images,
            )
            if not agent.user_mcp_servers:  # only the MCP servers crew gives it, never crew itself again
                base.options += provider.own_mcp_only(base, {**os.environ, **self.env}, workdir)
            conversation = new_conversation(provider, base, cwd=workdir, env={**self.env, **provider.mcp_env(servers)})
        except CrewError as exc:
            return exc, False
        held = conversation.resume(prior) if prior is not None else True
        conversation.start()
        return conversation, held

    def loop(
        self,
        mention: Mention,
        work: Work,
        *,
        spec: AgentSpec | None = None,
        conversation: Conversation | CrewError | None = None,
        extra: Sequence[Tool] = (),
        role: str = "",
        round: int | None = None,
    ) -> AgentLoop:
        """The agent's loop over `conversation` (by default a new one: a review makes several), with
        the tools and `extra`: a part of the run (`role` and `round` in a review) in its record. The
        CrewError that kept the conversation from starting is raised; the conversation is closed if
        the loop cannot be made."""
        if conversation is None:
            conversation = self.conversation(mention, work.mode, work.options, spec, images=work.images)[0]
        if isinstance(conversation, CrewError):
            raise conversation
        from crewbridge.record import events as ev

        said = self.sandboxing.unsaid()  # the CLI's sandbox did not come up, and no other works here
        if said:
            work.record.emit(ev.Notice(agent=mention.agent, text=said, about="sandbox"))
        try:
            agent = spec or self.config.agent(mention.agent)
            loop = self._loop(mention, work, agent, conversation, extra)
        except BaseException:
            conversation.close()
            raise
        work.record.emit(
            ev.Part(
                agent=mention.agent,
                part=work.record.part(mention.agent),
                provider=agent.provider,
                model=mention.model or agent.model,
                workdir=str(loop.ctx.workdir),
                via="native" if loop.native else "text",
                role=role,
                round=round,
                span=getattr(trace_of(conversation), "span_id", None),
            )
        )
        return loop

    def _loop(
        self, mention: Mention, work: Work, agent: AgentSpec, conversation: Conversation, extra: Sequence[Tool]
    ) -> AgentLoop:
        from crewbridge.base.usage import Budget
        from crewbridge.engine.loop import AgentLoop
        from crewbridge.record import events as ev
        from crewbridge.system.approval import Approver
        from crewbridge.toolkit.hooks import Hooks
        from crewbridge.work.policy import Policy

        assert self.tools is not None
        workdir, options = self.workdir_of(agent), work.options
        record = work.record
        approver = Approver(
            channels=[*self.approvals, *work.channels],
            asking=lambda q: record.emit(ev.Ask(agent=q.agent, call=q.call, name=q.tool, input=q.input)),
            answered=lambda q, a: record.emit(
                ev.Approval(
                    agent=q.agent,
                    call=q.call,
                    name=q.tool,
                    input=q.input,
                    answer=a.verdict if a else None,
                    source=a.source if a else None,
                )
            ),
        )
        limits = (f"agents.{agent.id}.max_cost", f"agents.{agent.id}.max_tokens")
        loop = AgentLoop(
            mention.agent,
            conversation,
            self.tools.with_(extra),
            Policy(agent, work.mode, approve_all=options.approve_all, approver=approver),
            workdir=workdir,
            hooks=Hooks(self.config.hooks, workdir=workdir, passed=self.config.env_pass),
            record=record,
            max_turns=options.max_turns,
            timeout=agent.timeout or options.timeout,
            compact=self.config.compact_catalogue,
            skills=self.skills(agent),
            budgets=[work.budget, Budget(agent.max_cost, agent.max_tokens, limits)],
            tools_via=options.tools_via or agent.tools_via,
            sandbox=self.sandboxing.commands(
                self.sandbox_level(options, agent),
                workdir,
                work.mode,
                network=agent.sandbox_network,
                denied=agent.deny_commands,  # what they deny whatever its arguments is masked inside
                hosts=self.hosts(options),
                hiding=self.config.hiding,
                roots=self.roots,
            ),
            files=self.files,
            roots=self.roots,
        )
        record.on_cancel(loop.close)  # cancelled from the browser or the editor: as Ctrl-C, the CLI ends
        for sandbox in (conversation.base.sandbox, loop.ctx.sandbox):  # the CLI's and its commands'
            if sandbox is not None and sandbox.confinement.egress is not None:
                sandbox.confinement.egress.refusals.listen(loop.refused)
        return loop


def trace_of(conversation: Conversation) -> TraceParent | None:
    """The traceparent `conversation`'s CLI was started with (its agent's span; None: not traced)."""
    if not conversation.base.trace:
        return None
    from crewbridge.record.trace import TRACEPARENT, TraceParent  # for start-up speed: a traced run only

    return TraceParent.parse(dict(conversation.base.trace).get(TRACEPARENT))


def _trace_id(trace: TraceParent | RunTrace | None) -> str | None:
    return trace.trace_id if trace is not None else None


def found_skills(config: Config, workdir: Path) -> Found:
    """Every skill folder found from `workdir`, crew.yaml's `skills:` folders and the user's
    (crewbridge.base.skills), with the broken and the hidden ones."""
    from crewbridge.base.skills import discover, roots

    return discover(roots(workdir, config.skills), workdir)


def checked(mode: str, options: RunOptions | None, values: dict[str, Any]) -> RunOptions:
    """`options` with `values` given by name (a UsageError names one that is not an option), for a
    run in `mode` (a UsageError when it is not one)."""
    if mode not in MODES:
        raise UsageError(f"mode '{mode}' is not one of {', '.join(MODES)}")
    options = (options or RunOptions()).given(values)
    options.check(mode)  # --worktree and --review with query: refused before anything starts
    return options
