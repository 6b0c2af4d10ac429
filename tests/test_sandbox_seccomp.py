"""The seccomp filter: what it decides for each system call, read by a small classic-BPF interpreter,
and what the kernel does with it (a process that loads it cannot open a Unix socket)."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys

import pytest

from crewbridge.sandbox import seccomp
from crewbridge.sandbox.seccomp import ARCHES, RET_ALLOW, RET_ERRNO, RET_KILL_PROCESS, program

X86, ARM = ARCHES["x86_64"], ARCHES["aarch64"]
DENIED = RET_ERRNO | seccomp.EPERM


def run(code: bytes, arch: int, nr: int, *args: int) -> int:
    """What the filter returns for system call `nr` of `arch` with `args` (classic BPF, the opcodes
    the filter uses; any other fails the test)."""
    data = struct.pack("<II Q 6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))
    ins = [struct.unpack("=HBBI", code[i : i + 8]) for i in range(0, len(code), 8)]
    acc, pc = 0, 0
    while True:
        op, jt, jf, k = ins[pc]
        pc += 1
        if op == seccomp.LD_W_ABS:
            acc = struct.unpack_from("<I", data, k)[0]
        elif op == seccomp.JEQ_K:
            pc += jt if acc == k else jf
        elif op == seccomp.JGE_K:
            pc += jt if acc >= k else jf
        elif op == seccomp.AND_K:
            acc &= k
        elif op == seccomp.RET_K:
            return k
        else:
            pytest.fail(f"unknown opcode {op:#x}")


@pytest.mark.parametrize("arch", [X86, ARM])
def test_unix_sockets_are_refused_and_every_other_family_and_call_allowed(arch):
    code = program(arch, families=frozenset({socket.AF_UNIX}))
    assert run(code, arch.audit, arch.socket, socket.AF_UNIX, socket.SOCK_STREAM) == DENIED
    assert run(code, arch.audit, arch.socket, socket.AF_INET, socket.SOCK_STREAM) == RET_ALLOW
    assert run(code, arch.audit, arch.socket, socket.AF_INET6, socket.SOCK_DGRAM) == RET_ALLOW
    assert run(code, arch.audit, arch.setsid) == RET_ALLOW
    assert run(code, arch.audit, 0) == RET_ALLOW


@pytest.mark.parametrize("arch", [X86, ARM])
def test_without_datagrams_an_internet_socket_must_be_a_stream(arch):
    """Through crew's proxy under Landlock, which holds TCP's ports only: UDP, ICMP and raw sockets
    are refused here, whatever flags the type carries; TCP and socketpair's family stay."""
    code = program(arch, families=frozenset({socket.AF_UNIX}), datagrams=False)
    nonblocking = socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC
    for family in (socket.AF_INET, socket.AF_INET6):
        assert run(code, arch.audit, arch.socket, family, socket.SOCK_STREAM) == RET_ALLOW
        assert run(code, arch.audit, arch.socket, family, socket.SOCK_STREAM | nonblocking) == RET_ALLOW
        for kind in (socket.SOCK_DGRAM, socket.SOCK_DGRAM | nonblocking, socket.SOCK_RAW, socket.SOCK_SEQPACKET):
            assert run(code, arch.audit, arch.socket, family, kind) == DENIED
    assert run(code, arch.audit, arch.socket, socket.AF_UNIX, socket.SOCK_STREAM) == DENIED
    assert run(code, arch.audit, arch.socket, socket.AF_NETLINK, socket.SOCK_DGRAM) == RET_ALLOW


def test_only_the_low_word_of_the_family_is_compared_as_the_kernel_takes_an_int():
    code = program(X86, families=frozenset({socket.AF_UNIX}))
    assert run(code, X86.audit, X86.socket, (7 << 32) | socket.AF_UNIX) == DENIED


def test_with_no_family_listed_every_socket_is_refused():
    code = program(X86, families=None)
    for family in (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK, 17):
        assert run(code, X86.audit, X86.socket, family) == DENIED
    assert run(code, X86.audit, X86.socket + 1) == RET_ALLOW  # connect, and the rest


@pytest.mark.parametrize("arch", [X86, ARM])
def test_keep_group_refuses_setsid_and_setpgid(arch):
    code = program(arch, families=frozenset(), keep_group=True)
    assert run(code, arch.audit, arch.setsid) == DENIED
    assert run(code, arch.audit, arch.setpgid, 0, 0) == DENIED
    assert run(code, arch.audit, arch.socket, socket.AF_UNIX) == RET_ALLOW


def test_another_architectures_calls_kill_the_process_rather_than_pass_unfiltered():
    code = program(X86, families=frozenset({socket.AF_UNIX}))
    i386 = 0x40000003
    assert run(code, i386, 359, socket.AF_UNIX) == RET_KILL_PROCESS  # i386's socket()
    assert run(code, X86.audit, seccomp.X32_SYSCALL_BIT | X86.socket, socket.AF_UNIX) == RET_KILL_PROCESS
    assert run(program(ARM, families=None), X86.audit, ARM.socket) == RET_KILL_PROCESS


def test_the_kernel_refuses_a_unix_socket_and_udp_to_a_process_that_loaded_it(tmp_path):
    if seccomp.native_arch() is None:
        pytest.fail("crew has no seccomp filter for this architecture")
    code = program(seccomp.native_arch(), families=frozenset({socket.AF_UNIX}), datagrams=False)
    (tmp_path / "filter").write_bytes(code)
    probe = f"""
import ctypes, socket
libc = ctypes.CDLL(None, use_errno=True)
data = open({str(tmp_path / "filter")!r}, "rb").read()
buf = ctypes.create_string_buffer(data, len(data))
class Fprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))
prog = Fprog(len(data) // 8, ctypes.addressof(buf))
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.prctl(22, 2, ctypes.byref(prog), 0, 0) == 0, ctypes.get_errno()
socket.socket(socket.AF_INET).close()
print("inet ok")
for family, kind in ((socket.AF_UNIX, socket.SOCK_STREAM), (socket.AF_INET, socket.SOCK_DGRAM)):
    try:
        socket.socket(family, kind)
    except PermissionError:
        print(family.name, kind.name, "refused")
a, b = socket.socketpair()
print("socketpair ok")
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    said = ["inet ok", "AF_UNIX SOCK_STREAM refused", "AF_INET SOCK_DGRAM refused", "socketpair ok", ""]
    assert done.stdout.split("\n") == said, done.stderr
