"""A run's change as a pull request: what its title and body say (the task, a summary of the change,
its checks and its review's verdict, tokens and cost, from the run's record), and the git crew runs
to deliver it (the repository's remote as configured, the branch it goes into, the push). The forge's
side is crewbridge.system.forge; `crew execute --worktree --pr` (crewbridge.engine.pulls) and `crew
batch --pr` (crewbridge.batch.workflow) put them together."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crewbridge.base.mentions import parse_mentions
from crewbridge.errors import ForgeError, UsageError
from crewbridge.system.childenv import FORGE
from crewbridge.system.git import Checkout, GitError, run_git

TITLE = 120  # characters of a title taken from the task
ANSWER = 3000  # characters of the agent's answer the body quotes
FILES = 50  # changed files the body names
OUTPUT = 1500  # characters of a failing check's output the body quotes


@dataclass(frozen=True)
class Told:
    """What a pull request's body says of a run."""

    task: str  # as given, its mention first
    answer: str | None = None  # the agent's (its summary of the change)
    changes: Sequence[Mapping[str, Any]] = ()  # each file (the first FILES at least): path, status, added, removed
    counts: Mapping[str, int] | None = None  # files, added, removed (default: counted from `changes`)
    checks: Sequence[Mapping[str, Any]] = ()  # each check run, as --json has it (command, round, passed, …)
    review: Mapping[str, Any] | None = None  # the review's verdict, as --json has it
    usage: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # each agent's tokens and cost
    run: str | None = None  # the run it comes from
    batch: str | None = None  # … and the batch that run is part of
    intro: str | None = None  # --pr-body's text, in place of the task


def words(task: str) -> str:
    """The task without its mentions."""
    return parse_mentions(task)[1].strip() if task.lstrip().startswith("@") else task.strip()


def title_of(task: str, given: str | None = None) -> str:
    """The pull request's title: `given`, else the task's first line (cut at TITLE characters)."""
    if given:
        return given
    first = next((line.strip() for line in words(task).splitlines() if line.strip()), "crew's change")
    return first if len(first) <= TITLE else first[: TITLE - 1] + "…"


def body(told: Told) -> str:
    """The pull request's body, in Markdown."""
    parts = [told.intro.strip() if told.intro else words(told.task)]
    if told.answer:
        answer = told.answer.strip()
        answer = answer if len(answer) <= ANSWER else answer[:ANSWER] + "…"
        parts.append("### What the agent did\n\n" + "\n".join(f"> {line}" for line in answer.splitlines()))
    if told.changes:
        counts = told.counts or _counted(told.changes)
        lines = [_file(change) for change in told.changes[:FILES]]
        more = f"\n- … and {counts['files'] - len(lines)} more" if counts["files"] > len(lines) else ""
        files = f"{counts['files']} file{'' if counts['files'] == 1 else 's'} changed"
        parts.append(f"### Changes\n\n{files}, +{counts['added']} -{counts['removed']}\n\n" + "\n".join(lines) + more)
    if told.checks:
        parts.append("### Checks\n\n" + _checks(told.checks))
    if told.review:
        parts.append("### Review\n\n" + _review(told.review))
    if told.usage:
        parts.append("### Usage\n\n" + _usage(told.usage))
    run = f", run `{told.run}`" if told.run else ""
    parts.append(f"---\n_Proposed by crew{run}{f' of batch `{told.batch}`' if told.batch else ''}._")
    return "\n\n".join(parts) + "\n"


def _file(change: Mapping[str, Any]) -> str:
    counts = "binary" if change.get("added") is None else f"+{change['added']} -{change['removed']}"
    return f"- {change.get('status', 'modified')} `{change.get('path')}` ({counts})"


