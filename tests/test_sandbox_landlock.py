"""Landlock through ctypes: the ABI, the rights each ABI knows, and what it gives without namespaces
(a private temp folder, removed after; no signal to crew; no leaving the process group)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from crewbridge.sandbox import MECHANISM_ENV, Sandboxing, landlock, spawn

pytestmark = pytest.mark.needs("landlock")


def landlock_sandboxing() -> Sandboxing:
    return Sandboxing(env={**os.environ, MECHANISM_ENV: "landlock"})


def test_the_kernel_here_has_landlock():
    assert landlock.abi() >= 1


def test_each_abi_adds_the_rights_it_brought():
    one = landlock.written_rights(1)
    assert one & landlock.WRITE_FILE and not one & landlock.REFER
    assert landlock.written_rights(2) == one | landlock.REFER
    assert landlock.written_rights(3) == one | landlock.REFER | landlock.TRUNCATE
    assert landlock.written_rights(5) & landlock.IOCTL_DEV
    assert not one & (1 << 2)  # reading is never restricted


def test_the_program_runs_itself_with_a_private_temp_folder_removed_once_it_ended(tmp_path):
    sandbox = landlock_sandboxing().commands("required", tmp_path, "execute", network=False)
    proc, launch = spawn(
        ["sh", "-c", 'echo x > "$TMPDIR/scratch" && echo "$TMPDIR"'],
        sandbox=sandbox,
        env=None,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
    )
    temp = proc.communicate()[0].decode().strip()
    assert not launch.wrapped and launch.argv[0] in ("/usr/bin/sh", "/bin/sh")  # no wrapper process
    assert os.path.exists(f"{temp}/scratch")
    launch.ended()
    assert not os.path.exists(temp)


def test_a_sandboxed_command_can_neither_signal_crew_nor_leave_its_group(tmp_path):
    sandbox = landlock_sandboxing().commands("required", tmp_path, "execute", network=False)
    script = (
        f"import os\ntry:\n    os.kill({os.getpid()}, 0)\n    print('reached crew')\nexcept PermissionError:\n"
        "    print('crew out of reach')\ntry:\n    os.setsid()\n"
        "except PermissionError:\n    print('stays in its group')\n"
    )
    proc, launch = spawn(
        [sys.executable, "-c", script], sandbox=sandbox, env=None, cwd=tmp_path, stdout=subprocess.PIPE
    )
    assert proc.communicate()[0].decode() == "crew out of reach\nstays in its group\n"
    launch.ended()


def test_reading_is_granted_entry_by_entry_on_the_way_to_a_hidden_place(tmp_path):
    """Landlock only grants: everything but ~/.ssh is readable when each entry beside the folders on
    the way to it is granted, and those folders themselves are not."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / "notes.txt").write_text("")
    (home / "keys").symlink_to(home / ".ssh")  # a link is never granted: its target is, where it is
    (tmp_path / "beside").mkdir()
    granted = list(map(Path, landlock.readable([home / ".ssh"])))
    assert {home / "notes.txt", tmp_path / "beside", Path("/usr"), Path("/etc")} <= set(granted)
    assert not {Path("/"), tmp_path, home, home / ".ssh"} & set(granted)
    assert home / "keys" not in granted


def test_the_folders_on_the_way_to_a_hidden_place_cannot_be_listed(tmp_path):
    """What hiding costs under Landlock (docs/sandbox.md): `ls ~` is refused, the rest is not."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / "project").mkdir()
    (home / "project" / "a.txt").write_text("A\n")
    sandbox = landlock_sandboxing().commands("required", tmp_path, "query", network=False)
    proc, launch = spawn(
        ["sh", "-c", f"ls {home}; ls {home}/project; cat {home}/project/a.txt"],
        sandbox=sandbox,
        env={**os.environ, "HOME": str(home)},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    out = proc.communicate()[0].decode()
    launch.ended()
    assert out.endswith("Permission denied\na.txt\nA\n"), out
