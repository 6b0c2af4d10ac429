"""A task on every agent it mentions at once (`crew query "@claude @gemini …"`, Bridge.run): each
agent's CLI starts first, to boot while the rest is built; one transcript and one budget cover the
run; each agent's part (with its fallbacks: crewbridge.fallback) runs on a thread of its own. With
--worktree each works in a git worktree of its own; with --review the task goes to
crewbridge.review instead."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from crewbridge.config import AgentSpec
from crewbridge.context import RunContext, Work, checked
from crewbridge.errors import CrewError
from crewbridge.fallback import run_agent
from crewbridge.mentions import Mention, parse_mentions
from crewbridge.modes import Mode
from crewbridge.options import RunOptions
from crewbridge.piped import with_context

if TYPE_CHECKING:
    from crewbridge.api import Outcome
    from crewbridge.conversations import Conversation
    from crewbridge.loop import AgentLoop
    from crewbridge.sessions import Prior
    from crewbridge.transcript import Transcript
    from crewbridge.worktrees import Made


def run_task(
    ctx: RunContext,
    text: str,
    mode: Mode = "query",
    options: RunOptions | None = None,
    *,
    context: str | None = None,
    transcript: Transcript | None = None,
    **values: Any,
) -> list[Outcome]:
    """Run the task in `text` ("@agent[:model] … task") on every mentioned agent at once, with
    `options` and any RunOptions given by name; `context` is added to the task. Each agent's
    Outcome, in mention order. The CLIs ctx.start() started and no agent took are ended."""
    options = checked(mode, options, values)
    try:
        if options.review:
            from crewbridge.review import review_run

            return review_run(ctx, text, mode, options, context, transcript)
        return _run(ctx, text, mode, options, context, transcript)
    finally:
        ctx.close_started()


def _run(
    ctx: RunContext, text: str, mode: Mode, options: RunOptions, context: str | None, transcript: Transcript | None
) -> list[Outcome]:
    mentions, task = parse_mentions(text)
    specs = [ctx.config.agent(mention.agent) for mention in mentions]  # fail before starting anything
    ctx.check_sandbox(options, specs)
    made = ctx.worktrees(mentions, options) if options.worktree else None
    if made is not None:
        specs = [ctx.placed(spec, made, worktree) for spec, worktree in zip(specs, made.worktrees, strict=True)]
    task = with_context(task, context)
    own, status = transcript is None, "interrupted"
    earlier = _priors(options.resume)
    started: list[tuple[Conversation | CrewError, bool]] = []
    try:
        for mention, spec in zip(mentions, specs, strict=True):  # every CLI starts first, to boot meanwhile
            started.append(ctx.conversation(mention, mode, options, spec, prior=earlier.get(mention.agent)))
        if transcript is None:
            agents = [m.agent for m in mentions]
            models = {m.agent: m.model or spec.model for m, spec in zip(mentions, specs, strict=True)}
            transcript = ctx.transcript(
                mode, agents, options.resume, task=task, run_id=made and made.run_id, models=models
            )
        outcomes = _run_started(ctx, _work(task, mode, options, transcript), mentions, specs, started, earlier, made)
        status = "ok" if all(o.error is None for o in outcomes) else "failed"
        return outcomes
    except BaseException:
        if made is not None:  # stopped (Ctrl-C, an error): where the agents' work stays
            ctx.say("warning", mentions[0].agent, made.left())
        raise
    finally:
        for conversation, _ in started:
            if not isinstance(conversation, CrewError):
                conversation.close()
        if own and transcript is not None:
            transcript.close(status)


def _work(task: str, mode: Mode, options: RunOptions, transcript: Transcript) -> Work:
    from crewbridge.usage import Budget  # for start-up speed: once the CLIs have started

    return Work(task, mode, options, Budget(options.max_cost, options.max_tokens), transcript)


def _priors(resume: str | None) -> dict[str, Prior]:
    """The conversations of run `resume` by agent (none without one)."""
    if not resume:
        return {}
    from crewbridge.sessions import priors

    return priors(resume)


def _run_started(
    ctx: RunContext,
    work: Work,
    mentions: list[Mention],
    specs: list[AgentSpec],
    started: list[tuple[Conversation | CrewError, bool]],
    earlier: dict[str, Prior],
    made: Made | None,
) -> list[Outcome]:
    """Each agent's outcome, its CLI started: with the changes it made in its worktree (`made`), and
    the run's id."""
    from crewbridge.sessions import Resumed

    if made is not None:
        made.announce(work.transcript, ctx.say)
    ctx.registry.names()  # built here, once: an error in the tools' configuration ends the run
    resumed = Resumed(work.options.resume, earlier, [held for _, held in started]) if work.options.resume else None
    loops: list[AgentLoop] = []

    def one(index: int) -> Outcome:
        mention = mentions[index]
        prior = resumed.of(index, mention.agent, work.transcript, ctx.say) if resumed else (None, True)
        return run_agent(ctx, work, mention, specs[index], started[index][0], prior, loops)

    outcomes = [one(0)] if len(mentions) == 1 else _at_once(one, len(mentions), loops)
    if made is not None:
        outcomes = [
            replace(outcome, worktree=worktree, changes=made.changed(worktree, work.transcript))
            for outcome, worktree in zip(outcomes, made.worktrees, strict=True)
        ]
    return [replace(outcome, run=work.transcript.run_id) for outcome in outcomes]


def _at_once(one: Any, count: int, loops: list[AgentLoop]) -> list[Outcome]:
    """`one(index)` for each agent, each on a thread of its own; on Ctrl-C every agent's CLI ends now."""
    from concurrent.futures import ThreadPoolExecutor, wait

    pool = ThreadPoolExecutor(max_workers=count)
    try:
        futures = [pool.submit(one, index) for index in range(count)]
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
