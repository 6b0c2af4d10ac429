"""Issue 31's git attack through the real CLIs, sandboxed: a command run in execute mode makes a
repository whose core.fsmonitor is a program of the agent's and adds it as a gitlink. crew names
what it disarmed (--json, the stderr notice, the transcript) and the user's next `git status` in
the project runs nothing; through crew's run_command and through each CLI's own shell."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from crewbridge.sandbox import MECHANISM_ENV
from crewcli import processes_in, run_crew, tool_block
from gitrepo import make_repo
from mockserver import tool_call

pytestmark = pytest.mark.e2e

SHELL = {  # each CLI's own shell tool, and what crew's command line needs for the mock to call it
    "claude": (lambda cmd: tool_call("Bash", {"command": cmd}), []),
    "gemini": (lambda cmd: tool_call("run_shell_command", {"command": cmd}), ["--tools-via", "native"]),
    "codex": (lambda cmd: tool_call("exec_command", {"cmd": cmd}), []),
}
MODEL = {"codex": ":gpt-5.5"}  # the model whose tools include exec_command


def plant(marker: Path) -> str:
    git = "git -c user.name=a -c user.email=a@a"
    return (
        f"{git} init -q sub && {git} -C sub commit -q --allow-empty -m x && "
        f"git -C sub config core.fsmonitor 'touch {marker}; false' && git add sub && echo planted"
    )


def users_next_git_status(project: Path, marker: Path) -> None:
    """What the user does next, outside the sandbox: git status in the project and in `sub`."""
    subprocess.run(["git", "status"], cwd=project, capture_output=True, check=True)
    subprocess.run(["git", "status"], cwd=project / "sub", capture_output=True, check=False)
    assert not marker.exists(), "the agent's fsmonitor ran on the user's git status"


def transcript_events(env: dict[str, str], kind: str) -> list[dict]:
    runs = sorted((Path(env["XDG_STATE_HOME"]) / "crewbridge" / "runs").glob("*.jsonl"))
    return [event for line in runs[-1].read_text().splitlines() if (event := json.loads(line))["kind"] == kind]


@pytest.mark.parametrize("mechanism", ["bwrap", "landlock"])
def test_crews_run_command_cannot_leave_git_armed(mechanism, cli_env, mock_server, workdir, tmp_path):
    make_repo(workdir, {"notes.txt": "hi\n"})
    marker = tmp_path / "ran"
    mock_server.script(tool_block("crew:run_command", command=plant(marker)), "Done.")
    env = {**cli_env("claude"), MECHANISM_ENV: mechanism}
    done = run_crew(["execute", "--sandbox", "required", "--json", "@claude set it up"], env=env, cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert processes_in(tmp_path) == []
    [record] = json.loads(done.stdout)["results"]
    assert [(d["path"], d["what"].split(",")[0]) for d in record["disarmed"]] == [
        ("sub/.git", "a new git repository"),
        ("sub", "a gitlink added to the index: git runs that repository"),
    ]
    assert "crew: @claude: the run left what would run code on your next git command" in done.stderr
    assert [e["found"] for e in transcript_events(env, "disarmed")] == [record["disarmed"]]
    users_next_git_status(workdir, marker)


def test_the_clis_own_shell_cannot_leave_git_armed(cli, cli_env, mock_server, workdir, tmp_path):
    make_repo(workdir, {"notes.txt": "hi\n"})
    marker = tmp_path / "ran"
    shell, args = SHELL[cli]
    mock_server.script(shell(plant(marker)), "Done.")
    env = cli_env(cli)
    done = run_crew(
        ["execute", "--sandbox", "required", "--jsonl", *args, f"@{cli}{MODEL.get(cli, '')} set it up"],
        env=env,
        cwd=workdir,
    )
    assert done.returncode == 0, done.stderr
    assert processes_in(tmp_path) == []
    events = [json.loads(line) for line in done.stdout.splitlines()]
    disarmed = [event for event in events if event["kind"] == "disarmed"]
    assert [[d["path"] for d in event["found"]] for event in disarmed] == [["sub/.git", "sub"]]
    users_next_git_status(workdir, marker)
