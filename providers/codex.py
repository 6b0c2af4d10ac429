"""Codex CLI: `codex exec --json -`, prompt on stdin; `exec resume ID` continues."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.providers.base import JsonLineDecoder, McpServer, Provider, Turn, cli_home, mcp_servers

from crewbridge.base.decoded import Done, Event, Failure, MessageEnd, Notice, OwnCall, OwnResult, Session, Text, Usage
from crewbridge.sandbox import State
from crewbridge.toolkit.native import SERVER

if TYPE_CHECKING:
    from crewbridge.sandbox.allowlist import Entry

# Codex's own tools' items (exec --json's names; app-server's are these in camelCase) → the tool, as
# its model calls it and crew's policy names it; an MCP server's tool is mcp__SERVER__TOOL.
OWN_ITEMS = {
    "command_execution": "exec_command",
    "file_change": "apply_patch",
    "web_search": "web_search",
    "image_view": "view_image",
}


class OwnItems:
    """Codex's own tools' items → OwnCall when one starts (or completes unseen), OwnResult when it
    completes. Items are read with exec --json's names (app-server's: snake_case() first)."""

    def __init__(self) -> None:
        self._started: set[str] = set()

    def events(self, item: dict[str, Any], completed: bool) -> list[Event]:
        kind = item.get("type")
        if kind != "mcp_tool_call" and kind not in OWN_ITEMS:
            return [Notice("item", str(kind))]  # the model's reasoning, a plan, …
        ref = str(item.get("id"))
        out: list[Event] = []
        if ref not in self._started:
            self._started.add(ref)
            out.append(_own_call(ref, item))
        if completed:
            out.append(_own_result(ref, item))
        return out


def _own_call(ref: str, item: dict[str, Any]) -> OwnCall:
    """The use, named and read as codex asks crew about it (crewbridge/conversations/codex.py)."""
    kind = item.get("type")
    if kind == "mcp_tool_call":
        return OwnCall(ref, f"mcp__{item.get('server')}__{item.get('tool')}", item.get("arguments"))
    if kind == "command_execution":
        data = {"command": item.get("command"), **({"cwd": item["cwd"]} if item.get("cwd") else {})}
    elif kind == "file_change":
        data = {"changes": item.get("changes")}
    else:
        data = {key: item[key] for key in ("query", "path") if item.get(key) is not None}
    return OwnCall(ref, OWN_ITEMS[str(kind)], data)


def _own_result(ref: str, item: dict[str, Any]) -> OwnResult:
    status = item.get("status")
    ok = status in ("completed", None)  # a web search has no status
    if item.get("type") == "mcp_tool_call":
        result, error = item.get("result") or {}, item.get("error") or {}
        texts = [part.get("text") for part in result.get("content") or [] if isinstance(part, dict)]
        output = str(error.get("message") or "") if error else "\n".join(map(str, filter(None, texts)))
    elif item.get("type") == "file_change":
        output = "\n".join(f"{_kind(change.get('kind'))} {change.get('path')}" for change in item.get("changes") or [])
    else:
        output = str(item.get("aggregated_output") or "")
    exit_code = item.get("exit_code")
    return OwnResult.of(
        ref, ok, output or ("" if ok else f"codex: {status}"), exit_code if isinstance(exit_code, int) else None
    )


def _kind(kind: Any) -> str:
    """A file change's kind: exec --json's "add", app-server's {"type": "add"}."""
    return str(kind.get("type") if isinstance(kind, dict) else kind)


def snake_case(item: dict[str, Any]) -> dict[str, Any]:
    """An app-server item with exec --json's names: its keys and type in snake_case."""
    snake = {re.sub("([A-Z])", r"_\1", key).lower(): value for key, value in item.items()}
    snake["type"] = re.sub("([A-Z])", r"_\1", str(item.get("type"))).lower()
    if snake.get("status") == "inProgress":
        snake["status"] = "in_progress"
    return snake


