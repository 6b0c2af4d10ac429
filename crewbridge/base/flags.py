"""crew's command-line options, declared once, as data: those of the commands that run agents
(LOOP: query, execute and chat; TASK: query and execute), of `crew mcp` (MCP), `crew acp` (ACP),
`crew ui` (UI) and `crew batch` (BATCH, BATCH_WORKER: a batch's run options are LOOP's and TASK's). crewbridge.cli
makes click's options from them, and the quick readings of the arguments before click loads
(crewbridge.terminal.early, crewbridge.mcp.early: `read`) take a value only where click's type takes it
(`Flag.takes`), so neither can read an argument otherwise than the command will.

(Plain classes, and nothing imported but where crew's files are: crew mcp and crew acp read these
before they answer initialize.)"""

from __future__ import annotations

import os

from crewbridge.base.places import configured

TYPE_CHECKING = False  # typing itself is ~5 ms to import; type checkers read this name as True
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any


class Flag:
    """One option: its names (the first names it), the keyword it gives the command, its help, and
    what it takes: `kind` "flag" (no value), "int" or "float" (not below `low`; not even `low` when
    `above`), "choice" (one of `choices`), "text" or "path" (a file); `required`: the command refuses
    to run without it. `early`: whether a quick reading
    takes it (False: the reading is not sure, click reads the arguments), or the values it takes as
    sure (where click takes more that only the loaded command can check)."""

    __slots__ = (
        "above",
        "choices",
        "default",
        "dest",
        "early",
        "help",
        "kind",
        "low",
        "metavar",
        "multiple",
        "names",
        "required",
        "show_default",
    )

    def __init__(
        self,
        names: tuple[str, ...],
        dest: str,
        help: str,
        *,
        kind: str = "text",
        low: float = 0,
        above: bool = False,
        choices: tuple[str, ...] = (),
        default: Any = None,
        show_default: bool = False,
        metavar: str | None = None,
        multiple: bool = False,
        required: bool = False,
        early: bool | tuple[str, ...] = True,
    ) -> None:
        self.names, self.dest, self.help, self.kind = names, dest, help, kind
        self.low, self.above, self.choices = low, above, choices
        self.default, self.show_default, self.metavar, self.multiple = default, show_default, metavar, multiple
        self.required, self.early = required, early

    def takes(self, text: str) -> bool:
        """Whether click takes `text` as this option's value (as its type converts it)."""
        if self.kind in ("int", "float"):
            return _number(int if self.kind == "int" else float, text, self.low, self.above)
        if self.kind == "choice":
            return text in self.choices
        # any text ("" too); a path: one the OS can name that is not a folder (click's dir_okay=False)
        return self.kind != "path" or ("\0" not in text and not os.path.isdir(text))

    def sure(self, text: str) -> bool:
        """Whether a quick reading takes `text` as this option's value: click takes it, and it is not
        empty (an empty path click reads as ".")."""
        if isinstance(self.early, tuple):
            return text in self.early
        return self.early and bool(text) and self.takes(text)


def _number(kind: Callable[[str], float], text: str, low: float, above: bool) -> bool:
    """Whether click.IntRange/FloatRange(min=low, min_open=above) of `kind` takes `text`."""
    try:
        value = kind(text)
    except ValueError:
        return False
    return not (value <= low if above else value < low)


def read(args: Iterable[str], table: Iterable[Flag]) -> tuple[dict[str, str], list[str]] | None:
    """`args` read with the options of `table`: each option given, by its first name, with its
    value ("" for a flag), and the other words in order; None when an argument is not surely what
    this reading takes (an option it does not know or does not read early, a value click could
    refuse, a flag given a value, a required option missing)."""
    known = {name: flag for flag in table for name in flag.names}
    values: dict[str, str] = {}
    words: list[str] = []
    rest = iter(args)
    for arg in rest:
        if not arg.startswith("-") or arg == "-":
            words.append(arg)
            continue
        name, equals, value = arg.partition("=")
        flag = known.get(name)
        if flag is None or flag.early is False:
            return None
        if flag.kind == "flag":
            if equals:
                return None
            values[flag.names[0]] = ""
            continue
        value = value if equals else next(rest, "")
        if not flag.sure(value):
            return None
        values[flag.names[0]] = value
    if any(flag.required and flag.names[0] not in values for flag in known.values()):
        return None
    return values, words


def unrefusable() -> bool:
    """Whether nothing crew loads after a quick reading can refuse to start `crew mcp` or `crew
    acp`: no crew.yaml to read (it is read, and reported when it is wrong, before any answer) and no
    sandbox mechanism named (CREW_SANDBOX_MECHANISM: it may name one that does not work)."""
    return "CREW_SANDBOX_MECHANISM" not in os.environ and not configured(os.getcwd())


