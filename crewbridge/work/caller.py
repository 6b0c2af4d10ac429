"""One path for every tool call, whoever makes it (a model's fenced block, a native call, an MCP
client): hooks see the calls policy allows, policy decides (and may ask a person), the tool runs,
hooks see its result, and the run's record has the call, crew's decision and the result, under the
call's id."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from crewbridge.base import jsonio
from crewbridge.errors import ToolNotFound
from crewbridge.record import events as ev
from crewbridge.record.stream import Record
from crewbridge.system.gitguard import Watch, summary
from crewbridge.toolkit.hooks import Hooks
from crewbridge.toolkit.registry import Tool, ToolContext, ToolRegistry, ToolResult
from crewbridge.work.policy import Policy


@dataclass
class Caller:
    agent: str  # who calls: an agent's id, or the MCP client's name
    registry: ToolRegistry  # the tools this caller may name
    policy: Policy
    hooks: Hooks
    record: Record
    guarded: Path | None = None  # a folder: after each call that may write, what it left for git is disarmed

    def call(self, name: str, data: Any, ctx: ToolContext, call: str | None = None, via: str = "mcp") -> ToolResult:
        """Run the call `name` (`prefix:tool` or a bare tool name) with input `data`; always a
        result envelope, never an exception. Input that breaks the schema is not run. `call`: its
        id, when whoever made it recorded its start (else it is recorded here, `via` as said)."""
        try:
            jsonio.check_depth(data)  # decoded where it was not bounded (a CLI's line, the Python API)
            deep = None
        except jsonio.TooDeep as exc:
            deep = exc  # recorded as a note: the record's writers would recurse as deep as it nests
        if call is None:
            call = self.record.next_call()
            shown = data if deep is None else f"[crew left this out: nested more than {jsonio.MAX_DEPTH} levels deep]"
            self.record.emit(ev.Call(agent=self.agent, call=call, name=name, input=shown, via=via))
        try:
            if deep is not None:
                raise deep
            spec = self.registry.resolve(name)
        except ToolNotFound as exc:
            result = ToolResult(False, error=str(exc), tool=name)
        except jsonio.TooDeep as exc:
            result = ToolResult(False, error=f"invalid input for {name}: {exc}", tool=name)
        else:
            problem = spec.check(data)
            if problem:
                result = ToolResult(
                    False, error=f"invalid input for {self.registry.qualified(spec.name)} {problem}", tool=spec.name
                )
            else:
                result = self._run(spec, data, ctx, call)
        envelope = result.to_dict()
        self.record.emit(
            ev.Result(
                agent=self.agent,
                call=call,
                name=name,
                success=result.success,
                data=envelope["data"],
                error=result.error,
                metadata=envelope["metadata"],
                change=ev.Change(result.change.path, result.change.new, result.change.old) if result.change else None,
            )
        )
        return result

    def _run(self, spec: Tool, data: dict[str, Any], ctx: ToolContext, call: str) -> ToolResult:
        # Hooks see only calls the policy allows; command globs and approval see the input that will run.
        data, block = (
            self.hooks.before(spec.name, data, self.agent, spec) if self.policy.allowed(spec) else (data, None)
        )
        if block:
            self.record.emit(ev.Decision(agent=self.agent, call=call, decision="refused", by="hook", reason=block))
            return ToolResult(False, error=block, tool=spec.name)
        ruling = self.policy.check(spec, data, ctx.deadline, call)
        self.record.emit(
            ev.Decision(agent=self.agent, call=call, decision=ruling.decision, by=ruling.by, reason=ruling.refusal)
        )
        if ruling.refusal:
            return ToolResult(False, error=ruling.refusal, tool=spec.name)
        watch = Watch(self.guarded) if self.guarded is not None and not spec.read_only else None
        result = self.registry.call(spec.name, data, ctx)
        if watch is not None:  # before the hooks, which run outside the sandbox and may run git
            found = watch.disarm()
            if found:
                self.record.emit(
                    ev.Disarmed(
                        agent=self.agent, call=call, text=summary(found), found=[armed.to_dict() for armed in found]
                    )
                )
                result = replace(result, notices=(*result.notices, summary(found)))
        return self.hooks.after(spec.name, data, result, self.agent)
