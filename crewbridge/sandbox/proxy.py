"""crew's egress proxy: the one way out of a sandbox's network, run in crew's own process, outside.

Each sandbox gets doors: listening sockets crew holds (made inside the sandbox's network namespace
under bubblewrap, on the machine's loopback under Landlock), each leading one way:

- a proxy door speaks HTTP CONNECT and plain-HTTP forwarding (`GET http://host/…`): the head is
  read within HEAD_TIMEOUT and MAX_HEAD bytes, the destination checked against the sandbox's
  allow-list (crewbridge.sandbox.allowlist), the name resolved here, by crew, and an address a name
  may not lead to (loopback, private, link-local…) refused; then bytes are relayed both ways;
- a carried door leads every connection to one fixed destination: a loopback base URL's host and
  port (the CLI connects to that same address inside its namespace, where nothing else listens).

The user's own proxy (HTTPS_PROXY, HTTP_PROXY and NO_PROXY in crew's environment; an http:// one)
stays the upstream of an allowed destination: crew asks it to CONNECT (it resolves the name).

A refusal is answered `403` with crew's reason, and reported once, as a `Refused` (host, port, why,
which process when crew can tell), to the door's `report`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from crewbridge.sandbox.allowlist import AllowList, canonical_host, forbidden, split_authority

HEAD_TIMEOUT = 10.0  # seconds a client has to send its request's head (slowloris)
MAX_HEAD = 16384  # bytes of a request's head
CONNECT_TIMEOUT = 15.0  # seconds to reach a destination (or the upstream proxy)
MAX_OPEN = 128  # connections one door has open at once; more are refused
TOLD = 200  # refusals one door reports; later ones are answered but not told (a loop cannot fill the record)
NAMED = 32  # of those, how many crew looks up the process of (a scan of /proc each)
CHUNK = 1 << 16
PROCESS_CHARS = 200  # of the command line that names which process was refused


@dataclass(frozen=True)
class Refused:
    """A connection the sandbox's proxy refused: where to, why, and which process asked (its pid
    and command line) when crew can tell."""

    host: str
    port: int
    why: str
    process: str | None = None

    def text(self) -> str:
        by = f" (by {self.process})" if self.process else ""
        return f"network: refused {self.host}:{self.port}{by}: {self.why}"

    def to_dict(self) -> dict[str, object]:
        return {"host": self.host, "port": self.port, "why": self.why, "process": self.process}


class Failed(Exception):
    """A request refused: the status to answer with, the destination (when read) and why."""

    def __init__(self, status: str, why: str, host: str = "?", port: int = 0) -> None:
        super().__init__(why)
        self.status, self.why, self.host, self.port = status, why, host, port


@dataclass(frozen=True)
class Upstream:
    """The user's own proxy, from crew's environment: where allowed traffic goes on to."""

    https: tuple[str, int, str] | None = None  # host, port, Proxy-Authorization value ("" for none)
    http: tuple[str, int, str] | None = None
    bypass: tuple[str, ...] = ()  # NO_PROXY's entries: "*", names (a suffix match), addresses
    unusable: str = ""  # a proxy variable crew cannot use (not http://), for crew doctor

    @classmethod
    def of(cls, env: Mapping[str, str]) -> Upstream:
        found: dict[str, tuple[str, int, str] | None] = {}
        unusable = []
        for scheme in ("https", "http"):
            name = next((n for n in (f"{scheme}_proxy", f"{scheme.upper()}_PROXY") if env.get(n)), None)
            found[scheme] = None
            if name is not None:
                found[scheme] = _proxy_url(env[name])
                if found[scheme] is None:  # named by its kind only: its URL may hold a password
                    unusable.append(f"{name} ({env[name].partition('://')[0] or 'no scheme'}://…)")
        bypass = (env.get("no_proxy") or env.get("NO_PROXY") or "").split(",")
        names = tuple(b.strip().lower().lstrip(".") for b in bypass if b.strip())
        return cls(found["https"], found["http"], names, "; ".join(unusable))

    def for_(self, host: str, plain: bool) -> tuple[str, int, str] | None:
        """The proxy to reach `host` through (None: directly), for a CONNECT or (`plain`) an
        http:// request."""
        for entry in self.bypass:
            name = entry.rsplit(":", 1)[0] if entry.count(":") == 1 else entry.strip("[]")
            if name == "*" or host == name or host.endswith("." + name):
                return None
        return (self.http or self.https) if plain else (self.https or self.http)


def _proxy_url(url: str) -> tuple[str, int, str] | None:
    """An http:// proxy URL as host, port and its Proxy-Authorization value; None for another kind."""
    import base64
    from urllib.parse import unquote, urlsplit

    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme != "http" or not parts.hostname:
            return None
        auth = ""
        if parts.username is not None:
            secret = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            auth = "Basic " + base64.b64encode(secret).decode()
        return parts.hostname, parts.port or 80, auth
    except ValueError:
        return None


