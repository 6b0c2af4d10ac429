
import pytest
from crewbridge.tools import builtin_registry

from crewbridge.config import AgentSpec
from crewbridge.errors import ConfigError
from crewbridge.approval import Approver
from crewbridge.policy import Policy, command_refusal, simple_commands
from ttys import Terminal, close_terminals  # noqa: F401 - a fixture
from crewbridge.registry import Tool, ToolRegistry

READ_ONLY = {"read_file", "list_files", "grep", "help", "skill", "count_lines"}
CODING = READ_ONLY | {"write_file", "edit_file", "run_command"}
EVERYTHING = CODING | {"deploy"}


def custom(name: str, read_only: bool, needs_approval: bool = False) -> Tool:
    return Tool(name=name, description=name, input_schema={"type": "object"}, func=lambda ctx: None,
                read_only=read_only, needs_approval=needs_approval)


@pytest.fixture
def registry() -> ToolRegistry:
    registry = builtin_registry()
    registry.register(custom("count_lines", read_only=True))
    registry.register(custom("deploy", read_only=False))
    return registry


def offered(registry: ToolRegistry, mode: str = "execute", **agent: object) -> set[str]:
    return set(Policy(AgentSpec(id="a", provider="demo", **agent), mode).offered(registry).names())


def asking(terminal: Terminal, **agent: object) -> Policy:
    spec = AgentSpec(**{"id": "claude", "provider": "claude", **agent})  # type: ignore[arg-type]
    return Policy(spec, "execute", approver=Approver(stdin=terminal.stdin, stderr=terminal.stderr))


# --- profiles, allow, deny, mode --------------------------------------------------------------------

def test_profiles_offer_read_only_coding_or_everything(registry):
    assert offered(registry, profile="read-only") == READ_ONLY
    assert offered(registry, profile="coding") == CODING
    assert offered(registry, profile="full") == EVERYTHING


def test_query_mode_offers_read_only_tools_whatever_the_config_says(registry):
    assert offered(registry, "query", profile="full", allow=["*"]) == READ_ONLY


def test_query_mode_refuses_a_write_tool_even_when_config_allows_it_and_the_model_names_it(registry):
    policy = Policy(AgentSpec(id="a", provider="demo", profile="full", allow=["*"]), "query")
    for name in ("write_file", "edit_file", "run_command", "deploy"):
        refusal = policy.check(registry.resolve(name), {})
        assert refusal is not None and "not available in query mode" in refusal


def test_an_unknown_mode_is_treated_as_read_only(registry):
    assert offered(registry, "exec", profile="full") == READ_ONLY


def test_allow_narrows_the_profile_and_never_widens_it(registry):
    assert offered(registry, profile="coding", allow=["read_file", "deploy", "run_*"]) == {"read_file", "run_command"}


def test_deny_beats_allow(registry):
    assert offered(registry, profile="full", allow=["*"], deny=["write_file", "crew:run_*"]) == \
        EVERYTHING - {"write_file", "run_command"}


def test_check_refuses_a_denied_tool_the_model_names_anyway(registry):
    policy = Policy(AgentSpec(id="a", provider="demo", deny=["edit_file"]), "execute")
    assert policy.check(registry.resolve("edit_file"), {}) == (
        "tool 'edit_file' is not allowed for agent 'a' by its configuration (profile coding, allow/deny in "
        "crew.yaml); use another tool")
    assert policy.check(registry.resolve("write_file"), {"path": "x", "content": ""}) is None


def test_an_unknown_profile_is_a_config_error():
    with pytest.raises(ConfigError, match="agent 'a': profile 'admin' is not one of read-only, coding, full"):
        Policy(AgentSpec(id="a", provider="demo", profile="admin"), "execute")


# --- run_command confined by command globs ----------------------------------------------------------

DENY = ["rm *", "curl *", "git push*"]


