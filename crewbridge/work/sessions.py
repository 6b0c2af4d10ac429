"""Continuing an earlier run (`--continue`, `--resume RUN_ID`): which run, and what each of its agents'
conversations was, read back from crew's own transcripts.

A run that continued another names it in its `start` event (`resumed_from`), so an agent's history is
the chain of runs, oldest first: every message crew sent it (`turn`) and every reply as the
conversation kept it (`reply`: cut at its last tool block; `answer`: whole). With it come the CLI's
session id (the last `session` event) and, for CLIs that report a session's usage as running totals,
the totals last reported (`session.reported`). The conversation continues by the CLI's own session
when the CLI still has it, else by replaying this history (crewbridge.conversations).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from crewbridge.base.decoded import Usage
from crewbridge.base.usage import Tally
from crewbridge.errors import UsageError
from crewbridge.record import events as ev
from crewbridge.record.index import Runs
from crewbridge.record.stream import Record
from crewbridge.record.transcript import find_run, read_run

MAX_CHAIN = 100  # runs followed back through `resumed_from`


@dataclass
class Prior:
    """One agent's conversation in an earlier run (and the runs that one continued)."""

    run_id: str  # the run being continued
    agent: str
    mode: str = "query"  # the mode of its last run: the catalogue the CLI's history holds
    session_id: str | None = None
    history: list[tuple[str, str]] = field(default_factory=list)  # (role, text): "user" | "assistant"
    reported: Usage | None = None  # the session's usage totals as the CLI last reported them


def run_to_resume(continue_last: bool, resume: str | None, cwd: Path | None = None) -> str | None:
    """The run id `--continue` (the most recent run in `cwd`) or `--resume ID` names, or None."""
    if continue_last and resume:
        raise UsageError("--continue and --resume were both given; choose one (--continue: the last run here)")
    if resume:
        return find_run(resume).stem
    if not continue_last:
        return None
    here = str((cwd or Path.cwd()).resolve())
    row = Runs().latest(here, ("query", "execute", "chat"))
    if row is not None:
        return row.run_id
    raise UsageError(f"no earlier run in {here} to continue; `crew log` lists runs, `--resume ID` takes any of them")


def priors(run_id: str) -> dict[str, Prior]:
    """Each agent's conversation as of run `run_id` (its chain of runs included), by agent."""
    runs: list[list[ev.AnyEvent]] = []
    seen: set[str] = set()
    current: str | None = run_id
    while current and current not in seen and len(runs) < MAX_CHAIN:
        seen.add(current)
        events = read_run(current)
        runs.insert(0, events)
        current = events[0].resumed_from if events and isinstance(events[0], ev.Start) else None
    found: dict[str, Prior] = {}
    for events in runs:
        start = events[0] if events and isinstance(events[0], ev.Start) else None
        mode = (start.mode or start.command or "query") if start else "query"
        for event in events:
            if event.agent is None or not isinstance(event, (ev.Turn, ev.Reply, ev.Answer, ev.Session)):
                continue
            prior = found.setdefault(event.agent, Prior(run_id, event.agent))
            prior.mode = mode
            _take(prior, event)
    for prior in found.values():  # a message the run ended before any reply to is not part of it
        while prior.history and prior.history[-1][0] == "user":
            prior.history.pop()
    return {agent: prior for agent, prior in found.items() if prior.history}


def _take(prior: Prior, event: ev.Turn | ev.Reply | ev.Answer | ev.Session) -> None:
    if isinstance(event, ev.Turn):
        prior.history.append(("user", event.prompt))
    elif isinstance(event, (ev.Reply, ev.Answer)):
        prior.history.append(("assistant", event.text))
    else:
        if event.session:
            prior.session_id = event.session
        if event.reported:
            totals = Tally.of(event.reported)
            prior.reported = Usage(totals.input_tokens, totals.output_tokens, totals.cost_usd, totals.cached_tokens)


@dataclass
class Resumed:
    """A run continuing run `run_id`: its agents' earlier conversations, and whether each mentioned
    agent's CLI holds its own (in mention order)."""

    run_id: str
    priors: dict[str, Prior]
    held: list[bool]

    def of(self, index: int, agent: str, record: Record) -> tuple[Prior | None, bool]:
        """The mentioned agent's earlier conversation and whether its CLI holds it, in the run's
        `record` (with a text to show when it starts afresh or is replayed)."""
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
        session = prior.session_id if prior else None
        record.emit(ev.Resume(agent=agent, of=self.run_id, how=how, session=session, text=text))
        return prior, self.held[index]
