"""What every provider is: how to build the command, decode one output line, and resume."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from crewbridge.base import jsonio
from crewbridge.base.decoded import Event, Notice
from crewbridge.base.mentions import refuse_option
from crewbridge.base.modes import Mode
from crewbridge.errors import CLINotFound, UsageError
from crewbridge.sandbox.state import State

if TYPE_CHECKING:
    from crewbridge.sandbox import Sandbox
    from crewbridge.sandbox.allowlist import Entry


@dataclass(frozen=True)
class McpServer:
    """An MCP server on stdio that a CLI is given besides crew's own tools: one the editor passed to
    a crew acp session. `env`: (name, value) pairs, the values possibly secrets."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


def mcp_variables(servers: Sequence[McpServer]) -> dict[str, str]:
    """The servers' environment values under names of crew's own, CREW_MCP_<server>_<value> (from 1):
    for a CLI whose MCP configuration reads variables, the values stay off its command line."""
    return {
        f"CREW_MCP_{number}_{index}": value
        for number, server in enumerate(servers, 1)
        for index, (_, value) in enumerate(server.env, 1)
    }


@dataclass(frozen=True)
class Image:
    """An image given with a task (an editor's prompt): its MIME type and bytes."""

    mime: str  # image/png, image/jpeg, image/gif or image/webp
    data: bytes

    def base64(self) -> str:
        import base64  # for start-up speed: a task with an image only

        return base64.b64encode(self.data).decode("ascii")

    def url(self) -> str:
        """As a data: URL."""
        return f"data:{self.mime};base64,{self.base64()}"


@dataclass
class Turn:
    """One invocation of a CLI: the message to send and how."""

    prompt: str
    mode: Mode = "query"  # "query" (read-only) or "execute"
    model: str | None = None
    session_id: str | None = None  # continue this session (the CLI's own resume)
    system_prompt: str | None = None
    options: list[str] = field(default_factory=list)  # extra CLI options from configuration
    native: bool = (
        False  # crew's tools go through the CLI's native channel, not the catalogue (crewbridge.toolkit.native)
    )
    sandbox: Sandbox | None = None  # the CLI runs inside it (crewbridge.sandbox)
    passed: tuple[str, ...] = ()  # secret-named variables it gets all the same (crew.yaml's env.pass)
    mcp_servers: tuple[McpServer, ...] = ()  # MCP servers it is given besides crew's (Provider.mcp_via)
    trace: tuple[tuple[str, str], ...] = ()  # TRACEPARENT (its agent's span) and TRACESTATE, when the run is traced
    images: tuple[Image, ...] = ()  # given with the conversation's first message (Provider.images_via)

    def __post_init__(self) -> None:
        # Each goes to the CLI as an argument: `--model --dangerously-skip-permissions` must never be
        # built, whoever named the model (a mention, crew.yaml, the Python API) or the session.
        if self.model:
            refuse_option(
                f"model '{self.model}'", self.model, "name a model (crew agents list shows the configured ones)"
            )
        if self.session_id:
            refuse_option(f"session id '{self.session_id}'", self.session_id, "resume a session the CLI named")


def cli_environment(
    provider: Provider, turn: Turn, env: Mapping[str, str] | None
) -> tuple[dict[str, str], frozenset[str]]:
    """The environment a CLI runs with (crew's, with its provider's variables and `env`, what crew
    sets for it), and the names in it that reach it although crewbridge.system.childenv withholds such
    names from what crew starts: those crew sets for it, its own logins, `turn.passed`."""
    added = {**provider.env(), **(env or {}), **dict(turn.trace)}
    full = {**os.environ, **added}
    return full, frozenset({*added, *provider.logins(full), *turn.passed})


OTLP_ENDPOINTS = tuple(
    f"OTEL_EXPORTER_OTLP{signal}_ENDPOINT" for signal in ("", "_TRACES", "_METRICS", "_LOGS")
)  # the standard variables that name an OpenTelemetry collector


