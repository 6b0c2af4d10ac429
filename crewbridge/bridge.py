"""The engine entry point: run a task on one or more agents, in parallel, with their tools."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.config import AgentSpec, Config, load_config
from crewbridge.conversation import Conversation, new_conversation
from crewbridge.errors import CLINotFound, CrewError, Interrupted, ProviderUnavailable, UsageError
from crewbridge.mentions import Mention, parse_agent, parse_mentions
from crewbridge.modes import MODES, Mode
from crewbridge.options import RunOptions
from crewbridge.providers.base import Turn
from crewbridge.registry import Tool, ToolRegistry
from crewbridge.sandbox import Sandboxing, level

# For start-up speed, what a run needs only once the agents' CLIs have started (the loop, hooks,
# policy, catalogue, skills, transcript, usage, outcomes, concurrent.futures) is imported where it is used: it loads
# while those boot. So is what only the Python API uses (function tools, event streams).
if TYPE_CHECKING:
    from crewbridge.api import EventStream, Outcome, Stop
    from crewbridge.loop import AgentLoop, Progress, RunResult
    from crewbridge.sessions import Prior
    from crewbridge.skills import Found, Skill
    from crewbridge.transcript import Transcript
    from crewbridge.usage import Budget
    from crewbridge.worktrees import Made, Worktree


class Bridge:
    def __init__(
        self,
        config: Config | None = None,
        workdir: Path | None = None,
        env: dict[str, str] | None = None,
        tools: list[Tool] | None = None,
        sandboxing: Sandboxing | None = None,
    ) -> None:
        """`sandboxing`: the machine's sandbox as another Bridge detected it (or is detecting it):
        detecting runs a probe process."""
        self.config = config or load_config()
        self.workdir = (workdir or Path.cwd()).resolve()
        self.env = env or {}  # added to the environment of the CLIs this Bridge starts
        self._tools = tools or []  # added to the configured ones (registered once the CLIs started)
        self._registry: ToolRegistry | None = None
        self._started: dict[tuple[Mention, Mode, str | None, str | None], Conversation] = {}  # start()'s, untaken
        # where the CLIs and the tools' commands run (detected once)
        self.sandboxing = Sandboxing() if sandboxing is None else sandboxing

    @property
    def registry(self) -> ToolRegistry:
        """Built-in, configured and plugin tools, and those given to this Bridge."""
        if self._registry is None:
            self._registry = self.config.registry()
            self._registry.register_all(self._tools)
        return self._registry

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
        hints, its description from the docstring (crewbridge.functions). `bridge.tool(func)`, or as
        a decorator, `@bridge.tool` / `@bridge.tool(read_only=True)`; the function is returned as it was.
        A function already declared with @crewbridge.tool is registered as declared."""
        from crewbridge.functions import function_tool

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
        """Run a task in the background and iterate over its Progress events as they happen (text,
        call, result, turn); `.outcomes` holds the results once the iteration ends. Leaving the loop
        early stops the run. Takes the options of `run`."""
        from crewbridge.api import EventStream

        return EventStream(lambda emit: self.run(text, mode, on_progress=emit, **options))

    def first_prompt(self, text: str, mode: Mode = "query") -> str:
        """The exact first message the (first) mentioned agent would be sent, catalogue included."""
        from crewbridge.catalogue import build_prompt, offered_tools, render_catalogue
        from crewbridge.policy import Policy

        mentions, task = parse_mentions(text)
        agent = self.config.agent(mentions[0].agent)
        skills = self.skills(agent)
        tools = offered_tools(Policy(agent, mode).offered(self.registry), skills)
        catalogue = render_catalogue(tools, mode, compact=self.config.compact_catalogue, skills=list(skills.values()))
        return build_prompt(catalogue, task)

    def skills_section(self, text: str) -> str:
        """The catalogue's skills section for the (first) agent `text` mentions ("" without skills)."""
        from crewbridge.catalogue import skills_section

        skills = self.skills(self.config.agent(parse_mentions(text)[0][0].agent))
        return skills_section(self.registry, list(skills.values()))

    def skills(self, agent: AgentSpec) -> dict[str, Skill]:
        """The skills `agent` gets: those found from its working directory, chosen by its `skills:` globs."""
        from crewbridge.skills import chosen

        return chosen(self.found_skills(self._workdir(agent)).skills, *agent.allow_lists("skills"))

    def found_skills(self, workdir: Path | None = None) -> Found:
        """Every skill folder found from `workdir` (default the Bridge's), crew.yaml's `skills:`
        folders and the user's (crewbridge.skills), with the broken and the hidden ones."""
        from crewbridge.skills import discover, roots

        workdir = workdir or self.workdir
        return discover(roots(workdir, self.config.skills), workdir)

    def start(self, text: str, mode: Mode = "query", options: RunOptions | None = None) -> None:
        """Start the CLIs of the agents `text` mentions now, for the next run of this Bridge with the
        same mode, `tools_via` and `sandbox` options (a fresh conversation, not a resumed one) to
        take: they boot while the caller loads the rest. A sandbox that is required and not to be had
        raises SandboxUnavailable, nothing started; an agent that cannot start is left to that run to
        report. Those no run took are ended by close()."""
        options = options or RunOptions()
        mentions = parse_mentions(text)[0]
        self._check_sandbox(options, [self.config.agent(mention.agent) for mention in mentions], None)
        for mention in mentions:
            key = (mention, mode, options.tools_via, options.sandbox)
            if key not in self._started:
                conversation, _ = self._conversation(mention, mode, options)
                if not isinstance(conversation, CrewError):
                    self._started[key] = conversation

    def close(self) -> None:
        """End the CLIs start() started that no run took."""
        while self._started:
            self._started.popitem()[1].close()

    def run(
        self,
        text: str,
        mode: Mode = "query",
        *,
        options: RunOptions | None = None,
        context: str | None = None,
        transcript: Transcript | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        stop: Stop | None = None,
        **values: Any,
    ) -> list[Outcome]:
        """Run the task in `text` ("@agent[:model] … task") on every mentioned agent at once, with
        `options` and any RunOptions given by name (`max_turns=3`, `tools_via="native"`; see
        crewbridge.options). `max_cost` (dollars) and `max_tokens` bound the whole run, every agent's
        usage summed: past one, each agent stops before its next tool turn (BudgetExceeded). `resume`:
        the id of an earlier run whose agents' conversations the task continues (crewbridge.sessions).
        `context` is added to the task; `stop`, when set from another thread, ends the run
        (crewbridge.api.Stop)."""
        options = (options or RunOptions()).given(values)
        if mode not in MODES:
            raise UsageError(f"mode '{mode}' is not one of {', '.join(MODES)}")
        if options.review:
            from crewbridge.review import review_run

            return review_run(self, text, mode, options, context, transcript, on_progress, stop)
        mentions, task = parse_mentions(text)
        specs = [self.config.agent(mention.agent) for mention in mentions]  # fail before starting anything
        self._check_sandbox(options, specs, on_progress)
        made = self.worktrees(mentions, options) if options.worktree else None
        if made is not None:
            specs = [self.placed(spec, made, worktree) for spec, worktree in zip(specs, made.worktrees, strict=True)]
        if context:
            task = f"{task}\n\n{context}"
        own = transcript is None
        status = "interrupted"
        earlier = self._priors(options.resume)
        conversations: list[Conversation | CrewError] = []
        held: list[bool] = []  # whether each CLI holds its earlier conversation
        try:
            for mention, spec in zip(mentions, specs, strict=True):  # every CLI starts first, to boot meanwhile
                conversation, holds = self._conversation(mention, mode, options, spec, prior=earlier.get(mention.agent))
                conversations.append(conversation)
                held.append(holds)
            from crewbridge.usage import Budget  # for start-up speed (see top)

            if transcript is None:
                run_id = made.run_id if made else None
                transcript = self._transcript(
                    mode, [m.agent for m in mentions], options.resume, task=task, run_id=run_id
                )
            if made is not None:
                made.announce(transcript, _teller(on_progress))
            self.registry.names()  # built here, once: an error in the tools' configuration ends the run
            outcomes = self._run_all(
                mentions,
                specs,
                conversations,
                task,
                mode,
                options,
                resumed=Resumed(options.resume, earlier, held) if options.resume else None,
                budget=Budget(options.max_cost, options.max_tokens),
                transcript=transcript,
                on_progress=on_progress,
                stop=stop,
            )
            if made is not None:
                outcomes = [
                    replace(outcome, worktree=worktree, changes=made.changed(worktree, transcript))
                    for outcome, worktree in zip(outcomes, made.worktrees, strict=True)
                ]
            status = "ok" if all(o.error is None for o in outcomes) else "failed"
            return outcomes
        finally:
            for conversation in conversations:
                if not isinstance(conversation, CrewError):
                    conversation.close()
            self.close()  # what start() started for another reading of the task
            if own and transcript is not None:
                transcript.close(status)

    def chat(
        self,
        agent: str,
        mode: Mode = "query",
        *,
        options: RunOptions | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        **values: Any,
    ) -> Chat:
        """A conversation with one agent ("@claude", "@claude:haiku" or "claude") that goes on across
        messages: `chat.ask(text)` for each, `chat.close()` at the end. Its CLI starts now. Takes the
        options of `run`; with `resume`, the conversation continues that run's with the agent."""
        from crewbridge.usage import Budget

        options = (options or RunOptions()).given(values)
        if mode not in MODES:
            raise UsageError(f"mode '{mode}' is not one of {', '.join(MODES)}")
        if options.worktree or options.review:
            raise UsageError("a chat takes no worktree or review; crew execute --worktree or --review runs a task so")
        mention = parse_agent(agent)
        self._check_sandbox(options, [self.config.agent(mention.agent)], on_progress)  # before anything starts
        earlier = self._priors(options.resume)
        transcript = self._transcript("chat", [mention.agent], options.resume, mode=mode)
        conversation: Conversation | CrewError | None = None
        try:
            conversation, held = self._conversation(mention, mode, options, prior=earlier.get(mention.agent))
            if isinstance(conversation, CrewError):
                raise conversation
            prior = None
            if options.resume:
                resumed = Resumed(options.resume, earlier, [held])
                prior, held = resumed.of(0, mention.agent, transcript, _teller(on_progress))
            loop = self._loop(
                mention,
                mode,
                options,
                conversation=conversation,
                budget=Budget(options.max_cost, options.max_tokens),
                transcript=transcript,
                on_progress=on_progress,
            )
        except BaseException:
            if conversation is not None and not isinstance(conversation, CrewError):
                conversation.close()
            transcript.close("interrupted")
            raise
        return Chat(loop, prior, held)

    def worktrees(self, mentions: list[Mention], options: RunOptions) -> Made:
        """A git worktree per mentioned agent, from HEAD of the checkout this Bridge works in."""
        from crewbridge.transcript import new_run_id
        from crewbridge.worktrees import labels, make

        if options.resume:
            raise UsageError("--worktree starts afresh; it cannot go with --continue or --resume")
        return make(self.workdir, new_run_id(), labels(mentions))

    def placed(self, spec: AgentSpec, made: Made, worktree: Worktree) -> AgentSpec:
        """`spec` working in `worktree`: where its working directory is in it."""
        return replace(spec, workdir=str(made.place(worktree, self._workdir(spec))))

    def with_tools(self, tools: list[Tool]) -> Bridge:
        """A Bridge like this one whose registry also holds `tools` (a run's own, such as a review's)."""
        other = Bridge(self.config, self.workdir, self.env, sandboxing=self.sandboxing)
        other._registry = self.registry.subset(lambda tool: True)
        other._registry.register_all(tools)
        return other

    def loop(
        self,
        mention: Mention,
        mode: Mode,
        options: RunOptions,
        *,
        spec: AgentSpec,
        budget: Budget,
        transcript: Transcript,
        on_progress: Callable[[Progress], None] | None,
        conversation: Conversation | CrewError | None = None,
    ) -> AgentLoop:
        """The agent's loop over `conversation` (by default a new one: a review makes several); the
        CrewError that stopped the conversation from starting is raised."""
        if conversation is None:
            conversation = self._conversation(mention, mode, options, spec)[0]
        if isinstance(conversation, CrewError):
            raise conversation
        return self._loop(
            mention,
            mode,
            options,
            conversation=conversation,
            spec=spec,
            budget=budget,
            transcript=transcript,
            on_progress=on_progress,
        )

    def _priors(self, resume: str | None) -> dict[str, Prior]:
        """The conversations of run `resume` by agent (none without one)."""
        if not resume:
            return {}
        from crewbridge.sessions import priors

        return priors(resume)

    def _transcript(self, command: str, agents: list[str], resume: str | None, **fields: Any) -> Transcript:
        """A new run's transcript (one that writes nothing when transcripts are off)."""
        from crewbridge.transcript import Transcript

        if not self.config.transcripts:
            return Transcript()
        return Transcript.open(
            command=command, agents=agents, **fields, secrets=self.config.provider_env(), resumed_from=resume
        )

    def _run_all(
        self,
        mentions: list[Mention],
        specs: list[AgentSpec],
        conversations: list[Conversation | CrewError],
        task: str,
        mode: Mode,
        options: RunOptions,
        *,
        resumed: Resumed | None,
        budget: Budget,
        transcript: Transcript,
        on_progress: Callable[[Progress], None] | None,
        stop: Stop | None,
    ) -> list[Outcome]:
        from crewbridge.api import Outcome

        loops: list[AgentLoop] = []
        say = _teller(on_progress)

        def one(index: int, mention: Mention, conversation: Conversation | CrewError) -> Outcome:
            """The mentioned agent's run; when its provider cannot serve, its fallbacks' in turn."""
            asked = specs[index]
            prior, held = resumed.of(index, mention.agent, transcript, say) if resumed else (None, True)
            chain = [mention, *(Mention(name) for name in asked.fallback)]
            for step, current in enumerate(chain):
                spec = asked if step == 0 else self._stand_in(asked, current.agent)
                fell_back_from = mention.agent if step else None
                try:
                    held = held and not step  # another CLI is given the earlier conversation, replayed
                    loop = self.loop(
                        current,
                        mode,
                        options,
                        conversation=None if step else conversation,
                        spec=spec,
                        budget=budget,
                        transcript=transcript,
                        on_progress=on_progress,
                    )
                    loops.append(loop)
                    if stop is not None:
                        stop.on_set(loop.close)
                    result = loop.run(task, prior, held)
                    return Outcome(current.agent, result=result, fell_back_from=fell_back_from)
                except (ProviderUnavailable, CLINotFound) as exc:
                    if step + 1 == len(chain):
                        transcript.write("error", agent=current.agent, message=str(exc))
                        return Outcome(current.agent, error=exc, fell_back_from=fell_back_from)
                    reason = exc.reason if isinstance(exc, ProviderUnavailable) else "not installed"
                    after = chain[step + 1].agent
                    transcript.write("fallback", agent=current.agent, to=after, reason=reason, message=str(exc))
                    say("fallback", current.agent, f"@{current.agent} cannot answer ({reason}); @{after} takes over")
                except CrewError as exc:
                    error = exc
                    if stop is not None and stop.is_set():  # what the stopped CLI said last is beside the point
                        error = Interrupted(f"@{current.agent} was stopped")
                    transcript.write("error", agent=current.agent, message=str(error))
                    return Outcome(current.agent, error=error, fell_back_from=fell_back_from)
            raise AssertionError("unreachable: the chain's last agent returns")

        if len(mentions) == 1:
            return [one(0, mentions[0], conversations[0])]
        from concurrent.futures import ThreadPoolExecutor, wait

        pool = ThreadPoolExecutor(max_workers=len(mentions))
        try:
            futures = [
                pool.submit(one, index, mention, conv)
                for index, (mention, conv) in enumerate(zip(mentions, conversations, strict=True))
            ]
            # Waited for in slices: a Ctrl-C the kernel hands to a worker thread is acted on only
            # when the main thread runs, and an endless wait would never let it.
            while wait(futures, timeout=0.25).not_done:
                pass
            return [future.result() for future in futures]
        except BaseException:  # Ctrl-C: end every agent's CLI now, rather than wait for them
            for loop in list(loops):
                loop.close()
            raise
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _stand_in(self, asked: AgentSpec, name: str) -> AgentSpec:
        """Agent `name` taking over `asked`'s task: its own CLI and model, `asked`'s tools, limits and
        working directory."""
        other = self.config.agent(name)
        return replace(
            asked,
            id=name,
            provider=other.provider,
            model=other.model,
            system_prompt=other.system_prompt,
            options=other.options,
            timeout=other.timeout or asked.timeout,
            fallback=[],
        )

    def _check_sandbox(
        self, options: RunOptions, agents: list[AgentSpec], on_progress: Callable[[Progress], None] | None
    ) -> None:
        """Refuse a run whose sandbox is required and not to be had here (SandboxUnavailable), before
        anything starts; say once when `auto` finds none."""
        levels = [self._sandbox_level(options, agent) for agent in agents]
        for wanted in levels:
            self.sandboxing.mechanism(wanted)
        said = self.sandboxing.notice(levels)
        if said and on_progress is not None:
            from crewbridge.loop import Progress  # for start-up speed (see top): only said once

            on_progress(Progress("sandbox", agents[0].id, said))

    def _sandbox_level(self, options: RunOptions, agent: AgentSpec) -> str:
        """The agent's sandbox level: the run's (its option, else crew.yaml's), where the agent's own
        is not stricter (crewbridge.sandbox.level)."""
        return level(options.sandbox or self.config.sandbox, agent.sandbox)

    def _conversation(
        self,
        mention: Mention,
        mode: Mode,
        options: RunOptions,
        spec: AgentSpec | None = None,
        prior: Prior | None = None,
    ) -> tuple[Conversation | CrewError, bool]:
        """The agent's conversation, its CLI started where it can wait for the first message (or the
        error that stops this agent alone, such as an unknown provider). The options' `tools_via`
        replaces the agent's; `spec`: the agent's settings, when not the configured ones (a fallback's). With
        `prior`, the conversation continues that one; the flag says whether the CLI holds it (else
        the first message replays it). The one start() started for the same, if there is one."""
        if self._started and prior is None and (spec is None or spec == self.config.agent(mention.agent)):
            started = self._started.pop((mention, mode, options.tools_via, options.sandbox), None)
            if started is not None:
                return started, True
        try:
            agent = spec or self.config.agent(mention.agent)
            provider = self.config.provider(agent.provider)
            workdir = self._workdir(agent)
            base = Turn(
                prompt="",
                mode=mode,
                model=mention.model or agent.model,
                system_prompt=agent.system_prompt,
                options=list(agent.options.get(mode, [])),
                native=(options.tools_via or agent.tools_via) == "native",
                sandbox=self.sandboxing.cli(self._sandbox_level(options, agent), workdir, mode, provider.state),
            )
            if not agent.user_mcp_servers:  # only the MCP servers crew gives it, never crew itself again
                base.options += provider.own_mcp_only(base, {**os.environ, **self.env}, workdir)
            conversation = new_conversation(provider, base, cwd=workdir, env=self.env)
        except CrewError as exc:
            return exc, False
        held = conversation.resume(prior) if prior is not None else True
        conversation.start()
        return conversation, held

    def _workdir(self, agent: AgentSpec) -> Path:
        return (self.workdir / agent.workdir).resolve() if agent.workdir else self.workdir

    def _loop(
        self,
        mention: Mention,
        mode: Mode,
        options: RunOptions,
        *,
        conversation: Conversation,
        budget: Budget,
        transcript: Transcript,
        on_progress: Callable[[Progress], None] | None,
        spec: AgentSpec | None = None,
    ) -> AgentLoop:
        """The agent's loop over `conversation` (closed if the loop cannot be made)."""
        from crewbridge.hooks import Hooks
        from crewbridge.loop import AgentLoop
        from crewbridge.policy import Policy
        from crewbridge.usage import Budget

        agent = spec or self.config.agent(mention.agent)
        workdir = self._workdir(agent)
        try:
            return AgentLoop(
                mention.agent,
                conversation,
                self.registry,
                Policy(agent, mode, approve_all=options.approve_all),
                workdir=workdir,
                hooks=Hooks(self.config.hooks, workdir=workdir),
                transcript=transcript,
                max_turns=options.max_turns,
                timeout=agent.timeout or options.timeout,
                compact=self.config.compact_catalogue,
                on_progress=on_progress,
                skills=self.skills(agent),
                budgets=[
                    budget,
                    Budget(
                        agent.max_cost,
                        agent.max_tokens,
                        (f"agents.{agent.id}.max_cost", f"agents.{agent.id}.max_tokens"),
                    ),
                ],
                tools_via=options.tools_via or agent.tools_via,
                sandbox=self.sandboxing.commands(
                    self._sandbox_level(options, agent), workdir, mode, network=agent.sandbox_network
                ),
            )
        except BaseException:
            conversation.close()
            raise


