"""Gemini CLI: `gemini -o stream-json`, prompt on stdin (no -p)."""

from __future__ import annotations

import contextlib
import glob
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.providers.base import JsonLineDecoder, Provider, Turn, cli_home

from crewbridge.base import jsonio
from crewbridge.base.decoded import Done, Event, Failure, MessageEnd, Notice, OwnCall, OwnResult, Session, Text, Usage
from crewbridge.sandbox import State
from crewbridge.toolkit.native import SERVER  # the name `crew mcp install` registers crew under

if TYPE_CHECKING:
    from crewbridge.sandbox.allowlist import Entry

# What the native conversation (conversations/gemini_acp.py) runs instead of stream-json: ACP on stdio, in the
# approval mode in which Gemini asks its client before each use of its own tools that write or run
# commands (crew's policy answers). Gemini names an MCP server's tools mcp_<server>_<tool>: told to
# allow crew's, it never asks about them (crew's policy applies in each call anyway). The flag also
# replaces the user's own list of tools Gemini runs without asking, so every other write or command
# is asked about.
NO_SERVER = "crew:none"  # the MCP server gemini may start when crew gives it none: no server has that name
ACP_SERVER = "crewbridge"  # crew's own MCP server in gemini's ACP session: its tools are mcp_crewbridge_*
NATIVE_FLAGS = ["--acp", "--approval-mode", "default", "--allowed-tools", f"mcp_{ACP_SERVER}_*"]


class GeminiDecoder(JsonLineDecoder):
    """stream-json events → assistant text. The prompt is echoed as a role "user" message: skip it.
    Its own tools' uses and results (tool_use, tool_result) are OwnCall and OwnResult events, and
    end a message."""

    def event(self, obj: dict[str, Any]) -> list[Event]:
        kind = obj.get("type")
        if kind == "init":
            return [Session(obj.get("session_id"), obj.get("model"))]
        if kind == "message":
            if obj.get("role") == "assistant":
                return [Text(obj.get("content") or "")]
            return [Notice("echo", str(obj.get("role")))]
        if kind == "tool_use":
            return [MessageEnd(), OwnCall(str(obj.get("tool_id")), str(obj.get("tool_name")), obj.get("parameters"))]
        if kind == "tool_result":
            error = obj.get("error")
            output = obj.get("output") or (error.get("message") if isinstance(error, dict) else error) or ""
            return [MessageEnd(), OwnResult.of(str(obj.get("tool_id")), obj.get("status") == "success", str(output))]
        if kind == "result":
            return self._result(obj)
        if kind == "error":
            return [Failure(str(obj.get("message") or obj))]
        return [Notice("unknown", str(kind))]

    def _result(self, obj: dict[str, Any]) -> list[Event]:
        stats = obj.get("stats") or {}
        usage = Usage(
            stats.get("input_tokens") or 0, stats.get("output_tokens") or 0, cached_tokens=stats.get("cached") or 0
        )
        out: list[Event] = [MessageEnd(), usage]
        if obj.get("status") == "error":
            err = obj.get("error") or {}
            out.append(Failure(_readable(str(err.get("message") if isinstance(err, dict) else err))))
        return [*out, Done()]


def _readable(message: str) -> str:
    """Gemini wraps the API's JSON error body in its message ("[API Error: {…}]"): say it plainly."""
    start, end = message.find("{"), message.rfind("}")
    try:
        body = jsonio.loads(message[start : end + 1]) if 0 <= start < end else None
    except ValueError:
        return message
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or not error.get("message"):
        return message
    code = " ".join(str(error[k]) for k in ("code", "status") if error.get(k))
    return f"API Error{' ' + code if code else ''}: {error['message']}"