def cli_home(env: Mapping[str, str], variable: str, default: str) -> Path:
    """Where a CLI keeps its state: `variable` if set in `env`, else `default` under its HOME."""
    return Path(env.get(variable) or Path(env.get("HOME") or Path.home()) / default)


def base_urls(env: Mapping[str, str], variables: Sequence[str]) -> list[Entry]:
    """The entries of the base URLs `variables` name in `env` (those set to an http(s) URL)."""
    from crewbridge.sandbox.allowlist import from_url  # for start-up speed: a run with a sandbox only

    found = [from_url(env[name], name) for name in variables if env.get(name)]
    return [one for one in found if one is not None]


def mcp_servers(path: Path, kind: str) -> dict[str, object]:
    """The MCP servers a CLI's configuration file names, by name: "json", its `mcpServers` object;
    "toml", its `[mcp_servers.NAME]` tables (codex's config.toml). None for a file that cannot be read."""
    try:
        text = path.read_text()
    except OSError:
        return {}
    if kind == "toml":
        return {name: True for _, name in re.findall(r'(?m)^\s*\[mcp_servers\.("?)([\w-]+)\1\]', text)}
    try:
        servers = json.loads(text).get("mcpServers")
    except (ValueError, AttributeError):
        return {}
    return servers if isinstance(servers, dict) else {}


class Decoder(Protocol):
    def decode(self, line: str) -> list[Event]:
        """The events one line of CLI output stands for (a corrupt line gives a Notice)."""

    def end(self) -> list[Event]:
        """The events the whole output stands for once it has ended well (a Failure when it could
        not be read at all); called after the CLI exited with status 0."""


def parse_object(line: str | bytes, fields: Any = None) -> dict[str, Any] | Notice | None:
    """The JSON object one line of CLI output (text, or UTF-8 bytes) holds; None for a blank line; a
    Notice for a corrupt one (not JSON, nested too deeply, not an object). Bytes that are not UTF-8
    are read as lone surrogates, as crew reads stdin. `fields`: the TypedDict of what the reader
    looks at (jsonio.decode): the object may hold only those; a line of another shape is read whole.
    Read to its fields, a line gives what json's scanner makes of it whole: what msgspec skips is
    not built, so a number past a double there does not send the line to `loads` and its bound.

    Nesting: the fast decoder (jsonio.decode) stops at its recursion limit (RecursionError, a Notice
    here), so no line can crash a reader. A line it decodes is not counted for jsonio.MAX_DEPTH: that
    would cost a fifth of the time of a streamed delta, and decoders read fields by name. A value
    handed on whole (a tool's input) is bounded where it is handed on (crewbridge.work.caller,
    LoopChannel.permit)."""
    try:
        obj = jsonio.decode(line, fields)
    except (ValueError, RecursionError):
        line = as_text(line).strip()  # blank, corrupt, nested too deeply, or padded with whitespace
        if not line:
            return None
        try:
            obj = jsonio.loads(line)
        except jsonio.TooDeep:
            return Notice("corrupt", f"JSON nested too deeply (more than {jsonio.MAX_DEPTH} levels): {line[:120]}")
        except ValueError as exc:
            return Notice("corrupt", f"not JSON ({getattr(exc, 'msg', exc)}): {line[:120]}")
    if not isinstance(obj, dict):
        return Notice("corrupt", f"not a JSON object: {as_text(line).strip()[:120]}")
    return obj


def as_text(line: str | bytes) -> str:
    """A line of CLI output as text: UTF-8 bytes decoded, those that are not UTF-8 kept as lone
    surrogates (as crew reads stdin: crewbridge.cli)."""
    return line if isinstance(line, str) else line.decode("utf-8", "surrogateescape")