class Chat:
    """One agent's conversation across messages (Bridge.chat): the first message carries the tool
    catalogue (or continues the resumed conversation), later ones go as they are; the model keeps
    the context, and its CLI stays open until close()."""

    def __init__(self, loop: AgentLoop, prior: Prior | None = None, held: bool = True) -> None:
        self.loop = loop
        self.prior, self.held = prior, held  # the earlier conversation it continues, if any
        self.started = False  # a reply came back: the model has the catalogue

    @property
    def agent(self) -> str:
        return self.loop.agent

    def ask(self, text: str) -> RunResult:
        """Send a message; the answer once the model is done with its tools."""
        result = self.loop.converse(text if self.started else self.loop.opening(text, self.prior, self.held))
        self.started = True
        return result

    def failed(self, error: CrewError) -> None:
        """Record that `error` ended the last message's reply (the chat goes on)."""
        self.loop.transcript.write("error", agent=self.agent, message=str(error))

    def cancel(self) -> None:
        """Stop the reply being written (after a Ctrl-C), and any approval question of its calls;
        the conversation goes on."""
        self.loop.policy.withdraw()
        self.loop.conv.stop()

    def close(self, status: str = "ok") -> None:
        """End the conversation and its transcript (`status`: ok, interrupted)."""
        try:
            self.loop.close()
        finally:
            self.loop.transcript.close(status)