class GeminiProvider(Provider):
    name = "gemini"
    binary = "gemini"
    install_hint = "npm install -g @google/gemini-cli"
    tested = "0.61.0"
    login = ()  # its first interactive start asks how to log in
    images_via = "native"
    live = "crewbridge.conversations.gemini:GeminiSessionConversation"
    native = "crewbridge.conversations.gemini_acp:GeminiAcpConversation"
    native_via = "an MCP server in crew's process, over ACP (gemini --acp)"
    mcp_via = "session"  # its -p mode takes MCP servers only from its settings files
    # An API key (Gemini's or Google's), Vertex AI's service account file, a Google Cloud token.
    login_env = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_ACCESS_TOKEN")
    # Its own tools (0.61) that read the project or change only its own state (a to-do list, the
    # topic it shows); the rest write files, run commands, fetch URLs or run other agents.
    read_only_tools = frozenset(
        {"read_file", "read_many_files", "list_directory", "glob", "grep_search", "write_todos", "update_topic"}
    )
    default_model = "gemini-2.5-pro"  # naming a model skips the CLI's extra routing call
    # The Gemini API; Code Assist (a Google login) and where that login is refreshed; Vertex AI.
    hosts = (
        "generativelanguage.googleapis.com",
        "cloudcode-pa.googleapis.com",
        "oauth2.googleapis.com",
        "aiplatform.googleapis.com",
    )
    base_url_variables = ("GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL")

    def argv(self, turn: Turn) -> list[str]:
        argv = [self.binary, "-o", "stream-json", "-m", turn.model or self.default_model]
        if turn.session_id:
            argv += ["--resume", turn.session_id]
        # Always explicit: settings.json may set general.defaultApprovalMode. Headless "default"
        # leaves out every tool that would ask for approval (writes, shell).
        argv += ["--approval-mode", "auto_edit" if turn.mode == "execute" else "default"]
        return argv + turn.options

    def native_argv(self, turn: Turn) -> list[str]:
        """The native conversation's command: one process for the whole conversation, speaking ACP."""
        return [self.binary, "-m", turn.model or self.default_model, *NATIVE_FLAGS, *turn.options]

    def commands(self) -> list[list[str]]:
        return [*super().commands(), self.native_argv(Turn("", "query", model="MODEL"))]

    def mcp_commands(self, serve: list[str]) -> tuple[list[str], list[str]]:
        # trusted: in -p mode gemini offers an MCP server's tools only when it is
        scope = ["--scope", "user"]
        add = [self.binary, "mcp", "add", *scope, "--trust", SERVER, *serve]
        return add, [self.binary, "mcp", "remove", *scope, SERVER]

    def mcp_files(self, env: Mapping[str, str], cwd: Path) -> list[tuple[Path, str]]:
        home = cli_home(env, "GEMINI_CLI_HOME", "") / ".gemini"
        return [(home / "settings.json", "json"), (cwd / ".gemini" / "settings.json", "json")]

    def decoder(self) -> GeminiDecoder:
        return GeminiDecoder()

    def has_session(self, session_id: str, env: Mapping[str, str], cwd: Path) -> bool:
        # Gemini resumes only the sessions of the project it runs in
        folder = project_folder(env, cwd)
        return folder is not None and session_file(env, session_id, folder) is not None

    def own_mcp_only(self, turn: Turn, env: Mapping[str, str], cwd: Path) -> list[str]:
        # Only crew's own server, which the native conversation hands it over ACP; else one no
        # settings file names (an empty list it refuses), so that none starts. The filter is by name
        # and applies to ACP's servers too: crew's own is not named "crew", as `crew mcp install
        # gemini` names the `crew mcp` it registers (which gemini would start at its start-up).
        # The servers an editor gives a crew acp session (turn.mcp_servers) are allowed by name too.
        names = [*([ACP_SERVER] if turn.native else []), *(server.name for server in turn.mcp_servers)]
        return ["--allowed-mcp-server-names", ",".join(names) or NO_SERVER]

    def endpoints(self, env: Mapping[str, str]) -> list[Entry]:
        from crewbridge.sandbox.allowlist import entry  # for start-up speed: a run with a sandbox only

        found = super().endpoints(env)
        location = env.get("GOOGLE_CLOUD_LOCATION", "")
        if re.fullmatch(r"[a-z0-9-]{1,40}", location) and location != "global":  # Vertex AI's regional host
            found.append(entry(f"{location}-aiplatform.googleapis.com", "GOOGLE_CLOUD_LOCATION", private_ok=False))
        return found

    def state(self, env: Mapping[str, str]) -> State:
        # Measured with 0.61.0 (strace; docs/sandbox.md): it writes its sessions and logs under tmp/.
        # At each start it rewrites projects.json by a temp file and a rename, holding a lock folder
        # it makes beside the file a link leads to (proper-lockfile resolves links), retried with a
        # growing delay for hours: a copy of its own in the view, so its changes are dropped (it
        # finds a project's folder again by the .project_root file in it). history/ holds git
        # repositories it runs git in (checkpoints): private. It reads settings.json, .env,
        # GEMINI.md, extensions/, policies/, agents/, skills/, trustedFolders.json there: read-only,
        # and so is tmp/bin, where it looks for the ripgrep it runs. GEMINI_CLI_HOME names the folder
        # holding .gemini: the view holds links to that folder's other entries (~/.agents, ~/.env).
        # It logs in with a Google account's tokens (oauth_creds.json, or gemini-credentials.json
        # encrypted), its MCP servers' and agents' tokens, a key in its .env or ~/.env, or Vertex AI's
        # service account file (GOOGLE_APPLICATION_CREDENTIALS).
        home = cli_home(env, "GEMINI_CLI_HOME", "") / ".gemini"
        logins = ("oauth_creds.json", "google_accounts.json", "gemini-credentials.json", "mcp-oauth-tokens.json")
        account = env.get("GOOGLE_APPLICATION_CREDENTIALS")
        return State(
            home=home,
            variable="GEMINI_CLI_HOME",
            within=".gemini",
            data=(home / "tmp",),
            private=("history",),
            copies=("projects.json",),
            read_only=(home / "tmp" / "bin",),
            login=(
                *(home / name for name in (*logins, "a2a-oauth-tokens.json", ".env")),
                home.parent / ".env",
                *((Path(account),) if account and os.path.isabs(account) else ()),
            ),
        )

    def api_status(self, exit_code: int) -> int | None:
        # After an API error Gemini exits with the HTTP status mod 256 (429 → 173): 400 to 511 are
        # told apart from its own exit codes (below 144).
        return exit_code + 256 if 144 <= exit_code < 256 else None

    def env(self) -> dict[str, str]:
        # Without it the CLI starts a second node process for itself (only to raise its heap
        # limit): measured here 4.5 s instead of 8.4 s a turn under load, and one process, not a
        # parent that ignores SIGTERM.
        return {"GEMINI_CLI_NO_RELAUNCH": "true"}


