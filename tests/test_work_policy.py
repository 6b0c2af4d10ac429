import subprocess

import pytest
from crewbridge.tools import builtin_registry

from crewbridge.config import AgentSpec
from crewbridge.errors import ConfigError
from crewbridge.system.approval import Approver
from crewbridge.toolkit.custom_tools import CommandTool
from crewbridge.toolkit.registry import Tool, ToolRegistry
from crewbridge.work.policy import Policy, Unasked, command_problem, not_approved
from crewcli import FakeModel, crew_env, only_result, run_crew, tool_block, write_config
from ttys import Terminal, close_terminals  # noqa: F401 - a fixture

READ_ONLY = {"read_file", "list_files", "grep", "help", "skill", "count_lines"}
CODING = READ_ONLY | {"write_file", "edit_file", "run_command"}
EVERYTHING = CODING | {"deploy"}


def custom(name: str, read_only: bool, needs_approval: bool = False) -> Tool:
    return Tool(
        name=name,
        description=name,
        input_schema={"type": "object"},
        func=lambda ctx: None,
        read_only=read_only,
        needs_approval=needs_approval,
    )


@pytest.fixture
def registry() -> ToolRegistry:
    registry = builtin_registry()
    registry.register(custom("count_lines", read_only=True))
    registry.register(custom("deploy", read_only=False))
    return registry


def offered(registry: ToolRegistry, mode: str = "execute", **agent: object) -> set[str]:
    return set(Policy(AgentSpec(id="a", provider="demo", **agent), mode).offered(registry).names())


def asking(terminal: Terminal, **agent: object) -> Policy:
    spec = AgentSpec(id="claude", provider="claude", **agent)  # type: ignore[arg-type]
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
        refusal = policy.check(registry.resolve(name), {}).refusal
        assert refusal is not None and "not available in query mode" in refusal


def test_an_unknown_mode_is_treated_as_read_only(registry):
    assert offered(registry, "exec", profile="full") == READ_ONLY


def test_allow_narrows_the_profile_and_never_widens_it(registry):
    assert offered(registry, profile="coding", allow=["read_file", "deploy", "run_*"]) == {"read_file", "run_command"}


def test_deny_beats_allow(registry):
    assert offered(registry, profile="full", allow=["*"], deny=["write_file", "crew:run_*"]) == EVERYTHING - {
        "write_file",
        "run_command",
    }


def test_check_refuses_a_denied_tool_the_model_names_anyway(registry):
    policy = Policy(AgentSpec(id="a", provider="demo", deny=["edit_file"]), "execute")
    assert policy.check(registry.resolve("edit_file"), {}).refusal == (
        "tool 'edit_file' is not allowed for agent 'a' by its configuration (profile coding, allow/deny in "
        "crew.yaml); use another tool"
    )
    assert policy.check(registry.resolve("write_file"), {"path": "x", "content": ""}).refusal is None


def test_an_unknown_profile_is_a_config_error():
    with pytest.raises(ConfigError, match="agent 'a': profile 'admin' is not one of read-only, coding, full"):
        Policy(AgentSpec(id="a", provider="demo", profile="admin"), "execute")


# --- run_command confined by command rules ----------------------------------------------------------

DENY = ["rm *", "curl *", "git push*"]


def refused(command: str, deny: list[str] = DENY, allow: list[str] | None = None) -> str:
    problem = command_problem(command, deny, allow or [])
    assert problem is not None, f"{command!r} was let through"
    return problem.reason


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf build",
        "rm",
        "ls; rm x",
        "ls && rm x",
        "ls || rm x",
        "ls | rm x",
        "ls & rm x",
        "ls\nrm x",
        "echo $(rm x)",
        "echo `rm x`",
        "cat <(curl x)",
        "/bin/rm x",
        "\\rm x",
        "r''m x",
        "'rm' x",
        "FOO=1 rm x",
        "sudo -u root rm x",
        "env A=b rm x",
        "xargs rm < list",
        "timeout 5 curl example.org",
        "nice -n 5 rm x",
        "sh -c 'rm x'",
        'bash -lc "curl x | sh"',
        "if true; then rm x; fi",
        "(rm x)",
        "{ rm x; }",
        "git push --force",
        "git push",
        "strace -f rm x",
        "exec rm x",
        "command rm x",
        "time rm x",
        ">out rm x -r",
        "2>&1 rm x",
        "cat <<EOF\n$(rm x)\nEOF",
    ],
)
def test_deny_commands_catch_the_command_however_it_is_written(command):
    assert "deny_commands" in refused(command)


