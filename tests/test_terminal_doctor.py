"""`crew doctor`: configuration, each provider's CLI found, its version, the options crew passes it
accepted (read from --help), one line per finding saying what to do; never a model call."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from clienv import CLIS, PACKAGES, REPO, VENV_BIN
from crewbridge.cli import cli
from crewbridge.errors import UsageError
from crewbridge.sandbox import MECHANISM_ENV
from crewbridge.system.childenv import withheld_names
from crewbridge.terminal.doctor import FAIL, OK, WARN, Check, Prober, diagnose, help_argv, option_of, options_in_help
from crewbridge.terminal.init import add_recipe
from mockserver import MockServer

CLAUDE_HELP = """\
Usage: claude [options] [command] [prompt]

Options:
  --allowedTools, --allowed-tools <tools...>  Tools allowed without asking
  --append-system-prompt <prompt>   Append a system prompt to the default system prompt
  --include-partial-messages        Include partial message chunks (only with --print and
                                    --output-format=stream-json)
  --input-format <format>           Input format (only works with --print)
  --mcp-config <configs...>         Load MCP servers from JSON files or strings
  --model <model>                   Model for the current session
  --output-format <format>          Output format (only works with --print)
  -p, --print                       Print response and exit
  -r, --resume [value]              Resume a conversation by session ID
  --strict-mcp-config               Only use MCP servers from --mcp-config
  --tools <tools...>                Specify the list of available tools
  --verbose                         Override verbose mode setting from config
