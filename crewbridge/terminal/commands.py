"""The terminal's commands: run a task (query, execute, chat, prompt), look at runs and worktrees
(log, worktrees, apply), tools and skills, crew.yaml (config, init, agents), doctor, parse. Thin:
each parses its arguments and calls the engine (crewbridge.cli registers them)."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from crewbridge import __version__
from crewbridge.base import flags, jsonio
from crewbridge.base.modes import Mode
from crewbridge.errors import UsageError
from crewbridge.terminal.early import terminal_bridge

if TYPE_CHECKING:
    from crewbridge.config import Config
from crewbridge.terminal.options import (
    NO_STDIN,
    config_option,
    early_reading,
    loop_options,
    piped_context,
    run_options,
    run_options_of,
    table_options,
)


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
    from crewbridge.base.mentions import parse_agent, parse_mentions
    from crewbridge.terminal.render import Renderer

    if as_json and as_jsonl:
        raise UsageError(
            "--json and --jsonl were both given; choose one (--json: one object at the end, "
            "--jsonl: the events as they happen)"
        )
    task = " ".join(text)
    agents = [m.agent for m in parse_mentions(task)[0]]
    options = run_options_of(continue_last, values)
    if options.review:  # the reviewer's tool calls are labelled too
        agents.append(parse_agent(options.review).agent)
    agents = list(dict.fromkeys(agents))
    context = None if no_stdin else piped_context(options.timeout)
    output = "json" if as_json else "jsonl" if as_jsonl else "text"
    early = early_reading()
    bridge = early.bridge if early is not None and early.bridge.config is config else terminal_bridge(config)
    # The tools are built once the agents' CLIs have started (Bridge.run), while those boot.
    with Renderer(output=output, agents=agents, verbose=verbose, secrets=config.provider_env()) as renderer:
        outcomes = bridge.run(task, mode, options=options, context=context or None, on_progress=renderer.progress)
        renderer.finish(outcomes)
    failed = [o.error for o in outcomes if o.error is not None]
    if failed:
        sys.exit(failed[0].exit_code)


@click.command("query")
@run_options
def query_command(**options: Any) -> None:
    """Ask agents a question with read-only tools: crew query "@claude what does notes.txt say?" """
    _run("query", **options)


@click.command("execute")
@run_options
def execute_command(**options: Any) -> None:
    """Let agents act, with every tool policy allows: crew execute "@claude fix the typo in a.py" """
    _run("execute", **options)


@click.command("apply")
@click.argument("run_id")
@click.argument("agent")
def apply_command(run_id: str, agent: str) -> None:
    """Take AGENT's changes from its worktree of run RUN_ID (crew execute --worktree) into this
    checkout, as uncommitted changes; all or nothing (exit 1 when they conflict)."""
    from crewbridge.work.worktrees import apply

    for line in apply(Path.cwd(), run_id, agent).lines():
        click.echo(line)


@click.group("worktrees", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per worktree and line.")
@click.pass_context
def worktrees_group(ctx: click.Context, as_json: bool) -> None:
    """List the agents' worktrees of this repository (crew execute --worktree): run, agent, what it
    changed, branch, folder. `crew worktrees clean` removes them."""
    if ctx.invoked_subcommand is not None:
        return
    from crewbridge.work.worktrees import listed, table

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
    from crewbridge.work.worktrees import clean

    done = clean(Path.cwd(), run_id, force=force)
    if not done:
        click.echo("no worktrees of crew to remove" + (f" for run {run_id}" if run_id else ""))
    for cleaned in done:
        click.echo(cleaned.line(), err=not cleaned.removed)
    if any(not cleaned.removed for cleaned in done):
        sys.exit(1)


@click.command("chat")
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
    from crewbridge.terminal.chat import run_chat

    options = run_options_of(continue_last, values)
    run_chat(terminal_bridge(config), agent, mode=mode, options=options, verbose=verbose)


@click.command("prompt")
@click.argument("text", nargs=-1, required=True)
@click.option("--mode", type=click.Choice(["query", "execute"]), default="query", show_default=True)
@NO_STDIN
@config_option
def prompt_command(text: tuple[str, ...], mode: Mode, no_stdin: bool, config: Config) -> None:
    """Print the exact prompt that would be sent, catalogue and piped stdin included."""
    from crewbridge.bridge import Bridge
    from crewbridge.toolkit.catalogue import tokens

    bridge = Bridge(config)
    click.echo(bridge.first_prompt(" ".join(text), mode, context=None if no_stdin else piped_context(None)))
    section = bridge.skills_section(" ".join(text))
    if section:  # what the skills cost in every first message
        click.echo(f"crew: skills section: {len(section):,} characters (~{tokens(section):,} tokens)", err=True)


@click.group("skills")
def skills_group() -> None:
    """List and show the skills (SKILL.md folders) crew offers to agents."""


@skills_group.command("list")
@config_option
def skills_list_command(config: Config) -> None:
    """One line per skill: name, where it was found, description; then any that are broken."""
    from crewbridge.engine.context import found_skills

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
    from crewbridge.base.skills import body, unknown
    from crewbridge.engine.context import found_skills

    skills = found_skills(config, Path.cwd().resolve()).skills
    if name not in skills:
        raise UsageError(str(unknown(name, skills)))
    skill = skills[name]
    click.echo(f"{skill.file}  ({skill.source})\n{skill.description}\n\n{body(skill)}")


@click.group("tools")
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
    from crewbridge.toolkit.registry import ToolContext

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


@click.command("parse")
@table_options(flags.PARSE)
def parse_command(fmt: str, prefix: str | None, config: Config) -> None:
    """Read raw CLI output on stdin; print one JSON line per tool-call attempt, validated."""
    from crewbridge.terminal.parsing import run

    run(fmt, prefix, config, functools.partial(click.echo, err=True))


@click.group("log", invoke_without_command=True)
@click.option("--limit", type=click.IntRange(min=1), help="Runs listed at most (default 20; every one with --since).")
@click.option("--since", "since_text", help="Only runs started since a span back (7d, 12h, 30m, 2w) or a date.")
@click.option("--by", type=click.Choice(["agent"]), help="Sum the runs' tokens and cost per agent (a small table).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line, for scripts.")
@click.pass_context
def log_group(ctx: click.Context, limit: int | None, since_text: str | None, by: str | None, as_json: bool) -> None:
    """List recent runs (newest first) with their tokens and cost; `crew log show ID` prints one
    run's events; `crew log --since 7d --by agent` sums usage per agent."""
    if ctx.invoked_subcommand is None:
        from crewbridge.base.usage import by_agent, since, table
        from crewbridge.record.index import Runs
        from crewbridge.terminal.runlog import line

        start = since(since_text) if since_text else None
        runs = Runs().rows(start)[: limit or (None if start or by else 20)]
        if by:
            rows = by_agent(run.usage for run in runs)
            lines = [json.dumps(row.to_dict()) for row in rows] if as_json else table(rows)
        else:
            lines = [json.dumps(run.to_dict(), ensure_ascii=False) if as_json else line(run) for run in runs]
        for text in lines:
            click.echo(text)