@pytest.mark.parametrize("command", [
    "rm -rf build", "rm", "ls; rm x", "ls && rm x", "ls || rm x", "ls | rm x", "ls & rm x", "ls\nrm x",
    "echo $(rm x)", "echo `rm x`", "cat <(curl x)", "/bin/rm x", "\\rm x", "r''m x", "'rm' x", "FOO=1 rm x",
    "sudo -u root rm x", "env A=b rm x", "xargs rm < list", "timeout 5 curl example.org", "nice -n 5 rm x",
    "sh -c 'rm x'", "bash -lc \"curl x | sh\"", "eval 'rm x'", "if true; then rm x; fi", "(rm x)",
    "{ rm x; }", "git push --force", "ls # ; rm x",
])
def test_deny_commands_catch_the_command_however_it_is_wrapped(command):
    refusal = command_refusal(command, DENY, [])
    assert refusal is not None and "deny_commands" in refusal


@pytest.mark.parametrize("command", [
    "ls -la", "git status", "grep -r 'rm x' .", "echo rm", "git commit -m 'rm old files'", "format disk",
    "trim x", "git pull",
])
def test_deny_commands_let_other_commands_through(command):
    assert command_refusal(command, DENY, []) is None


def test_the_refusal_names_the_denied_command():
    assert command_refusal("ls && sudo rm -rf /", DENY, []) == (
        "the command policy forbids 'rm -rf /' (deny_commands in crew.yaml); it was not run. "
        "Do it another way or ask the user")


def test_allow_commands_require_every_command_to_match():
    allow = ["git status", "git diff*", "ls*"]
    assert command_refusal("git status && ls -la", [], allow) is None
    assert command_refusal("git status; make", [], allow) == (
        "the command policy does not allow 'make' (allow_commands in crew.yaml: git status, git diff*, ls*); "
        "it was not run")
    assert command_refusal("ls $(curl x)", [], allow) is not None


def test_a_command_that_cannot_be_split_is_refused_when_confined():
    assert command_refusal("echo 'open", DENY, []) == (
        "the command could not be checked against the command policy (No closing quotation); it was not run")
    assert command_refusal("echo 'open", [], []) is None  # no policy: the shell reports it


def test_simple_commands_are_split_and_normalised():
    assert simple_commands("A=1 /usr/bin/git status | wc -l") == [["git status"], ["wc -l"]]


def test_policy_check_applies_command_globs_to_run_command_only(registry):
    policy = Policy(AgentSpec(id="a", provider="demo", deny_commands=["rm *"]), "execute")
    assert "forbids 'rm x'" in policy.check(registry.resolve("run_command"), {"command": "rm x"})
    assert policy.check(registry.resolve("run_command"), {"command": "ls"}) is None
    assert policy.check(registry.resolve("write_file"), {"path": "rm x", "content": ""}) is None


# --- approval ---------------------------------------------------------------------------------------

def test_a_tool_matching_approval_globs_asks_and_runs_on_yes(registry):
    terminal = Terminal("y")
    policy = asking(terminal, approval=["write_*"])
    assert policy.check(registry.resolve("write_file"), {"path": "a.txt", "content": "x"}) is None
    assert terminal.asked == [('@claude wants to run write_file {"path": "a.txt", "content": "x"}\n'
                               "Allow? [y/N/a=always] ")]
    assert policy.check(registry.resolve("read_file"), {"path": "a.txt"}) is None  # not asked
    assert len(terminal.asked) == 1


@pytest.mark.parametrize("answer", ["n", "", "nope", "yes please"])
def test_anything_but_yes_declines(registry, answer):
    refusal = asking(Terminal(answer), approval=["run_command"]).check(registry.resolve("run_command"),
                                                                       {"command": "make"})
    assert refusal == "the user declined this call to 'run_command'; it was not run. Ask or try another way."


def test_always_approves_that_tool_for_the_rest_of_the_run(registry):
    terminal = Terminal("a")
    policy = asking(terminal, approval=["run_command"])
    for command in ("make", "make test", "make clean"):
        assert policy.check(registry.resolve("run_command"), {"command": command}) is None
    assert len(terminal.asked) == 1


def test_a_tool_declared_as_needing_approval_asks_without_config():
    terminal = Terminal("n")
    assert asking(terminal, profile="full").check(custom("deploy", False, needs_approval=True), {}) is not None
    assert len(terminal.asked) == 1


def test_without_a_terminal_approval_is_refused_with_a_message_for_the_model(registry):
    refusal = asking(Terminal("y", tty=False), approval=["*"]).check(registry.resolve("read_file"), {"path": "x"})
    assert refusal == ("tool 'read_file' needs a person's approval and there is no terminal to ask on; it was "
                       "not run (the user can re-run with --yes to approve every call)")