class JsonLineDecoder:
    """Base for JSON-lines decoders: parses the line, hands dicts to `event`."""

    # The TypedDict (total=False) of every field `event` reads, nested for the objects it reads
    # into, when it reads no other (None: the whole line): each line is decoded to those alone.
    fields: Any = None

    def decode(self, line: str | bytes) -> list[Event]:
        """As Decoder.decode; `line` may also be UTF-8 bytes (parse_object), read faster: msgspec
        makes text only of the fields asked for."""
        obj = parse_object(line, self.fields)
        return [] if obj is None else self.decode_object(obj, line)

    def decode_object(self, obj: dict[str, Any] | Notice, line: str | bytes | None = None) -> list[Event]:
        """The events one parsed line stands for (a corrupt one gives a Notice); live readers parse
        their own lines and come in here. `line`: the line `obj` was read from (it may hold only
        `fields`: a line of an unexpected shape is read whole to be shown)."""
        if isinstance(obj, Notice):
            return [obj]
        try:
            return self.event(obj)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            if line is not None and self.fields is not None:
                whole = parse_object(line)
                if not isinstance(whole, dict):  # what reading it whole makes of it (too deep for loads)
                    return [] if whole is None else [whole]
                obj = whole
            try:
                shown = json.dumps(obj)[:120]
            except RecursionError:  # a line the fast path took whole, just under json's limit
                shown = "(nested too deeply to show)"
            return [Notice("corrupt", f"unexpected event shape ({exc}): {shown}")]

    def event(self, obj: dict[str, Any]) -> list[Event]:
        raise NotImplementedError

    def end(self) -> list[Event]:
        return []


