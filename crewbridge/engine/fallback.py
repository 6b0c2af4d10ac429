"""One mentioned agent's part of a task, and its fallbacks: when the agent's provider cannot serve
(the API says it is unavailable, or the CLI is not installed), the next agent of its `fallback:`
list takes the task over — its own CLI and model, the asked agent's tools, limits and working
directory — and the outcome says whom it stood in for. Any other error ends the agent's part: it is
the outcome's error (Interrupted once the run was stopped: what the stopped CLI said last is beside
the point). With a check (crewbridge.engine.gate), the answer must pass it, in the same conversation."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from crewbridge.api import Outcome
from crewbridge.base.mentions import Mention
from crewbridge.config import AgentSpec, Config
from crewbridge.engine.gate import Gate
from crewbridge.errors import CLINotFound, CrewError, Interrupted, ProviderError, ProviderUnavailable
from crewbridge.record.events import Error, Fallback

if TYPE_CHECKING:
    from crewbridge.conversations import Conversation
    from crewbridge.engine.context import RunContext, Work
    from crewbridge.engine.loop import AgentLoop
    from crewbridge.work.sessions import Prior


def run_agent(
    ctx: RunContext,
    work: Work,
    mention: Mention,
    asked: AgentSpec,
    conversation: Conversation | CrewError,
    earlier: tuple[Prior | None, bool],
    loops: list[AgentLoop],
) -> Outcome:
    """The mentioned agent's run (`asked`: its settings, `conversation`: its CLI, started), or its
    fallbacks' in turn. `earlier`: the conversation it continues, and whether its CLI holds it (a
    stand-in is given it replayed). Each loop made is added to `loops` (to be closed on Ctrl-C)."""
    prior, held = earlier
    chain = [mention, *(Mention(name) for name in asked.fallback)]
    gate = Gate.of(ctx, work)  # its deadline: --timeout from the part's start
    checks = gate.runs if gate is not None else []
    for step, current in enumerate(chain):
        fell_back_from = mention.agent if step else None
        loop: AgentLoop | None = None
        try:
            loop = ctx.loop(
                current,
                work,
                spec=asked if step == 0 else stand_in(ctx.config, asked, current.agent),
                conversation=None if step else conversation,
            )
            loops.append(loop)
            if ctx.stop is not None:
                ctx.stop.on_set(loop.close)
            try:
                result = loop.converse(loop.opening(work.task, prior, held and not step))
                result, failed = gate.through(loop, result, work) if gate is not None else (result, None)
            finally:
                loop.close()
            if failed is not None:
                record_failure(work, current.agent, failed)
            return Outcome(
                current.agent,
                result=result,
                error=failed,
                fell_back_from=fell_back_from,
                disarmed=loop.disarmed,
                checks=checks,
            )
        except (ProviderUnavailable, CLINotFound) as exc:
            if step + 1 == len(chain):
                record_failure(work, current.agent, exc)
                return Outcome(current.agent, error=exc, fell_back_from=fell_back_from, checks=checks)
            _fall_back(ctx, work, current.agent, chain[step + 1].agent, exc)
        except CrewError as exc:
            error = exc
            if (ctx.stop is not None and ctx.stop.is_set()) or work.record.cancelled:
                error = Interrupted(f"@{current.agent} was stopped")
            record_failure(work, current.agent, error)
            disarmed = loop.disarmed if loop is not None else []  # a run that failed may have left them too
            return Outcome(current.agent, error=error, fell_back_from=fell_back_from, disarmed=disarmed, checks=checks)
    raise AssertionError("unreachable: the chain's last agent returns")


def _fall_back(ctx: RunContext, work: Work, agent: str, after: str, error: ProviderUnavailable | CLINotFound) -> None:
    """Record and say that `after` takes `agent`'s task over."""
    reason = error.reason if isinstance(error, ProviderUnavailable) else "not installed"
    work.record.emit(Fallback(agent=agent, to=after, reason=reason, message=str(error)))


def record_failure(work: Work, agent: str, error: CrewError) -> None:
    """Record that `error` ended `agent`'s part of the run."""
    status = error.status if isinstance(error, ProviderError) else None
    work.record.emit(Error(agent=agent, message=str(error), exit_code=error.exit_code, status=status))


def stand_in(config: Config, asked: AgentSpec, name: str) -> AgentSpec:
    """Agent `name` taking over `asked`'s task: its own CLI and model, `asked`'s tools, limits and
    working directory."""
    other = config.agent(name)
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
