"""Listening sockets inside another process's network namespace, for crew to hold.

A sandbox made by bubblewrap has a network namespace of its own, with only loopback. crew gives it
its way out without a process of its own inside: a child forked from crew joins the sandbox's user
namespace (its owner, crew's user, has every capability there) and then its network namespace,
makes the listening sockets on the namespace's loopback, hands them to crew over a socket pair
(SCM_RIGHTS) and exits. crew then accepts on them from outside (crewbridge.sandbox.proxy): what the
sandbox connects to there, crew's proxy answers. Nothing inside runs for it, and nothing inside
needs a Unix socket.

The child only makes system calls whose arguments are built before the fork (ctypes), as
Landlock's restriction does between fork and exec: crew has threads, and the child may take no
lock one of them held. Where crew may join the namespace without its user namespace (root, with
that capability), a thread of its own joins it instead (a thread's network namespace is its own):
no fork, whose cost grows with crew's memory.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct
import threading
import time
import warnings
from collections.abc import Collection, Sequence

CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
SIOCGIFFLAGS, IFF_UP = 0x8913, 0x1
LOOPBACK_WAIT = 5.0  # seconds: bwrap brings it up in microseconds; this bounds a sandbox that never does
Plan = tuple[int, tuple[str, int], bool]  # a socket's family, its address, whether it is optional
_libc = ctypes.CDLL(None, use_errno=True)


class NamespaceError(OSError):
    """The sockets could not be made in that namespace."""


def listeners(
    pid: int, addresses: Sequence[tuple[str, int]], *, optional: Collection[int] = (), backlog: int = 64
) -> list[socket.socket | None]:
    """Listening TCP sockets bound to `addresses` (host, port; port 0: any) inside the network
    namespace of process `pid`, in order; None for one of the `optional` (their indexes: ::1 where
    the namespace has no IPv6) that could not be bound. NamespaceError saying why when they cannot
    be made."""
    # Each socket's family and address, resolved here: the child resolves nothing.
    plans = [(_family(host), (host, port), i in optional) for i, (host, port) in enumerate(addresses)]
    user = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    try:
        net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        os.close(user)
        raise
    try:
        made = _in_thread(net, plans, backlog) if os.geteuid() == 0 else None
        return made if made is not None else _forked(user, net, plans, backlog)
    finally:
        os.close(user)
        os.close(net)


def _in_thread(net: int, plans: list[Plan], backlog: int) -> list[socket.socket | None] | None:
    """The sockets, made by a thread that joins the namespace; None when it may not (no capability)."""
    done: list[list[socket.socket | None] | OSError | None] = [None]

    def work() -> None:  # the thread ends after: crew's other threads stay in their namespace
        if _libc.setns(net, CLONE_NEWNET) != 0:
            return
        try:
            done[0] = _made(plans, backlog)
        except OSError as exc:
            done[0] = exc

    thread = threading.Thread(target=work, name="crew-netns")
    thread.start()
    thread.join()
    if isinstance(done[0], OSError):
        raise NamespaceError(f"cannot open the sandbox's network to crew's proxy: {done[0].strerror or done[0]}")
    return done[0]


def _forked(user: int, net: int, plans: list[Plan], backlog: int) -> list[socket.socket | None]:
    """The sockets, made by a forked child that joins the user namespace, then the network one."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        with warnings.catch_warnings():  # Python 3.12+ warns of a fork with threads: see the docstring
            warnings.simplefilter("ignore", DeprecationWarning)
            child = os.fork()
        if child == 0:  # pragma: no cover - the child: system calls, then _exit
            _child(user, net, plans, backlog, theirs)
        theirs.close()
        _, status = os.waitpid(child, 0)
        mine.settimeout(0)
        try:
            message, fds, _, _ = socket.recv_fds(mine, 512, len(plans))
        except BlockingIOError:
            message, fds = b"", []
        made = message.decode(errors="replace").split(" ")
        if made[:1] != ["ok"] or len(made) - 1 != len(plans) or made.count("1") != len(fds):
            for fd in fds:
                os.close(fd)
            why = message.decode(errors="replace") or f"its helper ended with status {status}"
            raise NamespaceError(f"cannot open the sandbox's network to crew's proxy: {why}")
        given = iter(fds)
        return [socket.socket(fileno=next(given)) if one == "1" else None for one in made[1:]]
    finally:
        mine.close()
        if theirs.fileno() >= 0:
            theirs.close()


def _child(user: int, net: int, plans: list[Plan], backlog: int, out: socket.socket) -> None:
    """In the forked child: join the namespaces, make the sockets, send them, exit."""
    code = 1
    try:
        # Its user namespace first: crew's user owns it, so there it has the capability to join
        # the network namespace. (Root with that capability outside may join it directly.)
        step = "joining its network namespace"
        user_errno = 0 if _libc.setns(user, CLONE_NEWUSER) == 0 else ctypes.get_errno()
        if _libc.setns(net, CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            step += f" (its user namespace too: {os.strerror(user_errno)})" if user_errno else ""
            raise OSError(errno, f"{step}: {os.strerror(errno)}")
        made = _made(plans, backlog)
        said = "ok " + " ".join("0" if one is None else "1" for one in made)
        socket.send_fds(out, [said.encode()], [one.fileno() for one in made if one is not None])
        code = 0
    except OSError as exc:
        try:
            out.send((exc.strerror or str(exc)).encode()[:500])
        except OSError:
            pass
    finally:
        os._exit(code)


def _made(plans: list[Plan], backlog: int) -> list[socket.socket | None]:
    """The listening sockets of `plans`, made in this thread's network namespace (None for an
    optional one that cannot be bound). OSError naming the address that cannot."""
    _await_loopback()
    made: list[socket.socket | None] = []
    try:
        for family, address, optional in plans:
            one = socket.socket(family, socket.SOCK_STREAM)
            made.append(one)  # kept: a socket object that goes closes its descriptor
            one.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                one.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                one.bind(address)
            except OSError as exc:
                if not optional:
                    raise OSError(exc.errno, f"listening on {address[0]}:{address[1]}: {exc.strerror}") from None
                one.close()
                made[-1] = None
                continue
            one.listen(backlog)
    except BaseException:
        for kept in made:
            if kept is not None:
                kept.close()
        raise
    return made


def _await_loopback() -> None:
    """Return once this namespace's loopback is up, or after LOOPBACK_WAIT. bwrap reports its
    child's pid (--json-status-fd) before the child gives loopback its address and brings it up:
    binding before that fails (EADDRNOTAVAIL), as it did on a loaded machine."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        request = struct.pack("16sH14x", b"lo", 0)
        end = time.monotonic() + LOOPBACK_WAIT
        while not struct.unpack("16sH14x", fcntl.ioctl(probe, SIOCGIFFLAGS, request))[1] & IFF_UP:
            if time.monotonic() > end:
                return  # binding says why
            time.sleep(0.0005)
    finally:
        probe.close()


def _family(host: str) -> int:
    return socket.AF_INET6 if ":" in host else socket.AF_INET
