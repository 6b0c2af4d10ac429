"""Which tools an agent is offered and may run, in which mode, and which calls need a person's yes.

Every layer only narrows: the profile is the ceiling, `allow` (when given) narrows it, `deny` removes
(deny wins), and `query` mode keeps read-only tools only, whatever the configuration says.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from crewbridge.base.globs import NATIVE, command_allowed, command_denied, matches, matches_native, native_globs
from crewbridge.base.modes import Mode
from crewbridge.config import AgentSpec
from crewbridge.errors import ConfigError, NotApproved
from crewbridge.system.approval import Approver, Question
from crewbridge.toolkit.registry import Tool, ToolRegistry

CODING_TOOLS = frozenset({"write_file", "edit_file", "run_command"})  # besides every read-only tool
PROFILES = ("read-only", "coding", "full")
COMMAND_TOOL = "run_command"


@dataclass(frozen=True)
class Unasked:
    """A call refused because it needed a person's yes and nobody could be asked (no terminal)."""

    name: str  # the tool (native:NAME for one of the CLI's own)
    input: Any
    unchecked: bool = False  # a command the command rules could not check: --yes does not approve it

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "input": self.input}


@dataclass(frozen=True)
class Ruling:
    """The policy's decision on one call: why it may not run (None: it may), and by whom it was
    decided: `policy` (the rules), `approve_all` (--yes), `always` (an earlier "always" answer), the
    channel a person answered on (terminal, editor, browser), `nobody` (nobody could be asked, or
    nobody answered in time)."""

    refusal: str | None = None
    by: str = "policy"

    @property
    def decision(self) -> str:
        return "refused" if self.refusal else "allowed"


ALLOWED = Ruling()