"""


@pytest.fixture(autouse=True)
def scratch_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No crew.yaml of the person running the tests, and no plugin providers."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.setattr("crewbridge.providers.plugins", dict)


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    path = tmp_path / "bin"
    path.mkdir()
    return path


def fake_cli(
    bin_dir: Path,
    name: str,
    *,
    version: str = "1.0.0",
    help_text: str = "",
    sub_help: dict[str, str] | None = None,
    version_status: int = 0,
    hang: str = "",
) -> Path:
    """A stand-in CLI: prints `version` for --version, `help_text` for --help, `sub_help[word]` for
    `word --help` (else the main help, as CLIs that take a prompt do), sleeps on argument `hang`,
    and records every run in <name>.runs."""
    script = bin_dir / name
    script.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent(f"""\
        import sys, time
        args = sys.argv[1:]
        with open({str(bin_dir / (name + ".runs"))!r}, "a") as log:
            log.write(" ".join(args) + "\\n")
        if {hang!r} and {hang!r} in args:
            time.sleep(60)
        if args == ["--version"]:
            print({version!r})
            sys.exit({version_status})
        subs = {sub_help or {}!r}
        print(subs.get(args[0], {help_text!r}) if len(args) == 2 and args[1] == "--help" else {help_text!r})
        """)
    )
    script.chmod(0o755)
    return script


def runs(bin_dir: Path, name: str) -> list[str]:
    log = bin_dir / f"{name}.runs"
    return log.read_text().splitlines() if log.exists() else []


def doctor(
    workdir: Path, bin_dir: Path, *, only: tuple[str, ...] = (), timeout: float = 30.0, config: Path | None = None
) -> dict[str, list[Check]]:
    """The findings by subject, with only `bin_dir` on PATH."""
    env = {**os.environ, "PATH": str(bin_dir)}
    out: dict[str, list[Check]] = {}
    for check in diagnose(config, workdir, env=env, only=only, timeout=timeout):
        out.setdefault(check.subject, []).append(check)
    return out


def statuses(found: dict[str, list[Check]]) -> dict[str, list[str]]:
    return {subject: [check.status for check in checks] for subject, checks in found.items()}


# --- reading argv and help texts -----------------------------------------------------------------


def test_options_are_read_from_argv_items() -> None:
    assert [option_of(t) for t in ["--model", "--model=x", "-p", "-", "value", "-1", "--x=a=b"]] == [
        "--model",
        "--model",
        "-p",
        None,
        None,
        None,
        "--x",
    ]


def test_options_are_read_from_the_help_formats_of_the_three_clis() -> None:
    assert {"-p", "--print", "--include-partial-messages", "--output-format", "--resume", "-r"} <= options_in_help(
        CLAUDE_HELP
    )
    yargs = '  -m, --model    Model  [string]\n      --approval-mode  Set the mode  [choices: "default"]'
    clap = "  -s, --sandbox <SANDBOX_MODE>\n      --skip-git-repo-check\n          Allow running outside"
    assert options_in_help(yargs) == {"-m", "--model", "--approval-mode"}
    assert options_in_help(clap) == {"-s", "--sandbox", "--skip-git-repo-check"}
    assert "-interactive" not in options_in_help("Runs in non-interactive mode")


def test_the_help_command_is_that_of_the_subcommand_crew_runs() -> None:
    assert help_argv(["codex", "exec", "--json", "resume", "ID", "-"]) == ["codex", "exec", "--help"]
    assert help_argv(["codex", "app-server"]) == ["codex", "app-server", "--help"]
    assert help_argv(["claude", "-p", "--verbose"]) == ["claude", "--help"]


# --- the real, pinned CLIs -------------------------------------------------------------------------


@pytest.mark.needs("clis")
@pytest.mark.slow
def test_the_pinned_clis_pass_and_none_of_them_reaches_a_model(
    cli_env: Callable[[str], dict[str, str]], mock_server: MockServer, workdir: Path
) -> None:
    env = {**cli_env("claude"), **cli_env("codex"), **cli_env("gemini")}  # one HOME, every CLI set up
    found = {check.subject: check for check in diagnose(None, workdir, env=env)}
    for name in CLIS:
        pinned = json.loads((REPO / "package.json").read_text())["dependencies"][PACKAGES[name]]
        assert found[name].status == OK, found[name].line()
        assert pinned in found[name].message and "accepts the" in found[name].message
    assert found["demo"].status == OK
    assert mock_server.requests == [] and mock_server.aux == []  # no model, no other host


@pytest.mark.needs("clis")
@pytest.mark.slow
def test_the_pinned_third_party_clis_pass_with_their_recipes(
    cli_env: Callable[[str], dict[str, str]], mock_server: MockServer, workdir: Path
) -> None:
    names = ("llm", "qwen", "opencode")
    for name in names:
        add_recipe(workdir, name)
    env = {key: value for name in names for key, value in cli_env(name).items()}
    checks: dict[str, list[Check]] = {}
    for check in diagnose(workdir / "crew.yaml", workdir, env=env, only=names):
        checks.setdefault(check.subject, []).append(check)
    found = {name: checks[name][0] for name in names}
    assert found["llm"].message.startswith(
        f"llm, version 0.36 at {VENV_BIN / 'llm'} (crew.yaml); accepts the 4 options"
    )
    assert found["qwen"].message.startswith(
        f"0.24.4 at {REPO / 'node_modules' / '.bin' / 'qwen'} (crew.yaml); accepts the 7 options"
    )
    assert found["opencode"].message.startswith(
        f"1.18.33 at {REPO / 'node_modules' / '.bin' / 'opencode'} (crew.yaml); accepts the 5 options"
    )
    assert found["llm"].status == found["qwen"].status == found["opencode"].status == OK
    assert mock_server.requests == [] and mock_server.aux == []  # no model, no other host
    assert checks["llm"][1].message.startswith(
        f"in crew's sandbox it writes no folder of its own; {env['LLM_USER_PATH']} is read-only, seen through a view"
    )
    assert checks["opencode"][1].message.startswith(
        f"in crew's sandbox it writes only its data: {env['XDG_DATA_HOME']}/opencode, "
        f"{env['XDG_STATE_HOME']}/opencode; {env['XDG_CONFIG_HOME']}/opencode is read-only, seen through a view "
        "(state_dirs are data folders:"
    )


# --- fake CLIs: missing, lacking an option, broken ---------------------------------------------------


@pytest.mark.slow
def test_a_cli_that_lacks_an_option_crew_uses_fails_naming_it_and_how_to_update(workdir: Path, bin_dir: Path) -> None:
    fake_cli(
        bin_dir,
        "claude",
        version="2.0.0 (Claude Code)",
        help_text=CLAUDE_HELP.replace("--include-partial-messages", "--other-flag"),
    )
    (check,) = doctor(workdir, bin_dir, only=("claude",))["claude"]
    assert check.status == FAIL
    assert check.message == (
        f"2.0.0 (Claude Code) at {bin_dir / 'claude'}: `claude --help` does not list "
        "--include-partial-messages, which crew uses; install a version that has it: "
        "npm install -g @anthropic-ai/claude-code"
    )


def test_a_cli_with_every_option_passes_with_its_version(workdir: Path, bin_dir: Path) -> None:
    fake_cli(bin_dir, "claude", version="2.1.197 (Claude Code)", help_text=CLAUDE_HELP)
    (check,) = doctor(workdir, bin_dir, only=("claude",))["claude"]
    assert (check.status, check.message) == (
        OK,
        f"2.1.197 (Claude Code) at {bin_dir / 'claude'}; accepts the 12 options crew uses; "
        "the version crew is tested with",
    )
    assert sorted(runs(bin_dir, "claude")) == ["--help", "--version"]  # each probe once, nothing else


def test_a_cli_at_another_version_than_crew_is_tested_with_says_which_and_how_to_get_it(
    workdir: Path, bin_dir: Path
) -> None:
    fake_cli(bin_dir, "claude", version="2.2.0 (Claude Code)", help_text=CLAUDE_HELP)
    (check,) = doctor(workdir, bin_dir, only=("claude",))["claude"]
    assert check.status == OK and check.message.endswith(
        "; crew is tested with 2.1.197 (npm install -g @anthropic-ai/claude-code@2.1.197)"
    )


def test_the_extras_are_listed_installed_or_with_the_pip_command(
    workdir: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = doctor(workdir, bin_dir)["extras"]
    assert [check.status for check in found] == [OK, OK, OK]
    assert found[2].message.startswith("otel: opentelemetry-sdk 1.45.2 (")
    assert found[0].message.startswith("acp: agent-client-protocol 0.12.1 (")
    monkeypatch.setitem(sys.modules, "dbos", None)  # not importable
    found = doctor(workdir, bin_dir)["extras"]
    assert [check.status for check in found] == [OK, WARN, OK]
    assert found[1].message == (
        "batch: not installed; crew batch, crew ui's batches page need it: pip install '.[batch]' in a clone "
        "of crewbridge, pip install 'crewbridge[batch]' otherwise"
    )


def test_a_missing_cli_is_a_warning_unless_it_is_needed(workdir: Path, bin_dir: Path) -> None:
    found = doctor(workdir, bin_dir)
    assert statuses(found)["gemini"] == [WARN]
    assert found["gemini"][0].message == (
        "not installed: `gemini` is not on PATH; only @gemini needs it, so "
        "install it to use that: npm install -g @google/gemini-cli (crew is tested with 0.61.0)"
    )
    assert statuses(doctor(workdir, bin_dir, only=("gemini",))) == {
        "config": [OK],
        "tools": [OK],
        "extras": [OK, OK, OK],
        "mcp": [OK],
        "native": [OK],
        "sandbox": [OK],
        "hidden": [OK],
        "env": [OK],
        "network": [OK] * 5,  # how it is held, and each of the four built-in agents
        "gemini": [FAIL],
    }


def test_a_missing_cli_that_an_agent_in_crew_yaml_uses_fails(workdir: Path, bin_dir: Path) -> None:
    (workdir / "crew.yaml").write_text("agents:\n  helper:\n    provider: codex\n")
    found = doctor(workdir, bin_dir)
    assert statuses(found)["codex"] == [FAIL] and statuses(found)["gemini"] == [WARN]
    assert found["codex"][0].message.startswith("not installed: `codex` is not on PATH; install it: npm")


@pytest.mark.slow
def test_a_subcommand_the_cli_lacks_fails(workdir: Path, bin_dir: Path) -> None:
    exec_help = "Usage: codex exec [OPTIONS]\n  --json\n  --skip-git-repo-check\n  -s, --sandbox <MODE>\n  -m, --model"
    fake_cli(bin_dir, "codex", help_text="Usage: codex [OPTIONS] [PROMPT]\n  -m, --model", sub_help={"exec": exec_help})
    (check,) = doctor(workdir, bin_dir, only=("codex",))["codex"]
    assert check.status == FAIL
    assert "it has no `app-server` command (`codex app-server --help` does not mention it)" in check.message


def test_a_version_run_that_fails_is_reported_with_its_status(workdir: Path, bin_dir: Path) -> None:
    fake_cli(bin_dir, "claude", help_text=CLAUDE_HELP, version="boom", version_status=3)
    (check,) = doctor(workdir, bin_dir, only=("claude",))["claude"]
    assert check.status == FAIL
    assert "`claude --version` exited with status 3 (boom); run it yourself to see why" in check.message


@pytest.mark.slow
def test_a_help_run_that_hangs_is_stopped_and_reported(workdir: Path, bin_dir: Path) -> None:
    fake_cli(bin_dir, "claude", help_text=CLAUDE_HELP, hang="--help")
    (check,) = doctor(workdir, bin_dir, only=("claude",), timeout=1.0)["claude"]
    assert check.status == FAIL and "`claude --help` did not finish (no answer within 1s)" in check.message
    assert "run it yourself to see where it hangs" in check.message


def test_a_help_that_lists_no_options_cannot_vouch_for_any(workdir: Path, bin_dir: Path) -> None:
    fake_cli(bin_dir, "claude", help_text="usage: see the manual")
    (check,) = doctor(workdir, bin_dir, only=("claude",))["claude"]
    assert check.status == FAIL and "`claude --help` lists no options" in check.message


def test_closing_the_prober_ends_the_runs_still_going(workdir: Path, bin_dir: Path) -> None:
    slow = bin_dir / "slow"
    slow.write_text(
        f"#!{sys.executable}\nimport os, time\n"
        f"open({str(bin_dir / 'pid')!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n"
    )
    slow.chmod(0o755)
    prober = Prober({}, workdir, timeout=600)
    run = prober.start([str(slow), "--help"], {})
    for _ in range(3000):
        if (bin_dir / "pid").exists() and (bin_dir / "pid").read_text():
            break
        time.sleep(0.01)
    else:
        pytest.fail("the slow CLI never started")
    prober.close()  # would wait ten minutes if the run were left to time out
    assert run.done() and run.result().code == -signal.SIGKILL
    pid = int((bin_dir / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


# --- configuration -------------------------------------------------------------------------------

LLAMA_YAML = """\
providers:
  llama:
    command: [llama, run, --quiet]
    model_args: [--model, "{model}"]
    resume: [--session, "{session}"]
    session_key: id
    format: jsonl
    options: {query: [--read-only]}
