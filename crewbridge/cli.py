"""The `crew` command. Thin: parse arguments, call the engine, print. For start-up speed, each
command imports the engine it needs where it runs: `crew --help` loads click alone."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import io
import json
import os
import shlex
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from crewbridge import VERSION_MESSAGE, __version__, flags, jsonio
from crewbridge.errors import CrewError, UsageError
from crewbridge.modes import Mode

if TYPE_CHECKING:
    from crewbridge.acp.early import Greeting as AcpGreeting
    from crewbridge.config import Config
    from crewbridge.early import Early
    from crewbridge.mcp.early import Greeting
    from crewbridge.options import RunOptions


def click_option(flag: flags.Flag) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """click's option for one of crewbridge.flags' (the table the early readings read too)."""
    kinds: dict[str, dict[str, Any]] = {
        "flag": {"is_flag": True},
        "int": {"type": click.IntRange(min=int(flag.low), min_open=flag.above)},
        "float": {"type": click.FloatRange(min=flag.low, min_open=flag.above)},
        "choice": {"type": click.Choice(list(flag.choices))},
        "path": {"type": click.Path(dir_okay=False, path_type=Path)},
        "text": {},
    }
    kind = kinds[flag.kind]
    if flag.default is not None:
        kind.update(default=flag.default, show_default=flag.show_default)
    return click.option(*flag.names, flag.dest, help=flag.help, metavar=flag.metavar, multiple=flag.multiple, **kind)


def config_option(func: Callable[..., Any]) -> Callable[..., Any]:
    @click_option(flags.CONFIG)
    @functools.wraps(func)
    def wrapper(*args: Any, config_path: Path | None, **kwargs: Any) -> Any:
        from crewbridge.config import load_config

        early = _early()
        if early is not None and early.reading.config_path == config_path:  # it read this file
            return func(*args, config=early.bridge.config, **kwargs)
        return func(*args, config=load_config(config_path, Path.cwd()), **kwargs)

    return wrapper


def _early() -> Early | None:
    """crewbridge.early's reading of this command, its CLIs started (crew query/execute), if any:
    main() gives it to click as the context's obj (not imported here: other commands never load it)."""
    obj = click.get_current_context().obj
    if obj is None:
        return None
    from crewbridge.early import Early  # loaded already when there is one

    return obj if isinstance(obj, Early) else None


def sandbox_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """--sandbox for a command that takes no RunOptions (mcp): it replaces crew.yaml's top-level
    `sandbox:` (put after config_option)."""

    @click_option(flags.SANDBOX)
    @functools.wraps(func)
    def wrapper(*args: Any, sandbox: str | None, config: Config, **kwargs: Any) -> Any:
        if sandbox is not None:
            config = dataclasses.replace(config, sandbox=sandbox)
        return func(*args, config=config, **kwargs)

    return wrapper


def _apply(func: Callable[..., Any], decorators: list[Callable[..., Any]]) -> Callable[..., Any]:
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def options_of(table: tuple[flags.Flag, ...]) -> list[Callable[[Callable[..., Any]], Callable[..., Any]]]:
    """click's options for `table`, in its order; --config loads the file (config_option)."""
    return [config_option if flag.dest == "config_path" else click_option(flag) for flag in table]


SANDBOX = click_option(flags.SANDBOX)


def loop_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The options of every command that runs an agent loop (query, execute, chat): crewbridge.flags.LOOP."""
    return _apply(func, options_of(flags.LOOP))


NO_STDIN = click_option(flags.NO_STDIN)


def run_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The options of the commands that run a task (query, execute): crewbridge.flags.TASK, then LOOP."""
    return _apply(func, [click.argument("text", nargs=-1, required=True), *options_of(flags.TASK), loop_options])


