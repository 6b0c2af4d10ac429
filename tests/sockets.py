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
