"""Landlock (Linux 5.13+), through ctypes: the process may write only beneath the folders it is
given, and (ABI 4+) neither connect nor bind TCP; (ABI 6+) it can signal no process outside its
domain and reach no abstract Unix socket outside it.

Unlike bubblewrap it needs no user namespace (Ubuntu 24.04's AppArmor rule, unprivileged
containers), and unlike it, it gives no private /tmp, no PID namespace and no way to keep one file
inside a writable folder read-only. Reading is not restricted.

The ruleset is built in crew's process; the child applies it to itself between fork and exec
(`restrict`, a subprocess `preexec_fn` that makes only system calls: no import, no lock).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import stat
import struct
from collections.abc import Callable, Sequence
from pathlib import Path

from crewbridge.sandbox import seccomp
from crewbridge.sandbox.base import Confinement, Launch, private_temp, program
from crewbridge.sandbox.hidden import NOTHING, Hidden

CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446  # the same numbers on every architecture
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
CAP_VERSION_3 = 0x20080522

# LANDLOCK_ACCESS_FS_*: reading (ABI 1), and the rights that change something, by the ABI that brought them in
READ_FILE, READ_DIR = 1 << 2, 1 << 3
READ = READ_FILE | READ_DIR
WRITE_FILE, REMOVE_DIR, REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
MAKE = sum(1 << bit for bit in range(6, 13))  # MAKE_CHAR, _DIR, _REG, _SOCK, _FIFO, _BLOCK, _SYM
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FILE_RIGHTS = READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV  # those a rule on a file (not a folder) may grant
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
# Devices every program may write: the sink, the sources, the terminal, and new pseudo-terminals
# (gemini runs its shell tool in one: node-pty's forkpty opens /dev/ptmx).
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts")

_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_prctl = _libc.prctl


def abi() -> int:
    """The kernel's Landlock ABI version; 0 when it has none (too old, or not enabled at boot)."""
    version = _syscall(CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    return max(int(version), 0)


def written_rights(version: int) -> int:
    """The file-system rights that change something, as far as ABI `version` knows them."""
    rights = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE
    if version >= 2:
        rights |= REFER
    if version >= 3:
        rights |= TRUNCATE
    if version >= 5:
        rights |= IOCTL_DEV
    return rights


def ruleset(
    writable: Sequence[Path],
    *,
    network: bool,
    version: int,
    hidden: Hidden = NOTHING,
    ports: Sequence[int] | None = None,
) -> int:
    """A ruleset (its descriptor) that lets a process write only beneath `writable` (and to the
    common devices), read everything but `hidden`'s places (what beneath them it shows excepted),
    and, without `network`, make no TCP connection (ABI 4+); with `network` and `ports`, connect
    over TCP to those ports only (ABI 4+: crew's proxy's, the carried ones). OSError when the
    kernel refuses it."""
    handled = written_rights(version) | (READ if hidden.places else 0)
    net = 0 if version < 4 else NET_BIND_TCP | NET_CONNECT_TCP if not network else NET_CONNECT_TCP if ports else 0
    open_net = network and ports is None
    scoped = SCOPE_SIGNAL | (0 if open_net else SCOPE_ABSTRACT_UNIX_SOCKET) if version >= 6 else 0
    attr = struct.pack("=QQQ", handled, net, scoped)
    fd = _call(CREATE_RULESET, ctypes.c_char_p(attr), ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    try:
        for path in [*writable, *map(Path, DEVICES)]:
            _allow(fd, path, handled)
        if hidden.places:
            for place in [*readable(hidden.places), *map(str, hidden.shown)]:
                _allow(fd, place, READ, follow=False)
        for port in ports if net == NET_CONNECT_TCP and ports else ():
            rule = struct.pack("=QQ", NET_CONNECT_TCP, port)  # struct landlock_net_port_attr, packed
            _call(ADD_RULE, ctypes.c_int(fd), ctypes.c_int(RULE_NET_PORT), ctypes.c_char_p(rule), 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def holds_network(version: int) -> str | None:
    """Why Landlock ABI `version` cannot keep a process to crew's proxy; None when it can (ABI 4+)."""
    if version >= 4:
        return None
    return f"Landlock ABI {version} has no network rules (ABI 4, Linux 6.7, has them): the CLIs' network is not cut"


def readable(hidden: Sequence[Path]) -> list[str]:
    """The places to grant reading beneath so that all is readable but `hidden`: Landlock only
    grants, and a grant on a folder holds for everything beneath it, so each folder on the way to a
    hidden place is granted nothing itself (it cannot be listed) and each of its other entries is
    granted instead; a link is left out (its target is granted, or not, where it is: a link in HOME
    to ~/.ssh must not grant it)."""
    places = {str(place) for place in hidden}
    on_the_way = {str(folder) for place in hidden for folder in place.parents}
    out = []
    for folder in sorted(on_the_way):
        try:
            with os.scandir(folder) as entries:
                out += [
                    entry.path
                    for entry in entries
                    if not entry.is_symlink() and entry.path not in on_the_way and entry.path not in places
                ]
        except OSError:
            continue
    return out


def _allow(ruleset_fd: int, path: Path | str, rights: int, *, follow: bool = True) -> None:
    """Grant `rights` beneath `path` (a file gets the rights a file can have); a path that does not
    exist is left out, and so is a link when not to `follow` it (its target is granted, or not,
    where it is: a link in HOME to ~/.ssh must not open it)."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW))
    except OSError:
        return
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISLNK(mode):
            return
        if not stat.S_ISDIR(mode):
            rights &= FILE_RIGHTS
        rule = struct.pack("=Qi", rights, fd)  # struct landlock_path_beneath_attr, packed
        _call(ADD_RULE, ctypes.c_int(ruleset_fd), ctypes.c_int(RULE_PATH_BENEATH), ctypes.c_char_p(rule), 0)
    finally:
        os.close(fd)


class _Fprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))  # struct sock_fprog


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32))


def restrictor(ruleset_fd: int, seccomp: bytes | None) -> Callable[[], None]:
    """The `preexec_fn` that confines the child: no new privileges, the ruleset, no capabilities
    (run as root it would have them all: Landlock does not stop CAP_SYS_MODULE or CAP_NET_ADMIN),
    the seccomp filter. Everything it hands the kernel is built here, before the fork, and kept
    alive by the closure."""
    filters = ctypes.create_string_buffer(seccomp or b"", len(seccomp or b""))
    fprog = _Fprog(len(seccomp or b"") // 8, ctypes.addressof(filters))
    pointer = ctypes.byref(fprog)
    header, data = _CapHeader(CAP_VERSION_3, 0), (_CapData * 2)()
    capabilities = range(_last_capability() + 1) if os.geteuid() == 0 else range(0)

    def restrict(_kept: object = (filters, header, data)) -> None:
        if _prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or _syscall(RESTRICT_SELF, ruleset_fd, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
        for capability in capabilities:  # out of the bounding set: an exec as root gets none back
            _prctl(PR_CAPBSET_DROP, capability, 0, 0, 0)
        if capabilities and (
            _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0
            or _libc.capset(ctypes.byref(header), ctypes.byref(data)) != 0
        ):
            raise OSError(ctypes.get_errno(), "dropping the capabilities failed")
        if fprog.len and _prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, pointer, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "seccomp filter refused")

    return restrict


def _last_capability() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as last:
            return int(last.read())
    except (OSError, ValueError):
        return 63


def _call(number: int, *args: object) -> int:
    result = int(_syscall(number, *args))
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return result


class Landlock:
    name = "landlock"
    unproven = False  # detected by a system call, not a process

    def __init__(self, version: int) -> None:
        self.version = version
        self.detail = f"ABI {version}"

    def holds_network(self) -> str | None:
        return holds_network(self.version)

    def launch(self, argv: list[str], env: dict[str, str], cwd: Path, confinement: Confinement) -> Launch:
        path = program(argv, env, cwd)
        temp = private_temp()
        gate = confinement.egress.gate(env) if confinement.network and confinement.egress is not None else None
        try:
            ports = None
            if gate is not None:
                gate.open_here()
                env = gate.env(env)
                ports = [gate.port, *(port for _, port in gate.carried())]
            writable = [*confinement.writable, temp]
            fd = ruleset(
                writable, network=confinement.network, version=self.version, hidden=confinement.hidden, ports=ports
            )
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            if gate is not None:
                gate.close()
            raise
        return Launch(
            [path, *argv[1:]],
            {**env, "TMPDIR": str(temp)},
            preexec_fn=restrictor(fd, _filter(confinement)),
            removed=[temp],
            parent_fds=[fd],
            gate=gate,
        )


def _filter(confinement: Confinement) -> bytes | None:
    """The seccomp filter of a process: no socket at all without network; through crew's proxy,
    TCP alone (Landlock holds its ports) and no Unix socket; none with the network open; and
    setsid()/setpgid() refused to one that may not leave its group."""
    arch = seccomp.native_arch()
    gated = confinement.network and confinement.egress is not None
    if arch is None or (confinement.network and not gated and confinement.leave_group):
        return None
    families: frozenset[int] | None = None if not confinement.network else frozenset()
    if gated:
        families = frozenset({seccomp.AF_UNIX})
    return seccomp.program(arch, families=families, keep_group=not confinement.leave_group, datagrams=not gated)
