"""A task on every agent it mentions at once (`crew query "@claude @gemini …"`, Bridge.run): each
agent's CLI starts first, to boot while the rest is built; one record and one budget cover the
run; each agent's part (with its fallbacks: crewbridge.engine.fallback) runs on a thread of its own. With
--worktree each works in a git worktree of its own (with --pr, each change is then proposed:
crewbridge.engine.pulls); with --review the task goes to crewbridge.engine.review instead."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from crewbridge.base.mentions import Mention, parse_mentions
from crewbridge.base.modes import Mode
from crewbridge.base.options import RunOptions
from crewbridge.base.piped import with_context
from crewbridge.config import AgentSpec
from crewbridge.engine.context import Named, RunContext, Work, checked
from crewbridge.engine.fallback import run_agent
from crewbridge.engine.pulls import Proposer
from crewbridge.errors import CrewError

if TYPE_CHECKING:
    from crewbridge.api import Outcome
    from crewbridge.conversations import Conversation
    from crewbridge.engine.loop import AgentLoop
    from crewbridge.providers.base import Image
    from crewbridge.record.events import Ended, Parent
    from crewbridge.record.stream import Record
    from crewbridge.system.approval import Channel
    from crewbridge.work.sessions import Prior
    from crewbridge.work.worktrees import Made


def run_task(
    ctx: RunContext,
    text: str,
    mode: Mode = "query",
    options: RunOptions | None = None,
    *,
    context: str | None = None,
    run: str | None = None,
    command: str | None = None,
    parent: Parent | None = None,
    images: tuple[Image, ...] = (),
    **values: Any,
) -> list[Outcome]:
    """Run the task in `text` ("@agent[:model] … task") on every mentioned agent at once, with
    `options` and any RunOptions given by name; `context` is added to the task, `images` go with
    it to each agent's model (a CLI that cannot take them is refused: UsageError). The run's record
    has the id `run` (default: a new one), says `command` (default: the mode) and what the run is
    part of (`parent`). Each agent's Outcome, in mention order. The CLIs ctx.start() started and no
    agent took are ended."""
    options = checked(mode, options, values)
    named = Named(run, command or mode, parent)
    ctx = ctx.traced(parent)  # before its CLIs start: each is given its span
    try:
        if options.review:
            from crewbridge.engine.review import review_run

            return review_run(ctx, text, mode, options, context, named, images)
        return _run(ctx, text, mode, options, context, named, images)
    finally:
        ctx.close_started()


def _run(
    ctx: RunContext,
    text: str,
    mode: Mode,
    options: RunOptions,
    context: str | None,
    named: Named,
    images: tuple[Image, ...] = (),
) -> list[Outcome]:
    mentions, task = parse_mentions(text)
    specs = [ctx.config.agent(mention.agent) for mention in mentions]  # fail before starting anything
    ctx.check_sandbox(options, specs)  # a required sandbox that is not to be had: refused before all
    proposer = Proposer.of(ctx.workdir, options)  # --pr that could not be proposed: refused before all
    made = ctx.worktrees(mentions, options, named.run) if options.worktree else None
    if made is not None:
        specs = [ctx.placed(spec, made, worktree) for spec, worktree in zip(specs, made.worktrees, strict=True)]
    task = with_context(task, context)
    earlier = _priors(options.resume)
    started: list[tuple[Conversation | CrewError, bool]] = []
    record: Record | None = None
    status: Ended = "cancelled"
    try:
        for mention, spec in zip(mentions, specs, strict=True):  # every CLI starts first, to boot meanwhile
            started.append(
                ctx.conversation(mention, mode, options, spec, prior=earlier.get(mention.agent), images=images)
            )
        agents = [m.agent for m in mentions]
        models = {m.agent: m.model or spec.model for m, spec in zip(mentions, specs, strict=True)}
        record = ctx.record(
            named.command,
            mode,
            agents,
            task,
            resume=options.resume,
            run=made.run_id if made is not None else named.run,
            models=models,
            workdir=made.top if made is not None else None,
            parent=named.parent,
        )
        ctx.check_sandbox(options, specs, record)  # `auto` with no mechanism here: said once, in the record
        work = _work(task, mode, options, record, ctx.keep(record), images)
        outcomes = _run_started(ctx, work, mentions, specs, started, earlier, made)
        if proposer is not None:
            outcomes = [proposer.deliver(work, outcome) for outcome in outcomes]
        status = "done" if all(o.error is None for o in outcomes) else "failed"
        return outcomes
    except BaseException as exc:
        if record is not None:
            status = record.fail(exc)
            if made is not None:  # stopped (Ctrl-C, an error): where the agents' work stays
                from crewbridge.record.events import Notice

                record.emit(Notice(agent=mentions[0].agent, text=made.left(), about="warning"))
        raise
    finally:
        for conversation, _ in started:
            if not isinstance(conversation, CrewError):
                conversation.close()
        if record is not None:
            record.end(status)


def _work(
    task: str,
    mode: Mode,
    options: RunOptions,
    record: Record,
    channels: Sequence[Channel],
    images: tuple[Image, ...] = (),
) -> Work:
    from crewbridge.base.usage import Budget  # for start-up speed: once the CLIs have started

    return Work(task, mode, options, Budget(options.max_cost, options.max_tokens), record, channels, images)


def _priors(resume: str | None) -> dict[str, Prior]:
    """The conversations of run `resume` by agent (none without one)."""
    if not resume:
        return {}
    from crewbridge.work.sessions import priors

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
    from crewbridge.work.sessions import Resumed

    if made is not None:
        made.announce(work.record)
    ctx.registry.names()  # built here, once: an error in the tools' configuration ends the run
    resumed = Resumed(work.options.resume, earlier, [held for _, held in started]) if work.options.resume else None
    loops: list[AgentLoop] = []

    def one(index: int) -> Outcome:
        mention = mentions[index]
        prior = resumed.of(index, mention.agent, work.record) if resumed else (None, True)
        return run_agent(ctx, work, mention, specs[index], started[index][0], prior, loops)

    outcomes = [one(0)] if len(mentions) == 1 else _at_once(one, len(mentions), loops)
    if made is not None:
        outcomes = [
            replace(outcome, worktree=worktree, changes=made.changed(worktree, work.record))
            for outcome, worktree in zip(outcomes, made.worktrees, strict=True)
        ]
    run = work.record.run if work.record.kept else None
    return [replace(outcome, run=run) for outcome in outcomes]


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