def project_folder(env: Mapping[str, str], cwd: Path) -> str | None:
    """The folder under ~/.gemini/tmp/ in which Gemini keeps the sessions of project `cwd`:
    projects.json names it, or (when Gemini ran in crew's sandbox, where its changes to projects.json
    are dropped) the .project_root file in it names the project."""
    home = cli_home(env, "GEMINI_CLI_HOME", "") / ".gemini"
    try:
        folder = jsonio.loads((home / "projects.json").read_text(encoding="utf-8"))["projects"][str(cwd)]
    except (OSError, ValueError, KeyError, TypeError):
        folder = None
    if isinstance(folder, str):
        return folder
    for marker in (home / "tmp").glob("*/.project_root"):
        with contextlib.suppress(OSError, UnicodeDecodeError):
            if marker.read_text(encoding="utf-8").strip() == str(cwd):
                return marker.parent.name
    return None


def session_file(env: Mapping[str, str], session_id: str | None, project: str | None = None) -> Path | None:
    """The file Gemini keeps session `session_id` in (the newest, if it was ever copied), in the
    folder of `project` (default: any project's)."""
    if not session_id:
        return None
    home = cli_home(env, "GEMINI_CLI_HOME", "")
    pattern = f"{glob.escape(project) if project else '*'}/chats/session-*-{session_id[:8]}.jsonl"
    candidates = [path for path in (home / ".gemini" / "tmp").glob(pattern) if _session_id(path) == session_id]
    return max(candidates, key=lambda path: path.stat().st_mtime, default=None)


def _session_id(path: Path) -> str | None:
    try:
        with path.open(encoding="utf-8") as file:
            return jsonio.loads(file.readline()).get("sessionId")
    except (OSError, ValueError, AttributeError):
        return None
