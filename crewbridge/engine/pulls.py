"""`crew execute --worktree --pr`: once an agent's part is over (its check passed, its review
approved), its change is committed on its worktree's branch (crew/RUN_ID/AGENT), the branch pushed to
the checkout's remote (origin) and proposed as a pull request (GitLab: a merge request), or the one
open for that branch updated (crewbridge.system.forge); a `pull` event of the run's record says where.
What it needs is checked before any agent starts: a remote whose forge crew can tell, and a token.
A forge that refuses is the agent's error (exit 3), its change left committed on its branch."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from crewbridge.base.options import RunOptions
from crewbridge.engine.fallback import record_failure
from crewbridge.engine.outputs import check_record
from crewbridge.errors import CrewError
from crewbridge.record.events import Notice, Pull
from crewbridge.system.forge import Client, Forge, Proposal, Remote, forge_of, propose, remote_of
from crewbridge.system.git import Checkout
from crewbridge.work.pulls import Told, base_branch, body, push, remote_url, title_of

if TYPE_CHECKING:
    from crewbridge.api import Outcome
    from crewbridge.engine.context import Work

REMOTE = "origin"  # the remote a branch is pushed to, and whose URL names the repository on its forge


@dataclass(frozen=True)
class Proposer:
    """Where a run's changes are proposed: the checkout, its remote, the forge."""

    checkout: Checkout
    remote: Remote
    forge: Forge
    options: RunOptions

    @classmethod
    def of(cls, folder: Path, options: RunOptions) -> Proposer | None:
        """The proposer of a run in `folder` with `options` (None without --pr); a UsageError when
        it could not propose (no remote, a forge crew cannot tell, no token)."""
        if not options.pr:
            return None
        checkout = Checkout.of(folder, "--pr")
        remote = remote_of(remote_url(checkout, REMOTE))
        return cls(checkout, remote, forge_of(remote), options)

    def deliver(self, work: Work, outcome: Outcome) -> Outcome:
        """`outcome` with its pull request; unchanged without a change to propose (or after an
        error); with the forge's (or git's) error when it could not be proposed."""
        worktree = outcome.worktree
        if outcome.error is not None or worktree is None:
            return outcome
        if not outcome.changes:
            said = (
                f"@{outcome.agent} changed nothing: no pull request"
                if outcome.changes == []
                else (f"@{outcome.agent}'s changes could not be told: no pull request")
            )
            work.record.emit(Notice(agent=outcome.agent, text=said, about="worktree"))
            return outcome
        try:
            tree = worktree.checkout.snapshot()
            message = f"{title_of(work.task)}\n\ncrew run {worktree.run_id}\n"
            commit = self.checkout.commit(tree, worktree.base, message, self.checkout.stamp(time.time()))
            self.checkout.git(["update-ref", f"refs/heads/{worktree.branch}", commit])
            worktree.checkout.git(["reset", "--quiet"])  # its index follows its branch: nothing shows uncommitted
            push(self.checkout, REMOTE, commit, worktree.branch)
            proposal = Proposal(
                worktree.branch,
                base_branch(self.checkout, REMOTE),
                title_of(work.task, self.options.pr_title),
                body(self.told(work, outcome)),
                self.options.draft,
                self.options.labels,
            )
            pull = propose(Client(self.forge), self.remote, proposal)
        except CrewError as exc:
            record_failure(work, outcome.agent, exc)
            return replace(outcome, error=exc)
        event = Pull(
            agent=outcome.agent,
            url=pull.url,
            number=pull.number,
            branch=worktree.branch,
            forge=self.forge.kind,
            opened=pull.opened,
            draft=pull.draft,
        )
        work.record.emit(event)
        return replace(outcome, pull=event)

    def told(self, work: Work, outcome: Outcome) -> Told:
        """What the body says of the agent's part: from the outcome and the run's record."""
        return Told(
            task=work.task,
            answer=outcome.result.answer if outcome.result is not None else None,
            changes=[change.to_dict() for change in outcome.changes or []],
            checks=[check_record(check) for check in outcome.checks],
            review=outcome.review.to_dict() if outcome.review is not None else None,
            usage=work.record.usage(),
            run=work.record.run,
            intro=self.options.pr_body,
        )
