"""Which tools an agent is offered and may run, in which mode, and which calls need a person's yes.

Every layer only narrows: the profile is the ceiling, `allow` (when given) narrows it, `deny` removes
(deny wins), and `query` mode keeps read-only tools only, whatever the configuration says.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
from typing import Any

from crewbridge.approval import Approver
from crewbridge.config import AgentSpec
from crewbridge.errors import ConfigError
from crewbridge.globs import NATIVE, matches, matches_native, native_globs
from crewbridge.modes import Mode
from crewbridge.registry import Tool, ToolRegistry

CODING_TOOLS = frozenset({"write_file", "edit_file", "run_command"})  # besides every read-only tool
PROFILES = ("read-only", "coding", "full")
COMMAND_TOOL = "run_command"
SHOWN_INPUT = 2000  # characters of a call's input shown in an approval question

# Words that run the command after them: `sudo rm x` is checked as `rm x`.
_WRAPPERS = frozenset(
    {
        "sudo",
        "doas",
        "env",
        "command",
        "builtin",
        "exec",
        "nohup",
        "nice",
        "time",
        "xargs",
        "stdbuf",
        "setsid",
        "timeout",
        "watch",
        "strace",
        "chroot",
        "unshare",
        "if",
        "elif",
        "then",
        "else",
        "while",
        "until",
        "do",
        "!",
        "{",
    }
)
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "fish", "busybox"})


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
        if self.agent.allow and not matches(spec.name, self.agent.allow):
            return False
        return not matches(spec.name, self.agent.deny)

    def offered(self, registry: ToolRegistry) -> ToolRegistry:
        """The tools the model is told about."""
        return registry.subset(self.allowed)

    def check(self, spec: Tool, data: dict[str, Any], deadline: float | None = None) -> str | None:
        """Why this call may not run, or None. May ask a person (called from tool worker threads),
        until `deadline` (time.monotonic(): the run's end) at the latest."""
        if not self.allowed(spec):
            return self._refusal(spec)
        if spec.name == COMMAND_TOOL and isinstance(data.get("command"), str):
            problem = command_refusal(data["command"], self.agent.deny_commands, self.agent.allow_commands)
            if problem:
                return problem
        if self.needs_approval(spec):
            return self._approve(spec.name, data, deadline)
        return None

    def needs_approval(self, spec: Tool) -> bool:
        return spec.needs_approval or matches(spec.name, self.agent.approval)

    def decides_native(self) -> bool:
        """Whether check_native may refuse anything (else it allows every use of the CLI's tools)."""
        agent = self.agent
        globs = native_globs([*agent.allow, *agent.deny, *agent.approval])
        return bool(
            self.mode != "execute"
            or agent.profile == "read-only"
            or globs
            or agent.deny_commands
            or agent.allow_commands
        )

    def check_native(
        self, tool: str, data: dict[str, Any], read_only: bool, deadline: float | None = None
    ) -> str | None:
        """Why the CLI may not run its own tool `tool` with `data`, or None. The rules of crew's own
        tools: query mode and the read-only profile refuse what writes or runs commands (all but
        `read_only` tools); `native:` globs in allow (when it has any) and deny; command globs on a
        shell tool's command; approval. May ask a person, until `deadline` at the latest."""
        agent = self.agent
        if not read_only and (self.mode != "execute" or agent.profile == "read-only"):
            where = f"{self.mode} mode" if self.mode != "execute" else f"agent '{agent.id}' (profile read-only)"
            return (
                f"crew does not allow {tool} for {where}: only the CLI's tools that read may run "
                "(the user can run `crew execute`)"
            )
        allow = native_globs(agent.allow)
        if (allow and not matches_native(tool, agent.allow)) or matches_native(tool, agent.deny):
            return (
                f"crew's policy does not allow {tool} for agent '{agent.id}' (native:… in allow/deny "
                "in crew.yaml); it was not run. Do it another way or ask the user"
            )
        if isinstance(data.get("command"), str):
            problem = command_refusal(data["command"], agent.deny_commands, agent.allow_commands)
            if problem:
                return problem
        if matches_native(tool, agent.approval):
            return self._approve(NATIVE + tool, data, deadline)
        return None

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

    def _approve(self, name: str, data: dict[str, Any], deadline: float | None) -> str | None:
        """Ask a person whether tool `name` may run with `data` (None: yes), until `deadline`."""
        if self.approve_all or name in self._always:
            return None
        if not self.approver.interactive:
            return (
                f"tool '{name}' needs a person's approval and there is no terminal to ask on; "
                "it was not run (the user can re-run with --yes to approve every call)"
            )
        shown = json.dumps(data, ensure_ascii=True)  # escapes control characters: nothing can hide
        if len(shown) > SHOWN_INPUT:
            shown = shown[:SHOWN_INPUT] + f"… ({len(shown) - SHOWN_INPUT} more characters)"
        answer = self.approver.ask(f"@{self.agent.id} wants to run {name} {shown}\nAllow?", deadline)
        if answer is None:
            return f"no one answered in time whether '{name}' may run; it was not run"
        if answer == "always":
            self._always.add(name)
        if answer == "no":
            return f"the user declined this call to '{name}'; it was not run. Ask or try another way."
        return None


def _in_profile(profile: str, spec: Tool) -> bool:
    if profile == "full":
        return True
    return spec.read_only or (profile == "coding" and spec.name in CODING_TOOLS)


def command_refusal(command: str, deny: list[str], allow: list[str]) -> str | None:
    """Why `command` may not run under these command globs, or None.

    Each simple command inside it (split at `;`, `&&`, `|`, newlines, `$(…)`, backticks, and inside
    `sh -c '…'` or `eval`) is matched with quotes, variable assignments and the program's directory
    taken away. After a wrapper (`sudo`, `env`, `xargs`, `if`, …) every later word may start the real
    command, so deny globs are tried from each. A glob `rm *` also matches a bare `rm`. With `allow`,
    every simple command must match one of its globs as written.
    """
    if not deny and not allow:
        return None
    try:
        commands = simple_commands(command)
    except ValueError as exc:
        return f"the command could not be checked against the command policy ({exc}); it was not run"
    for forms in commands:
        denied = next((form for form in forms if _glob_any(form, deny)), None)
        if denied is not None:
            return (
                f"the command policy forbids '{denied}' (deny_commands in crew.yaml); "
                "it was not run. Do it another way or ask the user"
            )
        if allow and not _glob_any(forms[0], allow):
            return (
                f"the command policy does not allow '{forms[0]}' (allow_commands in crew.yaml: "
                f"{', '.join(allow)}); it was not run"
            )
    return None


def _glob_any(text: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(text, p) or fnmatch.fnmatchcase(text + " ", p) for p in patterns)


def simple_commands(command: str, depth: int = 0) -> list[list[str]]:
    """The simple commands of a shell command line, each as the forms a glob is matched against
    (the command as written first). ValueError when the line cannot be split (unbalanced quotes)."""
    # Substitutions and line breaks start commands of their own; splitting more than the shell
    # would only ever make a deny glob match more.
    for mark in ("$(", "`", "\n", "<(", ">("):
        command = command.replace(mark, " ; ")
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    out: list[list[str]] = []
    words: list[str] = []
    for token in [*lexer, ";"]:
        if set(token) <= set(";&|()"):
            out += _forms(words, depth)
            words = []
        else:
            words.append(token)
    return out


def _forms(words: list[str], depth: int) -> list[list[str]]:
    while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
        words = words[1:]  # FOO=1 rm x
    if not words:
        return []
    words = [_program(words[0]), *words[1:]]
    starts = range(1, len(words)) if words[0] in _WRAPPERS else []
    forms = [" ".join(words)] + [" ".join([_program(words[i]), *words[i + 1 :]]) for i in starts]
    out = [forms]
    flag = next((i for i, w in enumerate(words[1:-1], 1) if re.fullmatch(r"-[a-z]*c[a-z]*", w)), None)
    if depth < 3 and words[0] in _SHELLS and flag is not None:  # sh -c '…', bash -lc '…'
        out += simple_commands(words[flag + 1], depth + 1)
    elif depth < 3 and words[0] == "eval":
        out += simple_commands(" ".join(words[1:]), depth + 1)
    return out


def _program(word: str) -> str:
    return word.rsplit("/", 1)[-1] or word
