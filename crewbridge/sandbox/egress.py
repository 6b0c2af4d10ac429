"""A sandbox's way out of its network: through crew's proxy (crewbridge.sandbox.proxy), to what its
allow-list lets through (crewbridge.sandbox.allowlist), and nowhere else.

`Egress` is what a kind of process is given (a CLI's: its model API and crew.yaml's hosts; crew's
commands': crew.yaml's hosts); each launch opens a `Gate` of its own: the proxy's door and the
loopback destinations carried to it. Under bubblewrap the doors are listening sockets crew makes
inside the sandbox's network namespace once it exists (crewbridge.sandbox.netns), the process held
back until they are there (bwrap's --block-fd); under Landlock the proxy's door is a port on the
machine's loopback, the only TCP port the process may connect to besides the carried ones.

Inside, HTTP_PROXY, HTTPS_PROXY and ALL_PROXY (and their lower-case forms) name the door, and
NO_PROXY names loopback only: what a program reaches directly there is what crew carried.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from crewbridge.sandbox.allowlist import AllowList, Entry

# For start-up speed: the proxy (socket, ~2 ms) loads once the process has started, when its doors open.
if TYPE_CHECKING:
    import socket

    from crewbridge.sandbox.proxy import Door, Proxy, Refused, Upstream

Hosts = Callable[[Mapping[str, str]], AllowList]  # what a process may reach, from its environment
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
LOOPBACK = "localhost,127.0.0.1,::1"
KEPT = 100  # refusals kept until someone listens


def reaching(
    network: str, allowed: Sequence[Entry], endpoints: Callable[[Mapping[str, str]], Sequence[Entry]] | None = None
) -> Hosts | None:
    """What a kind of process may reach: `endpoints` (a CLI's model API, from its environment) and
    `allowed` (crew.yaml's network: allow); None when `network` is "open"."""
    if network == "open":
        return None
    listed = tuple(allowed)
    if endpoints is None:
        return lambda env: AllowList(listed)
    return lambda env: AllowList((*endpoints(env), *listed))


class Refusals:
    """Where a sandbox's refused connections are told: kept (the first KEPT) until a listener
    comes, then each told as it happens, from the proxy's thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: list[Refused] = []
        self._listener: Callable[[Refused], None] | None = None

    def tell(self, refused: Refused) -> None:
        with self._lock:
            listener = self._listener
            if listener is None and len(self._kept) < KEPT:
                self._kept.append(refused)
        if listener is not None:
            listener(refused)

    def listen(self, listener: Callable[[Refused], None]) -> None:
        """Tell `listener` every refusal from now on, and those kept."""
        with self._lock:
            kept, self._kept, self._listener = self._kept, [], listener
        for refused in kept:
            listener(refused)


@dataclass(frozen=True)
class Egress:
    """What a kind of process may reach through crew's proxy (`proxy()`, made when first needed):
    `hosts`, from its environment."""

    proxy: Callable[[], Proxy] = field(compare=False)
    hosts: Hosts = field(compare=False)
    refusals: Refusals = field(default_factory=Refusals, compare=False)

    def plus(self, more: Iterable[Entry]) -> Egress:
        """This way out, reaching `more` too; refusals told where this one's are."""
        hosts, more = self.hosts, tuple(more)
        return Egress(self.proxy, lambda env: hosts(env).plus(more), self.refusals)

    def gate(self, env: Mapping[str, str]) -> Gate:
        """The doors of one launch with environment `env` (not open yet)."""
        return Gate(self, self.hosts(env), dict(env))


@dataclass
class Gate:
    """One launch's doors: the proxy's, and one per loopback destination carried into its network.
    `env`: the process's environment before the gate's (its proxy variables name the upstream)."""

    egress: Egress
    allowed: AllowList
    given: dict[str, str]
    port: int = 0  # the proxy's door's port, where the process finds it
    listeners: list[socket.socket] = field(default_factory=list)

    def __post_init__(self) -> None:
        carried = {port for _, port in self.allowed.loopback()}
        self.port = next(p for p in iter(lambda: random.randrange(20000, 60000), 0) if p not in carried)

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """`env` as the process sees it: every proxy variable names the door, NO_PROXY loopback."""
        door = f"http://127.0.0.1:{self.port}"
        return {**env, **dict.fromkeys(PROXY_VARIABLES, door), "NO_PROXY": LOOPBACK, "no_proxy": LOOPBACK}

    def carried(self) -> list[tuple[str, int]]:
        """The loopback destinations a process reaches directly, at the same address and port."""
        return self.allowed.loopback()

    def open_in(self, pid: int) -> None:
        """Open the doors inside the network namespace of process `pid` (a sandbox's first) and
        serve them. NamespaceError when they cannot be made there."""
        from crewbridge.sandbox import netns
        from crewbridge.sandbox.proxy import Door

        places: list[tuple[str, int]] = [("127.0.0.1", self.port)]
        destinations: list[tuple[str, int] | None] = [None]
        for host, port in self.carried():
            for address in ("127.0.0.1", "::1") if not _is_address(host) else (host,):
                places.append((address, port))
                destinations.append((host, port))
        made = netns.listeners(pid, places, optional={i for i, (a, _) in enumerate(places) if a == "::1"})
        namespace = Path(f"/proc/{pid}")
        for listener, to in zip(made, destinations, strict=True):
            if listener is not None:
                self._serve(listener, Door(self.egress.refusals.tell, self.allowed, self._upstream(), to, namespace))

    def open_here(self) -> None:
        """Open the proxy's door on this machine's loopback, at a free port (Landlock: the process
        may connect to that port, and the carried ones, directly)."""
        import socket

        from crewbridge.sandbox.proxy import Door

        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._serve(listener, Door(self.egress.refusals.tell, self.allowed, self._upstream()))

    def _upstream(self) -> Upstream:
        from crewbridge.sandbox.proxy import Upstream

        return Upstream.of(self.given)

    def _serve(self, listener: socket.socket, door: Door) -> None:
        self.listeners.append(listener)
        self.egress.proxy().open(listener, door)

    def close(self) -> None:
        """Close every door (and the connections through them)."""
        listeners, self.listeners = self.listeners, []
        for listener in listeners:
            with contextlib.suppress(OSError):
                self.egress.proxy().shut(listener)


def _is_address(host: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
