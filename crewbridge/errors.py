"""The one error hierarchy. The engine raises these; only the CLI turns them into messages."""

from __future__ import annotations


class CrewError(Exception):
    """Base of every error crew reports to a person. The message names the thing and the next step."""

    exit_code = 1


class UsageError(CrewError):
    """The command line or its input was wrong."""

    exit_code = 2


class ConfigError(CrewError):
    """crew.yaml (or another configuration source) is invalid."""

    exit_code = 2


class ConfigKeyError(ConfigError):
    """A ConfigError about one key of an object built from configuration: crew.yaml's loader puts
    the file, that key's line and its whole path in front of the message."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


class AgentNotFound(UsageError):
    """A mention names an agent that is not configured."""


class ToolNotFound(UsageError):
    """A tool name that is not registered."""


class SandboxUnavailable(UsageError):
    """The sandbox is required (--sandbox required, crew.yaml `sandbox: required`) and no
    mechanism works on this machine."""


class ProviderError(CrewError):
    """The wrapped CLI failed or reported an API error (`status`: its HTTP status, when it said one)."""

    exit_code = 3
    status: int | None = None


class ProviderUnavailable(ProviderError):
    """The CLI's provider cannot serve now (rate limit, quota, overload, authentication, model):
    an agent's `fallback` may take the task over."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class CLINotFound(ProviderError):
    """The wrapped CLI is not installed (not on PATH)."""

    exit_code = 127


class MaxTurnsReached(CrewError):
    """The model kept calling tools past --max-turns."""

    exit_code = 4


class BudgetExceeded(CrewError):
    """The run's usage passed --max-cost or --max-tokens (or an agent's max_cost/max_tokens)."""

    exit_code = 5


class ReviewNotApproved(CrewError):
    """The reviewer did not approve the writer's change within --rounds rounds (crew execute --review)."""

    exit_code = 6


class NotApproved(CrewError):
    """The run answered, but calls that needed a person's approval were refused because nobody could
    be asked (no terminal): its work was not done (crewbridge.work.policy.not_approved says which)."""

    exit_code = 8


class CheckFailed(CrewError):
    """The run's check still failed after --check-rounds rounds (crewbridge.engine.gate)."""

    exit_code = 9


class ForgeError(CrewError):
    """A forge (GitHub, GitLab) could not be reached, or refused a pull request; what the agent
    changed stays on its branch."""

    exit_code = 3
    status: int | None = None  # the HTTP status, when it answered


class CrewTimeout(CrewError):
    """A deadline passed; the process group was ended."""

    exit_code = 124


class Interrupted(CrewError):
    """Ctrl-C: the child was ended and the transcript closed."""

    exit_code = 130
