"""The real claude, gemini and codex inside crew's sandbox (`--sandbox required`, each mechanism
forced in turn), against the mock model server: they answer, keep their sessions (their state
folders are writable), and their own shell tools, allowed in execute mode, write the project and
nothing else: not their HOME, not a folder outside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from crewbridge.sandbox import MECHANISM_ENV
from crewcli import processes_in, run_crew, tool_block
from mockserver import tool_call

pytestmark = pytest.mark.e2e

# Each CLI's own shell tool, and what crew's command line needs for the mock to call it.
SHELL = {
    "claude": (lambda cmd: tool_call("Bash", {"command": cmd}), []),
    "gemini": (lambda cmd: tool_call("run_shell_command", {"command": cmd}), ["--tools-via", "native"]),
    "codex": (lambda cmd: tool_call("exec_command", {"cmd": cmd}), []),
}
MODEL = {"codex": ":gpt-5.5"}  # the model whose tools include exec_command


@pytest.fixture(params=["bwrap", "landlock"])
def sandboxed(request, cli_env, workdir, tmp_path):
    """sandboxed(cli, command, *args) → the finished `crew COMMAND --sandbox required ARGS` with the
    mechanism forced; then checks that nothing it started runs on."""

    def run(cli, command, *args):
        env = {**cli_env(cli), MECHANISM_ENV: request.param}
        done = run_crew([command, "--sandbox", "required", *args], env=env, cwd=workdir)
        assert processes_in(tmp_path) == []
        return done

    run.mechanism = request.param
    return run


def test_each_cli_answers_in_query_mode_and_goes_on_in_execute_mode_with_its_own_session(
    cli, sandboxed, mock_server, notes
):
    mock_server.script(tool_block("crew:read_file", path="notes.txt"), "The code is 7-4-1.")
    first = sandboxed(cli, "query", f"@{cli} what does notes.txt say?")
    assert (first.returncode, first.stdout) == (0, "The code is 7-4-1.\n"), first.stderr
    mock_server.script("You asked what notes.txt says.")
    second = sandboxed(cli, "execute", "--continue", f"@{cli} what did I ask you before?")
    assert (second.returncode, second.stdout) == (0, "You asked what notes.txt says.\n"), second.stderr
    assert "crew:" not in second.stderr  # no notice: the CLI held its session, stored in its state folder
    said = [text for role, text in mock_server.requests[-1].messages() if role != "system"]
    assert said[-1].rstrip().endswith("what did I ask you before?")  # after the execute mode catalogue
    assert any(notes in text for text in said[:-1])  # the first run, from the CLI's own session


def test_the_clis_own_shell_in_execute_mode_writes_the_project_and_nothing_else(
    cli, sandboxed, mock_server, workdir, tmp_path
):
    home, outside = tmp_path / f"home-{cli}", tmp_path / "outside"
    outside.mkdir()
    shell, args = SHELL[cli]
    command = f"echo made > made.txt; echo x > {home}/planted; echo x > {outside}/planted; echo x > /etc/planted"
    mock_server.script(shell(command), "Done.")
    done = sandboxed(cli, "execute", *args, "-v", f"@{cli}{MODEL.get(cli, '')} make made.txt")
    assert done.returncode == 0, done.stderr
    assert (workdir / "made.txt").read_text() == "made\n"
    assert not (home / "planted").exists() and not (outside / "planted").exists()
    etc = Path("/etc/planted")
    planted, _ = etc.exists(), etc.unlink(missing_ok=True)  # a failing test leaves nothing behind
    assert not planted
    if cli == "codex":  # its own sandbox cannot start inside crew's: crew's alone confines its commands
        assert '"sandbox": "danger-full-access"' in done.stderr  # what crew asked of codex's app-server


@pytest.mark.parametrize("via", ["crew", "native"])
@pytest.mark.parametrize("mechanism", ["bwrap", "landlock"])
def test_a_program_deny_commands_denies_cannot_start_from_a_script_the_rules_let_through(
    via, mechanism, cli_env, mock_server, workdir, tmp_path
):
    """deny_commands ["rm *"]: python3 running rm is beyond any reading of the line (the rules let
    it through). bubblewrap masks rm: v survives and the model reads why. Landlock cannot mask a
    program (docs/sandbox.md): there the script deletes v, as the docs say."""
    (workdir / "v").write_text("keep me\n")
    (workdir / "crew.yaml").write_text('agents:\n  claude:\n    deny_commands: ["rm *"]\n')
    script = "python3 -c \"import subprocess; subprocess.run(['rm', 'v'])\""
    mock_server.script(
        tool_block("crew:run_command", command=script) if via == "crew" else SHELL["claude"][0](script), "Done."
    )
    env = {**cli_env("claude"), MECHANISM_ENV: mechanism}
    done = run_crew(["execute", "--sandbox", "required", "@claude tidy up"], env=env, cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert processes_in(tmp_path) == []
    said = "rm is denied by deny_commands in crew.yaml ('rm *'); this sandbox does not run it"
    masked = mechanism == "bwrap"
    assert (workdir / "v").exists() == masked
    assert (said in mock_server.requests[-1].text()) == masked