@dataclass
class Door:
    """Where the connections a listener accepts lead: through the proxy to what `allowed` lets
    through (via `upstream`, the user's proxy, where it applies), or (`to`) to one carried
    destination. `namespace`: /proc/PID of a process in the sandbox's network namespace (None: the
    machine's), to tell which process a refusal was for."""

    report: Callable[[Refused], None]
    allowed: AllowList = field(default_factory=AllowList)
    upstream: Upstream = field(default_factory=lambda: Upstream())
    to: tuple[str, int] | None = None
    namespace: Path | None = None
    counted: Iterator[int] = field(default_factory=lambda: itertools.count(1))  # its refusals (next() is atomic)

    def refuse(self, client: socket.socket, failed: Failed) -> None:
        """Report a refusal (the first TOLD; the process of the first NAMED), then answer it."""
        told = next(self.counted)
        if told <= TOLD:
            process = who(client, self.namespace) if told <= NAMED else None
            last = "; crew records no more refusals of this sandbox" if told == TOLD else ""
            self.report(Refused(failed.host, failed.port, failed.why + last, process))
        _answer(client, failed)


class Proxy:
    """The doors of every sandbox of one crew process (a Sandboxing's), each served by a thread that
    accepts and a thread per connection."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # RLock: crew's Ctrl-C ends the doors from a signal handler
        # By listener: each connection it accepted, and the one crew made for it (None: not yet)
        self._open: dict[int, dict[socket.socket, socket.socket | None]] = {}

    def open(self, listener: socket.socket, door: Door) -> None:
        """Serve `listener` (listening already) until shut()."""
        with self._lock:
            self._open[id(listener)] = {}
        threading.Thread(target=self._accept, args=(listener, door), name="crew-egress", daemon=True).start()

    def shut(self, listener: socket.socket) -> None:
        """Stop serving `listener` and close it, and every connection it accepted."""
        with self._lock:
            connections = self._open.pop(id(listener), {})
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes its accept()
        listener.close()
        for client, server in connections.items():
            for one in (client, server):
                if one is not None:
                    _close(one)

    def _accept(self, listener: socket.socket, door: Door) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # shut
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # relayed pieces go at once
            with self._lock:
                held = self._open.get(id(listener))
                if held is None or len(held) >= MAX_OPEN:
                    client.close()
                    if held is None:
                        return
                    continue
                held[client] = None
            threading.Thread(target=self._serve, args=(listener, client, door), daemon=True).start()

    def _serve(self, listener: socket.socket, client: socket.socket, door: Door) -> None:
        server = None
        try:
            server, head, plain = (_reach(door.to, None), b"", False) if door.to else self._open_request(client, door)
            with self._lock:
                held = self._open.get(id(listener))
                if held is None:
                    return
                held[client] = server
            if head:
                server.sendall(head)
            _relay(client, server, closing=plain)
        except Failed as failed:
            if failed.status:
                door.refuse(client, failed)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.get(id(listener), {}).pop(client, None)
            _close(client)
            if server is not None:
                _close(server)

    def _open_request(self, client: socket.socket, door: Door) -> tuple[socket.socket, bytes, bool]:
        """Read the request, check it, reach its destination: that socket, what to send it first (a
        plain request's head, rewritten, and what of its body came with it), and whether it is a
        plain request. CONNECT is answered here."""
        request = read_request(client)
        entry = door.allowed.find(request.host, request.port)
        if entry is None:
            raise Failed("403 Forbidden", "not in the allow-list", request.host, request.port)
        via = door.upstream.for_(request.host, plain=not request.connect)
        if via is not None:
            server = _through(via, request)
        else:
            server = _reach((request.host, request.port), entry.private_ok)
        if request.connect:
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            return server, request.rest, False
        return server, request.forwarded(absolute=via is not None, auth=via[2] if via else "") + request.rest, True


@dataclass
class Request:
    """A client's request, read: CONNECT or a plain http:// one."""

    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]
    host: str
    port: int
    path: str = ""  # a plain request's origin-form target
    rest: bytes = b""  # what came after the head (a body's start, or a tunnel's first bytes)

    @property
    def connect(self) -> bool:
        return self.method == "CONNECT"

    def forwarded(self, *, absolute: bool, auth: str = "") -> bytes:
        """A plain request's head as sent on: origin-form (absolute-form to an upstream proxy, with
        its credentials), no Proxy-* headers of the client's, `Host` the destination crew checked
        (not another site the same server holds), and `Connection: close` (the next request on the
        client's connection may be for another host)."""
        dropped = ("connection", "host")
        kept = [(k, v) for k, v in self.headers if not k.lower().startswith("proxy-") and k.lower() not in dropped]
        host = f"[{self.host}]" if ":" in self.host else self.host
        kept[:0] = [("Host", host if self.port == 80 else f"{host}:{self.port}")]
        kept.append(("Connection", "close"))
        if auth:
            kept.append(("Proxy-Authorization", auth))
        line = f"{self.method} {self.target if absolute else self.path} {self.version}\r\n"
        return (line + "".join(f"{k}: {v}\r\n" for k, v in kept) + "\r\n").encode("latin-1")


