"""The places the sandbox hides: where the user's keys, tokens, passwords and browser profiles are,
crew's own state, every CLI's login but the running one's, and crew.yaml's hide/show; found from
the process's environment (HOME, XDG_*), links resolved. Then, under each mechanism, what a process
inside finds there: nothing, while what it works in stays readable."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from crewbridge.sandbox import Sandbox, Sandboxing, State, git_folders, spawn
from crewbridge.sandbox.hidden import Hiding


def home_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An environment whose HOME is a fresh folder under `tmp_path`, XDG variables unset."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_") and k != "SSH_AUTH_SOCK"}
    return {**env, "HOME": str(home), **extra}


def made(path: Path, text: str = "secret\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_the_list_follows_home_and_the_xdg_variables(tmp_path):
    env = home_env(tmp_path, XDG_CONFIG_HOME=str(tmp_path / "cfg"), XDG_RUNTIME_DIR="/run/user/7")
    listed = Hiding().listed({**env, "SSH_AUTH_SOCK": "/tmp/ssh-x/agent.1", "XDG_DATA_HOME": "relative/data"})
    home = Path(env["HOME"])
    assert {home / ".ssh", home / ".aws", home / ".netrc", home / ".mozilla"} <= set(listed)
    assert {tmp_path / "cfg/gcloud", tmp_path / "cfg/chromium", tmp_path / "cfg/gh"} <= set(listed)
    assert home / ".config/gcloud" not in listed  # XDG_CONFIG_HOME moved it
    assert home / ".local/share/keyrings" in listed  # a relative XDG_DATA_HOME is ignored, as the spec says
    assert {Path("/run/user/7/gnupg"), Path("/tmp/ssh-x/agent.1"), Path("/run/docker.sock")} <= set(listed)
    assert home / ".local/state/crewbridge" in listed  # crew's own: tokens, transcripts, the batch database


def test_only_what_is_here_is_hidden_with_links_resolved_and_nothing_twice(tmp_path):
    env = home_env(tmp_path)
    home = Path(env["HOME"])
    made(home / ".ssh/id_ed25519")
    made(home / "dotfiles/aws/credentials")
    (home / ".aws").symlink_to(home / "dotfiles/aws")
    made(home / ".config/gh/hosts.yml")
    hidden = Hiding(hide=("~/.config",)).places(env)
    assert hidden.places == (home / ".config", home / ".ssh", home / "dotfiles/aws")  # gh: within .config
    assert hidden.shown == ()


def test_crew_yaml_hides_more_and_shows_what_it_names(tmp_path):
    env = home_env(tmp_path, VAULT=str(tmp_path / "vault"))
    home = Path(env["HOME"])
    for path in (home / ".docker/config.json", tmp_path / "vault/key", home / ".config/gcloud/adc.json"):
        made(path)
    hiding = Hiding(hide=("$VAULT", "$UNSET/x"), show=("~/.docker", "~/.config/gcloud/adc.json"))
    hidden = hiding.places(env)
    assert hidden.places == (home / ".config/gcloud", tmp_path / "vault")
    assert hidden.shown == (home / ".config/gcloud/adc.json",)


def test_a_cli_reads_its_own_login_and_no_other_clis(tmp_path):
    env = home_env(tmp_path)
    home = Path(env["HOME"])
    claude, codex = made(home / ".claude/.credentials.json"), made(home / ".codex/auth.json")
    logins = (lambda e: State(login=(claude,)), lambda e: State(login=(codex,)))
    hiding = Hiding(logins=logins)
    assert hiding.places(env).places == (claude, codex)
    assert hiding.places(env, own=[claude]).places == (codex,)


def test_what_a_process_works_in_stays_readable_beneath_a_hidden_place(tmp_path):
    env = home_env(tmp_path)
    state = Path(env["HOME"]) / ".local/state/crewbridge"
    worktree = state / "worktrees/repo-1/run/claude"
    worktree.mkdir(parents=True)
    hidden = Hiding().places(env, visible=[worktree, tmp_path / "elsewhere"])
    assert hidden.places == (state,) and hidden.shown == (worktree,)
    assert Hiding().places(env, visible=[state]).places == ()  # working in crew's state itself: nothing hidden


def test_a_worktrees_git_folders_are_found_from_its_git_file(tmp_path):
    repo, worktree = tmp_path / "repo", tmp_path / "wt"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", str(worktree)], check=True)
    assert git_folders(worktree) == (repo / ".git/worktrees/wt", repo / ".git")
    assert git_folders(repo) == () and git_folders(tmp_path / "none") == ()


# --- inside the sandbox, under each mechanism ------------------------------------------------------


def run(sandbox: Sandbox | None, command: str, env: dict[str, str], cwd: Path) -> str:
    """What `command` prints (stdout and stderr) run in `sandbox`."""
    proc, launch = spawn(
        ["sh", "-c", command], sandbox=sandbox, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    out = proc.communicate(timeout=60)[0].decode()
    launch.ended()
    return out


def test_inside_the_hidden_places_give_nothing_and_the_rest_is_there(sandboxing, tmp_path):
    env = home_env(tmp_path)
    home, work = Path(env["HOME"]), tmp_path / "work"
    made(home / ".ssh/id_ed25519", "SSH-KEY\n")
    made(home / ".netrc", "NETRC\n")
    made(home / ".config/chromium/Default/Cookies", "COOKIE\n")
    made(home / ".local/state/crewbridge/runs/other.jsonl", "TRANSCRIPT\n")
    made(home / "notes.txt", "NOTES\n")
    made(work / "code.py", "CODE\n")
    sandbox = sandboxing.commands("required", work, "execute", network=False)
    secrets = f"{home}/.ssh/id_ed25519 {home}/.netrc {home}/.config/chromium/Default/Cookies"
    out = run(sandbox, f"cat {secrets} {home}/.local/state/crewbridge/runs/*; ls -a {home}/.ssh", env, work)
    assert not any(secret in out for secret in ("SSH-KEY", "NETRC", "COOKIE", "TRANSCRIPT", "id_ed25519\n"))
    assert run(sandbox, f"cat {home}/notes.txt code.py; echo made > new; cat new", env, work) == "NOTES\nCODE\nmade\n"
    assert "SSH-KEY" in run(None, f"cat {home}/.ssh/id_ed25519", env, work)  # unconfined, it is there


def test_no_other_path_leads_to_a_hidden_place(sandboxing, tmp_path):
    """Through a link in HOME, through /proc/<pid>/root of crew or of the process itself; nor is
    crew's own environment readable through /proc/<pid>/environ."""
    env = home_env(tmp_path)
    home = Path(env["HOME"])
    made(home / ".ssh/id_ed25519", "SSH-KEY\n")
    (home / "keys").symlink_to(home / ".ssh")
    sandbox = sandboxing.commands("required", tmp_path, "query", network=False)
    ways = [home / "keys/id_ed25519", f"/proc/{os.getpid()}/root{home}/.ssh/id_ed25519"]
    ways += [f"/proc/self/root{home}/.ssh/id_ed25519", f"/proc/{os.getpid()}/environ"]
    out = run(sandbox, f"cat {' '.join(map(str, ways))}", env, tmp_path)
    assert "SSH-KEY" not in out and "HOME=" not in out and out.count("cat: ") == 4


