"""Landlock through ctypes: the ABI, the rights each ABI knows, and what it gives without namespaces
(a private temp folder, removed after; no signal to crew; no leaving the process group)."""

from __future__ import annotations

import os
import subprocess
import sys

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