def read_request(client: socket.socket) -> Request:
    """The request on `client`: its head within HEAD_TIMEOUT seconds and MAX_HEAD bytes. Failed
    (with the status to answer) when it is not a CONNECT or a plain http:// request crew can read;
    Failed without a status when the client left or was too slow."""
    import time  # for start-up speed: loaded once a sandbox's process asks

    deadline = time.monotonic() + HEAD_TIMEOUT
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > MAX_HEAD:
            raise Failed("431 Request Header Fields Too Large", f"a request head longer than {MAX_HEAD} bytes")
        left = deadline - time.monotonic()
        if left <= 0:
            raise Failed("", "too slow")
        client.settimeout(left)
        try:
            chunk = client.recv(MAX_HEAD + 4 - len(data))
        except (TimeoutError, OSError):
            raise Failed("", "too slow") from None
        if not chunk:
            raise Failed("", "left")
        data += chunk
    client.settimeout(None)
    head, _, rest = data.partition(b"\r\n\r\n")
    if len(head) > MAX_HEAD:
        raise Failed("431 Request Header Fields Too Large", f"a request head longer than {MAX_HEAD} bytes")
    try:
        lines = head.decode("ascii").split("\r\n")
    except UnicodeDecodeError:
        raise Failed("400 Bad Request", "a request head that is not ASCII") from None
    words = lines[0].split(" ")
    if len(words) != 3 or words[2] not in ("HTTP/1.1", "HTTP/1.0") or not words[0].isalpha():
        raise Failed("400 Bad Request", f"not an HTTP request line: {lines[0][:80]!r}")
    method, target, version = words
    headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip() or any(c in name for c in " \t") or not line.isprintable():
            raise Failed("400 Bad Request", f"not a header line: {line[:80]!r}")
        headers.append((name, value.strip()))
    request = Request(method, target, version, headers, "", 0, rest=rest)
    try:
        if method == "CONNECT":
            request.host, request.port = split_authority(target)
        else:
            request.host, request.port, request.path = _absolute(target)
    except ValueError as exc:
        raise Failed("400 Bad Request", str(exc)) from None
    return request


def _absolute(target: str) -> tuple[str, int, str]:
    """A plain request's absolute-form target (`http://host[:port]/path?query`) as host, port and
    the origin-form target. ValueError when it is not one."""
    scheme, sep, rest = target.partition("://")
    if scheme.lower() != "http" or not sep:
        raise ValueError(f"'{target[:80]}' is not an http:// URL (a proxy takes https through CONNECT)")
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, path = rest[:cut], rest[cut:]
    if "@" in authority or not authority:
        raise ValueError(f"'{target[:80]}' has no host, or credentials in it")
    path = path if path.startswith("/") else "/" + path
    if authority.endswith("]") or ":" not in authority.rsplit("]", 1)[-1]:
        return canonical_host(authority), 80, path
    host, port = split_authority(authority)
    return host, port, path


def _reach(destination: tuple[str, int], private_ok: bool | None) -> socket.socket:
    """A connection to `destination`, its name resolved here: each address in turn, those a name may
    not lead to left out unless `private_ok` (None: a carried destination, which is crew's own
    choice). Failed when none can be reached."""
    host, port = destination
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as exc:
        raise Failed("502 Bad Gateway", f"cannot resolve it ({exc})", host, port) from None
    import ipaddress

    why = "no address"
    for family, kind, proto, _, address in found:
        if private_ok is False:
            bad = forbidden(ipaddress.ip_address(str(address[0]).split("%")[0]))
            if bad is not None:
                why = f"it resolves to {address[0]}, {bad}; name it exactly in crew.yaml network: allow to reach it"
                continue
        server = socket.socket(family, kind, proto)
        server.settimeout(CONNECT_TIMEOUT)
        try:
            server.connect(address)
        except OSError as exc:
            server.close()
            why = f"cannot connect to {address[0]} ({exc.strerror or exc})"
            continue
        server.settimeout(None)
        server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return server
    status = "403 Forbidden" if why.startswith("it resolves") else "502 Bad Gateway"
    raise Failed(status, why, host, port)