def _counted(changes: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    added = sum(change.get("added") or 0 for change in changes)
    return {"files": len(changes), "added": added, "removed": sum(change.get("removed") or 0 for change in changes)}


def _checks(checks: Sequence[Mapping[str, Any]]) -> str:
    """Each command's last run (and how many rounds it took); a failure's output's end."""
    last: dict[str, Mapping[str, Any]] = {}
    for check in checks:
        last[str(check["command"])] = check
    lines = []
    for command, check in last.items():
        rounds = f", round {check['round']}" if check.get("round", 1) > 1 else ""
        if check.get("passed"):
            lines.append(f"- ✅ `{command}` passed{rounds}")
        else:
            lines.append(f"- ❌ `{command}` failed, exit status {check.get('exit_code')}{rounds}")
            output = str(check.get("output") or "")[-OUTPUT:]
            if output.strip():
                fence = "````" if "```" in output else "```"
                lines.append(f"\n{fence}\n{output.rstrip()}\n{fence}\n")
    return "\n".join(lines)


def _review(review: Mapping[str, Any]) -> str:
    rounds = review.get("rounds", 1)
    verdict = "approved" if review.get("verdict") == "approve" else "asked for changes"
    said = f"@{review.get('reviewer')} {verdict} after {rounds} round{'' if rounds == 1 else 's'}"
    findings = review.get("findings") or []
    listed = "".join(f"\n- [{f.get('severity')}] {f.get('path') or ''} {f.get('message')}".rstrip() for f in findings)
    return said + (f"; findings left:{listed}" if findings else ".")


def _usage(usage: Mapping[str, Mapping[str, Any]]) -> str:
    lines = []
    for agent, used in usage.items():
        tokens = (used.get("input_tokens") or 0) + (used.get("output_tokens") or 0)
        cost = used.get("cost_usd")
        lines.append(f"- @{agent}: {tokens:,} tokens" + (f", ${cost:.4f}" if cost is not None else ""))
    return "\n".join(lines)


def remote_url(checkout: Checkout, name: str = "origin") -> str:
    """Remote `name`'s URL as configured (before `url.<base>.insteadOf` rewrites it: it names the
    repository on the forge); a UsageError when the repository has no such remote."""
    found = checkout.git(["config", "--get", f"remote.{name}.url"], check=False)
    url = found.stdout.decode("utf-8", "replace").strip()
    if found.returncode != 0 or not url:
        raise UsageError(
            f"the repository at {checkout.top} has no remote '{name}' to push to; add one (git remote add {name} "
            "URL) or go without --pr"
        )
    return url


def base_branch(checkout: Checkout, remote: str) -> str:
    """The branch a pull request from `checkout` goes into on `remote` (a name or a URL): the
    branch HEAD's branch tracks there, else the remote's default branch."""
    tracked = checkout.git(["rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}"], check=False)
    upstream = tracked.stdout.decode("utf-8", "replace").strip()
    if tracked.returncode == 0 and upstream.startswith(f"{remote}/"):
        return upstream.removeprefix(f"{remote}/")
    listed = reach(["ls-remote", "--symref", "--", remote, "HEAD"], checkout.top).stdout.decode("utf-8", "replace")
    for line in listed.splitlines():
        if line.startswith("ref: refs/heads/") and line.endswith("\tHEAD"):
            return line.removeprefix("ref: refs/heads/").removesuffix("\tHEAD")
    raise GitError(f"{remote} names no default branch (its HEAD); crew cannot tell where the pull request goes")


def push(checkout: Checkout, remote: str, commit: str, branch: str) -> None:
    """`commit` pushed to `remote` (a name or a URL) as `branch`, replacing it there: crew's own
    push, with the user's way to the forge (crewbridge.system.childenv.FORGE) and no hook."""
    try:
        reach(["push", "--quiet", "--", remote, f"+{commit}:refs/heads/{branch}"], checkout.top)
    except GitError as exc:  # the forge (or the way there) refused: as a forge's refusal, exit 3
        raise ForgeError(f"cannot push {branch} to {remote}: {exc}") from None


def reach(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """A git command that reaches a forge (a clone, a push, an ls-remote), with the user's way there
    and no hook."""
    return run_git(["-c", "core.hooksPath=/dev/null", *args], cwd, passed=FORGE)