def _options(table: tuple[flags.Flag, ...]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A command's options: those of `table`, in its order."""
    return lambda func: _apply(func, options_of(table))


def acp_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """crew acp's options: crewbridge.flags.ACP (--sandbox stays the sessions' own: each project's
    crew.yaml is read where its session works)."""
    own = tuple(flag for flag in flags.ACP if flag.dest != "config_path")
    return _apply(func, [*options_of(own), config_option])


def mcp_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """crew mcp's options: crewbridge.flags.MCP, its --sandbox read into the configuration."""
    own = tuple(flag for flag in flags.MCP if flag.dest != "sandbox")
    return _apply(func, [*options_of(own), sandbox_option])


def _run(
    mode: Mode,
    text: tuple[str, ...],
    config: Config,
    as_json: bool,
    as_jsonl: bool,
    verbose: bool,
    continue_last: bool,
    no_stdin: bool,
    **values: Any,
) -> None:
    from crewbridge.bridge import Bridge
    from crewbridge.mentions import parse_agent, parse_mentions
    from crewbridge.render import Renderer

    if as_json and as_jsonl:
        raise UsageError(
            "--json and --jsonl were both given; choose one (--json: one object at the end, "
            "--jsonl: the events as they happen)"
        )
    task = " ".join(text)
    agents = [m.agent for m in parse_mentions(task)[0]]
    options = _run_options(continue_last, values)
    if options.review:  # the reviewer's tool calls are labelled too
        agents.append(parse_agent(options.review).agent)
    agents = list(dict.fromkeys(agents))
    context = None if no_stdin else _piped(options.timeout)
    output = "json" if as_json else "jsonl" if as_jsonl else "text"
    early = _early()
    bridge = early.bridge if early is not None and early.bridge.config is config else Bridge(config)
    # The tools are built once the agents' CLIs have started (Bridge.run), while those boot.
    with Renderer(output=output, agents=agents, verbose=verbose, secrets=config.provider_env()) as renderer:
        outcomes = bridge.run(task, mode, options=options, context=context or None, on_progress=renderer.progress)
        renderer.finish(outcomes)
    failed = [o.error for o in outcomes if o.error is not None]
    if failed:
        sys.exit(failed[0].exit_code)


def _piped(timeout: float | None) -> str | None:
    """What a pipe or file on stdin holds (crewbridge.piped), waited for within `timeout`."""
    from crewbridge.piped import read_context

    return read_context(sys.stdin, functools.partial(click.echo, err=True), timeout)


def _run_options(continue_last: bool, values: dict[str, Any]) -> RunOptions:
    """The RunOptions loop_options gave (--continue resolved to the run it continues)."""
    from crewbridge.options import RunOptions
    from crewbridge.sessions import run_to_resume

    if values.get("rounds", 0) is None:  # not given: the default
        del values["rounds"]
    elif "rounds" in values and not values.get("review"):
        raise UsageError("--rounds counts review rounds; give --review AGENT too")
    values["resume"] = run_to_resume(continue_last, values.get("resume"))
    return RunOptions.pick(values)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="crew", message=VERSION_MESSAGE)
def cli() -> None:
    """Give CLI language models (claude, gemini, codex, any CLI) tools they don't have."""


@cli.command("query")
@run_options
def query_command(**options: Any) -> None:
    """Ask agents a question with read-only tools: crew query "@claude what does notes.txt say?" """
    _run("query", **options)


@cli.command("execute")
@run_options
def execute_command(**options: Any) -> None:
    """Let agents act, with every tool policy allows: crew execute "@claude fix the typo in a.py" """
    _run("execute", **options)


@cli.command("apply")
@click.argument("run_id")
@click.argument("agent")
def apply_command(run_id: str, agent: str) -> None:
    """Take AGENT's changes from its worktree of run RUN_ID (crew execute --worktree) into this
    checkout, as uncommitted changes; all or nothing (exit 1 when they conflict)."""
    from crewbridge.worktrees import apply

    for line in apply(Path.cwd(), run_id, agent).lines():
        click.echo(line)