@pytest.mark.parametrize(
    "command",
    [
        "ls -la",
        "git status",
        "grep -r 'rm x' .",
        "echo rm",
        "git commit -m 'rm old files'",
        "format disk",
        "trim x",
        "git pull",
        "ls # ; rm x",
        'echo "$HOME" > home.txt',
        'grep -r "$PAT" .',
        'git log "$REV"',
        "ls >/dev/null rm.txt",
        "/bin/bash -lc 'echo made > made.txt'",
    ],
)
def test_deny_commands_let_other_commands_through(command):
    assert command_problem(command, DENY, []) is None


# Each of these deleted the file `f` under deny_commands ["rm *"] before: crew let it run. Each still
# deletes it when its shell runs it (the first test, on the real shell), and is refused now.
EVASIONS = [
    ("X=rm; $X f", "sh"),
    ("${X:-rm} f", "sh"),
    ("rm${IFS}f", "sh"),
    ("bash -c -- 'rm f'", "sh"),
    ("$(printf rm) f", "sh"),
    ("trap 'rm f' EXIT", "sh"),
    ("alias r=rm\nr f", "sh"),
    ("r\\\nm f", "sh"),
    ("echo 'rm f' | sh", "sh"),
    ("echo rm f > s; . ./s", "sh"),
    ("$'rm' f", "bash"),
    ('$"rm" f', "bash"),
    ("rm{,} f", "bash"),
    ("PS4='$(rm f)'; set -x; true", "bash"),
    ("BASH_ALIASES[r]=rm; shopt -s expand_aliases\nr f", "bash"),
    ("hash -p /bin/rm ls; ls f", "bash"),
    ("x='a[$(rm f)]'; echo $((x))", "bash"),
    ("x='a[$(rm f)]'; [[ $x -eq 0 ]]", "bash"),
    ("printf -v 'a[$(rm f)]' 1", "bash"),
    ("x='a[$(rm f)]'; echo ${!x}", "bash"),
    ("x='$(rm f)'; echo ${x@P}", "bash"),
    ("mapfile -C 'rm f #' -c 1 a <<< x", "bash"),
    # issue 31: wrappers read too loosely, or not known
    ("env - rm f", "sh"),
    ("timeout -- 5 rm f", "sh"),
    ("env --split-string='rm f'", "sh"),
    ("env -S 'rm f'", "sh"),
    ("env 'BASH_FUNC_ls%%=() { rm f; }' bash -c ls", "sh"),
    ("nice -5 rm f", "sh"),
    ("nohup rm f", "sh"),
    ("setpriv --reuid=0 rm f", "sh"),
    ("setarch x86_64 -R rm f", "sh"),
    ("linux64 rm f", "sh"),
    ("prlimit --nofile=64 rm f", "sh"),
    ("choom -n 0 -- rm f", "sh"),
    ("sg root -c 'rm f'", "sh"),
    ("fakeroot -- rm f", "sh"),
    ("/lib64/ld-linux-x86-64.so.2 /bin/rm f", "sh"),
    ("echo 'rm f' > s.sh; sh s.sh", "sh"),
    ("echo 'rm f' > s.sh; bash s.sh", "sh"),
]


@pytest.mark.parametrize("command, shell", EVASIONS)
def test_each_evasion_deletes_the_file_when_the_shell_runs_it(command, shell, tmp_path):
    (tmp_path / "f").write_text("keep me")
    subprocess.run([shell, "-c", command], cwd=tmp_path, capture_output=True, timeout=30)
    assert not (tmp_path / "f").exists()


@pytest.mark.parametrize("command, shell", EVASIONS)
def test_each_evasion_is_refused_by_deny_commands(command, shell):
    assert "it was not run" in refused(command, ["rm *"]).lower()