class Provider:
    """A CLI crew can drive. Subclasses set the class attributes and build the argv."""

    name = ""
    binary = ""
    install_hint = ""  # how a person installs the CLI
    tested = ""  # the version crew's tests drive (package.json's pin; `crew doctor` compares)
    # which of its conversations gives the model images with the task: "live" or "native" ("": none)
    images_via = ""
    login: tuple[str, ...] | None = None  # its arguments that log a person in, in a terminal (`crew acp login`)
    resumable = True  # has its own session resume; otherwise crew replays the transcript
    prompt_on_stdin = True  # argv is capped at 128 KiB; stdin is not. Then argv() must not read turn.prompt:
    # the first turn's CLI is started before its prompt is built (Conversation.start)
    live = ""  # "module:Class" of its exact, live conversation (crewbridge/conversations/CLI.py), if it has one
    native = ""  # "module:Class" of the conversation that offers crew's tools natively, when not `live`
    native_via = ""  # how crew's tools reach it natively (`crew doctor` says it); "" when they cannot
    read_only_tools: frozenset[str] = frozenset()  # its own tools that only read (the rest write or run commands)
    # How it takes the MCP servers an editor gives a crew acp session (Turn.mcp_servers): "options"
    # (on its command line: mcp_options, and mcp_env), "session" (in the session its `native`
    # conversation opens, which then runs), "" not at all
    mcp_via = ""
    # Where it reaches its model API, the only places it (and all it starts) may connect to inside
    # crew's sandbox besides crew.yaml's network: allow (crewbridge.sandbox.allowlist entries), and
    # the variables that name a base URL its user configured instead.
    hosts: tuple[str, ...] = ()
    base_url_variables: tuple[str, ...] = ()
    # The variables it logs in with (its documented keys and tokens): it gets them although
    # crewbridge.system.childenv withholds such names from everything else crew starts. Its login files are
    # its State's `login`.
    login_env: tuple[str, ...] = ()

    def argv(self, turn: Turn) -> list[str]:
        raise NotImplementedError

    def decoder(self) -> Decoder:
        raise NotImplementedError

    def has_session(self, session_id: str, env: Mapping[str, str], cwd: Path) -> bool:
        """Whether the CLI still holds session `session_id` (run with `env` in `cwd`), so that
        resuming it continues the conversation; crew replays its transcript otherwise. True when
        crew cannot tell."""
        return True

    def api_status(self, exit_code: int) -> int | None:
        """The HTTP status of the API error that made the CLI exit with `exit_code`, when the CLI
        says it that way only."""
        return None

    def env(self) -> dict[str, str]:
        """Variables added to the inherited environment."""
        return {}

    def own_mcp_only(self, turn: Turn, env: Mapping[str, str], cwd: Path) -> list[str]:
        """The options that keep the CLI (run with `env` in `cwd`) to the MCP servers crew gives it:
        none, or crew's own for native tools. Without them it would start, in every run crew makes,
        each server its user registered, crew itself included once `crew mcp install` ran (an agent's
        user_mcp_servers: true leaves them out). [] for a CLI that has no such option."""
        return []

    def mcp_options(self, servers: Sequence[McpServer]) -> list[str]:
        """The options that give the CLI `servers` (mcp_via "options")."""
        return []

    def mcp_env(self, servers: Sequence[McpServer]) -> dict[str, str]:
        """What the CLI's environment needs for mcp_options' servers (the values they refer to)."""
        return {}

    def endpoints(self, env: Mapping[str, str]) -> list[Entry]:
        """Where the CLI (run with `env`) may connect inside crew's sandbox: its model API's known
        hosts (never to a non-public address), and the base URLs its user configured (any address:
        a local gateway or model server)."""
        from crewbridge.sandbox.allowlist import entry  # for start-up speed: a run with a sandbox only

        found = [entry(host, f"{self.name}'s API", private_ok=False) for host in self.hosts]
        return found + base_urls(env, self.base_url_variables) + self.telemetry_endpoints(env)

    def telemetry_endpoints(self, env: Mapping[str, str]) -> list[Entry]:
        """Where the CLI (run with `env`) sends its own telemetry, when its user turned that on
        (docs/observability.md): its sandbox lets it reach them. None by default."""
        return []

    def logins(self, env: Mapping[str, str]) -> frozenset[str]:
        """The variables the CLI (run with `env`) logs in with: `login_env`, and those its own
        configuration names for its model (codex's `env_key`)."""
        return frozenset(self.login_env)

    def state(self, env: Mapping[str, str]) -> State:
        """Where the CLI (run with `env`) keeps its own state, and what of it it writes as data: the
        only places besides its temp folder (and, in execute mode, the working directory) it may
        write inside crew's sandbox (crewbridge.sandbox.state)."""
        return State()

    def mcp_commands(self, serve: list[str]) -> tuple[list[str], list[str]] | None:
        """The commands that register crew's MCP server (started by `serve`) in the CLI's own
        configuration, for the user, under the name `crew`, and that remove it again (`crew mcp
        install`); None when crew cannot register it in this CLI."""
        return None

    def mcp_files(self, env: Mapping[str, str], cwd: Path) -> list[tuple[Path, str]]:
        """The CLI's configuration files (run with `env` in `cwd`) that may register crew's MCP
        server (`crew doctor` says which does), each with how it lists servers: "json" (an
        `mcpServers` object) or "toml" (`[mcp_servers.NAME]` tables)."""
        return []

    def login_argv(self) -> list[str]:
        """The command that logs a person in to this CLI in a terminal; UsageError where it has none,
        CLINotFound where it is not installed."""
        if self.login is None:
            raise UsageError(f"crew knows no login for {self.name}; log in as its documentation says")
        path = shutil.which(self.binary)
        if path is None:
            raise CLINotFound(f"{self.binary} is not on PATH; install it ({self.install_hint}), then log in")
        return [path, *self.login]

    def commands(self) -> list[list[str]]:
        """Every command line crew may run, with sample values: `crew doctor` checks each one's
        options against the CLI's --help (no model is asked). Empty: crew only looks for the CLI."""
        turns = [
            Turn("", mode, model="MODEL", session_id=session, system_prompt="PROMPT")
            for mode in ("query", "execute")
            for session in (None, "SESSION")
        ]
        return [self.argv(turn) + self.own_mcp_only(turn, os.environ, Path.cwd()) for turn in turns]