SANDBOX_HELP = (
    "Run the CLIs and crew's commands in an OS sandbox: auto (where the machine allows; the default), "
    "required (refuse to run without one, exit 2) or off. Default: crew.yaml's sandbox."
)
SANDBOX = Flag(("--sandbox",), "sandbox", SANDBOX_HELP, kind="choice", choices=("auto", "required", "off"))
NETWORK_HELP = (
    "Where the sandboxed CLIs (and all they start) may connect: allow (each CLI's model API and crew.yaml's "
    "network: allow, through crew's proxy; the default) or open (any host, with a warning). Default: "
    "crew.yaml's network."
)
NETWORK = Flag(("--network",), "network", NETWORK_HELP, kind="choice", choices=("allow", "open"))
CONFIG = Flag(
    ("--config",),
    "config_path",
    "crew.yaml to use (default: found in this directory or its parents, then ~/.config).",
    kind="path",
)

NO_STDIN = Flag(
    ("--no-stdin", "-n"),
    "no_stdin",
    "Read nothing from stdin (else a pipe or file on stdin is read to its end and added to the task; give -n "
    "inside `while read` loops).",
    kind="flag",
)


def _limits(timeout_help: str, turns_help: str) -> tuple[Flag, Flag]:
    """--timeout and --max-turns, with their defaults: a run's, or each of a server's runs'."""
    return (
        Flag(("--timeout",), "timeout", timeout_help, kind="float", low=0.1, default=300.0, show_default=True),
        Flag(("--max-turns",), "max_turns", turns_help, kind="int", low=1, default=10, show_default=True),
    )


# The options of every command that runs an agent loop (query, execute, chat): the fields of
# crewbridge.base.options.RunOptions, each under its own name, and --continue, --verbose, --config.
LOOP = (
    *_limits(
        "Seconds the whole run may take, tools included; then everything it started is ended (exit 124).",
        "Model replies allowed before crew stops a tool loop.",
    ),
    Flag(
        ("--max-cost",),
        "max_cost",
        "Dollars the run may cost (as the CLIs report it); past it, crew stops before the next tool turn (exit 5).",
        kind="float",
        above=True,
    ),
    Flag(
        ("--max-tokens",),
        "max_tokens",
        "Tokens (input + output) the run may use; past it, crew stops before the next tool turn (exit 5).",
        kind="int",
        low=1,
    ),
    # continuing a run: its CLIs start as the run says, not as the quick reading would start them
    Flag(
        ("--continue",),
        "continue_last",
        "Continue the most recent run in this directory: each agent goes on with its conversation.",
        kind="flag",
        early=False,
    ),
    Flag(("--resume",), "resume", "Continue run RUN_ID (`crew log` lists runs).", metavar="RUN_ID", early=False),
    Flag(("--yes", "-y"), "approve_all", "Approve every tool that needs approval.", kind="flag"),
    Flag(
        ("--tools-via",),
        "tools_via",
        "How crew's tools reach the CLIs: text (a catalogue in the prompt, any CLI) or native (the CLI's own "
        "tool channel: claude, codex, gemini). Default: each agent's tools_via, else text.",
        kind="choice",
        choices=("text", "native"),
    ),
    # the trace shows each CLI's start: crew starts them itself
    Flag(
        ("--verbose", "-v"),
        "verbose",
        "Show on stderr each CLI command crew runs and every raw line it reads and sends.",
        kind="flag",
        early=False,
    ),
    SANDBOX,
    NETWORK,
    CONFIG,
)


def _checks(where: str = "the agent's folder") -> tuple[Flag, Flag, Flag]:
    """--check, --check-rounds and --no-check (crewbridge.engine.gate), run in `where`."""
    return (
        Flag(
            ("--check",),
            "checks",
            f"A command that must pass once the agent answers, run in {where} in crew's sandbox (repeat for "
            "more); when it fails, its output goes back to the agent, up to --check-rounds times (exit 9). "
            "Default: crew.yaml's check.",
            metavar="CMD",
            multiple=True,
        ),
        Flag(
            ("--check-rounds",),
            "check_rounds",
            "Times the check runs at most (default: crew.yaml's, else 3).",
            kind="int",
            low=1,
            metavar="N",
        ),
        Flag(("--no-check",), "no_check", "Run no check, not even crew.yaml's.", kind="flag"),
    )


