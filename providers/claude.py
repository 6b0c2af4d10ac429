"""Claude Code: `claude -p --output-format stream-json --verbose`, prompt on stdin."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from crewbridge.providers.base import (
    OTLP_ENDPOINTS,
    JsonLineDecoder,
    McpServer,
    Provider,
    Turn,
    base_urls,
    cli_home,
    mcp_variables,
)

from crewbridge.base import jsonio
from crewbridge.base.decoded import Done, Event, Failure, MessageEnd, Notice, OwnCall, OwnResult, Session, Text, Usage
from crewbridge.sandbox import State
from crewbridge.toolkit.native import SERVER

if TYPE_CHECKING:
    from crewbridge.sandbox.allowlist import Entry

# Query mode offers only these of Claude's own tools. An allow list, not a deny list: 2.1.197 also
# has CronCreate, EnterWorktree, Skill, Workflow, … and each version adds more.
READ_ONLY_TOOLS = "Read,Glob,Grep"
# What the live conversation (crewbridge/conversations/claude.py) adds to the command. With the permission prompt tool
# on stdio, Claude asks crew (can_use_tool) before each use of its own tools that its permission rules
# do not already allow; crew's policy answers. That option is hidden: --help does not list it (the
# Agent SDK uses it), so `crew doctor` does not look for it.
# The folders of its state folder it writes as data (its content, not its settings).
CLAUDE_DATA = ("projects", "sessions", "todos", "file-history", "plans", "debug", "paste-cache", "image-cache")
STREAM_FLAGS = ["--input-format", "stream-json", "--include-partial-messages"]
LIVE_FLAGS = [*STREAM_FLAGS, "--permission-prompt-tool", "stdio"]
# What it adds for native tools: crew's tools as an SDK MCP server named crew, served over the control
# protocol by crew itself (no process of its own); their calls need no question: crew's policy applies
# to each call anyway.
NATIVE_FLAGS = [
    "--mcp-config",
    json.dumps({"mcpServers": {SERVER: {"type": "sdk", "name": SERVER}}}),
    "--allowedTools",
    f"mcp__{SERVER}",
]


CREW_TOOLS = f"mcp__{SERVER}__"  # crew's own tools, natively: recorded by crew's channel, not as the CLI's own


# What ClaudeDecoder reads of a line, and nothing else (JsonLineDecoder.fields): the structured copy
# of a tool's result, the text the `assistant` event repeats after its deltas, each event's uuid are
# skipped unbuilt.
class _Block(TypedDict, total=False):  # a content block (text, tool_use, tool_result), or a stream event's delta
    type: Any
    text: Any
    name: Any
    id: Any
    input: Any
    tool_use_id: Any
    content: Any
    is_error: Any


class _Message(TypedDict, total=False):
    id: Any
    model: Any
    content: list[_Block]


class _StreamEvent(TypedDict, total=False):
    type: Any
    delta: _Block
    message: _Message


class _Line(TypedDict, total=False):
    type: Any
    subtype: Any
    parent_tool_use_id: Any
    event: _StreamEvent
    message: _Message
    session_id: Any
    model: Any
    usage: Any
    total_cost_usd: Any
    modelUsage: Any
    is_error: Any
    result: Any
    errors: Any
    api_error_status: Any


class ClaudeDecoder(JsonLineDecoder):
    """stream-json events → assistant text. With --include-partial-messages the text arrives as
    stream_event deltas, and the full `assistant` event that follows repeats it: skip that copy.
    Without it, each content block is an `assistant` event of its own. Either way the text blocks of
    one message (one `message.id`) are one text: the message ends (MessageEnd) when another message
    starts, a native tool is used or the result comes, not at each block.

    Claude's own tools' uses (tool_use blocks, its subagents' too) are OwnCall events, their
    results (the `user` events' tool_result blocks) OwnResult events; crew's own tools (CREW_TOOLS)
    are neither."""

    fields = _Line

    def __init__(self) -> None:
        self._streamed: set[str] = set()  # message ids whose text came as deltas
        self._current: str | None = None  # the streaming message, until its first delta
        self._message: str | None = None  # the streaming message's id
        self._open: str | None = None  # the message whose text was given and not yet ended
        self._crews: set[str] = set()  # ids of uses of crew's own tools: their results are not the CLI's

    def event(self, obj: dict[str, Any]) -> list[Event]:
        kind = obj.get("type")
        if kind == "stream_event" and not obj.get("parent_tool_use_id"):
            ev = obj["event"]
            if ev.get("type") == "content_block_delta":  # most lines are text deltas: here first
                delta = ev["delta"]
                if delta.get("type") != "text_delta":
                    return []
                if self._current:  # the message's first delta: its full copy is to be skipped
                    self._streamed.add(self._current)
                    self._current = None
                return self._text(self._message, delta["text"])
            return self._stream_event(ev)
        if kind == "system":
            if obj.get("subtype") == "init":
                return [Session(obj.get("session_id"), obj.get("model"))]
            return [Notice("system", str(obj.get("subtype")))]
        if obj.get("parent_tool_use_id") and kind in ("stream_event", "assistant"):
            # a native Task subagent wrote it, not the model we asked: only its tools' uses count
            uses = self._uses(obj["message"].get("content") or []) if kind == "assistant" else []
            return [Notice("subagent", str(kind)), *uses]
        if kind == "assistant":
            return self._assistant(obj["message"])
        if kind == "user":
            return [*self._end(), *self._results(obj["message"])]
        if kind == "result":
            return self._end() + self._result(obj)
        return [Notice("unknown", str(kind))]

    def _text(self, message: str | None, text: str) -> list[Event]:
        out: list[Event] = [] if self._open is None or self._open == message else [MessageEnd()]
        self._open = message or ""
        out.append(Text(text))
        return out

    def _end(self) -> list[Event]:
        if self._open is None:
            return []
        self._open = None
        return [MessageEnd()]

    def _stream_event(self, ev: dict[str, Any]) -> list[Event]:
        kind = ev.get("type")
        if kind == "message_start":
            self._current = self._message = ev["message"].get("id")
        elif kind == "message_stop":
            return self._end()
        return []

    def _assistant(self, msg: dict[str, Any]) -> list[Event]:
        if msg.get("model") == "<synthetic>":  # written by the CLI (API error), not by the model
            return [*self._end(), Notice("synthetic", _text_of(msg))]
        streamed = msg.get("id") in self._streamed  # its text came as deltas, its tools' uses did not
        out: list[Event] = []
        for block in msg.get("content") or []:
            if block.get("type") == "text" and not streamed:
                out += self._text(msg.get("id"), block["text"])
            elif block.get("type") == "tool_use":
                out += [*self._end(), *self._uses([block])]
        return out

    def _uses(self, blocks: list[dict[str, Any]]) -> list[Event]:
        """The CLI's own tools' uses among a message's content blocks."""
        out: list[Event] = []
        for block in blocks:
            if block.get("type") != "tool_use":
                continue
            name, ref = str(block.get("name")), str(block.get("id"))
            if name.startswith(CREW_TOOLS):
                self._crews.add(ref)
            else:
                out.append(OwnCall(ref, name, block.get("input")))
        return out

    def _results(self, msg: dict[str, Any]) -> list[Event]:
        """The results of the CLI's own tools a `user` event holds (what else it holds, a subagent's
        prompt, is not the model's and not a tool's)."""
        content = msg.get("content")
        out: list[Event] = []
        for block in content if isinstance(content, list) else []:
            ref = block.get("tool_use_id")
            if block.get("type") == "tool_result" and ref not in self._crews:
                out.append(OwnResult.of(str(ref), not block.get("is_error"), _result_text(block.get("content"))))
        return out

    def _result(self, obj: dict[str, Any]) -> list[Event]:
        usage = obj.get("usage") or {}
        cached = usage.get("cache_read_input_tokens") or 0
        written = usage.get("cache_creation_input_tokens") or 0
        out: list[Event] = [
            Session(obj.get("session_id")),
            # Claude's input_tokens leave out the tokens read from and written to its cache
            Usage(
                (usage.get("input_tokens") or 0) + cached + written,
                usage.get("output_tokens") or 0,
                obj.get("total_cost_usd"),
                cached,
                context_window=_context_window(obj.get("modelUsage")),
            ),
        ]
        if obj.get("is_error"):
            message = obj.get("result") or "; ".join(obj.get("errors") or []) or obj.get("subtype")
            out.append(Failure(str(message), obj.get("api_error_status")))
        out.append(Done())
        return out


def _context_window(models: Any) -> int | None:
    """The context window of the model that did the reply's work (result's modelUsage names each model
    used, a small one for side tasks too): the one that read and wrote the most tokens."""
    if not isinstance(models, dict):
        return None
    used = [m for m in models.values() if isinstance(m, dict) and isinstance(m.get("contextWindow"), int)]
    counts = ("inputTokens", "outputTokens", "cacheReadInputTokens", "cacheCreationInputTokens")
    main = max(used, key=lambda m: sum(m.get(k) or 0 for k in counts if isinstance(m.get(k), int)), default=None)
    return None if main is None else main["contextWindow"]


def _result_text(content: Any) -> str:
    """A tool_result's content as text: a string, or its blocks' text (another block by its type)."""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "\n".join(
        str(part.get("text")) if part.get("type") == "text" else f"[{part.get('type')}]"
        for part in parts
        if isinstance(part, dict)
    )


def _text_of(msg: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in msg.get("content") or [] if b.get("type") == "text")


class ClaudeProvider(Provider):
    name = "claude"
    binary = "claude"
    install_hint = "npm install -g @anthropic-ai/claude-code"
    tested = "2.1.197"
    login = ("auth", "login")
    images_via = "live"
    live = "crewbridge.conversations.claude:ClaudeLiveConversation"
    native_via = "an SDK MCP server in its live process"
    read_only_tools = frozenset(READ_ONLY_TOOLS.split(","))
    mcp_via = "options"
    # The Messages API, and where a subscription's login is refreshed (2.1.197's binary names both).
    hosts = ("api.anthropic.com", "platform.claude.com")
    base_url_variables = ("ANTHROPIC_BASE_URL", "ANTHROPIC_BEDROCK_BASE_URL", "ANTHROPIC_VERTEX_BASE_URL")
    # An API key, a gateway's token, a subscription's token (`claude setup-token`), Bedrock's and
    # Foundry's keys (claude 2.1.197 reads each).
    login_env = (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "AWS_BEARER_TOKEN_BEDROCK",
        "ANTHROPIC_FOUNDRY_API_KEY",
    )

    def argv(self, turn: Turn) -> list[str]:
        argv = [self.binary, "-p", "--output-format", "stream-json", "--verbose"]
        if turn.model:
            argv += ["--model", turn.model]
        if turn.session_id:
            argv += ["--resume", turn.session_id]
        if turn.system_prompt:
            argv += ["--append-system-prompt", turn.system_prompt]
        if turn.mode == "query":
            argv += ["--tools", READ_ONLY_TOOLS]  # one argument: the option takes several
        return argv + turn.options

    def decoder(self) -> ClaudeDecoder:
        return ClaudeDecoder()

    def mcp_options(self, servers: Sequence[McpServer]) -> list[str]:
        # One more --mcp-config (claude loads each given). Its values name variables (claude reads
        # ${NAME}), the secrets being in its environment (mcp_env); alwaysLoad: claude -p waits for
        # the server to connect before it asks the model (else the first request goes without it).
        config = {
            server.name: {
                "type": "stdio",
                "command": server.command,
                "args": list(server.args),
                "env": {name: f"${{CREW_MCP_{number}_{index}}}" for index, (name, _) in enumerate(server.env, 1)},
                "alwaysLoad": True,
            }
            for number, server in enumerate(servers, 1)
        }
        return ["--mcp-config", json.dumps({"mcpServers": config})] if servers else []

    def mcp_env(self, servers: Sequence[McpServer]) -> dict[str, str]:
        return mcp_variables(servers)

    def has_session(self, session_id: str, env: Mapping[str, str], cwd: Path) -> bool:
        # ~/.claude/projects/<the working directory, every other character a dash>/<id>.jsonl
        projects = cli_home(env, "CLAUDE_CONFIG_DIR", ".claude") / "projects"
        return (projects / re.sub(r"[^A-Za-z0-9]", "-", str(cwd)) / f"{session_id}.jsonl").is_file()

    def commands(self) -> list[list[str]]:
        return [*super().commands(), self.argv(Turn("", "query")) + STREAM_FLAGS + NATIVE_FLAGS]

    def mcp_commands(self, serve: list[str]) -> tuple[list[str], list[str]]:
        scope = ["--scope", "user", SERVER]
        return [self.binary, "mcp", "add", *scope, "--", *serve], [self.binary, "mcp", "remove", *scope]

    def mcp_files(self, env: Mapping[str, str], cwd: Path) -> list[tuple[Path, str]]:
        return [(cli_home(env, "HOME", "") / ".claude.json", "json"), (cwd / ".mcp.json", "json")]

    def own_mcp_only(self, turn: Turn, env: Mapping[str, str], cwd: Path) -> list[str]:
        # Only the servers of --mcp-config (crew's own, for native tools; else none): not those of
        # ~/.claude.json (claude mcp add), .mcp.json or plugins.
        return ["--strict-mcp-config"]

    def endpoints(self, env: Mapping[str, str]) -> list[Entry]:
        # The user's settings.json may set the base URL too ("env"; a project's settings are the
        # project's, not the user's word).
        try:
            settings = jsonio.loads((cli_home(env, "CLAUDE_CONFIG_DIR", ".claude") / "settings.json").read_text())
            configured = {k: v for k, v in settings.get("env", {}).items() if isinstance(v, str)}
        except (OSError, ValueError, AttributeError):
            configured = {}
        return [*super().endpoints(env), *base_urls(configured, self.base_url_variables)]

    def telemetry_endpoints(self, env: Mapping[str, str]) -> list[Entry]:
        # CLAUDE_CODE_ENABLE_TELEMETRY=1 makes it export to the standard OTLP variables' collector.
        if env.get("CLAUDE_CODE_ENABLE_TELEMETRY", "").strip().lower() not in ("1", "true"):
            return []
        return base_urls(env, OTLP_ENDPOINTS)

    def state(self, env: Mapping[str, str]) -> State:
        # Measured with 2.1.197 (strace; docs/sandbox.md): it writes its sessions (projects/), a file
        # per running process (sessions/), and, as data, to-dos, file backups, plans, logs and caches.
        # It sources what it writes to session-env/ (hooks' environment, for its Bash tool, which
        # fails without it) and shell-snapshots/: private. It reads settings.json, .config.json,
        # .credentials.json, CLAUDE.md, agents/, commands/, plugins/, rules/, skills/, … there, and
        # ~/.claude.json (MCP servers), which it writes by a temp file renamed beside it: a link in the
        # view, which it follows, so those writes fail, measured to cost nothing but its counters.
        # It logs in with .credentials.json (a subscription's tokens) and ~/.claude.json (an API key
        # given at /login is kept there).
        home = cli_home(env, "CLAUDE_CONFIG_DIR", ".claude")
        also = () if env.get("CLAUDE_CONFIG_DIR") else ((".claude.json", home.parent / ".claude.json"),)
        return State(
            home=home,
            variable="CLAUDE_CONFIG_DIR",
            data=tuple(home / name for name in CLAUDE_DATA),
            private=("session-env", "shell-snapshots"),
            also=also,
            login=(home / ".credentials.json", also[0][1] if also else home / ".claude.json"),
        )
