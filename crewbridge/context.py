"""A run's context: one value holding what a run needs — the configuration, the working directory,
what is added to the CLIs' environment, the machine's sandboxing, the tools — and where the run
reports (its event sink), asks a person (its approval channels), is stopped from, and keeps the
text of files (an editor's buffers). It makes a
run's parts: each agent's conversation (its CLI started at once), its loop, the run's transcript.

Every face makes one and runs with it: the command and the Python API through the facade
crewbridge.bridge.Bridge, crew mcp's `ask` (crewbridge.asking), and any other face — an editor's
agent, a batch worker, a web UI — with its own sink, approvals and stop:
`crewbridge.parallel.run_task(context, text, mode, options)` runs a task,
`crewbridge.dialogue.open_chat(context, agent, mode, options)` opens a conversation. Copies made
with `reporting` share the tools and the CLIs started ahead (`start`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.config import AgentSpec, Config, load_config
from crewbridge.conversations import Conversation, new_conversation
from crewbridge.errors import CrewError, UsageError
from crewbridge.mentions import Mention, parse_mentions
from crewbridge.modes import MODES, Mode
from crewbridge.options import RunOptions
from crewbridge.providers.base import McpServer, Provider, Turn
from crewbridge.sandbox import Sandboxing, level

# For start-up speed, what a run needs only once the agents' CLIs have started (the loop, hooks,
# policy, catalogue, skills, transcript, usage, worktrees) is imported where it is used: it loads
# while those boot.
if TYPE_CHECKING:
    from crewbridge.approval import Channel
    from crewbridge.loop import AgentLoop, Progress
    from crewbridge.registry import Files, Tool, ToolRegistry
    from crewbridge.sandbox.egress import Hosts
    from crewbridge.sessions import Prior
    from crewbridge.skills import Found, Skill
    from crewbridge.stop import Stop
    from crewbridge.transcript import Transcript
    from crewbridge.usage import Budget
    from crewbridge.worktrees import Made, Worktree

Key = tuple[Mention, Mode, "str | None", "str | None", "str | None"]  # a CLI started ahead: for whom, how


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
    run and its transcript."""

    task: str
    mode: Mode
    options: RunOptions
    budget: Budget
    transcript: Transcript


