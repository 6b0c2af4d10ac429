"""The engine entry point: run a task on one or more agents, in parallel, with their tools."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.config import AgentSpec, Config, load_config
from crewbridge.conversation import Conversation, new_conversation
from crewbridge.errors import CLINotFound, CrewError, Interrupted, ProviderUnavailable, UsageError
from crewbridge.mentions import Mention, parse_mentions
from crewbridge.modes import MODES, Mode
from crewbridge.providers.base import Turn
from crewbridge.registry import Tool, ToolRegistry
from crewbridge.sandbox import Sandboxing
from crewbridge.skills import Found, Skill, chosen, discover, roots

# For start-up speed, what a run needs only once the agents' CLIs have started (the loop, hooks,
# policy, catalogue, transcript, usage, outcomes, concurrent.futures) is imported where it is used: it loads
# while those boot. So is what only the Python API uses (function tools, event streams).
if TYPE_CHECKING:
    from crewbridge.api import EventStream, Outcome, Stop
    from crewbridge.loop import AgentLoop, Progress, RunResult
    from crewbridge.sessions import Prior
    from crewbridge.transcript import Transcript
    from crewbridge.usage import Budget


class Bridge:
    def __init__(
        self,
        config: Config | None = None,
        workdir: Path | None = None,
        env: dict[str, str] | None = None,
        tools: list[Tool] | None = None,
    ) -> None:
        self.config = config or load_config()
        self.workdir = (workdir or Path.cwd()).resolve()
        self.env = env or {}  # added to the environment of the CLIs this Bridge starts
        self._tools = tools or []  # added to the configured ones (registered once the CLIs started)
        self._registry: ToolRegistry | None = None
        self.sandboxing = Sandboxing(self.config.sandbox)  # where the CLIs and the tools' commands run

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
        return chosen(self.found_skills(self._workdir(agent)).skills, agent.skills)

    def found_skills(self, workdir: Path | None = None) -> Found:
        """Every skill folder found from `workdir` (default the Bridge's), crew.yaml's `skills:`
        folders and the user's (crewbridge.skills), with the broken and the hidden ones."""
        return discover(roots(workdir or self.workdir, self.config.skills))

    def run(
        self,
        text: str,
        mode: Mode = "query",
        *,
        context: str | None = None,
        max_turns: int = 10,
        timeout: float | None = 300.0,
        approve_all: bool = False,
        max_cost: float | None = None,
        max_tokens: int | None = None,
        resume: str | None = None,
        transcript: Transcript | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        stop: Stop | None = None,
        tools_via: str | None = None,
    ) -> list[Outcome]:
        """Run the task in `text` ("@agent[:model] … task") on every mentioned agent at once.
        `max_cost` (dollars) and `max_tokens` bound the whole run, every agent's usage summed: past
        one, each agent stops before its next tool turn (BudgetExceeded). `resume`: the id of an
        earlier run whose agents' conversations the task continues (crewbridge.sessions). `stop`, when set
        from another thread, ends the run (crewbridge.api.Stop). `tools_via` ("text" or "native")
        replaces each agent's `tools_via` (crewbridge.native)."""
        if mode not in MODES:
            raise UsageError(f"mode '{mode}' is not one of {', '.join(MODES)}")
        mentions, task = parse_mentions(text)
        agents = [self.config.agent(mention.agent) for mention in mentions]  # fail before starting anything
        for agent in agents:
            self.sandboxing.mechanism(agent.sandbox)  # a sandbox required and not to be had, too
        said = self.sandboxing.notice([agent.sandbox for agent in agents])
        if said and on_progress is not None:
            from crewbridge.loop import Progress  # for start-up speed (see top): only said once

            on_progress(Progress("sandbox", mentions[0].agent, said))
        if context:
            task = f"{task}\n\n{context}"
        own = transcript is None
        status = "interrupted"
        earlier: dict[str, Prior] = {}
        if resume:
            from crewbridge.sessions import priors

            earlier = priors(resume)
        conversations: list[Conversation | CrewError] = []
        held: list[bool] = []  # whether each CLI holds its earlier conversation
        try:
            for mention in mentions:  # every CLI starts first: it boots while the rest is built
                conversation, holds = self._conversation(
                    mention, mode, prior=earlier.get(mention.agent), tools_via=tools_via
                )
                conversations.append(conversation)
                held.append(holds)
            from crewbridge.usage import Budget  # for start-up speed (see top)

            if transcript is None:
                from crewbridge.transcript import Transcript

                transcript = (
                    Transcript.open(
                        command=mode,
                        agents=[m.agent for m in mentions],
                        task=task,
                        secrets=self.config.provider_env(),
                        resumed_from=resume,
                    )
                    if self.config.transcripts
                    else Transcript()
                )
            self.registry.names()  # built here, once: an error in the tools' configuration ends the run
            outcomes = self._run_all(
                mentions,
                conversations,
                task,
                mode,
                resumed=Resumed(resume, earlier, held) if resume else None,
                max_turns=max_turns,
                timeout=timeout,
                approve_all=approve_all,
                budget=Budget(max_cost, max_tokens),
                transcript=transcript,
                on_progress=on_progress,
                stop=stop,
                tools_via=tools_via,
            )
            status = "ok" if all(o.error is None for o in outcomes) else "failed"
            return outcomes
        finally:
            for conversation in conversations:
                if not isinstance(conversation, CrewError):
                    conversation.close()
            if own and transcript is not None:
                transcript.close(status)

    def _run_all(
        self,
        mentions: list[Mention],
        conversations: list[Conversation | CrewError],
        task: str,
        mode: Mode,
        *,
        resumed: Resumed | None,
        transcript: Transcript,
        stop: Stop | None,
        **options: Any,
    ) -> list[Outcome]:
        from crewbridge.api import Outcome
        from crewbridge.loop import Progress

        loops: list[AgentLoop] = []

        def say(kind: str, agent: str, text: str) -> None:
            if options.get("on_progress"):
                options["on_progress"](Progress(kind, agent, text))

        def one(index: int, mention: Mention, conversation: Conversation | CrewError) -> Outcome:
            """The mentioned agent's run; when its provider cannot serve, its fallbacks' in turn."""
            asked = self.config.agent(mention.agent)
            prior, held = resumed.of(index, mention.agent, transcript, say) if resumed else (None, True)
            chain = [mention, *(Mention(name) for name in asked.fallback)]
            for step, current in enumerate(chain):
                spec = asked if step == 0 else self._stand_in(asked, current.agent)
                fell_back_from = mention.agent if step else None
                try:
                    if step:  # another CLI: it is given the earlier conversation, replayed
                        conversation = self._conversation(current, mode, spec, tools_via=options["tools_via"])[0]
                        held = False
                    if isinstance(conversation, CrewError):
                        raise conversation
                    loop = self._loop(
                        current, mode, conversation=conversation, transcript=transcript, spec=spec, **options
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

    def _conversation(
        self,
        mention: Mention,
        mode: Mode,
        spec: AgentSpec | None = None,
        prior: Prior | None = None,
        tools_via: str | None = None,
    ) -> tuple[Conversation | CrewError, bool]:
        """The agent's conversation, its CLI started where it can wait for the first message (or the
        error that stops this agent alone, such as an unknown provider). `spec`: the agent's settings,
        when not the configured ones (a fallback's). With `prior`, the conversation continues that
        one; the flag says whether the CLI holds it (else the first message replays it). `tools_via`
        replaces the agent's."""
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
                native=(tools_via or agent.tools_via) == "native",
                sandbox=self.sandboxing.cli(agent.sandbox, workdir, mode, provider.state),
            )
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
        *,
        max_turns: int,
        timeout: float | None,
        approve_all: bool,
        transcript: Transcript | None,
        on_progress: Callable[[Progress], None] | None,
        conversation: Conversation | None = None,
        spec: AgentSpec | None = None,
        budget: Budget | None = None,
        tools_via: str | None = None,
    ) -> AgentLoop:
        """The agent's loop over `conversation` (by default a new one, its CLI started at once)."""
        from crewbridge.hooks import Hooks
        from crewbridge.loop import AgentLoop
        from crewbridge.policy import Policy
        from crewbridge.usage import Budget

        if conversation is None:
            made = self._conversation(mention, mode, spec, tools_via=tools_via)[0]
            if isinstance(made, CrewError):
                raise made
            conversation = made
        agent = spec or self.config.agent(mention.agent)
        workdir = self._workdir(agent)
        try:
            return AgentLoop(
                mention.agent,
                conversation,
                self.registry,
                Policy(agent, mode, approve_all=approve_all),
                workdir=workdir,
                hooks=Hooks(self.config.hooks, workdir=workdir),
                transcript=transcript,
                max_turns=max_turns,
                timeout=agent.timeout or timeout,
                compact=self.config.compact_catalogue,
                on_progress=on_progress,
                skills=self.skills(agent),
                budgets=[
                    budget or Budget(None, None),
                    Budget(
                        agent.max_cost,
                        agent.max_tokens,
                        (f"agents.{agent.id}.max_cost", f"agents.{agent.id}.max_tokens"),
                    ),
                ],
                tools_via=tools_via or agent.tools_via,
                sandbox=self.sandboxing.commands(agent.sandbox, workdir, mode, network=agent.sandbox_network),
            )
        except BaseException:
            conversation.close()
            raise


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
