"""Small helpers for tests that talk to crew's servers over raw sockets."""

from __future__ import annotations

import socket


def connected(sock: socket.socket) -> bool:
    """Whether the server still holds `sock` open (nothing to read, no end of stream)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)


def stop_listening(listener: socket.socket) -> None:
    """Close a listening socket another thread accepts on, and end that thread: a close alone leaves
    it in accept(), and the socket listening, until one more connection comes (whoever it is from)."""
    try:
        listener.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    listener.close()
