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
lock one of them held.
"""

from __future__ import annotations

import ctypes
import os
import socket
import warnings
from collections.abc import Collection, Sequence

CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
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
        os.close(user)
        os.close(net)


def _child(
    user: int, net: int, plans: list[tuple[int, tuple[str, int], bool]], backlog: int, out: socket.socket
) -> None:
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
            raise OSError(errno, step)
        made: list[socket.socket | None] = []
        for family, address, optional in plans:
            step = f"listening on {address[0]}:{address[1]}"
            one = socket.socket(family, socket.SOCK_STREAM)
            one.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                one.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                one.bind(address)
            except OSError:
                if not optional:
                    raise
                one.close()
                made.append(None)
                continue
            one.listen(backlog)
            made.append(one)  # kept: a socket object that goes closes its descriptor
        said = "ok " + " ".join("0" if one is None else "1" for one in made)
        socket.send_fds(out, [said.encode()], [one.fileno() for one in made if one is not None])
        code = 0
    except OSError as exc:
        with_reason = f"{step}: {os.strerror(exc.errno) if exc.errno else exc}"
        try:
            out.send(with_reason.encode()[:500])
        except OSError:
            pass
    finally:
        os._exit(code)


def _family(host: str) -> int:
    return socket.AF_INET6 if ":" in host else socket.AF_INET