class Policy:
    def __init__(
        self, agent: AgentSpec, mode: Mode, *, approve_all: bool = False, approver: Approver | None = None
    ) -> None:
        if agent.profile not in PROFILES:
            raise ConfigError(f"agent '{agent.id}': profile '{agent.profile}' is not one of {', '.join(PROFILES)}")
        self.agent = agent
        self.mode = mode
        self.approve_all = approve_all
        self.approver = approver or Approver()
        self._always: set[str] = set()
        self._unasked: list[Unasked] = []  # since the last take_unasked()
        self._lock = threading.Lock()  # calls are decided on several tool threads at once

    def take_unasked(self) -> list[Unasked]:
        """The calls refused since the last take because nobody could be asked (in the order refused)."""
        with self._lock:
            unasked, self._unasked = self._unasked, []
        return unasked

    def withdraw(self) -> None:
        """Withdraw any approval question a call of this policy asks or waits to ask (its reply was
        stopped, its run ended): that call, and any other until reopen(), is refused."""
        self.approver.withdraw()

    def reopen(self) -> None:
        """Approval questions may be asked again (a new message of the conversation)."""
        self.approver.reopen()

    def allowed(self, spec: Tool) -> bool:
        """Whether the agent may use this tool at all in this mode."""
        if self.mode != "execute" and not spec.read_only:
            return False
        if not _in_profile(self.agent.profile, spec):
            return False
        if not all(matches(spec.name, globs) for globs in self.agent.allow_lists("allow")):
            return False
        return not matches(spec.name, self.agent.deny)

    def offered(self, registry: ToolRegistry) -> ToolRegistry:
        """The tools the model is told about."""
        return registry.subset(self.allowed)

    def check(self, spec: Tool, data: dict[str, Any], deadline: float | None = None, call: str | None = None) -> Ruling:
        """Whether this call (`call`: its id in the run's record) may run. May ask a person (called
        from tool worker threads), until `deadline` (time.monotonic(): the run's end) at the latest."""
        if not self.allowed(spec):
            return Ruling(self._refusal(spec))
        command = data.get("command") if spec.name == COMMAND_TOOL else _shell_argv(spec, data)
        return self._decide(spec.name, data, command, self.needs_approval(spec), deadline, call)

    def needs_approval(self, spec: Tool) -> bool:
        return spec.needs_approval or matches(spec.name, self.agent.approval)

    def decides_native(self) -> bool:
        """Whether check_native may refuse anything (else it allows every use of the CLI's tools)."""
        agent = self.agent
        allows = agent.allow_lists("allow")
        globs = native_globs([*(glob for globs in allows for glob in globs), *agent.deny, *agent.approval])
        return bool(
            self.mode != "execute"
            or agent.profile == "read-only"
            or globs
            or agent.deny_commands
            or agent.allow_lists("allow_commands")
        )

    def check_native(
        self, tool: str, data: dict[str, Any], read_only: bool, deadline: float | None = None, call: str | None = None
    ) -> Ruling:
        """Whether the CLI may run its own tool `tool` with `data`. The rules of crew's own
        tools: query mode and the read-only profile refuse what writes or runs commands (all but
        `read_only` tools); `native:` globs in allow (when it has any) and deny; command globs on a
        shell tool's command; approval. May ask a person, until `deadline` at the latest."""
        agent = self.agent
        if not read_only and (self.mode != "execute" or agent.profile == "read-only"):
            where = f"{self.mode} mode" if self.mode != "execute" else f"agent '{agent.id}' (profile read-only)"
            return Ruling(
                f"crew does not allow {tool} for {where}: only the CLI's tools that read may run "
                "(the user can run `crew execute`)"
            )
        narrowed = any(native_globs(g) and not matches_native(tool, g) for g in agent.allow_lists("allow"))
        if narrowed or matches_native(tool, agent.deny):
            return Ruling(
                f"crew's policy does not allow {tool} for agent '{agent.id}' (native:… in allow/deny "
                "in crew.yaml); it was not run. Do it another way or ask the user"
            )
        approval = matches_native(tool, agent.approval)
        return self._decide(NATIVE + tool, data, data.get("command"), approval, deadline, call)

    def _decide(
        self, name: str, data: dict[str, Any], command: Any, approval: bool, deadline: float | None, call: str | None
    ) -> Ruling:
        """The command rules on `command` (when it is one), then approval. A command crew cannot
        check is asked about where the tool needs approval, every time; elsewhere it is refused."""
        problem = None
        if isinstance(command, (str, list)):
            problem = command_problem(command, self.agent.deny_commands, *self.agent.allow_lists("allow_commands"))
        if problem is not None and not (problem.unchecked and approval):
            return Ruling(problem.reason)
        if approval:
            return self._approve(name, data, deadline, problem.unchecked if problem else None, call)
        return ALLOWED

    def _refusal(self, spec: Tool) -> str:
        if self.mode != "execute" and not spec.read_only:
            return (
                f"tool '{spec.name}' is not available in {self.mode} mode "
                "(query mode offers read-only tools only; the user can run `crew execute`)"
            )
        return (
            f"tool '{spec.name}' is not allowed for agent '{self.agent.id}' by its configuration "
            f"(profile {self.agent.profile}, allow/deny in crew.yaml); use another tool"
        )

    def _approve(
        self, name: str, data: dict[str, Any], deadline: float | None, unchecked: str | None, call: str | None
    ) -> Ruling:
        """Ask a person whether tool `name` may run with `data`, until `deadline`. A command the
        command rules could not check (`unchecked`: why) is asked about even under --yes or
        "always", and refused with that reason when nobody can be asked."""
        if unchecked is None and self.approve_all:
            return Ruling(by="approve_all")
        if unchecked is None and name in self._always:
            return Ruling(by="always")
        if not self.approver.interactive:  # the one place that decides nobody can be asked
            with self._lock:
                self._unasked.append(Unasked(name, data, bool(unchecked)))
            return Ruling(
                f"{unchecked}; it was not run (nobody to ask: no terminal, no crew ui serving)"
                if unchecked
                else (
                    f"tool '{name}' needs a person's approval and there is nobody to ask (no terminal, no crew ui "
                    "serving); it was not run (the user can re-run with --yes to approve every call)"
                ),
                by="nobody",
            )
        answer = self.approver.ask(Question(self.agent.id, name, data, unchecked or "", call=call), deadline)
        if answer is None:
            return Ruling(f"no one answered in time whether '{name}' may run; it was not run", by="nobody")
        if answer.verdict == "always":
            self._always.add(name)
        if answer.verdict == "no":
            return Ruling(
                f"the user declined this call to '{name}'; it was not run. Ask or try another way.", by=answer.source
            )
        return Ruling(by=answer.source)