def test_approve_all_approves_without_asking(registry):
    terminal = Terminal()
    spec = AgentSpec(id="a", provider="demo", approval=["*"])
    policy = Policy(spec, "execute", approve_all=True, approver=Approver(terminal.stdin, terminal.stderr))
    assert policy.check(registry.resolve("run_command"), {"command": "make"}) is None
    assert terminal.asked == []


def test_approve_all_never_lifts_the_mode_or_deny(registry):
    spec = AgentSpec(id="a", provider="demo", deny=["edit_file"], approval=["*"])
    assert Policy(spec, "query", approve_all=True).check(registry.resolve("write_file"), {}) is not None
    assert Policy(spec, "execute", approve_all=True).check(registry.resolve("edit_file"), {}) is not None


def test_the_question_cannot_hide_the_input_behind_control_characters(registry):
    terminal = Terminal("n")
    asking(terminal, approval=["run_command"]).check(
        registry.resolve("run_command"), {"command": "rm -rf ~\r\x1b[2Kecho harmless"})
    assert "\r" not in terminal.asked[0] and "\x1b" not in terminal.asked[0]
    assert "rm -rf ~\\r\\u001b[2Kecho harmless" in terminal.asked[0]


def test_a_huge_input_is_shortened_in_the_question(registry):
    terminal = Terminal("n")
    asking(terminal, approval=["write_file"]).check(registry.resolve("write_file"),
                                                    {"path": "a", "content": "x" * 10_000})
    assert len(terminal.asked[0]) < 2200 and "more characters)" in terminal.asked[0]


# --- the CLI's own tools (native:…) -----------------------------------------------------------------

def native(mode="execute", **agent: object) -> Policy:
    return Policy(AgentSpec(id="claude", provider="claude", **agent), mode)  # type: ignore[arg-type]


def test_query_mode_lets_the_clis_own_tools_read_and_refuses_every_other():
    policy = native("query")
    assert policy.check_native("Read", {"file_path": "a"}, read_only=True) is None
    refusal = policy.check_native("Bash", {"command": "ls"}, read_only=False)
    assert refusal == ("crew does not allow Bash for query mode: only the CLI's tools that read may run "
                       "(the user can run `crew execute`)")
    assert native(profile="read-only").check_native("Edit", {}, read_only=False) is not None


def test_execute_mode_lets_them_act_unless_a_native_glob_denies_them():
    assert native().check_native("Bash", {"command": "make"}, read_only=False) is None
    policy = native(deny=["native:Bash", "write_file"])
    assert "native:… in allow/deny" in policy.check_native("Bash", {"command": "make"}, read_only=False)
    assert policy.check_native("write_file", {}, read_only=False) is None  # crew's write_file is not gemini's


def test_native_allow_globs_narrow_the_clis_tools_and_leave_crews_alone(registry):
    policy = native(allow=["native:Read*", "native:Grep", "read_file", "run_command"])
    assert policy.check_native("Grep", {}, read_only=True) is None
    assert policy.check_native("Edit", {}, read_only=False) is not None
    assert [tool.name for tool in policy.offered(registry)] == ["read_file", "run_command"]
    assert native(allow=["run_command"]).check_native("Edit", {}, read_only=False) is None  # no native: glob


def test_command_globs_apply_to_a_native_shell_tools_command():
    refusal = native(deny_commands=["rm *"]).check_native("run_shell_command", {"command": "cd x && rm -rf y"}, False)
    assert refusal is not None and "rm -rf y" in refusal


def test_native_approval_globs_ask_on_the_terminal():
    terminal = Terminal("n")
    refusal = asking(terminal, approval=["native:Bash"]).check_native("Bash", {"command": "make"}, read_only=False)
    assert terminal.asked == ['@claude wants to run native:Bash {"command": "make"}\nAllow? [y/N/a=always] ']
    assert refusal == "the user declined this call to 'native:Bash'; it was not run. Ask or try another way."


def test_the_policy_says_when_it_could_refuse_any_of_the_clis_own_tools():
    assert native("query").decides_native() and native(profile="read-only").decides_native()
    assert native(deny=["native:Bash"]).decides_native() and native(deny_commands=["rm *"]).decides_native()
    assert not native().decides_native() and not native(deny=["write_file"]).decides_native()
