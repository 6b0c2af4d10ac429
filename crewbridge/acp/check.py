"""`crew acp check -- COMMAND…`: a conformance check of any ACP agent, crew's own included (no
official suite exists). It drives the agent as an editor would, with the SDK's client: initialize
and version negotiation, capability gating (the client offers no fs and no terminal: the agent must
call neither), session/new, a prompt with streamed updates, a permission request answered each
way (the session first switched to a mode that may write, when it starts in one that only reads),
cancel, load of a past session where advertised, malformed frames. Each check held, failed,
or was not exercised (what the agent could not be made to do, such as its model never asking for a
permission): only a failed required check fails the whole."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import signal
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from acp import RequestError, text_block
from acp.client.connection import ClientSideConnection
from acp.connection import StreamEvent
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    Implementation,
    InitializeResponse,
    RequestPermissionResponse,
)

from crewbridge.acp.wire import MAX_FRAME, StdioTransport
from crewbridge.protocol.jsonrpc import METHOD_NOT_FOUND, PARSE_ERROR

HELD, FAILED, NOT_EXERCISED = "held", "FAILED", "not exercised"
ASKED = 2.0  # seconds the agent has to answer a malformed frame
GRACE = 10.0  # seconds the agent has to exit once its stdin is closed (then SIGTERM, then as long again)


@dataclass
class Result:
    name: str
    status: str
    detail: str = ""
    required: bool = True


@dataclass
class Client:
    """The checking client: it records every update, answers permission requests allow once, then
    reject, and refuses fs and terminal calls (it offered neither)."""

    updates: list[Any] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)  # the option kind chosen for each request
    forbidden: list[str] = field(default_factory=list)  # methods called that were not offered

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any) -> Any:
        wanted = "allow_once" if not self.asked else "reject_once"
        option = next((o for o in options if o.kind == wanted), None)
        self.asked.append(wanted if option else "cancelled")
        if option is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option.option_id))

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        if name.startswith(("read_", "write_", "create_terminal", "terminal_", "kill_", "release_", "wait_for")):

            async def refused(*args: Any, **kwargs: Any) -> Any:
                self.forbidden.append(name)
                raise RequestError.method_not_found(name)

            return refused
        raise AttributeError(name)

    def kinds(self, since: int = 0) -> list[str]:
        return [getattr(u, "session_update", "") for u in self.updates[since:]]


class Agent:
    """The agent under check, as a process, with the SDK's client connection to it and a record of
    every message it sent."""

    def __init__(self, command: list[str], cwd: str) -> None:
        self.command, self.cwd = command, cwd
        self.client = Client()
        self.seen: list[dict[str, Any]] = []

    async def __aenter__(self) -> Agent:
        self.process = await asyncio.create_subprocess_exec(
            *self.command,
            cwd=self.cwd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
            limit=MAX_FRAME,
        )
        assert self.process.stdout is not None and self.process.stdin is not None
        self.writer = self.process.stdin
        transport = StdioTransport(self.process.stdout, self.process.stdin)
        self.connection = ClientSideConnection(self.client, transport, observers=[self._observe])  # type: ignore[arg-type]  # a Client by its methods
        return self

    async def __aexit__(self, *exc: object) -> None:
        """End the agent as an editor does: its stdin closed and a moment to exit on its own (to
        save what it keeps), then its process group ended."""
        with contextlib.suppress(Exception):
            await self.connection.close()
        with contextlib.suppress(Exception):
            self.writer.close()
        for sent in (None, signal.SIGTERM, signal.SIGKILL):
            if sent is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.process.pid, sent)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.process.wait()), GRACE)
                break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)  # what it started and left behind
        await self.process.wait()

    def _observe(self, event: StreamEvent) -> None:
        if event.direction.value == "incoming":
            self.seen.append(event.message)

    async def raw(
        self, line: bytes, answered: Callable[[dict[str, Any]], bool], wait: float = ASKED
    ) -> dict[str, Any] | None:
        """Write `line` as it is; the message the agent answers it with, if one comes in time."""
        since = len(self.seen)
        self.writer.write(line)
        await self.writer.drain()
        loop = asyncio.get_running_loop()
        end = loop.time() + wait
        while loop.time() < end:
            found = next((m for m in self.seen[since:] if answered(m)), None)
            if found is not None:
                return found
            await asyncio.sleep(0.02)
        return None


class Checker:
    """Runs the checks on `command` and tells what held."""

    def __init__(self, command: list[str], *, timeout: float = 120.0, prompt: str, write_prompt: str) -> None:
        self.command, self.timeout = command, timeout
        self.prompt, self.write_prompt = prompt, write_prompt

    def run(self) -> list[Result]:
        with tempfile.TemporaryDirectory(prefix="crew-acp-check-") as folder:
            return asyncio.run(self._run(folder))

    async def _run(self, cwd: str) -> list[Result]:
        results: list[Result] = []
        session_id, loadable = await self._first(cwd, results)
        if session_id is not None and loadable:
            results.append(await self._load(cwd, session_id))
        elif session_id is not None:
            results.append(Result("session/load of a past session", NOT_EXERCISED, "not advertised", required=False))
        return results

    async def _first(self, cwd: str, results: list[Result]) -> tuple[str | None, bool]:
        async with Agent(self.command, cwd) as agent:
            connection, client = agent.connection, agent.client
            try:
                answer = await self._in_time(
                    connection.initialize(
                        protocol_version=999,
                        client_capabilities=ClientCapabilities(),
                        client_info=Implementation(name="crew-acp-check", version="1"),
                    )
                )
            except Exception as exc:  # what the agent did wrong, for the table
                results.append(Result("initialize", FAILED, _said(exc)))
                return None, False
            results.append(self._initialized(answer))
            results.append(await self._malformed(agent))
            try:
                session = await self._in_time(connection.new_session(cwd=cwd, mcp_servers=[]))
            except Exception as exc:
                results.append(Result("session/new", FAILED, _said(exc)))
                return None, False
            results.append(Result("session/new", HELD, f"session {session.session_id}"))
            sid = session.session_id
            results.append(await self._prompt(agent, sid))
            writing = await self._writing(agent, session)
            results.append(writing)
            results += await self._permissions(agent, sid, writing)
            results.append(await self._cancel(agent, sid))
            results.append(
                Result("no fs or terminal call to a client that offered none", FAILED, ", ".join(client.forbidden))
                if client.forbidden
                else Result("no fs or terminal call to a client that offered none", HELD)
            )
            caps = answer.agent_capabilities
            return sid, bool(caps and caps.load_session)

    def _initialized(self, answer: InitializeResponse) -> Result:
        version = answer.protocol_version
        name = "initialize: version negotiation (asked 999)"
        if not isinstance(version, int) or not 1 <= version <= 999:
            return Result(name, FAILED, f"answered protocolVersion {version!r}: not one the client asked for or below")
        info = answer.agent_info
        return Result(name, HELD, f"protocol {version}" + (f", {info.name} {info.version}" if info else ""))

    async def _malformed(self, agent: Agent) -> Result:
        name = "malformed frames get JSON-RPC errors"
        problems = []
        frames = (
            (b"{not json\n", PARSE_ERROR),
            (b'{"jsonrpc":"2.0","id":"x1","method":"crew/none"}\n', METHOD_NOT_FOUND),
        )
        for line, code in frames:
            answer = await agent.raw(line, functools.partial(_error_to, None if code == PARSE_ERROR else "x1"))
            if answer is None:
                problems.append(f"no error answered {line.decode().strip()!r}")
            elif answer["error"].get("code") != code:
                problems.append(f"{line.decode().strip()!r} got code {answer['error'].get('code')}, not {code}")
        if agent.process.returncode is not None:
            problems.append("the agent exited")
        return (
            Result(name, FAILED, "; ".join(problems)) if problems else Result(name, HELD, "parse error, unknown method")
        )

    async def _prompt(self, agent: Agent, sid: str) -> Result:
        name = "session/prompt streams updates"
        since = len(agent.client.updates)
        try:
            answer = await self._in_time(agent.connection.prompt(session_id=sid, prompt=[text_block(self.prompt)]))
        except Exception as exc:
            return Result(name, FAILED, _said(exc))
        chunks = agent.client.kinds(since).count("agent_message_chunk")
        if not chunks:
            return Result(name, FAILED, f"stopReason {answer.stop_reason}, but no agent_message_chunk before it")
        return Result(name, HELD, f"{chunks} agent_message_chunk, stopReason {answer.stop_reason}")

    async def _writing(self, agent: Agent, session: Any) -> Result:
        """Switch the session to a mode that may write (where it starts in one that only reads), so
        that a write asks for a permission: a session mode (session/set_mode), or a config option of
        the mode category (session/set_config_option)."""
        name = "a mode that may write, for the permission requests"
        modes = session.modes
        option = next((o for o in session.config_options or [] if o.category == "mode"), None)
        if modes is not None:
            current, offered = modes.current_mode_id, [(m.id, m.name) for m in modes.available_modes]
        elif option is not None and hasattr(option, "options"):
            current, offered = str(option.current_value), [(o.value, o.name) for o in option.options]
        else:
            return Result(name, NOT_EXERCISED, "the agent offers no modes: its session as it starts", required=False)
        if not _reads_only(current, dict(offered).get(current, "")):
            return Result(name, HELD, f"mode {current} as the session started", required=False)
        chosen = next((m for m, label in offered if not _reads_only(m, label) and not _asks_nothing(m, label)), None)
        if chosen is None:
            shown = ", ".join(m for m, _ in offered)
            return Result(name, NOT_EXERCISED, f"every mode it offers only reads or asks nothing: {shown}", False)
        try:
            if modes is not None:
                await self._in_time(agent.connection.set_session_mode(mode_id=chosen, session_id=session.session_id))
            else:
                assert option is not None
                await self._in_time(
                    agent.connection.set_config_option(config_id=option.id, session_id=session.session_id, value=chosen)
                )
        except Exception as exc:
            return Result(name, FAILED, f"switching to mode {chosen}: {_said(exc)}")
        how = "session/set_mode" if modes is not None else f"session/set_config_option {option.id if option else ''}"
        return Result(name, HELD, f"switched from {current} to {chosen} ({how})")

    async def _permissions(self, agent: Agent, sid: str, writing: Result) -> list[Result]:
        results = []
        for answered in ("allow_once", "reject_once"):
            name = f"a permission request answered {answered}"
            asked = len(agent.client.asked)
            try:
                answer = await self._in_time(
                    agent.connection.prompt(session_id=sid, prompt=[text_block(self.write_prompt)])
                )
            except Exception as exc:
                results.append(Result(name, FAILED, _said(exc)))
                continue
            if len(agent.client.asked) == asked:
                mode = f" ({writing.detail})" if writing.status == HELD else f" ({writing.status}: {writing.detail})"
                results.append(Result(name, NOT_EXERCISED, f"the agent asked no permission{mode}", required=False))
            else:
                results.append(Result(name, HELD, f"the prompt went on to stopReason {answer.stop_reason}"))
        return results

    async def _cancel(self, agent: Agent, sid: str) -> Result:
        name = "session/cancel ends the prompt with stopReason cancelled"
        since = len(agent.client.updates)
        prompt = asyncio.ensure_future(agent.connection.prompt(session_id=sid, prompt=[text_block(self.prompt)]))
        while not prompt.done() and len(agent.client.updates) == since:  # cancelled once it is under way
            await asyncio.sleep(0.01)
        await agent.connection.cancel(session_id=sid)
        try:
            answer = await self._in_time(prompt)
        except Exception as exc:
            return Result(name, FAILED, _said(exc))
        if answer.stop_reason == "cancelled":
            return Result(name, HELD)
        return Result(name, NOT_EXERCISED, f"the prompt ended ({answer.stop_reason}) before the cancel", required=False)

    async def _load(self, cwd: str, sid: str) -> Result:
        name = "session/load replays a past session (a new process)"
        async with Agent(self.command, cwd) as agent:
            try:
                await self._in_time(
                    agent.connection.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
                )
                await self._in_time(agent.connection.load_session(cwd=cwd, session_id=sid, mcp_servers=[]))
            except Exception as exc:
                return Result(name, FAILED, _said(exc))
            kinds = agent.client.kinds()
            if "user_message_chunk" not in kinds and "agent_message_chunk" not in kinds:
                return Result(name, FAILED, "no message of the past session was replayed")
            return Result(name, HELD, f"{len(kinds)} updates replayed")

    async def _in_time(self, awaitable: Awaitable[Any]) -> Any:
        try:
            return await asyncio.wait_for(awaitable, self.timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"no answer within {self.timeout:g}s") from None

    def table(self, results: list[Result]) -> str:
        width = max(len(r.name) for r in results)
        lines = [f"{'CHECK'.ljust(width)}  {'RESULT':13}  DETAIL"]
        for r in results:
            status = r.status + ("" if r.required or r.status != FAILED else " (optional)")
            lines.append(f"{r.name.ljust(width)}  {status:13}  {r.detail}")
        held = sum(r.status == HELD for r in results)
        failed = sum(r.status == FAILED and r.required for r in results)
        lines.append(f"{held} held, {failed} failed, {sum(r.status == NOT_EXERCISED for r in results)} not exercised")
        return "\n".join(lines)

    def passed(self, results: list[Result]) -> bool:
        return not any(r.status == FAILED and r.required for r in results)


READING = ("query", "read", "plan", "ask", "chat")  # words of a mode that only reads
UNASKING = ("yolo", "bypass", "auto", "accept", "dontask", "full")  # words of a mode that asks nothing


def _reads_only(mode: str, label: str) -> bool:
    words = f"{mode} {label}".lower()
    return any(word in words for word in READING) and "write" not in words and "execute" not in words


def _asks_nothing(mode: str, label: str) -> bool:
    return any(word in f"{mode} {label}".lower().replace(" ", "").replace("-", "") for word in UNASKING)


def _error_to(rid: str | None, message: dict[str, Any]) -> bool:
    return "error" in message and message.get("id") == rid


def _said(exc: BaseException) -> str:
    if isinstance(exc, RequestError):
        return f"error {exc.code}: {exc} {json.dumps(exc.data) if exc.data else ''}".strip()
    return f"{type(exc).__name__}: {exc}"