def _through(via: tuple[str, int, str], request: Request) -> socket.socket:
    """A connection to the request's destination through the user's proxy `via`: a CONNECT asked
    of it (a plain request goes to it as it is, absolute-form)."""
    server = _reach(via[:2], None)
    if not request.connect:
        return server
    auth = f"Proxy-Authorization: {via[2]}\r\n" if via[2] else ""
    authority = f"[{request.host}]" if ":" in request.host else request.host
    server.sendall(
        f"CONNECT {authority}:{request.port} HTTP/1.1\r\nHost: {authority}:{request.port}\r\n{auth}\r\n".encode()
    )
    answer = b""
    server.settimeout(CONNECT_TIMEOUT)
    try:
        while b"\r\n\r\n" not in answer and len(answer) <= MAX_HEAD:
            chunk = server.recv(4096)
            if not chunk:
                break
            answer += chunk
    except OSError:
        pass
    server.settimeout(None)
    status = answer.split(b"\r\n", 1)[0].decode("latin-1")
    if status.split(" ")[1:2] != ["200"] or answer.partition(b"\r\n\r\n")[2]:
        server.close()
        raise Failed(
            "502 Bad Gateway", f"the upstream proxy {via[0]}:{via[1]} said {status[:80]!r}", request.host, request.port
        )
    return server


def _relay(client: socket.socket, server: socket.socket, *, closing: bool = False) -> None:
    """Bytes both ways until both sides are done: one way on a thread of its own, one here.
    `closing`: the answer to a plain request, whose head is told the connection closes after it."""
    other = threading.Thread(target=_pump, args=(server, client, closing), daemon=True)
    other.start()
    _pump(client, server)
    other.join()


def _pump(source: socket.socket, sink: socket.socket, closing: bool = False) -> None:
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    try:
        if closing:
            sink.sendall(_closing_head(source))
        while True:
            size = source.recv_into(buffer)
            if not size:
                break
            sink.sendall(view[:size])
    except OSError:
        with contextlib.suppress(OSError):
            source.shutdown(socket.SHUT_RDWR)  # the other way ends too
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def _closing_head(source: socket.socket) -> bytes:
    """The answer's head (and what came with it) read from `source`, saying `Connection: close`:
    the client must not send another request on this connection (it may be for another host, and
    crew forwards one request a connection)."""
    data = b""
    while b"\r\n\r\n" not in data and len(data) <= MAX_HEAD:
        chunk = source.recv(CHUNK)
        if not chunk:
            return data
        data += chunk
    head, blank, rest = data.partition(b"\r\n\r\n")
    if not blank:
        return data
    lines = head.split(b"\r\n")
    kept = [line for line in lines[1:] if line.split(b":", 1)[0].strip().lower() not in _HOP_HEADERS]
    return b"\r\n".join([lines[0], *kept, b"Connection: close"]) + blank + rest


_HOP_HEADERS = (b"connection", b"keep-alive", b"proxy-connection")


def _answer(client: socket.socket, failed: Failed) -> None:
    body = f"crew refused {failed.host}:{failed.port}: {failed.why}\n".encode()
    head = (
        f"HTTP/1.1 {failed.status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    with contextlib.suppress(OSError):
        client.settimeout(1.0)
        client.sendall(head.encode() + body)


def _close(one: socket.socket) -> None:
    with contextlib.suppress(OSError):
        one.shutdown(socket.SHUT_RDWR)
    one.close()


def who(client: socket.socket, namespace: Path | None) -> str | None:
    """Which process holds the other end of `client` (a connection from inside a sandbox): its pid
    and command line, found through /proc (the network namespace's TCP table, then the process that
    has that socket open); None when crew cannot tell."""
    try:
        peer, here = client.getpeername()[1], client.getsockname()[1]
        inode = _socket_inode(namespace or Path("/proc/self"), peer, here)
        if inode is None:
            return None
        mine = os.stat((namespace or Path("/proc/self")) / "ns" / "net").st_ino
        for pid in filter(str.isdigit, os.listdir("/proc")):
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{pid}/ns/net").st_ino != mine:
                    continue
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    with contextlib.suppress(OSError):
                        if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                            return f"pid {pid}: {_command(pid)}"
    except OSError:
        return None
    return None


def _socket_inode(process: Path, local_port: int, remote_port: int) -> str | None:
    """The inode of the TCP socket in `process`'s network namespace from `local_port` to `remote_port`."""
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError), open(process / "net" / table) as lines:
            next(lines, None)
            for line in lines:
                fields = line.split()
                if len(fields) > 9 and _port_of(fields[1]) == local_port and _port_of(fields[2]) == remote_port:
                    return fields[9]
    return None


def _port_of(address: str) -> int:
    return int(address.rpartition(":")[2], 16)


def _command(pid: str) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as file:
        words = file.read(PROCESS_CHARS * 4).rstrip(b"\0").split(b"\0")
    text = " ".join(" ".join(word.decode(errors="replace").split()) for word in words)  # one line
    return text if len(text) <= PROCESS_CHARS else text[: PROCESS_CHARS - 1] + "…"
