"""crew as the SDK's `acp.Agent`: sessions bound to a folder (and the editor's additional
directories), prompts run by crew's loop on the chosen agent and mode, their progress streamed as
`session/update`s, cancel, load, resume, close and list.

The SDK reads and writes on the event loop; each prompt runs on a thread of its own (the engine is
synchronous), and what it says goes back through the session's courier (crewbridge.acp.wire)."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import logging
import os
import re
from pathlib import Path
from typing import Any

from acp import Agent, RequestError
from acp.agent.connection import AgentSideConnection
from acp.schema import (
    AuthenticateResponse,
    ClientCapabilities,
    CloseSessionResponse,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpServerStdio,
    NewSessionResponse,
    PromptResponse,
    ResourceContentBlock,
    ResumeSessionResponse,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    TextContentBlock,
)

from crewbridge.acp.early import LOGINS, Greeting, hello
from crewbridge.acp.session import Serving, Session, new_session_id, runs_of, sessions
from crewbridge.acp.wire import Courier, stdio
from crewbridge.config import Config, load_config
from crewbridge.errors import CrewError
from crewbridge.protocol.jsonrpc import INVALID_PARAMS
from crewbridge.providers.base import Image, McpServer
from crewbridge.toolkit.native import SERVER

TYPE_CHECKING = False
if TYPE_CHECKING:
    from crewbridge.sandbox import Sandboxing

log = logging.getLogger("crewbridge.acp")
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")  # what claude, gemini and codex take
MAX_IMAGE = 20 << 20  # bytes of one image (decoded)
SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # a TOML key as codex takes it, a tool name's part for claude


class CrewAgent(Agent):
    """The agent crew acp serves. `config_path`: --config; `sandbox`: --sandbox (replaces each
    folder's crew.yaml `sandbox:`)."""

    def __init__(
        self,
        *,
        config_path: Path | None = None,
        sandbox: str | None = None,
        sandboxing: Sandboxing | None = None,
        serving: Serving | None = None,
    ) -> None:
        self.config_path, self.sandbox, self.sandboxing = config_path, sandbox, sandboxing
        self.serving = serving or Serving()
        self.client: AgentSideConnection | None = None
        self.capabilities = ClientCapabilities()
        self.sessions: dict[str, Session] = {}
        self.issued: set[str] = set()  # the sessions this process made: one not yet prompted has no runs

    def on_connect(self, conn: Any) -> None:
        self.client = conn

    def greeted(self, params: dict[str, Any]) -> None:
        """The client's `initialize`, answered before this agent loaded (crewbridge.acp.early)."""
        capabilities = params.get("clientCapabilities")
        try:
            self.capabilities = ClientCapabilities.model_validate(capabilities or {})
        except ValueError:  # answered all the same: it offers nothing crew would use
            self.capabilities = ClientCapabilities()

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        self.capabilities = client_capabilities or ClientCapabilities()
        return InitializeResponse.model_validate(hello())

    async def authenticate(self, method_id: str, **kwargs: Any) -> AuthenticateResponse:
        """A login the editor ran in a terminal (`crew acp login CLI`): the CLI keeps it, crew has
        nothing more to do."""
        if method_id not in LOGINS:
            raise _refused(f"'{method_id}' is not one of crew's auth methods: {', '.join(LOGINS)}")
        return AuthenticateResponse()

    async def new_session(
        self, cwd: str, additional_directories: list[str] | None = None, mcp_servers: Any = None, **kwargs: Any
    ) -> NewSessionResponse:
        session = self._session(new_session_id(), cwd, additional_directories, servers=_servers(mcp_servers))
        self.issued.add(session.id)
        return NewSessionResponse(session_id=session.id, modes=session.modes(), config_options=session.options())

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: Any = None, additional_directories: Any = None, **kwargs: Any
    ) -> LoadSessionResponse:
        session = await self._reopened(session_id, cwd, additional_directories, mcp_servers)
        await asyncio.to_thread(session.replay)
        await session.courier.drain()
        return LoadSessionResponse(modes=session.modes(), config_options=session.options())

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: Any = None,
        **kwargs: Any,
    ) -> ResumeSessionResponse:
        """session/load without the replay: the editor shows the history it kept."""
        session = await self._reopened(session_id, cwd, additional_directories, mcp_servers)
        return ResumeSessionResponse(modes=session.modes(), config_options=session.options())

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        """End the session here: its running prompt is cancelled; its runs stay (session/load)."""
        session = self.sessions.pop(session_id, None)
        if session is None:
            raise _refused(f"session '{session_id}' is not open; session/new or session/load opens one")
        session.close()
        return CloseSessionResponse()

    async def _reopened(self, session_id: str, cwd: str, directories: Any, servers: Any) -> Session:
        """A session of crew's record (or made by this process and not yet prompted) opened again,
        its choices those of its last run."""
        runs = await asyncio.to_thread(runs_of, session_id)
        if not runs and session_id not in self.issued:
            raise _refused(f"session '{session_id}' not found; session/list lists crew's sessions")
        last = runs[-1].run_id if runs else None
        session = self._session(session_id, cwd, directories, last_run=last, servers=_servers(servers))
        if runs:
            agents, mode = runs[-1].agents, runs[-1].mode
            if agents and agents[0] in session.config.agents:
                session.choices = dataclasses.replace(session.choices, agent=agents[0])
            if mode in ("query", "execute"):
                session.choices = dataclasses.replace(session.choices, mode=str(mode))
        return session

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        return ListSessionsResponse(sessions=await asyncio.to_thread(sessions, cwd))

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> SetSessionModeResponse:
        session = self._get(session_id)
        self._choose(session, "mode", mode_id)
        session.courier.notify(
            ConfigOptionUpdate(session_update="config_option_update", config_options=session.options())
        )
        return SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        session = self._get(session_id)
        self._choose(session, config_id, str(value))
        if config_id == "mode":
            session.courier.notify(CurrentModeUpdate(session_update="current_mode_update", current_mode_id=str(value)))
        return SetSessionConfigOptionResponse(config_options=session.options())

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        session = self._get(session_id)
        if session.stop is not None:
            raise RequestError.invalid_request({"details": "a prompt is running in this session; cancel it first"})
        text, context, images = _task(prompt)
        if not text.strip():
            raise RequestError.invalid_params({"details": "the prompt has no text; say what the agent should do"})
        # the SDK hands the prompt's _meta over as keywords: its trace context is the run's parent
        reason = await asyncio.to_thread(session.run, text, context, session.begin(), images, kwargs)
        await session.courier.drain()
        return PromptResponse(stop_reason=reason)  # type: ignore[arg-type]

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None:
            session.cancel()

    async def fork_session(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("session/fork")

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def close(self) -> None:
        """End every session: their running prompts' CLIs."""
        for session in self.sessions.values():
            session.close()

    def _session(
        self,
        session_id: str,
        cwd: str,
        directories: list[str] | None,
        last_run: str | None = None,
        servers: tuple[McpServer, ...] = (),
    ) -> Session:
        folder = Path(cwd)
        if not folder.is_absolute() or not folder.is_dir():
            raise _refused(f"cwd '{cwd}' is not an absolute path to a folder; open a folder in the editor")
        roots = []
        for directory in directories or []:
            root = Path(directory)
            if not root.is_absolute() or not root.is_dir():
                raise _refused(f"additional directory '{directory}' is not an absolute path to a folder")
            roots.append(root.resolve())
        try:
            config = self._config(folder)
            assert self.client is not None
            session = Session(
                session_id,
                folder.resolve(),
                config,
                client=self.client,
                courier=Courier(asyncio.get_running_loop(), self._sender(session_id)),
                sandboxing=self.sandboxing,
                serving=self.serving,
                files=bool(self.capabilities.fs and self.capabilities.fs.read_text_file),
                last_run=last_run,
                mcp_servers=servers,
                roots=tuple(roots),
            )
        except CrewError as exc:
            raise _refused(str(exc)) from None
        old = self.sessions.pop(session_id, None)
        if old is not None:
            old.close()
        self.sessions[session_id] = session
        return session

    def _config(self, folder: Path) -> Config:
        config = load_config(self.config_path, folder)
        return dataclasses.replace(config, sandbox=self.sandbox) if self.sandbox else config

    def _sender(self, session_id: str) -> Any:
        async def send(update: Any) -> None:
            assert self.client is not None
            await self.client.session_update(session_id=session_id, update=update)

        return send

    def _get(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise _refused(f"session '{session_id}' is not open; session/new or session/load opens one")
        return session

    def _choose(self, session: Session, key: str, value: str) -> None:
        try:
            session.choose(key, value)
        except CrewError as exc:
            raise RequestError.invalid_params({"details": str(exc)}) from None


def _refused(message: str) -> RequestError:
    """An error the editor shows as it is."""
    return RequestError(INVALID_PARAMS, message)


def _servers(given: list[Any] | None) -> tuple[McpServer, ...]:
    """The editor's MCP servers (session/new's mcpServers) as crew gives them to the CLIs: on stdio
    only (crew offers no mcpCapabilities), each named as a CLI can name it, crew's own name apart."""
    servers: list[McpServer] = []
    for server in given or []:
        name = getattr(server, "name", "")
        if not isinstance(server, McpServerStdio):
            raise _refused(f"MCP server '{name}' is not on stdio; crew acp gives the CLIs MCP servers on stdio only")
        if not SERVER_NAME.fullmatch(name) or name == SERVER or name in {s.name for s in servers}:
            raise _refused(
                f"MCP server name '{name}' cannot be given to the CLIs: name each server once, in letters, "
                f"digits, '-' and '_', other than '{SERVER}' (crew's own tools)"
            )
        env = tuple((variable.name, variable.value) for variable in server.env)
        servers.append(McpServer(name, server.command, tuple(server.args), env))
    return tuple(servers)


def _task(blocks: list[Any]) -> tuple[str, str | None, tuple[Image, ...]]:
    """The prompt's text, the context its embedded resources and links give, and its images."""
    text, context, images = [], [], []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            text.append(block.text)
        elif isinstance(block, EmbeddedResourceContentBlock) and hasattr(block.resource, "text"):
            context.append(f'<context uri="{block.resource.uri}">\n{block.resource.text}\n</context>')
        elif isinstance(block, ResourceContentBlock):
            context.append(f"(the user points at {block.uri})")
        elif isinstance(block, ImageContentBlock):
            images.append(_image(block))
    return "".join(text), "\n\n".join(context) or None, tuple(images)


def _image(block: ImageContentBlock) -> Image:
    """An image of the prompt, its bytes decoded; refused when its type or bytes cannot go to a model."""
    if block.mime_type not in IMAGE_TYPES:
        raise _refused(f"an image of type '{block.mime_type}' cannot be sent; send {', '.join(IMAGE_TYPES)}")
    try:
        data = base64.b64decode(block.data, validate=True)
    except ValueError:
        raise _refused("an image's data is not base64; send the image's bytes in base64") from None
    if len(data) > MAX_IMAGE:
        raise _refused(f"an image of {len(data):,} bytes is too large; send one of {MAX_IMAGE >> 20} MB at most")
    return Image(block.mime_type, data)


def serve(
    greeting: Greeting | None = None,
    *,
    config_path: Path | None = None,
    sandbox: str | None = None,
    sandboxing: Sandboxing | None = None,
    serving: Serving | None = None,
) -> None:
    """Serve ACP on stdin and stdout until stdin ends; then everything crew started is ended."""
    agent = CrewAgent(config_path=config_path, sandbox=sandbox, sandboxing=sandboxing, serving=serving)
    if greeting is not None and greeting.initialize is not None:
        agent.greeted(greeting.initialize)
    _quiet_logs()
    try:
        asyncio.run(_serve(agent, greeting.leftover if greeting else b""))
    finally:
        agent.close()
        from crewbridge.system.process import end_all

        end_all()


async def _serve(agent: CrewAgent, leftover: bytes) -> None:
    transport = await stdio(leftover)
    # session/close and session/resume, stable in ACP v1's spec, are routed by SDK 0.12.1 only with
    # this flag (as is session/fork, which crew refuses itself)
    connection = AgentSideConnection(agent, transport, listening=False, use_unstable_protocol=True)
    try:
        await connection.listen()
    finally:
        agent.close()


def _quiet_logs() -> None:
    """The SDK logs what goes wrong in a handler with its traceback; crew says it in one line
    (CREW_DEBUG=1: with the traceback)."""

    class OneLine(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            if os.environ.get("CREW_DEBUG"):
                return "crew acp: " + super().format(record)
            error = f": {record.exc_info[1]}" if record.exc_info and record.exc_info[1] else ""
            return f"crew acp: {record.getMessage()}{error}"

    handler = logging.StreamHandler()
    handler.setFormatter(OneLine())
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