class CodexDecoder(JsonLineDecoder):
    """exec --json events → assistant text (one agent_message item per message; no deltas), and
    codex's own tools' uses (OwnItems)."""

    def __init__(self) -> None:
        self._own = OwnItems()

    def event(self, obj: dict[str, Any]) -> list[Event]:
        kind = obj.get("type")
        if kind == "thread.started":
            return [Session(obj.get("thread_id"))]
        if kind in ("item.started", "item.updated", "item.completed"):
            item = obj["item"]
            if item.get("type") == "agent_message":
                return [Text(item.get("text") or ""), MessageEnd()] if kind == "item.completed" else []
            return self._own.events(item, kind == "item.completed")
        if kind == "turn.completed":
            usage = obj.get("usage") or {}
            # the thread's totals so far: on a resumed thread they include the earlier turns
            totals = Usage(
                usage.get("input_tokens") or 0,
                usage.get("output_tokens") or 0,
                cached_tokens=usage.get("cached_input_tokens") or 0,
                cumulative=True,
            )
            return [totals, Done()]
        if kind == "turn.failed":
            err = obj.get("error") or {}
            return [Failure(str(err.get("message") or err)), Done()]
        if kind == "error":
            return [Failure(str(obj.get("message") or obj))]
        return [Notice("unknown", str(kind))]


# What crew sets of each such server (0.169.0): "required" makes codex wait for it to start before the
# first turn (else its first turn goes without its tools); "prompt" makes codex ask its client before
# each of its tools runs (mcpServer/elicitation/request, where crew's policy asks for one: the
# conversation's approval policy) — else it runs them unasked.
MCP_SETTINGS = {"required": "true", "default_tools_approval_mode": '"prompt"'}
CONFIGURED_URL = r'(?m)^\s*(\w*base_url)\s*=\s*"([^"]+)"'  # a base URL in config.toml: its key, the URL


def _toml(value: str | list[str]) -> str:
    return json.dumps(value, ensure_ascii=False)  # no \ud83d surrogate escapes: TOML has none


def own_sandbox(turn: Turn) -> str:
    """Codex's own sandbox for its commands. Query mode: always read-only, so that no command of its
    own runs unasked: inside crew's sandbox Codex's cannot start (below), so none runs at all. Execute
    mode: the working directory; inside crew's sandbox, none: Codex's bwrap cannot start there
    (measured with 0.169.0: without capabilities it can neither map its user namespace's ids nor
    mount a /proc, and under Landlock it cannot write /proc/self/uid_map), so crew's alone confines
    its commands, as it confines Codex."""
    if turn.mode != "execute":
        return "read-only"
    return "danger-full-access" if turn.sandbox is not None else "workspace-write"