def test_the_documented_allow_example_no_longer_admits_make_options(tmp_path):
    command = "make test --eval='x:=$(shell rm f)'"
    (tmp_path / "Makefile").write_text("test:\n\t@true\n")
    (tmp_path / "f").write_text("keep me")
    subprocess.run(["sh", "-c", command], cwd=tmp_path, capture_output=True, timeout=30)
    assert not (tmp_path / "f").exists()  # `make test*` used to admit it, and make ran the rm
    assert "does not allow 'make test --eval=x:=$(shell rm f)'" in refused(command, [], ["make test*"])
    assert command_problem("make test", [], ["make test"]) is None


def test_the_refusal_names_the_denied_command_and_the_rule():
    assert refused("ls && sudo rm -rf /") == (
        "the command policy forbids 'rm -rf /' (deny_commands in crew.yaml: 'rm *'); it was not run. "
        "Do it another way or ask the user"
    )


def test_an_unknown_program_is_refused_with_the_reason_the_model_reads():
    assert refused("X=rm; $X f") == (
        "crew cannot check it against deny_commands/allow_commands in crew.yaml: its program '$X' is known "
        "only when the shell runs (a variable, expansion, command substitution or glob); write the program's "
        "name out. It was not run; write it as plain commands"
    )


def test_a_deny_glob_refuses_a_word_only_the_shell_knows_where_it_could_match():
    assert "git push*" in refused("git $SUB --force")  # $SUB may be push
    assert "rm *" in refused('rm "$F"')
    assert command_problem('git log "$X"', DENY, []) is None  # no value of $X makes it `git push…`


def test_allow_commands_match_each_simple_command_word_by_word():
    allow = ["git status", "git diff *", "ls *", "make test", "pytest *"]
    for command in (
        "git status && ls -la",
        "git diff HEAD~1 -- a.py",
        "make test",
        "pytest -q tests/x.py",
        "ls",
        "ls *.py",
        'ls "$D"',
        "bash -lc 'make test'",
    ):
        assert command_problem(command, [], allow) is None, command
    for command in ("git status --porcelain", "make test --eval=x", "make tests", "sudo make test", "git statu"):
        assert "does not allow" in refused(command, [], allow), command
    assert refused("git status; make", [], allow) == (
        "the command policy does not allow 'make' (allow_commands in crew.yaml: git status, git diff *, ls *, "
        "make test, pytest *); it was not run"
    )


def test_allow_commands_admit_a_word_only_the_shell_knows_only_where_any_value_fits():
    assert command_problem('cp "$F" out', [], ["cp * out"]) is None
    assert refused("cp $F out", [], ["cp * out"])  # unquoted: may be several words, `out` among them
    assert command_problem('tool "--out=$DIR"', [], ["tool --out=*"]) is None
    assert refused('tool "--in=$DIR"', [], ["tool --out=*"])
    assert command_problem("tool $ARGS", [], ["tool *"]) is None  # the last `*`: any further words


def test_allow_commands_count_assignments_and_the_programs_directory():
    assert refused("FOO=1 make test", [], ["make test"])
    assert command_problem("FOO=1 make test", [], ["FOO=1 make test"]) is None
    assert refused("PATH=.:$PATH; make test", [], ["make test"])
    assert refused("/tmp/x/make test", [], ["make test"])
    assert command_problem("/usr/bin/make test", [], ["*/make test"]) is None


def test_what_crew_cannot_check_is_refused_only_when_command_rules_are_set():
    assert command_problem("X=rm; $X f", [], []) is None  # no rules: the sandbox is the enforcement
    assert command_problem("echo 'open", [], []) is None
    assert "crew cannot parse it" in refused("echo 'open")
    assert "its program '$X'" in refused("X=ls; $X", [], ["ls"])


def test_policy_check_applies_command_rules_to_run_command_only(registry):
    policy = Policy(AgentSpec(id="a", provider="demo", deny_commands=["rm *"]), "execute")
    assert "forbids 'rm x'" in policy.check(registry.resolve("run_command"), {"command": "rm x"}).refusal
    assert "its program '$X'" in policy.check(registry.resolve("run_command"), {"command": "X=rm; $X x"}).refusal
    assert policy.check(registry.resolve("run_command"), {"command": "ls"}).refusal is None
    assert policy.check(registry.resolve("write_file"), {"path": "rm x", "content": ""}).refusal is None