def test_a_working_directory_in_crews_state_works_with_git_and_the_rest_of_the_state_is_hidden(sandboxing, tmp_path):
    """crew batch's agents work in a worktree in crew's state folder, of a clone kept there."""
    env = home_env(tmp_path)
    state = Path(env["HOME"]) / ".local/state/crewbridge"
    clone, worktree = state / "batch/clones/repo-1", state / "worktrees/repo-1/run/claude"
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    made(clone / "a.txt", "A\n")
    subprocess.run(["git", "-C", str(clone), "add", "a.txt"], check=True)
    subprocess.run(["git", "-C", str(clone), "commit", "-q", "-m", "first"], check=True)
    subprocess.run(["git", "-C", str(clone), "worktree", "add", "-q", str(worktree)], check=True)
    made(state / "runs/other.jsonl", "TRANSCRIPT\n")
    sandbox = sandboxing.commands("required", worktree, "execute", network=False)
    out = run(sandbox, f"cat a.txt; git log --format=%s; echo b > b.txt; cat {state}/runs/other.jsonl", env, worktree)
    assert out.startswith("A\nfirst\n") and "TRANSCRIPT" not in out
    assert (worktree / "b.txt").read_text() == "b\n"


def test_a_cli_reads_its_own_login_and_what_its_command_line_names_a_command_neither(sandboxing, tmp_path):
    env = home_env(tmp_path)
    home = Path(env["HOME"])
    own, other = made(home / ".mycli/auth.json", "OWN\n"), made(home / ".other/auth.json", "OTHER\n")
    named = made(home / ".local/state/crewbridge/policies/gemini-1.toml", "NAMED\n")
    hiding = Hiding(logins=(lambda e: State(login=(own,)), lambda e: State(login=(other,))))
    cli = sandboxing.cli("required", tmp_path, "query", lambda e: State(login=(own,)), hiding=hiding)
    command = sandboxing.commands("required", tmp_path, "query", network=False, hiding=hiding)
    reads = f"cat {own} {other} $0"
    seen = {
        who: [mark for mark in ("OWN", "OTHER", "NAMED") if mark in run_argv(sandbox, argv, env, tmp_path)]
        for who, sandbox in (("cli", cli), ("command", command))
        for argv in [["sh", "-c", reads, str(named)]]
    }
    assert seen == {"cli": ["OWN", "NAMED"], "command": []}