@dataclass
class RunContext:
    config: Config
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)  # added to the environment of the CLIs it starts
    sandboxing: Sandboxing = field(default_factory=Sandboxing)  # detected once, for every run
    tools: Tools | None = None  # the configured ones when not given
    emit: Callable[[Progress], None] | None = None  # the run's event sink
    approvals: Sequence[Channel] = ()  # where a person is asked about a call, besides the terminal
    files: Files | None = None  # where the file tools read and write text instead of the disk (an editor's)
    mcp_servers: Sequence[McpServer] = ()  # given to each CLI that takes them, besides crew's tools (an editor's)
    stop: Stop | None = None  # set from another thread, it ends the run
    started: dict[Key, Conversation] = field(default_factory=dict)  # start()'s CLIs, not yet taken

    def __post_init__(self) -> None:
        self.workdir = self.workdir.resolve()
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

    def reporting(self, emit: Callable[[Progress], None] | None, stop: Stop | None = None) -> RunContext:
        """This context for one run that reports to `emit` and is stopped by `stop`."""
        return replace(self, emit=emit, stop=stop)

    @property
    def registry(self) -> ToolRegistry:
        assert self.tools is not None
        return self.tools.registry

    def say(self, kind: str, agent: str, text: str) -> None:
        """A notice to the run's sink."""
        if self.emit is not None:
            from crewbridge.loop import Progress  # for start-up speed (see top)

            self.emit(Progress(kind, agent, text))

    # -- where and how an agent works

    def workdir_of(self, agent: AgentSpec) -> Path:
        return (self.workdir / agent.workdir).resolve() if agent.workdir else self.workdir

    def sandbox_level(self, options: RunOptions, agent: AgentSpec) -> str:
        """The agent's sandbox level: the run's (its option, else crew.yaml's), where the agent's own
        is not stricter (crewbridge.sandbox.level)."""
        return level(options.sandbox or self.config.sandbox, agent.sandbox)

    def check_sandbox(self, options: RunOptions, agents: list[AgentSpec]) -> None:
        """Refuse a run whose sandbox is required and not to be had here (SandboxUnavailable), before
        anything starts; say once when `auto` finds none, and when the network is open."""
        levels = [self.sandbox_level(options, agent) for agent in agents]
        for wanted in levels:
            self.sandboxing.mechanism(wanted)
        said = self.sandboxing.notice(levels)
        if said:
            self.say("sandbox", agents[0].id, said)
        if self.network(options) == "open" and any(wanted != "off" for wanted in levels):
            why = "--network open" if options.network == "open" else f"network: open in {self.config.shown}"
            self.say(
                "warning", agents[0].id, f"the network is open ({why}): the CLIs and all they start reach any host"
            )

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
        from crewbridge.skills import chosen

        return chosen(found_skills(self.config, self.workdir_of(agent)).skills, *agent.allow_lists("skills"))

    def first_prompt(self, text: str, mode: Mode = "query", context: str | None = None) -> str:
        """The exact first message the (first) mentioned agent would be sent, catalogue (and
        `context`, as a run adds it) included."""
        from crewbridge.catalogue import build_prompt, offered_tools, render_catalogue
        from crewbridge.piped import with_context
        from crewbridge.policy import Policy

        mentions, task = parse_mentions(text)
        agent = self.config.agent(mentions[0].agent)
        skills = self.skills(agent)
        tools = offered_tools(Policy(agent, mode).offered(self.registry), skills)
        catalogue = render_catalogue(tools, mode, compact=self.config.compact_catalogue, skills=list(skills.values()))
        return build_prompt(catalogue, with_context(task, context))

    # -- a run's parts

    def transcript(self, command: str, agents: list[str], resume: str | None, **fields: Any) -> Transcript:
        """A new run's transcript (one that writes nothing when transcripts are off)."""
        from crewbridge.transcript import Transcript

        if not self.config.transcripts:
            return Transcript()
        return Transcript.open(
            command=command, agents=agents, **fields, secrets=self.config.provider_env(), resumed_from=resume
        )

    def worktrees(self, mentions: list[Mention], options: RunOptions) -> Made:
        """A git worktree per mentioned agent, from HEAD of the checkout this context works in."""
        from crewbridge.transcript import new_run_id
        from crewbridge.worktrees import labels, make

        if options.resume:
            raise UsageError("--worktree starts afresh; it cannot go with --continue or --resume")
        return make(self.workdir, new_run_id(), labels(mentions))

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
        for mention in mentions:
            key = (mention, mode, options.tools_via, options.sandbox, options.network)
            if key not in self.started:
                conversation, _ = self.conversation(mention, mode, options)
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
    ) -> tuple[Conversation | CrewError, bool]:
        """The agent's conversation, its CLI started where it can wait for the first message (or the
        error that stops this agent alone, such as an unknown provider). The options' `tools_via`
        replaces the agent's; `spec`: the agent's settings, when not the configured ones (a
        fallback's). With `prior`, the conversation continues that one; the flag says whether the
        CLI holds it (else the first message replays it). The one start() started for the same, if
        there is one."""
        if self.started and prior is None and (spec is None or spec == self.config.agent(mention.agent)):
            started = self.started.pop((mention, mode, options.tools_via, options.sandbox, options.network), None)
            if started is not None:
                return started, True
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
                ),
                passed=tuple(self.config.env_pass),
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
        emit: Callable[[Progress], None] | None = None,
    ) -> AgentLoop:
        """The agent's loop over `conversation` (by default a new one: a review makes several), with
        the tools and `extra`, reporting to `emit` (default: the run's sink). The CrewError that
        kept the conversation from starting is raised; the conversation is closed if the loop cannot
        be made."""
        if conversation is None:
            conversation = self.conversation(mention, work.mode, work.options, spec)[0]
        if isinstance(conversation, CrewError):
            raise conversation
        said = self.sandboxing.unsaid()  # the CLI's sandbox did not come up, and no other works here
        if said:
            self.say("sandbox", mention.agent, said)
        try:
            return self._loop(mention, work, spec or self.config.agent(mention.agent), conversation, extra, emit)
        except BaseException:
            conversation.close()
            raise

    def _loop(
        self,
        mention: Mention,
        work: Work,
        agent: AgentSpec,
        conversation: Conversation,
        extra: Sequence[Tool],
        emit: Callable[[Progress], None] | None,
    ) -> AgentLoop:
        from crewbridge.approval import Approver
        from crewbridge.hooks import Hooks
        from crewbridge.loop import AgentLoop
        from crewbridge.policy import Policy
        from crewbridge.uilink import BrowserChannel
        from crewbridge.usage import Budget

        assert self.tools is not None
        workdir, options = self.workdir_of(agent), work.options
        browser = BrowserChannel(work.transcript.run_id)  # a `crew ui` serving for this user, if any
        approver = Approver(channels=[*self.approvals, browser], record=work.transcript.answered)
        limits = (f"agents.{agent.id}.max_cost", f"agents.{agent.id}.max_tokens")
        loop = AgentLoop(
            mention.agent,
            conversation,
            self.tools.with_(extra),
            Policy(agent, work.mode, approve_all=options.approve_all, approver=approver),
            workdir=workdir,
            hooks=Hooks(self.config.hooks, workdir=workdir, passed=self.config.env_pass),
            transcript=work.transcript,
            max_turns=options.max_turns,
            timeout=agent.timeout or options.timeout,
            compact=self.config.compact_catalogue,
            on_progress=emit or self.emit,
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
            ),
            files=self.files,
        )
        work.transcript.on_cancel(loop.close)  # cancelled from crew ui: as Ctrl-C, the CLI ends
        for sandbox in (conversation.base.sandbox, loop.ctx.sandbox):  # the CLI's and its commands'
            if sandbox is not None and sandbox.confinement.egress is not None:
                sandbox.confinement.egress.refusals.listen(loop.refused)
        return loop


def found_skills(config: Config, workdir: Path) -> Found:
    """Every skill folder found from `workdir`, crew.yaml's `skills:` folders and the user's
    (crewbridge.skills), with the broken and the hidden ones."""
    from crewbridge.skills import discover, roots

    return discover(roots(workdir, config.skills), workdir)


def checked(mode: str, options: RunOptions | None, values: dict[str, Any]) -> RunOptions:
    """`options` with `values` given by name (a UsageError names one that is not an option), for a
    run in `mode` (a UsageError when it is not one)."""
    if mode not in MODES:
        raise UsageError(f"mode '{mode}' is not one of {', '.join(MODES)}")
    options = (options or RunOptions()).given(values)
    options.check(mode)  # --worktree and --review with query: refused before anything starts
    return options
