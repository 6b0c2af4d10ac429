"""A small seccomp filter, written as classic BPF: socket() refused for some address families (or
all), and optionally setsid()/setpgid() refused, everything else allowed.

bwrap loads it with `--seccomp FD` (the raw `struct sock_filter` array); under Landlock crew loads it
itself (`prctl(PR_SET_SECCOMP)`) in the child before exec. A plain network namespace still lets a
process reach Unix socket files (docker.sock, $SSH_AUTH_SOCK, D-Bus): refusing socket(AF_UNIX)
closes them, as Anthropic's sandbox-runtime does. socketpair() stays allowed: it reaches nothing.

Only the native architecture's system calls are allowed through: a process that switches to
another (x86_64's int 0x80 or x32 calls use other numbers) is killed rather than filtered wrongly.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

# classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h)
LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
RET_K = 0x06  # BPF_RET | BPF_K
AND_K = 0x54  # BPF_ALU | BPF_AND | BPF_K
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000
EPERM = 1
# struct seccomp_data: nr (u32), arch (u32), instruction_pointer (u64), args[6] (u64, little-endian here)
NR, ARCH, ARG0, ARG1 = 0, 4, 16, 24
AF_UNIX, AF_INET, AF_INET6, SOCK_STREAM, SOCK_TYPE_MASK = 1, 2, 10, 1, 0xF  # Linux's (socket's, unloaded)
X32_SYSCALL_BIT = 0x40000000


@dataclass(frozen=True)
class Arch:
    audit: int  # AUDIT_ARCH_* of the native system calls
    socket: int
    setpgid: int
    setsid: int
    x32: bool = False  # numbers with X32_SYSCALL_BIT set are another ABI's


ARCHES = {
    "x86_64": Arch(audit=0xC000003E, socket=41, setpgid=109, setsid=112, x32=True),
    "aarch64": Arch(audit=0xC00000B7, socket=198, setpgid=154, setsid=157),
}


def native_arch() -> Arch | None:
    """This machine's system call numbers, or None where crew has no filter for it."""
    return ARCHES.get(os.uname().machine)  # platform.machine()'s answer, without platform's ~1.4 ms import


def program(arch: Arch, *, families: frozenset[int] | None, keep_group: bool = False, datagrams: bool = True) -> bytes:
    """The filter as `struct sock_filter` items. `families`: the socket() address families refused
    (None: every one); `datagrams` False: IPv4 and IPv6 sockets other than streams refused too (UDP,
    ICMP, raw: TCP alone is left, for Landlock to restrict); `keep_group`: setsid() and setpgid()
    refused too (a process cannot leave the process group crew ends as a whole)."""
    deny = _ins(RET_K, 0, 0, RET_ERRNO | EPERM)
    allow = _ins(RET_K, 0, 0, RET_ALLOW)
    if families is None:
        socket = [deny]
    else:  # the domain and the type are ints: args[0]'s and args[1]'s first words (little-endian)
        tests = sorted(families)
        typed = [] if datagrams else [AF_INET, AF_INET6]
        last = len(tests) + len(typed) + (5 if typed else 0)  # how far deny is past the first test
        socket = [_ins(LD_W_ABS, 0, 0, ARG0)]
        socket += [_ins(JEQ_K, last - i, 0, family) for i, family in enumerate(tests)]  # → deny
        socket += [_ins(JEQ_K, len(typed) - i, 0, family) for i, family in enumerate(typed)]  # → the type's test
        socket.append(allow)
        if typed:  # the type, without SOCK_NONBLOCK and SOCK_CLOEXEC: a stream, or denied
            socket += [_ins(LD_W_ABS, 0, 0, ARG1), _ins(AND_K, 0, 0, SOCK_TYPE_MASK)]
            socket += [_ins(JEQ_K, 1, 0, SOCK_STREAM), deny, allow]
        socket.append(deny)
    rules = [(arch.socket, socket)]
    if keep_group:
        rules += [(arch.setsid, [deny]), (arch.setpgid, [deny])]
    code = [_ins(LD_W_ABS, 0, 0, ARCH), _ins(JEQ_K, 1, 0, arch.audit), _ins(RET_K, 0, 0, RET_KILL_PROCESS)]
    code.append(_ins(LD_W_ABS, 0, 0, NR))
    if arch.x32:
        code += [_ins(JGE_K, 0, 1, X32_SYSCALL_BIT), _ins(RET_K, 0, 0, RET_KILL_PROCESS)]
    for number, block in rules:  # the system call's block when it is this one, else past it
        code += [_ins(JEQ_K, 0, len(block), number), *block]
    code.append(allow)
    return b"".join(code)


def _ins(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)
