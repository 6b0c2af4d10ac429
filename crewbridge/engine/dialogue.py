"""One agent's conversation across messages (`crew chat`, Bridge.chat): its CLI starts when the chat
opens and stays open until it is closed; the first message carries the tool catalogue (or continues
a resumed conversation), later ones go as they are, and the model keeps the context."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from crewbridge.base.mentions import parse_agent
from crewbridge.base.modes import Mode
from crewbridge.base.options import RunOptions
from crewbridge.engine.context import RunContext, Work, checked
from crewbridge.errors import CrewError, UsageError

if TYPE_CHECKING:
    from crewbridge.conversations import Conversation
    from crewbridge.engine.loop import AgentLoop, RunResult
    from crewbridge.record.events import Ended
    from crewbridge.work.sessions import Prior


class Chat:
    """One agent's conversation across messages: `ask(text)` for each, `close()` at the end."""

    def __init__(self, loop: AgentLoop, prior: Prior | None = None, held: bool = True) -> None:
        self.loop = loop
        self.prior, self.held = prior, held  # the earlier conversation it continues, if any
        self.started = False  # a reply came back: the model has the catalogue

    @property
    def agent(self) -> str:
        return self.loop.agent

    def ask(self, text: str) -> RunResult:
        """Send a message; the answer once the model is done with its tools."""
        try:
            result = self.loop.converse(text if self.started else self.loop.opening(text, self.prior, self.held))
        finally:
            self.loop.check_git()  # what this message's run left, before the person goes back to git
        self.started = True
        return result

    def failed(self, error: CrewError) -> None:
        """Record that `error` ended the last message's reply (the chat goes on)."""
        from crewbridge.record.events import Error

        self.loop.record.emit(Error(agent=self.agent, message=str(error), exit_code=error.exit_code))

    def cancel(self) -> None:
        """Stop the reply being written (after a Ctrl-C), and any approval question of its calls;
        the conversation goes on."""
        self.loop.policy.withdraw()
        self.loop.conv.stop()

    def close(self, status: Ended = "done") -> None:
        """End the conversation and its record (`status`: done, cancelled)."""
        try:
            self.loop.close()
        finally:
            self.loop.record.end(status)


def open_chat(
    ctx: RunContext, agent: str, mode: Mode = "query", options: RunOptions | None = None, **values: Any
) -> Chat:
    """A chat with one agent ("@claude", "@claude:haiku" or "claude"), its CLI started now; the
    options of a run (a UsageError for a worktree or a review); with `resume`, the conversation goes
    on from that run's with the agent."""
    from crewbridge.base.usage import Budget
    from crewbridge.work.sessions import Resumed, priors

    options = checked(mode, options, values)
    ctx = ctx.traced()
    if options.worktree or options.review:
        raise UsageError("a chat takes no worktree or review; crew execute --worktree or --review runs a task so")
    mention = parse_agent(agent)
    spec = ctx.config.agent(mention.agent)
    ctx.check_sandbox(options, [spec])  # before anything starts
    earlier = priors(options.resume) if options.resume else {}
    models = {mention.agent: mention.model or spec.model}
    record = ctx.record("chat", mode, [mention.agent], "", resume=options.resume, models=models)
    conversation: Conversation | CrewError | None = None
    try:
        ctx.check_sandbox(options, [spec], record)
        conversation, held = ctx.conversation(mention, mode, options, prior=earlier.get(mention.agent))
        if isinstance(conversation, CrewError):
            raise conversation
        channels = ctx.keep(record)
        prior = None
        if options.resume:
            prior, held = Resumed(options.resume, earlier, [held]).of(0, mention.agent, record)
        work = Work("", mode, options, Budget(options.max_cost, options.max_tokens), record, channels)
        return Chat(ctx.loop(mention, work, conversation=conversation), prior, held)
    except BaseException as exc:
        if conversation is not None and not isinstance(conversation, CrewError):
            conversation.close()
        record.end(record.fail(exc))
        raise