def run_argv(sandbox: Sandbox | None, argv: list[str], env: dict[str, str], cwd: Path) -> str:
    proc, launch = spawn(argv, sandbox=sandbox, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.communicate(timeout=60)[0].decode()
    launch.ended()
    return out


def test_nothing_is_hidden_without_a_hiding(sandboxing: Sandboxing, tmp_path):
    env = home_env(tmp_path)
    made(Path(env["HOME"]) / ".ssh/id_ed25519", "SSH-KEY\n")
    sandbox = sandboxing.commands("required", tmp_path, "query", network=False, hiding=None)
    assert run(sandbox, "cat ~/.ssh/id_ed25519", env, tmp_path) == "SSH-KEY\n"


@pytest.mark.needs("bwrap", "landlock")
def test_a_hidden_place_inside_the_writable_project_is_hidden_by_bubblewrap_only(tmp_path):
    """Landlock grants by folder: what the process may write it may read (docs/sandbox.md)."""
    from crewbridge.sandbox import MECHANISM_ENV

    env = home_env(tmp_path)
    work = tmp_path / "work"
    made(work / ".env", "PROJECT-SECRET\n")
    hiding = Hiding(hide=(str(work / ".env"),))
    seen = {}
    for mechanism in ("bwrap", "landlock"):
        sandboxing = Sandboxing(env={**os.environ, MECHANISM_ENV: mechanism})
        sandbox = sandboxing.commands("required", work, "execute", network=False, hiding=hiding)
        seen[mechanism] = run(sandbox, "cat .env", env, work)
    assert seen == {"bwrap": "", "landlock": "PROJECT-SECRET\n"}


@pytest.mark.needs("bwrap", "landlock")
def test_a_hidden_socket_refuses_the_clis_connection_under_bubblewrap_only(tmp_path):
    """The ssh agent's or docker's socket: a CLI keeps Unix sockets, and Landlock on this kernel does
    not refuse connect() to a socket file it does not grant (docs/sandbox.md). crew's commands have
    no Unix socket at all under either."""
    import socket
    import sys

    from crewbridge.sandbox import MECHANISM_ENV

    path = tmp_path / "agent.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen(1)
        code = f"import socket; socket.socket(socket.AF_UNIX).connect({str(path)!r}); print('connected')"
        seen = {}
        for mechanism in ("bwrap", "landlock"):
            sandboxing = Sandboxing(env={**os.environ, MECHANISM_ENV: mechanism})
            hiding = Hiding(hide=(str(path),))
            sandbox = sandboxing.cli("required", tmp_path, "query", lambda env: State(), hiding=hiding)
            seen[mechanism] = run_argv(sandbox, [sys.executable, "-c", code], dict(os.environ), tmp_path)
    assert "connected" not in seen["bwrap"] and seen["landlock"] == "connected\n"
