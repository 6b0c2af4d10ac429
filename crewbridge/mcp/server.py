"""`crew mcp`'s configuration of the MCP core (crewbridge.protocol.mcp): crew's tools under their plain
names, and `ask`, `job` and `cancel` to run agents, over stdio (crewbridge.mcp.stdio) or streamable
HTTP (crewbridge.protocol.mcp_http)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.base.modes import Mode
from crewbridge.config import AgentSpec, Config
from crewbridge.errors import CrewError
from crewbridge.mcp.early import instructions
from crewbridge.protocol.mcp import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    Call,
    Job,
    McpCore,
    McpSession,
    RpcError,
    Send,
    content,
    mcp_tool,
    refusal,
    request_id,
    tool_content,
)
from crewbridge.sandbox import Sandboxing, level

# For start-up speed: `initialize` is answered before the engine is imported; it loads when the
# client first lists or calls a tool.
if TYPE_CHECKING:
    from crewbridge.engine.asking import Asker
    from crewbridge.record.events import Event
    from crewbridge.record.stream import Record
    from crewbridge.toolkit.registry import ToolContext, ToolRegistry
    from crewbridge.work.caller import Caller

SERVER_TOOLS = ("ask", "job", "cancel")
CLIENT = "mcp"  # how the MCP client is named in transcripts and hooks, unless --policy-of names an agent
JOBS_END_WAIT = 10.0  # seconds close() waits for stopped jobs to wind down (their CLIs are killed at once)


class McpServer(McpCore):
    """crew mcp: crew's tools this mode offers, then ask, job and cancel. Jobs belong to the
    session that started them; close() stops every one and closes the transcript."""

    def __init__(
        self,
        config: Config,
        workdir: Path,
        *,
        execute: bool = False,
        policy_of: str | None = None,
        depth: int | None = None,
        max_depth: int = 1,
        timeout: float = 300.0,
        max_turns: int = 10,
        sandboxing: Sandboxing | None = None,
    ) -> None:
        """`sandboxing`: one whose probe has started already (crewbridge.mcp.early's)."""
        super().__init__()
        self.config = config
        self.workdir = workdir
        self.mode: Mode = "execute" if execute else "query"
        self.client = config.agent(policy_of) if policy_of else AgentSpec(id=CLIENT, provider=CLIENT)
        self.depth, self.max_depth = depth, max_depth  # depth None: CREW_ASK_DEPTH says
        self.timeout, self.max_turns = timeout, max_turns
        self.sandboxing = Sandboxing() if sandboxing is None else sandboxing  # also its asks'
        wanted = level(config.sandbox, self.client.sandbox)
        network = self.client.sandbox_network  # a sandbox required and not to be had is refused now
        denied = self.client.deny_commands  # the programs they deny are masked in the sandbox too
        from crewbridge.sandbox.egress import reaching  # for start-up speed: the allow-list's parsing

        hosts = reaching(config.network, config.allowed)  # with sandbox_network: network: allow's hosts
        self.sandbox = self.sandboxing.commands(
            wanted, workdir, self.mode, network=network, denied=denied, hiding=config.hiding, hosts=hosts
        )
        self.sandbox_notice = self.sandboxing.notice([wanted])
        self._lock = threading.Lock()
        self._jobs: list[Job] = []  # every session's, to stop and wait for at close()
        self._closed = False
        self._tools: tuple[ToolRegistry, Caller, ToolContext, Record] | None = None
        from crewbridge.telemetry.exporter import exporter  # for start-up speed: with the engine

        self.traced = exporter(config)  # the asks' runs as traces, when telemetry is on

    def respond(self, message: Any, session: McpSession, notify: Send) -> dict[str, Any] | None:
        """As McpCore.respond; an error of crew's own (its configuration) is answered as an internal error."""
        try:
            return super().respond(message, session, notify)
        except CrewError as exc:
            return refusal(request_id(message), INTERNAL_ERROR, str(exc))

    def instructions(self) -> str:
        return instructions(self.workdir)

    # -- tools ----------------------------------------------------------------------------------

    def tool_list(self) -> list[dict[str, Any]]:
        """crew's tools this mode offers, then ask, job and cancel."""
        from crewbridge.engine.asking import CHANGE_PROPERTIES, TASK_PROPERTY

        modes = ["query", "execute"] if self.mode == "execute" else ["query"]
        ask_schema = {
            "type": "object",
            "properties": {
                "task": TASK_PROPERTY,
                "mode": {
                    "type": "string",
                    "enum": modes,
                    "default": "query",
                    "description": "query: the agents may read (their own and crew's read-only tools); "
                    "execute: they may change files and run commands"
                    + ("" if self.mode == "execute" else " (needs `crew mcp --execute`)"),
                },
                "background": {
                    "type": "boolean",
                    "default": False,
                    "description": "Return a job id at once instead of waiting; follow it with `job`.",
                },
                **CHANGE_PROPERTIES,
            },
            "required": ["task"],
            "additionalProperties": False,
        }
        id_schema = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
        return [
            *(mcp_tool(spec) for spec in self._crew_tools()[0]),
            {
                "name": "ask",
                "description": "Ask other CLI agents (@claude, @gemini, @codex, or any configured in "
                "crew.yaml) to do a task with crew's tools, and get each one's answer. Mentions lead the "
                "task: '@gemini what does notes.txt say?'; several run in parallel.",
                "inputSchema": ask_schema,
            },
            {
                "name": "job",
                "description": "The status, progress and, once done, the answers of a background ask.",
                "inputSchema": id_schema,
                "annotations": {"readOnlyHint": True},
            },
            {
                "name": "cancel",
                "description": "Stop a background ask and everything it started.",
                "inputSchema": id_schema,
            },
        ]

    def call_tool(self, name: str, arguments: dict[str, Any], call: Call) -> dict[str, Any]:
        if name == "ask":
            return self._ask(arguments, call)
        if name in SERVER_TOOLS:
            return self._follow(name, arguments, call.session)
        registry, caller, ctx, _ = self._crew_tools()
        if name not in registry:
            raise RpcError(INVALID_PARAMS, self._unknown(name, registry))
        result = caller.call(name, arguments, ctx.stoppable(call.stop))
        caller.policy.take_unasked()  # a call nobody could approve: the client has its refusal, in the result
        return tool_content(result)

    def _crew_tools(self) -> tuple[ToolRegistry, Caller, ToolContext, Record]:
        """The tools this mode offers the client, and the one path their calls take (made once)."""
        with self._lock:
            if self._tools is None:
                from crewbridge.record.events import Start
                from crewbridge.record.stream import Record, now
                from crewbridge.record.transcript import Transcript
                from crewbridge.toolkit.hooks import Hooks
                from crewbridge.toolkit.registry import ToolContext
                from crewbridge.version import __version__
                from crewbridge.work.caller import Caller
                from crewbridge.work.policy import Policy

                policy = Policy(self.client, self.mode)
                registry = policy.offered(self.config.registry())
                clash = next((name for name in SERVER_TOOLS if name in registry), None)
                if clash:
                    where = self.config.file_of(("tools", clash))
                    problem = f"a tool is named '{clash}', as crew mcp's own; rename it in {where}"
                    raise RpcError(INTERNAL_ERROR, problem)
                record = Record()
                if self.config.transcripts:
                    record.keep(Transcript.create(record.run, secrets=self.config.provider_env()))
                record.emit(
                    Start(
                        run=record.run,
                        at=now(),
                        version=__version__,
                        command="mcp",
                        mode=self.mode,
                        agents=[self.client.id],
                        cwd=str(self.workdir),
                        pid=os.getpid(),
                    )
                )
                hooks = Hooks(self.config.hooks, workdir=self.workdir, passed=self.config.env_pass)
                # Each call that may write is followed by crewbridge.system.gitguard: the client's next git
                # command runs outside crew's sandbox, at once.
                guarded = self.workdir if self.mode == "execute" else None
                caller = Caller(self.client.id, registry, policy, hooks, record, guarded=guarded)
                context = ToolContext(self.workdir, registry=registry, sandbox=self.sandbox)
                self._tools = (registry, caller, context, record)
            return self._tools

    def _unknown(self, name: str, registry: ToolRegistry) -> str:
        if self.mode == "query" and name in self.config.registry():
            return f"tool '{name}' changes files or runs commands; it is served by `crew mcp --execute` only"
        return registry.unknown_message(name).replace(registry.prefix + ":", "")

    def _follow(self, name: str, arguments: dict[str, Any], session: McpSession) -> dict[str, Any]:
        """job and cancel: a job of this session."""
        found = session.job(arguments.get("id"))
        if found is None:
            known = ", ".join(session.job_ids()) or "none yet"
            return content(f"no job '{arguments.get('id')}'; jobs of this session: {known}", error=True)
        if name == "cancel" and found.status == "running":
            found.stop.set()
            found.status = "cancelled"
        view = found.view()
        return content(json.dumps(view, ensure_ascii=False, indent=1), structured=view)

    def _ask(self, arguments: dict[str, Any], call: Call) -> dict[str, Any]:
        problem = _ask_problem(arguments, self.mode)
        if problem:
            return content(problem, error=True)
        from crewbridge.engine.asking import Asker, change_options, current_depth
        from crewbridge.ui.link import attend

        change = change_options(arguments)
        if isinstance(change, str):
            return content(change, error=True)

        task, mode = arguments["task"], arguments.get("mode", "query")
        depth = current_depth() if self.depth is None else self.depth
        traced = self.traced
        asker = Asker(
            self.config,
            self.workdir,
            depth,
            self.max_depth,
            self.timeout,
            self.max_turns,
            self.sandboxing,
            observers=[attend, *([traced.observe] if traced else [])],
            tracing=traced.tracing if traced else None,
        )
        try:
            asker.check(task)
        except CrewError as exc:
            return content(str(exc), error=True)
        from crewbridge.record.events import Parent
        from crewbridge.record.trace import carried

        change["parent"] = Parent(**carried(call.meta))  # the client's trace context (MCP: params._meta)
        if not arguments.get("background"):
            answer = asker.ask(task, mode, on_progress=_reporter(call.progress), stop=call.stop, **change)
            return content(answer.text, error=answer.failed, structured=answer.data)
        job = Job(os.urandom(4).hex(), task)
        refused = "the server is shutting down; no new job starts" if self._closed else call.session.add_job(job)
        if refused:
            return content(refused, error=True)
        self._start(job, asker, mode, change)
        return content(
            f'job {job.id} started; call job with {{"id": "{job.id}"}} for its progress and answers, cancel to stop it',
            structured=job.view(),
        )

    def _start(self, job: Job, asker: Asker, mode: Mode, change: dict[str, Any]) -> None:
        def work() -> None:
            try:
                asked = asker.ask(job.task, mode, on_progress=_reporter(job.progress.append), stop=job.stop, **change)
                job.outcome = {"answer": asked.text, "result": asked.data}
                if job.status == "running":
                    job.status = "failed" if asked.failed else "done"
            except Exception as exc:  # the job reports it; the server goes on
                job.error, job.status = str(exc), "failed"

        job.thread = threading.Thread(target=work, name=f"crew-job-{job.id}", daemon=True)
        with self._lock:
            self._jobs = [*(kept for kept in self._jobs if kept.thread and kept.thread.is_alive()), job]
        job.thread.start()

    def close(self) -> None:
        """Stop every job (their CLIs end) and wait for them to wind down; close the transcript."""
        with self._lock:
            self._closed = True
            jobs, tools = self._jobs, self._tools
        for job in jobs:
            job.stop.set()
        deadline = time.monotonic() + JOBS_END_WAIT
        for job in jobs:
            if job.thread is not None:
                job.thread.join(max(deadline - time.monotonic(), 0))
        if tools is not None:
            tools[3].end("done")


def _ask_problem(arguments: dict[str, Any], mode: Mode) -> str | None:
    task = arguments.get("task")
    if not isinstance(task, str) or not task.strip():
        return "ask needs a task: '@agent what to do', e.g. '@gemini what does notes.txt say?'"
    unknown = sorted(set(arguments) - {"task", "mode", "background", "worktree", "review", "rounds"})
    if unknown:
        return f"ask takes task, mode, background, worktree, review and rounds, not {', '.join(unknown)}"
    if arguments.get("mode", "query") not in ("query", "execute"):
        return f"mode '{arguments['mode']}' is not query or execute"
    if arguments.get("mode") == "execute" and mode != "execute":
        return "mode 'execute' needs the server started with `crew mcp --execute`; ask in query mode"
    if not isinstance(arguments.get("background", False), bool):
        return "background must be true or false"
    return None


def _reporter(report: Callable[[str], None]) -> Callable[[Event], None]:
    """A run's turns, calls, results, answers, reviews and checks as one-line messages."""
    from crewbridge.record import events as ev  # for start-up speed: once an ask runs

    def on_progress(event: Event) -> None:
        if isinstance(event, ev.Turn):
            report(f"@{event.agent} turn {event.turn}")
        elif isinstance(event, ev.Call) and event.via != "own":
            report(f"@{event.agent} calls {event.name} {json.dumps(event.input, ensure_ascii=False)[:200]}")
        elif isinstance(event, ev.Result):
            report(f"@{event.agent} {event.name} " + ("ok" if event.success else f"failed: {event.error}"))
        elif isinstance(event, ev.Answer):
            report(f"@{event.agent} answered")
        elif isinstance(event, ev.Notice):
            report(f"@{event.agent}: {event.text}")
        elif isinstance(event, ev.Review):
            verdict = "approves" if event.verdict == "approve" else "asks for changes"
            report(f"@{event.agent} review {event.round} of {event.rounds}: {verdict}")
        elif isinstance(event, ev.Check):
            outcome = "passed" if event.passed else f"failed, exit status {event.exit_code}"
            report(f"@{event.agent} check {event.round}/{event.rounds} {outcome}: {event.command}")

    return on_progress