@log_group.command("show")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="The events as written, one JSON object per line.")
def log_show_command(run_id: str, as_json: bool) -> None:
    """Print one run's record as the terminal showed it (RUN_ID: an id, its unique start, or last)."""
    if as_json:
        from crewbridge.engine.outputs import json_line
        from crewbridge.record.transcript import read_run

        for event in read_run(run_id):
            click.echo(json_line(event), nl=False)
        return
    from crewbridge.terminal.runlog import show

    show(run_id)


@click.group("config")
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
    from crewbridge.base.config_layers import shown_json, shown_text

    if as_json:
        click.echo(json.dumps(shown_json(config.files, config.described()), ensure_ascii=False))
    else:
        click.echo(shown_text(config.files, config.described()), nl=False)


@click.command("init")
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
    from crewbridge.terminal.init import add_recipes, user_file, write_starter

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


@click.command("doctor")
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

    from crewbridge.terminal.doctor import FAIL, diagnose

    click.echo(f"crew {__version__}, Python {platform.python_version()} ({sys.executable})")
    failed = 0
    for check in diagnose(config_path, Path.cwd(), only=providers):
        click.echo(check.line())
        failed += check.status == FAIL
    if failed:
        click.echo(f"crew: {failed} problem{'s' if failed > 1 else ''}: see the FAIL lines", err=True)
        sys.exit(1)


@click.group("agents")
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