def _teller(on_progress: Callable[[Progress], None] | None) -> Callable[[str, str, str], None]:
    """A notice (kind, agent, text) as a Progress event, for `on_progress`."""
    from crewbridge.loop import Progress

    def say(kind: str, agent: str, text: str) -> None:
        if on_progress is not None:
            on_progress(Progress(kind, agent, text))

    return say


@dataclass
class Resumed:
    """A run continuing run `run_id`: its agents' earlier conversations, and whether each mentioned
    agent's CLI holds its own (in mention order)."""

    run_id: str
    priors: dict[str, Prior]
    held: list[bool]

    def of(
        self, index: int, agent: str, transcript: Transcript, say: Callable[[str, str, str], None]
    ) -> tuple[Prior | None, bool]:
        """The mentioned agent's earlier conversation and whether its CLI holds it; a notice when it
        starts afresh or is replayed."""
        prior = self.priors.get(agent)
        if prior is None:
            how, text = "fresh", f"@{agent} was not in run {self.run_id}: it starts a fresh conversation"
        elif self.held[index]:
            how, text = "continued", ""  # the CLI holds it (its session, or its history given)
        else:
            how = "replay"
            gone = (
                f"@{agent}'s CLI no longer has session {prior.session_id} here (deleted, expired, or "
                "another directory's)"
                if prior.session_id
                else f"@{agent}'s CLI named no session in run {self.run_id}"
            )
            text = f"{gone}: crew replays the conversation from its transcript"
        transcript.write("resume", agent=agent, run=self.run_id, how=how, session=prior and prior.session_id)
        if text:
            say("resume", agent, text)
        return prior, self.held[index]
