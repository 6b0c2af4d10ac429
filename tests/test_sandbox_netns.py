"""Listening sockets made inside a sandbox's network namespace and held by crew: a process inside
reaches them at 127.0.0.1 (and nothing else there), crew accepts outside."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from crewbridge.sandbox import netns
from crewbridge.sandbox.bwrap import COMMON, find
from crewbridge.sandbox.netns import NamespaceError, listeners

pytestmark = pytest.mark.needs("bwrap")


@pytest.fixture(params=["as this user", "forked"])
def way(request, monkeypatch) -> str:
    """Each way crew makes them: a thread of its own joins the namespace (root, with the
    capability), or a forked child joins the user namespace first (any other user)."""
    if request.param == "forked":
        monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    elif os.geteuid() != 0:
        pytest.skip("only root joins a namespace from a thread; this user's way is the forked one")
    return request.param


@pytest.fixture
def held() -> Iterator[tuple[subprocess.Popen[bytes], int, int]]:
    """A process in a network namespace of its own, held back before it runs (bwrap's --block-fd):
    it, the pid of the namespace's first process, and the descriptor that lets it go on (closed)."""
    status, status_w = os.pipe()
    block_r, block = os.pipe()
    program = (
        "import socket, sys\n"
        "for port in map(int, sys.argv[1:]):\n"
        "    try:\n"
        "        with socket.create_connection(('127.0.0.1', port), timeout=5) as s: print(port, s.recv(10).decode())\n"
        "    except OSError as exc: print(port, type(exc).__name__)\n"
    )
    bwrap = find(os.environ)
    assert bwrap is not None
    argv = [bwrap, *COMMON, "--unshare-net", "--json-status-fd", str(status_w), "--block-fd", str(block_r)]
    proc = subprocess.Popen(
        [*argv, "--", sys.executable, "-c", program, "4711", "4712"],
        pass_fds=(status_w, block_r),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    os.close(status_w)
    os.close(block_r)
    said = b""
    while b"\n" not in said:
        chunk = os.read(status, 4096)
        assert chunk, "bwrap made no namespace"
        said += chunk
    pid = json.loads(said.split(b"\n")[0])["child-pid"]
    yield proc, pid, block
    os.close(status)
    if proc.poll() is None:
        os.killpg(proc.pid, 9)
        proc.wait()


def test_a_process_in_the_namespace_reaches_what_crew_listens_on_there_and_nothing_else(held, way):
    proc, pid, block = held
    made = listeners(pid, [("127.0.0.1", 4711), ("::1", 4711)], optional={1})
    assert made[0] is not None and made[0].getsockname() == ("127.0.0.1", 4711)
    os.close(block)  # the program goes on
    made[0].settimeout(30)  # a program that never connects fails the test, not hangs it
    try:
        conn, _ = made[0].accept()
    except TimeoutError:
        pytest.fail(f"nothing connected; the sandbox said {proc.communicate(timeout=30)}")
    conn.sendall(b"from-crew")
    conn.close()
    out, _ = proc.communicate(timeout=30)
    assert out.decode().splitlines() == ["4711 from-crew", "4712 ConnectionRefusedError"]
    for one in made:
        if one is not None:
            one.close()
    # crew's own 127.0.0.1:4711 is another namespace's: nothing of the sandbox's listens here
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", 4711), timeout=2).close()


def test_an_address_that_cannot_be_bound_there_is_named(held, way):
    _, pid, block = held
    first = listeners(pid, [("127.0.0.1", 4711)])
    with pytest.raises(NamespaceError, match=r"proxy: listening on 127\.0\.0\.1:4711: Address already in use$"):
        listeners(pid, [("127.0.0.1", 4712), ("127.0.0.1", 4711)])
    for one in first:
        assert one is not None
        one.close()
    os.close(block)


def test_a_process_that_is_not_there_has_no_namespace_to_join():
    with pytest.raises(OSError):
        listeners(2**22 + 12345, [("127.0.0.1", 0)])


def _unshared(script: str) -> subprocess.Popen[bytes]:
    """A shell in a user and network namespace of its own (its loopback down), once it is there."""
    proc = subprocess.Popen(["unshare", "-rn", "sh", "-c", script], start_new_session=True)
    mine = os.readlink("/proc/self/ns/net")
    while os.readlink(f"/proc/{proc.pid}/ns/net") == mine:
        assert proc.poll() is None, "unshare made no namespace"
    return proc


def test_a_namespace_whose_loopback_comes_up_late_is_waited_for(way):
    # bwrap names its child before the child brings loopback up: a bind then found no 127.0.0.1
    proc = _unshared("sleep 0.3; ip link set lo up; exec sleep 30")
    try:
        made = listeners(proc.pid, [("127.0.0.1", 4711)])
        there = subprocess.run(
            ["nsenter", "-t", str(proc.pid), "-n", "ip", "-o", "link", "show", "lo"], capture_output=True
        )
        assert made[0] is not None and made[0].getsockname() == ("127.0.0.1", 4711)
        made[0].close()
        assert b"<LOOPBACK,UP," in there.stdout, there  # made once it was up, not before
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
