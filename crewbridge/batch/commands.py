"""`crew batch`'s commands (crewbridge.cli registers them): submit, worker, resume, status, diff,
list, cancel."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from crewbridge.base import flags

if TYPE_CHECKING:
    from crewbridge.config import Config
from crewbridge.terminal.options import (
    click_option,
    config_option,
    table_options,
)


class _BatchGroup(click.Group):
    """`crew batch TASK REPO…` is `crew batch submit TASK REPO…`; `crew batch worker|status|…` the others."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["submit", *args]
        return super().parse_args(ctx, args)


BATCH_DB = click_option(flags.BATCH_DB)


BATCH_JSON = click_option(flags.BATCH_JSON)


@click.group("batch", cls=_BatchGroup)
@click.pass_context
def batch_group(ctx: click.Context) -> None:
    """One task across many repositories, durable: crew batch "@claude bump the linter" REPO… (each on
    branch crew/batch-ID/AGENT; docs/batch.md). Exit 7 when a repository is not done or unchanged."""
    from crewbridge.base.extras import require

    require("batch", f"crew batch {ctx.invoked_subcommand}".strip())


@batch_group.command("submit")
@click.argument("task")
@click.argument("repos", nargs=-1)
@table_options(flags.BATCH)
def batch_submit_command(
    task: str, repos: tuple[str, ...], repos_file: Path | None, detach: bool, as_json: bool, **given: Any
) -> None:
    """Run TASK ("@agent task") in each REPO (a git repository's folder, or a git URL), each in a
    worktree of its own; the repositories' progress, then a summary."""
    from crewbridge.batch import batches, report
    from crewbridge.batch.database import take_database_url
    from crewbridge.batch.spec import read_repos, repos_file_text
    from crewbridge.batch.store import Store

    config: Config = given.pop("config")
    spec = batches.spec_of(task, given, config)  # an unknown agent is named before anything starts
    found = read_repos(repos, repos_file_text(repos_file), Path.cwd())
    batches.proposable(spec, found, token=not detach)  # workers elsewhere bring their own tokens
    url = take_database_url(given["db"])
    store = Store.open(url) if detach else batches.open_working(url, config, [spec.batch], [spec])
    try:
        spec = batches.submit(store, spec, found)
        rows = store.rows(spec.batch) if detach else _batch_wait(store, spec.batch)
    finally:
        store.close()
    if detach:
        click.echo(json.dumps(report.batch_record(spec.batch, rows), ensure_ascii=False) if as_json else spec.batch)
        click.echo(f"crew: batch {spec.batch}: {len(found)} repositories queued for `crew batch worker`", err=True)
        return
    _batch_end(spec.batch, rows, as_json)


@batch_group.command("worker")
@table_options(flags.BATCH_WORKER)
def batch_worker_command(until_idle: bool, db: str | None, config: Config) -> None:
    """Work on the batches of the database (--db): take their queued repositories, and those of
    workers that died, until stopped (or idle, with --until-idle)."""
    from crewbridge.batch import batches
    from crewbridge.batch.database import take_database_url

    store = batches.open_working(take_database_url(db), config, None)
    click.echo(f"crew: worker {store.executor} on {store.name}", err=True)
    try:
        batches.work(store, until_idle, lambda said: click.echo(f"crew: {said}", err=True))
    finally:
        store.close()


@batch_group.command("resume")
@click.argument("batch_id")
@click.option("--failed", "failed_only", is_flag=True, help="Run only the failed repositories again.")
@BATCH_DB
@BATCH_JSON
@config_option
def batch_resume_command(batch_id: str, failed_only: bool, db: str | None, as_json: bool, config: Config) -> None:
    """Finish batch BATCH_ID here: every repository not done or unchanged (those of dead workers and
    those held for a canary included) runs again; finished ones are left as they are."""
    from crewbridge.batch import batches
    from crewbridge.batch.database import take_database_url

    store = batches.open_working(take_database_url(db), config, [batch_id])
    try:
        batches.resume(store, batch_id, failed_only=failed_only)
        rows = _batch_wait(store, batch_id)
    finally:
        store.close()
    _batch_end(batch_id, rows, as_json)