def not_approved(agent: str, unasked: list[Unasked]) -> NotApproved:
    """The error of a run in which `agent`'s calls `unasked` were refused because nobody could be
    asked: which calls, and how to allow them."""
    count = len(unasked)
    them = "it" if count == 1 else "them"
    shown = ", ".join(dict.fromkeys(_shown(call) for call in unasked))
    how = []
    if any(not call.unchecked for call in unasked):
        how.append(
            f"re-run with --yes to approve {them}, or take {them} out of the `approval` list of agent '{agent}' "
            "in crew.yaml"
        )
    if any(call.unchecked for call in unasked):
        how.append(
            "a command crew cannot check is allowed only by a person (on a terminal or crew ui), even with --yes"
        )
    return NotApproved(
        f"@{agent}: {count} call{'' if count == 1 else 's'} needed a person's approval and there was nobody "
        f"to ask (no terminal, no crew ui serving), so {'it was' if count == 1 else 'they were'} not run: "
        f"{shown}; {'; '.join(how)}"
    )


def _shown(call: Unasked) -> str:
    """A refused call in a few words: its tool and its first input value."""
    data = call.input if isinstance(call.input, dict) else {}
    first = next((v for v in data.values() if isinstance(v, str)), "")
    first = first if len(first) <= 40 and "\n" not in first else first[:39].split("\n")[0] + "…"
    return f"{call.name} {first}".strip()


def _shell_argv(spec: Tool, data: dict[str, Any]) -> list[str] | None:
    """The argv of a crew.yaml command tool that takes a shell command (`[sh, -c, "{script}"]`):
    the command rules read it as they read run_command's. Other tools run no command of the model's."""
    owner = getattr(spec.func, "__self__", None)
    if owner is None:  # a function, not a command tool's bound method: nothing more to import
        return None
    # Deferred for start-up speed, as the reading of commands is (and off a built-in tool's call).
    from crewbridge.base.shellwords import SHELLS
    from crewbridge.toolkit.custom_tools import CommandTool

    if not isinstance(owner, CommandTool) or not owner.command:
        return None
    return owner.argv(data) if owner.command[0].rsplit("/", 1)[-1] in SHELLS else None


def _in_profile(profile: str, spec: Tool) -> bool:
    if profile == "full":
        return True
    return spec.read_only or (profile == "coding" and spec.name in CODING_TOOLS)


@dataclass(frozen=True)
class CommandProblem:
    """Why a command may not run under the command rules, for the model; `unchecked`, when crew
    cannot tell what it runs (a person asked about the tool may still allow it): why not."""

    reason: str
    unchecked: str = ""


def command_problem(command: str | list[str], deny: list[str], *allows: list[str]) -> CommandProblem | None:
    """What stops `command` (a shell line, or an argv run without a shell) under deny_commands and
    allow_commands (`allows`: one list per configuration file, each must admit it; an empty one admits
    everything), or None. With neither set, nothing is checked: the sandbox is the enforcement.

    Each simple command the line runs is checked (shellwords finds them). A deny glob is matched
    against its words from the program on, the program without its directory, and against the
    command each wrapper runs (`sudo rm x` → `rm x`); with allow globs, each simple command, its
    `NAME=value` prefixes included, must be admitted by one word by word. A line whose programs
    crew cannot know without running the shell is refused (unchecked)."""
    allows = tuple(allow for allow in allows if allow)
    if not deny and not allows:
        return None
    # Deferred for start-up speed: only an agent with command rules reads commands.
    from crewbridge.base.shellwords import Unknowable, argv_commands, simple_commands

    try:
        found = simple_commands(command) if isinstance(command, str) else argv_commands(command)
    except Unknowable as exc:
        why = f"crew cannot check it against deny_commands/allow_commands in crew.yaml: {exc}"
        return CommandProblem(f"{why}. It was not run; write it as plain commands", unchecked=why)
    for simple in found:
        for named in simple.runs:
            glob = next((g for g in deny if command_denied(g, named)), None)
            if glob is not None:
                return CommandProblem(
                    f"the command policy forbids '{' '.join(w.text for w in named)}' (deny_commands in crew.yaml: "
                    f"'{glob}'); it was not run. Do it another way or ask the user"
                )
        everything = (*simple.assignments, *simple.words)
        for allow in allows:
            if not simple.shell and not any(command_allowed(g, everything) for g in allow):
                return CommandProblem(
                    f"the command policy does not allow '{simple.text}' (allow_commands in crew.yaml: "
                    f"{', '.join(allow)}); it was not run"
                )
    return None