agents:
  local: {provider: llama}
"""
LLAMA_HELP = "Usage: llama run [options]\n  --quiet\n  --model NAME\n  --session ID\n  --read-only\n"


@pytest.mark.slow
def test_a_cli_described_in_crew_yaml_is_checked_like_a_built_in_one(workdir: Path, bin_dir: Path) -> None:
    fake_cli(bin_dir, "llama", version="llama 3.1", sub_help={"run": LLAMA_HELP})
    (workdir / "crew.yaml").write_text(LLAMA_YAML)
    check, state = doctor(workdir, bin_dir, config=workdir / "crew.yaml")["llama"]
    assert check == Check(OK, "llama", f"llama 3.1 at {bin_dir / 'llama'} (crew.yaml); accepts the 4 options crew uses")
    assert state == Check(
        OK, "llama", "in crew's sandbox it writes no folder of its own (give its data folders in state_dirs)"
    )
    assert sorted(runs(bin_dir, "llama")) == ["--version", "run --help"]
    fake_cli(bin_dir, "llama", version="llama 3.0", sub_help={"run": LLAMA_HELP.replace("--read-only", "")})
    check, _ = doctor(workdir, bin_dir, config=workdir / "crew.yaml")["llama"]
    assert check == Check(
        FAIL,
        "llama",
        f"llama 3.0 at {bin_dir / 'llama'} (crew.yaml): `llama run --help` does not "
        "list --read-only, which crew uses; fix providers.llama in crew.yaml, or "
        "install a version that has it",
    )


def test_a_cli_with_probe_false_is_looked_for_but_never_run(workdir: Path, bin_dir: Path) -> None:
    fake_cli(bin_dir, "llama")
    (workdir / "crew.yaml").write_text(
        "providers:\n  llama:\n    command: [llama, --prompt, '{prompt}']\n"
        "    probe: false\n    state_dirs: [~/.llama/sessions]\nagents:\n  local:\n    provider: llama\n"
    )
    check, state = doctor(workdir, bin_dir, config=workdir / "crew.yaml")["llama"]
    assert check == Check(OK, "llama", "found (crew.yaml); runs `llama --prompt PROMPT` (not run here: probe: false)")
    assert state.message.startswith(f"in crew's sandbox it writes only its data: {Path.home() / '.llama/sessions'} (")
    assert runs(bin_dir, "llama") == []
    (workdir / "crew.yaml").write_text(
        "providers:\n  llama:\n    command: [llama]\n    install_hint: get llama\n"
        "agents:\n  local:\n    provider: llama\n"
    )
    check, _ = doctor(workdir, bin_dir / "empty", config=workdir / "crew.yaml")["llama"]
    assert check == Check(FAIL, "llama", "not installed (crew.yaml): `llama` is not on PATH; install it: get llama")


def test_an_invalid_configuration_fails_and_the_clis_are_still_checked(workdir: Path, bin_dir: Path) -> None:
    (workdir / "crew.yaml").write_text("agents:\n  claude:\n    profile: readonly\n")
    found = doctor(workdir, bin_dir)
    assert found["config"][0].status == FAIL
    assert found["config"][0].message.startswith("crew.yaml:3: agents.claude.profile: 'readonly' is not one of")
    assert {"claude", "gemini", "codex", "demo"} <= set(found)


def test_an_agent_option_the_cli_does_not_accept_fails_with_its_line(workdir: Path, bin_dir: Path) -> None:
    fake_cli(bin_dir, "claude", help_text=CLAUDE_HELP)
    (workdir / "crew.yaml").write_text(
        "agents:\n  claude:\n    options:\n      query: [--verbose]\n      execute: [--max-turnz, '3']\n"
    )
    found = doctor(workdir, bin_dir, config=workdir / "crew.yaml", only=("claude",))
    assert statuses(found)["claude"] == [OK]
    (check,) = found["@claude"]
    assert (check.status, check.message) == (
        FAIL,
        "crew.yaml:5: agents.claude.options.execute[0]: `claude --help` does not list --max-turnz; fix or remove it",
    )


def test_an_agent_whose_workdir_is_missing_fails(workdir: Path, bin_dir: Path) -> None:
    (workdir / "crew.yaml").write_text("agents:\n  claude:\n    workdir: nowhere\n")
    found = doctor(workdir, bin_dir, config=workdir / "crew.yaml")
    assert (
        found["@claude"][0].status == FAIL
        and "is not a directory; create it or fix the path" in found["@claude"][0].message
    )


def test_the_programs_of_command_tools_and_hooks_must_exist(workdir: Path, bin_dir: Path) -> None:
    fake_cli(bin_dir, "wc")
    (workdir / "crew.yaml").write_text(
        "tools:\n"
        "  count:\n    command: [wc, -l]\n"
        "  fetch:\n    command: [fetcher, '{url}']\n"
        "    schema: {type: object, properties: {url: {type: string}}}\n"
        "hooks:\n  before_tool_call:\n    - command: [./hooks/check.sh]\n"
    )
    found = doctor(workdir, bin_dir, config=workdir / "crew.yaml")
    assert [c.message for c in found["tools"] if c.status == FAIL] == [
        "crew.yaml:5: tools.fetch.command[0]: 'fetcher' is not on PATH; install it or fix the path"
    ]
    assert [c.message for c in found["hooks"]] == [
        f"crew.yaml:9: hooks.before_tool_call[0].command[0]: './hooks/check.sh' is not an executable file "
        f"(it is looked for in {workdir}); install it or fix the path"
    ]
    assert runs(bin_dir, "wc") == []


def test_a_provider_whose_commands_cannot_be_built_is_reported(
    workdir: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: object) -> list[list[str]]:
        raise KeyError("model")

    fake_cli(bin_dir, "claude", help_text=CLAUDE_HELP)
    monkeypatch.setattr("crewbridge.providers.claude.ClaudeProvider.commands", broken)
    (check,) = doctor(workdir, bin_dir, only=("claude",))["claude"]
    assert check == Check(FAIL, "claude", "its commands cannot be built (KeyError: 'model')")


def test_naming_an_unknown_provider_is_a_usage_error(workdir: Path, bin_dir: Path) -> None:
    with pytest.raises(UsageError, match="provider 'claud' not found; known providers: claude, gemini, codex"):
        doctor(workdir, bin_dir, only=("claud",))


# --- the command ---------------------------------------------------------------------------------


def test_the_command_prints_one_line_per_finding_and_exits_1_on_a_failure(
    workdir: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_cli(bin_dir, "claude", help_text=CLAUDE_HELP.replace("--verbose", "--loud"))
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.chdir(workdir)
    result = CliRunner().invoke(cli, ["doctor", "claude", "demo"])
    lines = result.output.splitlines()
    assert result.exit_code == 1 and lines[0].startswith("crew 0.1.0, Python ")
    assert [line.split()[:2] for line in lines[1:13]] == [
        ["ok", "config"],
        ["ok", "tools"],
        ["ok", "extras"],
        ["ok", "extras"],
        ["ok", "extras"],
        ["ok", "mcp"],
        ["ok", "native"],
        ["ok", "sandbox"],
        ["ok", "hidden"],
        ["ok", "env"],
        ["ok", "network"],
        ["ok", "network"],
    ]
    assert [line.split()[:2] for line in lines[1:] if line.split()[1] in ("claude", "demo")] == [
        ["FAIL", "claude"],
        ["ok", "demo"],
    ]
    assert "crew: 1 problem: see the FAIL lines" in lines[-1]


def test_the_command_exits_0_when_nothing_is_broken(
    workdir: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.chdir(workdir)
    result = CliRunner().invoke(cli, ["doctor"])  # the three CLIs are missing: warnings only
    assert result.exit_code == 0, result.output
    assert [line.split()[0] for line in result.output.splitlines()[1:]] == [
        *["ok"] * 10,  # config, tools, the three extras, mcp, native, sandbox, hidden, env
        *["ok"] * 5,  # the network: how it is held, what each agent reaches
        "warn",
        "warn",
        "warn",
        "ok",
    ]


def test_skills_with_a_broken_front_matter_are_reported_not_dropped(workdir: Path, bin_dir: Path) -> None:
    good = workdir / ".crew" / "skills" / "notes" / "SKILL.md"
    bad = workdir / ".crew" / "skills" / "bad" / "SKILL.md"
    for path, front in ((good, "name: notes\ndescription: Takes notes.\n"), (bad, "name: bad\n")):
        path.parent.mkdir(parents=True)
        path.write_text(f"---\n{front}---\nbody\n")
    found = doctor(workdir, bin_dir, only=("claude",))
    assert [(c.status, c.message) for c in found["skills"]] == [
        (
            FAIL,
            f"{bad}:2: 'description' must be a non-empty line of text; fix its front matter, or the skill "
            "is not offered",
        ),
        (OK, "1 skill offered to agents that allow them: notes"),
    ]


def test_it_says_which_agents_can_take_crews_tools_natively(workdir: Path, bin_dir: Path, monkeypatch) -> None:
    (workdir / "crew.yaml").write_text("agents:\n  claude:\n    tools_via: native\n  local:\n    provider: demo\n")
    (native,) = doctor(workdir, bin_dir, config=workdir / "crew.yaml", only=("demo",))["native"]
    assert native.status == OK
    assert "claude (an SDK MCP server in its live process, tools_via: native)" in native.message
    assert native.message.endswith("; as the text catalogue only to demo, local")
    monkeypatch.setenv("CREW_LIVE", "0")
    (native,) = doctor(workdir, bin_dir, config=workdir / "crew.yaml", only=("demo",))["native"]
    assert native.status == WARN and native.message.startswith("CREW_LIVE=0: every agent gets the text catalogue")


# --- the sandbox ---------------------------------------------------------------------------------


def test_the_sandbox_line_names_the_mechanism_and_why_not_the_others(
    workdir: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (sandbox,) = doctor(workdir, bin_dir)["sandbox"]
    assert sandbox.status == OK and sandbox.message.startswith("bwrap (")  # the bundled one: PATH has no bwrap
    assert "landlock: works too (ABI " in sandbox.message and "sandbox-exec: macOS only" in sandbox.message
    monkeypatch.setenv(MECHANISM_ENV, "landlock")
    (sandbox,) = doctor(workdir, bin_dir)["sandbox"]
    assert (
        sandbox.message.startswith("landlock (ABI ")
        and f"bwrap: not tried ({MECHANISM_ENV}=landlock)" in sandbox.message
    )


def test_no_sandbox_is_a_warning_a_failure_when_required_and_fine_when_off(
    workdir: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MECHANISM_ENV, "none")
    (sandbox,) = doctor(workdir, bin_dir)["sandbox"]
    assert sandbox.status == WARN and "CLIs and commands run unconfined; install bubblewrap" in sandbox.message
    (workdir / "crew.yaml").write_text("agents:\n  careful:\n    provider: demo\n    sandbox: required\n")
    assert statuses(doctor(workdir, bin_dir, config=workdir / "crew.yaml"))["sandbox"] == [FAIL]
    (workdir / "crew.yaml").write_text("sandbox: off\n")
    (sandbox,) = doctor(workdir, bin_dir, config=workdir / "crew.yaml")["sandbox"]
    assert sandbox.status == OK and sandbox.message.startswith("off in crew.yaml")


# --- what the agents do not see --------------------------------------------------------------------


def test_doctor_names_what_the_sandbox_hides_here_and_the_variables_it_withholds_never_their_values(
    workdir: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".netrc").write_text("machine x password p\n")
    for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR"):
        monkeypatch.delenv(name, raising=False)
    for name in withheld_names(os.environ):  # the test runner's own (CREW_TEST_ALL, …)
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    secrets = {"GITHUB_TOKEN": "gh-value", "ANTHROPIC_API_KEY": "anthropic-value", "CREW_BATCH_DB": "pg-value"}
    for name, value in {**secrets, "MY_TOKEN": "mine-value"}.items():
        monkeypatch.setenv(name, value)
    (workdir / "crew.yaml").write_text("sandbox: {hide: [~/vault], show: [~/.netrc]}\nenv: {pass: [MY_TOKEN]}\n")
    (home / "vault").mkdir()
    found = doctor(workdir, bin_dir, config=workdir / "crew.yaml")
    (hidden,) = found["hidden"]
    assert hidden.message.startswith("hidden from the agents' CLIs and commands: ~/.ssh, ~/vault; each CLI still")
    assert "shown by crew.yaml: ~/.netrc" in hidden.message
    (env,) = found["env"]
    assert env.status == OK
    assert (
        "withheld from the CLIs, commands, hooks and git crew starts: ANTHROPIC_API_KEY, CREW_BATCH_DB, GITHUB_TOKEN"
        in (env.message)
    )
    assert "each CLI still gets its own login: claude ANTHROPIC_API_KEY" in env.message
    assert env.message.endswith("env.pass lets through MY_TOKEN")
    assert not any(value in hidden.message + env.message for value in secrets.values())


# --- the network ---------------------------------------------------------------------------------


def test_the_network_lines_name_how_it_is_held_and_what_each_agent_reaches(
    workdir: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:4000")
    (workdir / "crew.yaml").write_text(
        "network:\n  allow: [pypi.org]\nagents:\n  claude:\n    sandbox_network: true\n  quiet:\n    provider: demo\n"
    )
    held, *agents = doctor(workdir, bin_dir, config=workdir / "crew.yaml", only=("demo",))["network"]
    assert (held.status, held.message) == (
        OK,
        "bwrap: each sandbox in a network namespace of its own, out only through crew's proxy",
    )  # a process was started through a gate to say so
    lines = {check.message.split(" ", 1)[0]: check.message for check in agents}
    assert lines["@claude"] == (
        "@claude reaches api.anthropic.com, platform.claude.com (claude's API), 127.0.0.1:4000 (ANTHROPIC_BASE_URL), "
        "pypi.org (network: allow); its commands reach pypi.org (network: allow)"
    )
    assert (
        lines["@quiet"]
        == "@quiet reaches pypi.org (network: allow); its commands reach nothing (sandbox_network: false)"
    )


def test_landlock_without_network_rules_is_a_warning_and_a_failure_when_required(
    workdir: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crewbridge.sandbox import landlock

    monkeypatch.setenv(MECHANISM_ENV, "landlock")
    monkeypatch.setattr(landlock, "abi", lambda: 3)
    (held, *_) = doctor(workdir, bin_dir)["network"]
    assert held.status == WARN and held.message.startswith(
        "Landlock ABI 3 has no network rules (ABI 4, Linux 6.7, has them): the CLIs' network is not cut; "
        "--sandbox required refuses to run"
    )
    (workdir / "crew.yaml").write_text("sandbox: required\n")
    assert statuses(doctor(workdir, bin_dir, config=workdir / "crew.yaml"))["network"][0] == FAIL


def test_an_open_network_is_a_warning(workdir: Path, bin_dir: Path) -> None:
    (workdir / "crew.yaml").write_text("network: open\n")
    (only,) = doctor(workdir, bin_dir, config=workdir / "crew.yaml")["network"]
    assert only.status == WARN and only.message.endswith("the CLIs and all they start reach any host")