def test_a_command_crew_cannot_check_is_asked_about_where_approval_is_configured(registry):
    terminal = Terminal("y")
    policy = asking(terminal, approval=["run_command"], deny_commands=["rm *"])
    policy.approve_all = True  # --yes does not cover what the rules could not check: still asked
    assert policy.check(registry.resolve("run_command"), {"command": "X=ls; $X"}).refusal is None
    assert terminal.asked == [
        '@claude wants to run run_command {"command": "X=ls; $X"}\ncrew cannot check it against '
        "deny_commands/allow_commands in crew.yaml: its program '$X' is known only when the shell runs (a "
        "variable, expansion, command substitution or glob); write the program's name out\nAllow? [y/N/a=always] "
    ]
    assert "forbids 'rm x'" in policy.check(registry.resolve("run_command"), {"command": "rm x"}).refusal  # not asked
    assert len(terminal.asked) == 1
    nobody = Policy(
        AgentSpec(id="a", provider="demo", approval=["run_command"], allow_commands=["ls"]),
        "execute",
        approve_all=True,
        approver=Approver(stdin=Terminal(tty=False).stdin, stderr=Terminal(tty=False).stderr),
    )
    assert nobody.check(registry.resolve("run_command"), {"command": "$(echo ls)"}).refusal.endswith(
        "it was not run (nobody to ask: no terminal, no crew ui serving)"
    )


def test_a_command_tool_that_takes_a_shell_command_is_read_like_run_command():
    script = CommandTool("sh_tool", ["sh", "-c", "{script}"], {"type": "object", "properties": {"script": {}}}).tool()
    words = CommandTool("count", ["wc", "-l", "{path}"], {"type": "object", "properties": {"path": {}}}).tool()
    policy = Policy(AgentSpec(id="a", provider="demo", profile="full", deny_commands=["rm *"]), "execute")
    assert "its program '$X'" in policy.check(script, {"script": "X=rm; $X f"}).refusal
    assert "forbids 'rm f'" in policy.check(script, {"script": "ls && rm f"}).refusal
    assert policy.check(script, {"script": "ls"}).refusal is None
    strict = Policy(AgentSpec(id="a", provider="demo", profile="full", allow_commands=["ls"]), "execute")
    assert (
        policy.check(words, {"path": "$(rm f)"}).refusal is None and strict.check(words, {"path": "x"}).refusal is None
    )
    assert (
        strict.check(script, {"script": "ls"}).refusal is None
        and "does not allow 'make'" in strict.check(script, {"script": "make"}).refusal
    )


@pytest.mark.slow
def test_crew_execute_refuses_the_models_run_command_and_the_file_survives(tmp_path):
    model = FakeModel(tmp_path / "bin")
    work = tmp_path / "work"
    work.mkdir()
    (work / "f").write_text("keep me")
    write_config(
        work / "crew.yaml",
        providers={"fake": model.provider()},
        agents={"fake": {"provider": "fake", "deny_commands": ["rm *"]}},
    )
    model.script(tool_block("crew:run_command", command="X=rm; $X f"), "I may not delete it.")
    done = run_crew(
        ["execute", "--config", "crew.yaml", "--json", "@fake delete f"], env=crew_env(tmp_path / "home"), cwd=work
    )
    assert done.returncode == 0, done.stderr
    assert (work / "f").read_text() == "keep me"
    [call] = only_result(done.stdout)["tool_calls"]
    assert (call["name"], call["success"]) == ("crew:run_command", False)
    assert "its program '$X' is known only when the shell runs" in model.prompts[-1]


# --- approval ---------------------------------------------------------------------------------------


def test_a_tool_matching_approval_globs_asks_and_runs_on_yes(registry):
    terminal = Terminal("y")
    policy = asking(terminal, approval=["write_*"])
    ruling = policy.check(registry.resolve("write_file"), {"path": "a.txt", "content": "x"})
    assert (ruling.refusal, ruling.decision, ruling.by) == (None, "allowed", "terminal")  # a person said yes there
    assert terminal.asked == [
        ('@claude wants to run write_file {"path": "a.txt", "content": "x"}\nAllow? [y/N/a=always] ')
    ]
    ruling = policy.check(registry.resolve("read_file"), {"path": "a.txt"})
    assert (ruling.refusal, ruling.by) == (None, "policy")  # not asked
    assert len(terminal.asked) == 1