def _pulls(what: str = "each agent's worktree branch") -> tuple[Flag, ...]:
    """--pr and how the pull request is opened: --draft, --pr-title, --pr-body, --label."""
    return (
        Flag(
            ("--pr",),
            "pr",
            f"Push {what} to the repository's remote and open its pull request (GitHub) or merge request "
            "(GitLab), or update the one open for that branch; the token: $GH_TOKEN, $GITHUB_TOKEN, `gh auth "
            "token`, $GITLAB_TOKEN.",
            kind="flag",
            early=False,
        ),
        Flag(("--draft",), "draft", "Open the pull request as a draft.", kind="flag", early=False),
        Flag(("--pr-title",), "pr_title", "The pull request's title (default: the task's first line).", early=False),
        Flag(
            ("--pr-body",),
            "pr_body_file",
            "A file whose text starts the pull request's body (default: the task); crew adds the checks, the "
            "review's verdict, tokens and cost.",
            kind="path",
            early=False,
        ),
        Flag(("--label",), "labels", "A label for the pull request (repeat for more).", multiple=True, early=False),
    )


# What only a task takes (query, execute): its output, and its worktrees and review (crewbridge.base.options.
# TASK_ONLY), whose CLIs start in worktrees made first, or as the review's rounds go.
TASK = (
    Flag(
        ("--worktree",),
        "worktree",
        "Each agent works in a git worktree of its own, on branch crew/RUN_ID/AGENT made from HEAD; your "
        "checkout is not touched (crew apply RUN_ID AGENT takes an agent's changes).",
        kind="flag",
        early=False,
    ),
    Flag(
        ("--review",),
        "review",
        "After the writer (the one agent mentioned) answers, AGENT reviews its diff read-only and approves or "
        "asks for changes, which go back to the writer (exit 6: not approved in --rounds).",
        metavar="AGENT",
        early=False,
    ),
    Flag(("--rounds",), "rounds", "Review rounds at most (default 3).", kind="int", low=1),
    *_checks(),
    *_pulls(),
    NO_STDIN,
    Flag(
        ("--json",),
        "as_json",
        "Print one JSON object at the end (answer, tool_calls, usage, session, error).",
        kind="flag",
    ),
    Flag(
        ("--jsonl",),
        "as_jsonl",
        "Print the events as they happen, one JSON object per line (turn, text, call, result, answer, error).",
        kind="flag",
    ),
)


def _served(within: str) -> tuple[Flag, ...]:
    """--token-file, --allow-host and --allow-remote of a face on the network (`within`: what they
    go with, said first in their help)."""

    def said(text: str) -> str:
        text = within + text
        return text[:1].upper() + text[1:]

    return (
        Flag(
            ("--token-file",),
            "token_file",
            said("write the token to this file (created 0600) instead of printing it."),
            kind="path",
            early=False,
        ),
        Flag(
            ("--allow-host",),
            "allowed_hosts",
            said("also accept requests whose Host (and Origin) name HOST, besides localhost."),
            metavar="HOST",
            multiple=True,
            early=False,
        ),
        Flag(
            ("--allow-remote",),
            "allow_remote",
            said("allow listening on an address other machines reach (the token is still required)."),
            kind="flag",
            early=False,
        ),
    )


def _served_runs(what: str) -> tuple[Flag, ...]:
    """--timeout, --max-turns, --config and --sandbox of a server whose runs are each one `what` (an
    MCP ask, an ACP prompt): read early where nothing that loads could refuse the start."""
    return (
        *_limits(f"Seconds one {what} may take.", f"Model replies per {what}."),
        Flag(CONFIG.names, CONFIG.dest, CONFIG.help, kind="path", early=False),
        Flag(SANDBOX.names, SANDBOX.dest, SANDBOX.help, kind="choice", choices=SANDBOX.choices, early=("auto", "off")),
    )


# crew mcp's. Read early only where nothing that loads could refuse the start: a file to read
# (--config), an agent to find (--policy-of), the HTTP transport, a sandbox required where none works.
MCP = (
    Flag(
        ("--execute",),
        "execute",
        "Also serve write_file, edit_file and run_command, and take ask in execute mode.",
        kind="flag",
    ),
    Flag(
        ("--http",),
        "address",
        "Serve MCP's streamable HTTP transport at http://HOST:PORT/mcp instead of stdio (port 0: a free one). "
        "Every request needs Authorization: Bearer TOKEN: $CREW_MCP_TOKEN, else a new one printed on stderr.",
        metavar="HOST:PORT",
        early=False,
    ),
    *_served("With --http: "),
    Flag(
        ("--policy-of",),
        "policy_of",
        "The crew.yaml agent whose policy (profile, allow, deny, approval, command globs) governs the client's "
        "tool calls (default: profile coding, nothing denied).",
        metavar="AGENT",
        early=False,
    ),
    Flag(
        ("--ask-depth",),
        "ask_depth",
        "How many times an asked agent may ask another in turn (0: asked agents get no ask).",
        kind="int",
        low=0,
        default=1,
        show_default=True,
    ),
    *_served_runs("ask"),
)

