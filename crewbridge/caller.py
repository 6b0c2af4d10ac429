"""One path for every tool call, whoever makes it (a model's fenced block, an MCP client): hooks see
the calls policy allows, policy decides (and may ask a person), the tool runs, hooks see its
result, and the transcript records the call and the result."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from crewbridge import jsonio
from crewbridge.errors import ToolNotFound
from crewbridge.gitguard import Watch, summary
from crewbridge.hooks import Hooks
from crewbridge.policy import Policy
from crewbridge.registry import Tool, ToolContext, ToolRegistry, ToolResult
from crewbridge.transcript import Transcript


@dataclass
class Caller:
    agent: str  # who calls: an agent's id, or the MCP client's name
    registry: ToolRegistry  # the tools this caller may name
    policy: Policy
    hooks: Hooks
    transcript: Transcript
    guarded: Path | None = None  # a folder: after each call that may write, what it left for git is disarmed

    def call(self, name: str, data: Any, ctx: ToolContext) -> ToolResult:
        """Run the call `name` (`prefix:tool` or a bare tool name) with input `data`; always a
        result envelope, never an exception. Input that breaks the schema is not run."""
        self.transcript.write("tool_call", agent=self.agent, name=name, input=data)
        try:
            jsonio.check_depth(data)  # decoded where it was not bounded (a CLI's line, the Python API)
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
                result = self._run(spec, data, ctx)
        self.transcript.write("tool_result", agent=self.agent, name=name, result=result.to_dict())
        return result

    def _run(self, spec: Tool, data: dict[str, Any], ctx: ToolContext) -> ToolResult:
        # Hooks see only calls the policy allows; command globs and approval see the input that will run.
        data, block = (
            self.hooks.before(spec.name, data, self.agent, spec) if self.policy.allowed(spec) else (data, None)
        )
        block = block or self.policy.check(spec, data, ctx.deadline)
        if block:
            return ToolResult(False, error=block, tool=spec.name)
        watch = Watch(self.guarded) if self.guarded is not None and not spec.read_only else None
        result = self.registry.call(spec.name, data, ctx)
        if watch is not None:  # before the hooks, which run outside the sandbox and may run git
            found = watch.disarm()
            if found:
                self.transcript.write(
                    "disarmed", agent=self.agent, name=spec.name, found=[armed.to_dict() for armed in found]
                )
                result = replace(result, notices=(*result.notices, summary(found)))
        return self.hooks.after(spec.name, data, result, self.agent)