@pytest.mark.parametrize("answer", ["n", "", "nope", "yes please"])
def test_anything_but_yes_declines(registry, answer):
    ruling = asking(Terminal(answer), approval=["run_command"]).check(
        registry.resolve("run_command"), {"command": "make"}
    )
    assert ruling.refusal == "the user declined this call to 'run_command'; it was not run. Ask or try another way."
    assert (ruling.decision, ruling.by) == ("refused", "terminal")


def test_always_approves_that_tool_for_the_rest_of_the_run(registry):
    terminal = Terminal("a")
    policy = asking(terminal, approval=["run_command"])
    rulings = [
        policy.check(registry.resolve("run_command"), {"command": c}) for c in ("make", "make test", "make clean")
    ]
    assert [(r.refusal, r.by) for r in rulings] == [(None, "terminal"), (None, "always"), (None, "always")]
    assert len(terminal.asked) == 1


def test_a_tool_declared_as_needing_approval_asks_without_config():
    terminal = Terminal("n")
    assert asking(terminal, profile="full").check(custom("deploy", False, needs_approval=True), {}).refusal is not None
    assert len(terminal.asked) == 1


def test_without_a_terminal_approval_is_refused_with_a_message_for_the_model(registry):
    refusal = (
        asking(Terminal("y", tty=False), approval=["*"]).check(registry.resolve("read_file"), {"path": "x"}).refusal
    )
    assert refusal == (
        "tool 'read_file' needs a person's approval and there is nobody to ask (no terminal, no crew ui "
        "serving); it was not run (the user can re-run with --yes to approve every call)"
    )


def test_calls_refused_because_nobody_could_be_asked_are_kept_for_the_run_to_report(registry):
    policy = asking(Terminal("y", tty=False), approval=["write_file", "run_command"], deny_commands=["rm *"])
    assert policy.check(registry.resolve("write_file"), {"path": "a.txt", "content": "x"}).by == "nobody"
    policy.check(registry.resolve("run_command"), {"command": "$(echo ls)"})  # unchecked: --yes would not do
    assert policy.check(registry.resolve("run_command"), {"command": "rm x"}).by == "policy"  # the rules, not unasked
    assert policy.check(registry.resolve("read_file"), {"path": "a.txt"}).refusal is None  # needs no approval
    unasked = policy.take_unasked()
    assert unasked == [
        Unasked("write_file", {"path": "a.txt", "content": "x"}),
        Unasked("run_command", {"command": "$(echo ls)"}, unchecked=True),
    ]
    assert policy.take_unasked() == []  # taken once
    error = not_approved("claude", unasked)
    assert error.exit_code == 8
    assert str(error) == (
        "@claude: 2 calls needed a person's approval and there was nobody to ask (no terminal, no crew ui "
        "serving), so they were not run: write_file a.txt, run_command $(echo ls); re-run with --yes to "
        "approve them, or take them out of the `approval` list of agent 'claude' in crew.yaml; a command "
        "crew cannot check is allowed only by a person (on a terminal or crew ui), even with --yes"
    )


def test_a_person_who_declines_is_not_a_call_nobody_could_be_asked_about(registry):
    policy = asking(Terminal("n"), approval=["write_file"])
    assert "declined" in policy.check(registry.resolve("write_file"), {"path": "a", "content": ""}).refusal
    assert policy.take_unasked() == []


def test_approve_all_approves_without_asking(registry):
    terminal = Terminal()
    spec = AgentSpec(id="a", provider="demo", approval=["*"])
    policy = Policy(spec, "execute", approve_all=True, approver=Approver(terminal.stdin, terminal.stderr))
    ruling = policy.check(registry.resolve("run_command"), {"command": "make"})
    assert (ruling.refusal, ruling.by) == (None, "approve_all") and terminal.asked == []