class CodexProvider(Provider):
    name = "codex"
    binary = "codex"
    install_hint = "npm install -g @openai/codex"
    tested = "0.169.0"
    login = ("login",)
    images_via = "live"
    live = "crewbridge.conversations.codex:CodexLiveConversation"
    native_via = "dynamic tools on its app-server thread"
    mcp_via = "options"
    # The Responses API, a ChatGPT login's backend, and where that login is refreshed.
    hosts = ("api.openai.com", "chatgpt.com", "auth.openai.com")
    base_url_variables = ("OPENAI_BASE_URL",)
    login_env = ("OPENAI_API_KEY", "CODEX_API_KEY", "CODEX_ACCESS_TOKEN")  # 0.169.0 reads each

    def logins(self, env: Mapping[str, str]) -> frozenset[str]:
        # A model provider in its config.toml names the variable its key is in (`env_key`).
        try:
            text = (cli_home(env, "CODEX_HOME", ".codex") / "config.toml").read_text(errors="replace")
        except OSError:
            text = ""
        return frozenset({*self.login_env, *re.findall(r'(?m)^\s*env_key\s*=\s*"([A-Za-z_]\w*)"', text)})

    def argv(self, turn: Turn) -> list[str]:
        argv = [self.binary, "exec", "--json", "--skip-git-repo-check", "--sandbox", own_sandbox(turn)]
        if turn.model:
            argv += ["--model", turn.model]
        argv += turn.options
        if turn.session_id:
            argv += ["resume", turn.session_id]
        return [*argv, "-"]

    def decoder(self) -> CodexDecoder:
        return CodexDecoder()

    def mcp_options(self, servers: Sequence[McpServer]) -> list[str]:
        # `-c mcp_servers.NAME.KEY=VALUE`, the value TOML (JSON's strings and arrays are TOML's).
        # The environment's values are on the command line: codex reads no variables in them.
        # Its model reaches the servers' tools from the JavaScript its `exec` tool runs.
        options = []
        for server in servers:
            table = {"command": _toml(server.command), "args": _toml(list(server.args))}
            if server.env:
                table["env"] = "{" + ", ".join(f"{_toml(k)} = {_toml(v)}" for k, v in server.env) + "}"
            table.update(MCP_SETTINGS)
            for key, value in table.items():
                options += ["-c", f"mcp_servers.{server.name}.{key}={value}"]
        return options

    def has_session(self, session_id: str, env: Mapping[str, str], cwd: Path) -> bool:
        # $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl
        sessions = cli_home(env, "CODEX_HOME", ".codex") / "sessions"
        return any(sessions.glob(f"*/*/*/rollout-*-{session_id}.jsonl"))

    def commands(self) -> list[list[str]]:
        return [*super().commands(), [self.binary, "app-server"]]  # the live conversation

    def mcp_commands(self, serve: list[str]) -> tuple[list[str], list[str]]:
        return [self.binary, "mcp", "add", SERVER, "--", *serve], [self.binary, "mcp", "remove", SERVER]

    def mcp_files(self, env: Mapping[str, str], cwd: Path) -> list[tuple[Path, str]]:
        return [(cli_home(env, "CODEX_HOME", ".codex") / "config.toml", "toml")]  # [mcp_servers.crew]

    def own_mcp_only(self, turn: Turn, env: Mapping[str, str], cwd: Path) -> list[str]:
        # Codex merges a -c table into its config's, so each server its config files name is turned
        # off by name (crew's tools reach it as dynamic tools, never as an MCP server).
        files = (cli_home(env, "CODEX_HOME", ".codex") / "config.toml", cwd / ".codex" / "config.toml")
        given = {server.name for server in turn.mcp_servers}  # an editor's, by the same name: kept on
        names = sorted({name for path in files for name in mcp_servers(path, "toml")} - given)
        return [option for name in names for option in ("-c", f"mcp_servers.{name}.enabled=false")]

    def endpoints(self, env: Mapping[str, str]) -> list[Entry]:
        # The base URLs of $CODEX_HOME/config.toml ([model_providers.NAME] base_url, and the like);
        # a project's .codex/config.toml is the project's, not the user's word.
        try:
            text = (cli_home(env, "CODEX_HOME", ".codex") / "config.toml").read_text()
        except (OSError, UnicodeDecodeError):
            text = ""
        from crewbridge.sandbox.allowlist import from_url  # for start-up speed: a run with a sandbox only

        found = [from_url(url, f"{key} in config.toml") for key, url in re.findall(CONFIGURED_URL, text)]
        return [*super().endpoints(env), *(one for one in found if one is not None)]

    def state(self, env: Mapping[str, str]) -> State:
        # Measured with 0.169.0 (strace; docs/sandbox.md): it writes its sessions, an id it makes once,
        # lock files, and sqlite databases, which it keeps beside config.toml unless CODEX_SQLITE_HOME
        # names another folder: in the view they are private, fresh each start (it resumes a thread
        # from its sessions all the same). Its shell snapshots, which its commands source, are
        # private, and so is tmp/, where each start makes links to itself (apply_patch, its sandbox
        # helper): where a plain run had left tmp/, the view led codex to the real one, its chmod
        # failed and it went on without them (no effect on its commands was seen). It reads
        # config.toml (MCP servers, notify), .env (its environment: PATH, keys), auth.json, rules/,
        # hooks.json, AGENTS.md, skills/ there: read-only.
        # It logs in with auth.json (a ChatGPT sign-in's tokens, or a key) or a key in its .env.
        home = cli_home(env, "CODEX_HOME", ".codex")
        sqlite = env.get("CODEX_SQLITE_HOME")
        return State(
            login=(home / "auth.json", home / ".env"),
            home=home,
            variable="CODEX_HOME",
            data=(
                *(home / name for name in ("sessions", "archived_sessions", "log", "thread-writer-locks")),
                *((Path(sqlite),) if sqlite else ()),
            ),
            data_files=(home / "installation_id",),
            private=("shell_snapshots", "tmp", *(() if sqlite else ("sqlite",))),
            view_env=() if sqlite else (("CODEX_SQLITE_HOME", "sqlite"),),
        )