@cli.group("worktrees", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per worktree and line.")
@click.pass_context
def worktrees_group(ctx: click.Context, as_json: bool) -> None:
    """List the agents' worktrees of this repository (crew execute --worktree): run, agent, what it
    changed, branch, folder. `crew worktrees clean` removes them."""
    if ctx.invoked_subcommand is not None:
        return
    from crewbridge.worktrees import listed, table

    found = listed(Path.cwd())
    if not found and not as_json:
        click.echo("no worktrees of crew in this repository; crew execute --worktree makes them")
    for line in table(found, as_json):
        click.echo(line)


@worktrees_group.command("clean")
@click.argument("run_id", required=False)
@click.option(
    "--force", is_flag=True, help="Also remove worktrees with uncommitted changes, and branches with commits."
)
def worktrees_clean_command(run_id: str | None, force: bool) -> None:
    """Remove the agents' worktrees (of RUN_ID, or all) and their branches. One with uncommitted
    changes is kept unless --force (exit 1 when one was kept)."""
    from crewbridge.worktrees import clean

    done = clean(Path.cwd(), run_id, force=force)
    if not done:
        click.echo("no worktrees of crew to remove" + (f" for run {run_id}" if run_id else ""))
    for cleaned in done:
        click.echo(cleaned.line(), err=not cleaned.removed)
    if any(not cleaned.removed for cleaned in done):
        sys.exit(1)


class _BatchGroup(click.Group):
    """`crew batch TASK REPO…` is `crew batch submit TASK REPO…`; `crew batch worker|status|…` the others."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["submit", *args]
        return super().parse_args(ctx, args)


BATCH_DB = click_option(flags.BATCH_DB)
BATCH_JSON = click_option(flags.BATCH_JSON)


@cli.group("batch", cls=_BatchGroup)
def batch_group() -> None:
    """One task across many repositories, durable: crew batch "@claude bump the linter" REPO… (each on
    branch crew/batch-ID/AGENT; docs/batch.md). Exit 7 when a repository is not done or unchanged."""


@batch_group.command("submit")
@click.argument("task")
@click.argument("repos", nargs=-1)
@_options(flags.BATCH)
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
@_options(flags.BATCH_WORKER)
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
    """A batch's repositories now (default: the batch submitted last). Exit 0 while they run, 7 once
    one failed or was cancelled."""
    from crewbridge.batch import batches

    with _batch_store(db) as store:
        batch_id = batch_id or batches.latest(store)
        rows = batches.existing(store, batch_id)
        store.interrupted(rows)
    _batch_end(batch_id, rows, as_json)


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


def _batch_end(batch_id: str, rows: Any, as_json: bool) -> None:
    """The summary (or --json), and exit 7 when a repository failed, was cancelled or skipped."""
    from crewbridge.batch import report

    if as_json:
        click.echo(json.dumps(report.batch_record(batch_id, rows), ensure_ascii=False))
    else:
        for text in report.summary(batch_id, rows):
            click.echo(text)
    sys.exit(report.exit_code(rows))


@cli.command("chat")
@click.argument("agent")
@click.option(
    "--mode",
    type=click.Choice(["query", "execute"]),
    default="query",
    show_default=True,
    help="query: read-only tools; execute: every tool policy allows.",
)
@loop_options
def chat_command(agent: str, mode: Mode, config: Config, verbose: bool, continue_last: bool, **values: Any) -> None:
    """Talk with one agent, tools at hand; it keeps the context: crew chat @claude (--continue: go
    on with the last run here)

    /exit or Ctrl-D leaves, Ctrl-C stops a reply. Line editing and history on a terminal; piped
    stdin is read as one message a line."""
    from crewbridge.bridge import Bridge
    from crewbridge.chat import run_chat

    run_chat(Bridge(config), agent, mode=mode, options=_run_options(continue_last, values), verbose=verbose)


@cli.command("prompt")
@click.argument("text", nargs=-1, required=True)
@click.option("--mode", type=click.Choice(["query", "execute"]), default="query", show_default=True)
@NO_STDIN
@config_option
def prompt_command(text: tuple[str, ...], mode: Mode, no_stdin: bool, config: Config) -> None:
    """Print the exact prompt that would be sent, catalogue and piped stdin included."""
    from crewbridge.bridge import Bridge
    from crewbridge.catalogue import tokens

    bridge = Bridge(config)
    click.echo(bridge.first_prompt(" ".join(text), mode, context=None if no_stdin else _piped(None)))
    section = bridge.skills_section(" ".join(text))
    if section:  # what the skills cost in every first message
        click.echo(f"crew: skills section: {len(section):,} characters (~{tokens(section):,} tokens)", err=True)


@cli.group("mcp", invoke_without_command=True)
@mcp_options
@click.pass_context
def mcp_group(
    ctx: click.Context,
    execute: bool,
    address: str | None,
    token_file: Path | None,
    allowed_hosts: tuple[str, ...],
    allow_remote: bool,
    policy_of: str | None,
    ask_depth: int,
    timeout: float,
    max_turns: int,
    config: Config,
) -> None:
    """Serve crew's tools, and `ask` to run agents, over MCP (stdio; --http for HTTP).
    Register it in a CLI with: crew mcp install claude|gemini|codex"""
    if ctx.invoked_subcommand is not None:
        return
    if address is None and (token_file or allowed_hosts or allow_remote):
        raise UsageError("--token-file, --allow-host and --allow-remote go with --http HOST:PORT")
    from crewbridge.mcp.early import Greeting
    from crewbridge.mcp.server import McpServer

    greeting = ctx.obj if isinstance(ctx.obj, Greeting) else None  # its initialize answered already
    server = McpServer(
        config,
        Path.cwd(),
        execute=execute,
        policy_of=policy_of,
        max_depth=ask_depth,
        timeout=timeout,
        max_turns=max_turns,
    )
    if server.sandbox_notice:
        click.echo(f"crew mcp: {server.sandbox_notice}", err=True)
    if address is None:
        from crewbridge.mcp.stdio import serve_stdio

        serve_stdio(server, greeting.link if greeting else None)
        return
    from crewbridge.mcp.http import serve_http
    from crewbridge.webserver import Listening

    say = functools.partial(click.echo, err=True)
    serve_http(server, Listening(address, token_file, allowed_hosts, allow_remote), say)


@mcp_group.command("install")
@click.argument("cli_name", metavar="CLI")
@click.option("--execute", is_flag=True, help="Register `crew mcp --execute`: the write and command tools too.")
def mcp_install_command(cli_name: str, execute: bool) -> None:
    """Register crew as an MCP server named `crew` in CLI's own configuration (user scope): a
    provider that can (claude, gemini, codex)."""
    from crewbridge.mcp.install import install

    done = install(cli_name, execute)
    click.echo(f"registered crew in {cli_name}: {shlex.join(done.add)}\nundo with: {shlex.join(done.remove)}")


@cli.command("ui")
@_options(flags.UI)
def ui_command(address: str, token_file: Path | None, allowed_hosts: tuple[str, ...], allow_remote: bool) -> None:
    """See every run in a browser, live: approvals, cancel, batches, usage. Prints a one-time sign-in
    link (a new one to the crew ui that serves, if one does)."""
    from crewbridge.ui.server import serve_ui
    from crewbridge.webserver import Listening

    listening = Listening(address, token_file, allowed_hosts, allow_remote)
    serve_ui(listening, functools.partial(click.echo, err=True), click.echo)


@cli.group("acp", invoke_without_command=True)
@acp_options
@click.pass_context
def acp_group(ctx: click.Context, timeout: float, max_turns: int, config: Config, sandbox: str | None) -> None:
    """Serve crew as an Agent Client Protocol agent on stdio, for editors (Zed, JetBrains, Neovim,
    acpx): every configured agent, crew's policy and sandbox. See docs/acp.md."""
    if ctx.invoked_subcommand is not None:
        return
    from crewbridge.acp.agent import serve
    from crewbridge.acp.early import Greeting
    from crewbridge.acp.session import Serving
    from crewbridge.sandbox import Sandboxing

    sandboxing = Sandboxing()
    sandboxing.mechanism(sandbox or config.sandbox)  # required where none works: refused before serving
    greeting = ctx.obj if isinstance(ctx.obj, Greeting) else None  # its initialize answered already
    path = config.files[-1].path if config.files and config.files[-1].kind == "config" else None
    serve(greeting, config_path=path, sandbox=sandbox, sandboxing=sandboxing, serving=Serving(timeout, max_turns))


@acp_group.command("check", context_settings={"ignore_unknown_options": True})
@click.option(
    "--timeout", type=click.FloatRange(min=1), default=120.0, show_default=True, help="Seconds each step may take."
)
@click.option(
    "--prompt", default="Say hello in one short sentence.", show_default=True, help="The prompt that is streamed."
)
@click.option(
    "--write-prompt",
    default="Create a file named acp-check.txt that says ok.",
    show_default=True,
    help="A prompt whose model is expected to ask for a permission (answered allow, then reject).",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def acp_check_command(timeout: float, prompt: str, write_prompt: str, command: tuple[str, ...]) -> None:
    """Check that the ACP agent COMMAND (`crew acp check -- gemini --acp`) does what the protocol
    says: a table of what held; exit 0 only when everything required held."""
    from crewbridge.acp.check import Checker

    checker = Checker(list(command), timeout=timeout, prompt=prompt, write_prompt=write_prompt)
    results = checker.run()
    click.echo(checker.table(results))
    if not checker.passed(results):
        sys.exit(1)


@cli.group("skills")
def skills_group() -> None:
    """List and show the skills (SKILL.md folders) crew offers to agents."""


@skills_group.command("list")
@config_option
def skills_list_command(config: Config) -> None:
    """One line per skill: name, where it was found, description; then any that are broken."""
    from crewbridge.context import found_skills

    found = found_skills(config, Path.cwd().resolve())
    if not found.skills and not found.problems:
        click.echo("no skills found; add a folder ./.crew/skills/NAME/ with a SKILL.md (see docs/skills.md)")
    width = max((len(name) for name in found.skills), default=0)
    for skill in found.skills.values():
        click.echo(f"{skill.name:<{width}}  {skill.source:<7}  {skill.description}")
    for hidden in found.shadowed:
        click.echo(f"crew: warning: skill '{hidden.name}' in {hidden.folder} is hidden by an earlier one", err=True)
    for problem in found.problems:
        click.echo(f"crew: warning: {problem}; the skill is not offered", err=True)


@skills_group.command("show")
@click.argument("name")
@config_option
def skills_show_command(name: str, config: Config) -> None:
    """A skill's file, description and instructions."""
    from crewbridge.context import found_skills
    from crewbridge.skills import body, unknown

    skills = found_skills(config, Path.cwd().resolve()).skills
    if name not in skills:
        raise UsageError(str(unknown(name, skills)))
    skill = skills[name]
    click.echo(f"{skill.file}  ({skill.source})\n{skill.description}\n\n{body(skill)}")


@cli.group("tools")
def tools_group() -> None:
    """List, inspect and call crew's tools."""


@tools_group.command("list")
@config_option
def tools_list_command(config: Config) -> None:
    """One line per tool: name, read-only or not, summary."""
    registry = config.registry()
    width = max((len(registry.qualified(t.name)) for t in registry), default=0)
    for spec in registry:
        kind = "read-only" if spec.read_only else "writes   "
        click.echo(f"{registry.qualified(spec.name):<{width}}  {kind}  {spec.summary}")


@tools_group.command("show")
@click.argument("name")
@config_option
def tools_show_command(name: str, config: Config) -> None:
    """A tool's description and input schema."""
    spec = config.registry().resolve(name)
    click.echo(
        json.dumps(
            {
                "name": spec.name,
                "read_only": spec.read_only,
                "description": spec.description,
                "input_schema": spec.input_schema,
                "output_schema": spec.output_schema,
            },
            indent=2,
        )
    )


@tools_group.command("call")
@click.argument("name")
@click.option("--input", "raw_input", default="{}", show_default=True, help="The tool's input as JSON.")
@config_option
def tools_call_command(name: str, raw_input: str, config: Config) -> None:
    """Run one tool here and print its result envelope (exit 1 when it fails)."""
    from crewbridge.registry import ToolContext

    try:
        data = jsonio.loads(raw_input)
    except jsonio.TooDeep as exc:
        raise UsageError(f"--input is {exc}") from None
    except ValueError as exc:
        raise UsageError(f'--input is not valid JSON ({exc}); pass an object, e.g. \'{{"path": "a.txt"}}\'') from None
    registry = config.registry()
    result = registry.call(name, data, ToolContext(Path.cwd().resolve(), registry=registry))
    click.echo(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    if not result.success:
        sys.exit(1)


@cli.command("parse")
@click.option(
    "--format",
    "fmt",
    required=True,
    help="Which CLI wrote the output on stdin: a provider's name (claude, gemini, codex, "
    "an installed plugin's), or text.",
)
@click.option("--prefix", default=None, help="Tool-name prefix (default: the configured one, crew).")
@config_option
def parse_command(fmt: str, prefix: str | None, config: Config) -> None:
    """Read raw CLI output on stdin; print one JSON line per tool-call attempt, validated."""
    from crewbridge.parse import parse_stream

    registry = config.registry()
    if prefix:
        registry.prefix = prefix
    warn = functools.partial(click.echo, err=True)
    if sys.stdin is None:  # started with its stdin closed
        raise UsageError("stdin is closed; pipe a CLI's output in, e.g. claude -p … | crew parse --format claude")
    lines = sys.stdin.buffer  # bytes: the JSON decoders make text only of the fields they read
    for record in parse_stream(lines, fmt, registry, registry.prefix, warn=lambda m: warn(f"crew: {m}")):
        click.echo(json.dumps(record))  # ASCII: an input may hold a lone surrogate (a "\ud800" escape)


@cli.group("log", invoke_without_command=True)
@click.option("--limit", type=click.IntRange(min=1), help="Runs listed at most (default 20; every one with --since).")
@click.option("--since", "since_text", help="Only runs started since a span back (7d, 12h, 30m, 2w) or a date.")
@click.option("--by", type=click.Choice(["agent"]), help="Sum the runs' tokens and cost per agent (a small table).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line, for scripts.")
@click.pass_context
def log_group(ctx: click.Context, limit: int | None, since_text: str | None, by: str | None, as_json: bool) -> None:
    """List recent runs (newest first) with their tokens and cost; `crew log show ID` prints one
    run's events; `crew log --since 7d --by agent` sums usage per agent."""
    if ctx.invoked_subcommand is None:
        from crewbridge.transcript import list_runs
        from crewbridge.usage import by_agent, since, table

        start = since(since_text) if since_text else None
        runs = list_runs(limit or (None if start or by else 20), since=start)
        if by:
            rows = by_agent(run.usage for run in runs)
            lines = [json.dumps(row.to_dict()) for row in rows] if as_json else table(rows)
        else:
            lines = [json.dumps(run.to_dict(), ensure_ascii=False) if as_json else run.line() for run in runs]
        for line in lines:
            click.echo(line)


@log_group.command("show")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="The events as written, one JSON object per line.")
def log_show_command(run_id: str, as_json: bool) -> None:
    """Print one run's events as a person reads them (RUN_ID: an id, its unique start, or last)."""
    from crewbridge.transcript import read_run

    events = read_run(run_id)
    if as_json:
        for event in events:
            click.echo(jsonio.dumps_bytes(event))
        return
    from crewbridge.runlog import lines

    for line in lines(events):
        click.echo(line)


@cli.group("config")
def config_group() -> None:
    """Work with crew.yaml."""


@config_group.command("trust")
@click.argument("path", required=False, type=click.Path(dir_okay=False, exists=True, path_type=Path))
def config_trust_command(path: Path | None) -> None:
    """Allow a project crew.yaml (found here or above) to run its hooks, tools and providers and to
    loosen rules: as it is now, through the path given (a link is trusted as the link), with the
    scripts it runs."""
    from crewbridge.config import find_project_config, trust_config

    target = path or find_project_config(Path.cwd())
    if target is None:
        raise UsageError("no crew.yaml in this directory or its parents; name one: crew config trust PATH")
    found = trust_config(target, Path.cwd())
    link = f" (a link to {found.target})" if found.target != found.used else ""
    scripts = ", ".join(word for word, _ in found.named.values())
    click.echo(f"trusted {found.used}{link}" + (f" and the scripts it runs: {scripts}" if scripts else ""))


@config_group.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (files, then settings with file and line).")
@config_option
def config_show_command(as_json: bool, config: Config) -> None:
    """Print the configuration in force: each setting with the file and line it came from."""
    from crewbridge.config_layers import shown_json, shown_text

    if as_json:
        click.echo(json.dumps(shown_json(config.files, config.described()), ensure_ascii=False))
    else:
        click.echo(shown_text(config.files, config.described()), nl=False)


@cli.command("init")
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Replace the file if it exists.")
@click.option("--user", is_flag=True, help="Write your own crew.yaml (~/.config/crewbridge) instead.")
@click.option(
    "--agent",
    "agents",
    multiple=True,
    metavar="CLI",
    help="Add the agent and provider entries for a known CLI (llm, opencode, qwen: docs/recipes.md) to the file.",
)
def init_command(path: Path | None, force: bool, user: bool, agents: tuple[str, ...]) -> None:
    """Write a commented starter crew.yaml here (or at PATH) that works as it is; with --agent, add a
    known CLI to it (the file is made if there is none)."""
    from crewbridge.init import add_recipes, user_file, write_starter

    if user and path is not None:
        raise UsageError("give a PATH or --user, not both")
    target = user_file() if user else path or Path.cwd()
    if not agents:
        written = write_starter(target, force=force)
        click.echo(f'wrote {written}\nnext: crew doctor; crew agents list; crew query "@demo what is in README.md?"')
        return
    written = add_recipes(target, agents, force=force)
    trust = "" if user else "read it, then crew config trust; "
    ask = f'crew query "@{agents[0]} what is in README.md?"'
    click.echo(f"added {', '.join(agents)} to {written}\nnext: {trust}crew doctor; {ask}")


@cli.command("doctor")
@click.argument("providers", nargs=-1)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="crew.yaml to check (default: the one crew would use here).",
)
def doctor_command(providers: tuple[str, ...], config_path: Path | None) -> None:
    """Check crew.yaml and each provider's CLI: installed, version, the options crew passes it.
    Runs the CLIs with --version and --help only (no model is asked). Exit 1 when something is broken."""
    import platform

    from crewbridge.doctor import FAIL, diagnose

    click.echo(f"crew {__version__}, Python {platform.python_version()} ({sys.executable})")
    failed = 0
    for check in diagnose(config_path, Path.cwd(), only=providers):
        click.echo(check.line())
        failed += check.status == FAIL
    if failed:
        click.echo(f"crew: {failed} problem{'s' if failed > 1 else ''}: see the FAIL lines", err=True)
        sys.exit(1)


@cli.group("agents")
def agents_group() -> None:
    """The agents a task can @mention."""


@agents_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@config_option
def agents_list_command(as_json: bool, config: Config) -> None:
    """One line per agent: id, provider, model, profile."""
    rows = [
        {"id": a.id, "provider": a.provider, "model": a.model, "profile": a.profile} for a in config.agents.values()
    ]
    if as_json:
        for row in rows:
            click.echo(json.dumps(row, ensure_ascii=False))
        return
    table = [("AGENT", "PROVIDER", "MODEL", "PROFILE")] + [
        (f"@{a.id}", a.provider, a.model or "(default)", a.profile) for a in config.agents.values()
    ]
    widths = [max(len(line[i]) for line in table) for i in range(3)]
    for line in table:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=False)) + "  " + line[3])