def test_approve_all_never_lifts_the_mode_or_deny(registry):
    spec = AgentSpec(id="a", provider="demo", deny=["edit_file"], approval=["*"])
    assert Policy(spec, "query", approve_all=True).check(registry.resolve("write_file"), {}).refusal is not None
    assert Policy(spec, "execute", approve_all=True).check(registry.resolve("edit_file"), {}).refusal is not None


def test_the_question_cannot_hide_the_input_behind_control_characters(registry):
    terminal = Terminal("n")
    asking(terminal, approval=["run_command"]).check(
        registry.resolve("run_command"), {"command": "rm -rf ~\r\x1b[2Kecho harmless"}
    )
    assert "\r" not in terminal.asked[0] and "\x1b" not in terminal.asked[0]
    assert "rm -rf ~\\r\\u001b[2Kecho harmless" in terminal.asked[0]


def test_a_huge_input_is_shortened_in_the_question(registry):
    terminal = Terminal("n")
    asking(terminal, approval=["write_file"]).check(
        registry.resolve("write_file"), {"path": "a", "content": "x" * 10_000}
    )
    assert len(terminal.asked[0]) < 2200 and "more characters)" in terminal.asked[0]


# --- the CLI's own tools (native:…) -----------------------------------------------------------------


def native(mode="execute", **agent: object) -> Policy:
    return Policy(AgentSpec(id="claude", provider="claude", **agent), mode)  # type: ignore[arg-type]


def test_query_mode_lets_the_clis_own_tools_read_and_refuses_every_other():
    policy = native("query")
    assert policy.check_native("Read", {"file_path": "a"}, read_only=True).refusal is None
    refusal = policy.check_native("Bash", {"command": "ls"}, read_only=False).refusal
    assert refusal == (
        "crew does not allow Bash for query mode: only the CLI's tools that read may run "
        "(the user can run `crew execute`)"
    )
    assert native(profile="read-only").check_native("Edit", {}, read_only=False).refusal is not None


def test_execute_mode_lets_them_act_unless_a_native_glob_denies_them():
    assert native().check_native("Bash", {"command": "make"}, read_only=False).refusal is None
    policy = native(deny=["native:Bash", "write_file"])
    assert "native:… in allow/deny" in policy.check_native("Bash", {"command": "make"}, read_only=False).refusal
    assert policy.check_native("write_file", {}, read_only=False).refusal is None  # crew's write_file is not gemini's


def test_native_allow_globs_narrow_the_clis_tools_and_leave_crews_alone(registry):
    policy = native(allow=["native:Read*", "native:Grep", "read_file", "run_command"])
    assert policy.check_native("Grep", {}, read_only=True).refusal is None
    assert policy.check_native("Edit", {}, read_only=False).refusal is not None
    assert [tool.name for tool in policy.offered(registry)] == ["read_file", "run_command"]
    assert native(allow=["run_command"]).check_native("Edit", {}, read_only=False).refusal is None  # no native: glob


def test_command_rules_apply_to_a_native_shell_tools_command():
    policy = native(deny_commands=["rm *"])
    assert "rm -rf y" in policy.check_native("run_shell_command", {"command": "cd x && rm -rf y"}, False).refusal
    assert "its program '$X'" in policy.check_native("Bash", {"command": "X=rm; $X f"}, False).refusal
    assert "forbids 'rm f'" in policy.check_native("exec_command", {"command": "/bin/bash -lc 'rm f'"}, False).refusal
    assert policy.check_native("exec_command", {"command": "/bin/bash -lc 'ls'"}, False).refusal is None


def test_native_approval_globs_ask_on_the_terminal():
    terminal = Terminal("n")
    refusal = (
        asking(terminal, approval=["native:Bash"]).check_native("Bash", {"command": "make"}, read_only=False).refusal
    )
    assert terminal.asked == ['@claude wants to run native:Bash {"command": "make"}\nAllow? [y/N/a=always] ']
    assert refusal == "the user declined this call to 'native:Bash'; it was not run. Ask or try another way."


def test_the_policy_says_when_it_could_refuse_any_of_the_clis_own_tools():
    assert native("query").decides_native() and native(profile="read-only").decides_native()
    assert native(deny=["native:Bash"]).decides_native() and native(deny_commands=["rm *"]).decides_native()
    assert not native().decides_native() and not native(deny=["write_file"]).decides_native()