# crew acp's, read early as crew mcp's are (crewbridge.acp.early answers initialize before click loads).
ACP = _served_runs("prompt")

# crew parse's, read early: the whole command runs before click loads (crewbridge.terminal.parsing).
PARSE = (
    Flag(
        ("--format",),
        "fmt",
        "Which CLI wrote the output on stdin: a provider's name (claude, gemini, codex, an installed "
        "plugin's), or text.",
        required=True,
    ),
    Flag(("--prefix",), "prefix", "Tool-name prefix (default: the configured one, crew)."),
    CONFIG,
)

# crew ui's.
UI = (
    Flag(
        ("--listen",),
        "address",
        "Where to serve the UI (port 0: a free one).",
        metavar="HOST:PORT",
        default="127.0.0.1:8766",
        show_default=True,
        early=False,
    ),
    *_served(""),
)


def _again(table: tuple[Flag, ...], dest: str, help: str, **changes: Any) -> Flag:
    """The entry of `table` for `dest` as another command takes it: the same names, kind and bounds,
    with its own `help` (and `changes`: a default)."""
    [flag] = [flag for flag in table if flag.dest == dest]
    values = {slot: getattr(flag, slot) for slot in Flag.__slots__ if slot not in ("names", "dest", "help")}
    return Flag(flag.names, dest, help, **{**values, **changes})


BATCH_DB = Flag(
    ("--db",),
    "db",
    "The batch database: postgresql://USER@HOST/DB to share batches between machines (no password here: "
    "~/.pgpass, ?passfile=PATH, or $CREW_BATCH_DB). Default: $CREW_BATCH_DB, else SQLite in crew's state folder.",
    metavar="URL",
    early=False,
)
BATCH_JSON = Flag(("--json",), "as_json", "Print the batch as one JSON object.", kind="flag")

# crew batch's (submit): each repository's run options (crewbridge.base.options.RunOptions' fields, LOOP's
# and TASK's entries with a batch's defaults and words; its worktree is the batch's own), then the
# batch's own. Nothing reads them before click: crew batch starts no CLI before its database.
BATCH = (
    Flag(("--repos",), "repos_file", "A file naming repositories, one a line (# comments).", kind="path"),
    Flag(("--id",), "given_id", "The batch's id; the same again is the same batch.", metavar="NAME"),
    Flag(
        ("--concurrency",),
        "concurrency",
        "Repositories at once, all workers.",
        kind="int",
        low=1,
        default=2,
        show_default=True,
    ),
    Flag(
        ("--worker-concurrency",),
        "worker_concurrency",
        "Repositories at once on each worker (default: --concurrency).",
        kind="int",
        low=1,
    ),
    Flag(
        ("--canary",),
        "canary",
        "Run N repositories first; the others start once they are done or unchanged, else the batch pauses.",
        kind="int",
        low=1,
        metavar="N",
    ),
    Flag(("--retries",), "retries", "Tries after a failure.", kind="int", default=1, show_default=True),
    _again(TASK, "review", "AGENT reviews each change (as crew execute --review)."),
    _again(TASK, "rounds", "Review rounds at most.", default=3, show_default=True),
    *_checks("each repository's worktree; a repository is committed only once it passes"),
    *_pulls("each repository's branch"),
    _again(LOOP, "max_cost", "Dollars each repository's run may cost."),
    _again(LOOP, "max_tokens", "Tokens each repository's run may use."),
    Flag(
        ("--max-total-cost",),
        "max_total_cost",
        "Dollars the batch may cost: no repository starts past it.",
        kind="float",
        above=True,
    ),
    _again(LOOP, "timeout", "Seconds a repository's run may take.", default=600.0),
    _again(LOOP, "max_turns", "Model replies in a repository's run.", default=20),
    _again(LOOP, "tools_via", "As crew execute --tools-via: text or native."),
    _again(LOOP, "approve_all", "Approve every tool that needs approval (nobody is asked in a batch)."),
    Flag(("--detach",), "detach", "Record the batch, print its id and return; workers do the work.", kind="flag"),
    BATCH_DB,
    BATCH_JSON,
    SANDBOX,
    NETWORK,
    CONFIG,
)

# crew batch worker's.
BATCH_WORKER = (
    Flag(("--until-idle",), "until_idle", "Exit once no repository is queued and none runs here.", kind="flag"),
    BATCH_DB,
    CONFIG,
)