@batch_group.command("status")
@click.argument("batch_id", required=False)
@BATCH_DB
@BATCH_JSON
def batch_status_command(batch_id: str | None, db: str | None, as_json: bool) -> None:
    """A batch's repositories now (default: the batch submitted last), with each pull request's state
    and checks asked of its forge. Exit 0 while they run, 7 once one failed or was cancelled."""
    from crewbridge.batch import batches

    with _batch_store(db) as store:
        batch_id = batch_id or batches.latest(store)
        rows = batches.existing(store, batch_id)
        store.interrupted(rows)
        states = batches.pull_states(rows, store.side.pace())  # each pull request now, from its forge
    _batch_end(batch_id, rows, as_json, states)


@batch_group.command("diff")
@click.argument("batch_id")
@click.argument("repo", required=False)
@BATCH_DB
def batch_diff_command(batch_id: str, repo: str | None, db: str | None) -> None:
    """What the agent changed in each repository of BATCH_ID done (or in REPO, as given), as a patch."""
    from crewbridge.batch import batches
    from crewbridge.config import state_dir

    with _batch_store(db) as store:
        rows = batches.existing(store, batch_id)
    for chunk in batches.diffs(rows, repo, state_dir()):
        sys.stdout.buffer.write(chunk)
    sys.stdout.flush()


@batch_group.command("list")
@BATCH_DB
def batch_list_command(db: str | None) -> None:
    """One line per batch: id, state, its repositories' states, task."""
    from crewbridge.batch import batches, report

    with _batch_store(db) as store:
        found = batches.batches(store)
        for _, rows in found:
            store.interrupted(rows)
    for batch, rows in found:
        click.echo(f"{batch}  {report.batch_status(rows)}  {report.totals(rows)}  {rows[0].spec.task.splitlines()[0]}")


@batch_group.command("cancel")
@click.argument("batch_id")
@BATCH_DB
def batch_cancel_command(batch_id: str, db: str | None) -> None:
    """Cancel batch BATCH_ID: its queued and held repositories never start, its running agents are ended."""
    from crewbridge.batch import batches

    with _batch_store(db) as store:
        cancelled = batches.cancel(store, batch_id)
    click.echo(f"cancelled {len(cancelled)} repositor{'y' if len(cancelled) == 1 else 'ies'} of batch {batch_id}")


@contextlib.contextmanager
def _batch_store(db: str | None) -> Iterator[Any]:
    """The batch database (--db) opened by a process that works on no batch, closed after the block."""
    from crewbridge.batch.database import take_database_url
    from crewbridge.batch.store import Store

    store = Store.open(take_database_url(db))
    try:
        yield store
    finally:
        store.close()


def _batch_wait(store: Any, batch_id: str) -> Any:
    """The batch's progress on stderr (redrawn on a terminal, a line per change when piped) until it
    ends; on Ctrl-C, how it goes on."""
    from crewbridge.batch import batches
    from crewbridge.batch.report import Progress

    try:
        return batches.wait(store, batch_id, Progress(sys.stderr, sys.stderr.isatty()).update)
    except KeyboardInterrupt:
        click.echo(f"crew: batch {batch_id} interrupted; `crew batch resume {batch_id}` goes on", err=True)
        raise


def _batch_end(batch_id: str, rows: Any, as_json: bool, states: Any = None) -> None:
    """The summary (or --json; with the pull requests' `states` now), and exit 7 when a repository
    failed, was cancelled or skipped."""
    from crewbridge.batch import report

    if as_json:
        click.echo(json.dumps(report.batch_record(batch_id, rows, states), ensure_ascii=False))
    else:
        for text in report.summary(batch_id, rows, states):
            click.echo(text)
    sys.exit(report.exit_code(rows))