_stopped_by = signal.SIGINT  # the signal that stopped crew; it exits with 128 + its number


def _stop(signum: int, frame: Any) -> None:
    """SIGTERM and SIGHUP stop crew as Ctrl-C does (else its CLIs, in their own sessions, run on)."""
    global _stopped_by
    _stopped_by = signal.Signals(signum)
    raise KeyboardInterrupt


def main(early: Early | None = None, greeting: Greeting | AcpGreeting | None = None) -> None:
    """Run the command in sys.argv; `early`: its reading by crewbridge.early, CLIs started;
    `greeting`: crew mcp's or crew acp's start by crewbridge.mcp.early or crewbridge.acp.early
    (their initialize answered)."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _stop)
    _tolerant_streams(stdin=greeting is None)  # crew mcp's and acp's stdin: read as bytes, and read already
    try:
        _main(early or greeting)
    finally:
        if early is not None:
            early.bridge.close()  # what the command did not take (it failed before its run)
        # Python's last garbage collections walk every object left (~20 ms, crew's longest pause
        # after its CLIs end); what crew opened is closed by now, so they are left out.
        gc.freeze()


def _tolerant_streams(*, stdin: bool) -> None:
    """Text that is not UTF-8 never ends crew: piped input keeps bytes that are not UTF-8 as lone
    surrogates (as Python does with file names and arguments), and stdout writes a lone surrogate as
    a backslash escape (stderr does already): inside a JSON string, a valid escape of the same text."""
    for stream, errors in ((sys.stdin if stdin else None, "surrogateescape"), (sys.stdout, "backslashreplace")):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors=errors)


def _exit_now(code: int) -> NoReturn:
    """Exit with `code` at once, once everything crew started has been ended. Not sys.exit: a Ctrl-C
    that lands while Python runs exec() on a string (a dataclass or namedtuple being made, as a
    module loads) leaves the interpreter to kill itself with SIGINT when it exits, whatever the
    code; and the normal exit would wait for the threads of tools still running."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # closed, or a reader that went away
    os._exit(code)


def _silence() -> None:
    """Send what is written to stdout and stderr from now on to /dev/null (crew is exiting, and its
    last line is written: click flushes each echo)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)


def _main(started: Early | Greeting | AcpGreeting | None) -> None:
    try:
        cli.main(prog_name="crew", standalone_mode=False, obj=started)
    except (click.exceptions.Abort, KeyboardInterrupt):  # click turns Ctrl-C into Abort
        from crewbridge.process import end_all

        end_all()  # the tools' commands too: nothing crew started outlives it
        click.echo(
            "crew: interrupted" if _stopped_by == signal.SIGINT else f"crew: stopped by {_stopped_by.name}", err=True
        )
        _silence()  # the last line: a tool's thread that reports its killed command now says nothing
        _exit_now(128 + _stopped_by)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except CrewError as exc:
        click.echo(f"crew: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except Exception as exc:  # a bug in crew: one line, and the traceback only on request
        if os.environ.get("CREW_DEBUG"):
            raise
        click.echo(
            f"crew: internal error: {type(exc).__name__}: {exc} (CREW_DEBUG=1 shows the traceback; please report it)",
            err=True,
        )
        sys.exit(1)
