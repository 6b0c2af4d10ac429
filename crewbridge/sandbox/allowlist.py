"""Where a sandboxed process may connect: an allow-list of hosts (and ports), read from crew.yaml's
`network: allow:`, a provider's known endpoints and the base URL its user configured, and the
addresses that stay out of reach whatever a name resolves to.

An entry is `host` (ports 443 and 80), `host:port`, `[v6]:port`, or `*.domain` (any name below
domain, not domain itself) with or without a port. Names are compared as crew canonicalizes them:
lower case, no trailing dot, an IPv4-mapped IPv6 address as its IPv4 address; a host whose last
label is a number must be a plain dotted IPv4 address (`127.1`, `2130706433`, `0x7f.0.0.1` and
`0177.0.0.1` are refused: resolvers read them as addresses that no list names).

A name that resolves to a loopback, private, link-local (the cloud metadata address among them),
multicast or otherwise non-public address is refused, unless the entry it matched names that host
exactly and was given by the user (crew.yaml, a configured base URL): a wildcard or a provider's
built-in endpoint never leads into the machine or its network.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

WEB_PORTS = (443, 80)  # the ports of an entry that names none
MAX_NAME = 253
_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")
_NUMERIC = re.compile(r"(0x[0-9a-f]*|[0-9]+)")
LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def canonical_host(text: str) -> str:
    """`text` as a host crew compares: a name in lower case without its trailing dot, or an IP
    address in its canonical form (IPv4 for an IPv4-mapped IPv6 one; an IPv6 one without brackets).
    ValueError saying why it is not a host."""
    host = text.strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            address = ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"'{text}' is not an IPv6 address") from None
        return str(address.ipv4_mapped or address)
    host = host.lower()
    if host.endswith("."):
        host = host[:-1]
    if ":" in host:
        try:
            address = ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"'{text}' is not a host name") from None
        return str(address.ipv4_mapped or address)
    if not host or len(host) > MAX_NAME:
        raise ValueError(f"'{text}' is not a host name")
    labels = host.split(".")
    if _NUMERIC.fullmatch(labels[-1]):
        try:
            return str(ipaddress.IPv4Address(host))
        except ValueError:
            raise ValueError(f"'{text}' is not a plain IPv4 address (write it as four decimal numbers)") from None
    if not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError(f"'{text}' is not a host name")
    return host


def split_authority(text: str) -> tuple[str, int]:
    """`host:port` (`[v6]:port`) as a canonical host and a port. ValueError saying why not."""
    host, colon, port = text.rpartition(":")
    if not colon or not host or (":" in host and not host.startswith("[")):
        raise ValueError(f"'{text}' is not host:port")
    return canonical_host(host), _port(port, text)


def _port(text: str, whole: str) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 5 or not 0 < int(text) < 65536:
        raise ValueError(f"'{whole}': the port is not a number from 1 to 65535")
    return int(text)


@dataclass(frozen=True)
class Entry:
    """One allowed destination. `host` is canonical; "*.domain" stands for every name below
    domain. `ports`: () for WEB_PORTS. `why`: where it comes from (shown by crew doctor).
    `private_ok`: it may lead to a non-public address (the user named this host exactly)."""

    host: str
    ports: tuple[int, ...] = ()
    why: str = ""
    private_ok: bool = False

    @property
    def wildcard(self) -> bool:
        return self.host.startswith("*.")

    def matches(self, host: str, port: int) -> bool:
        """Whether the canonical `host` and `port` are this entry's."""
        if port not in (self.ports or WEB_PORTS):
            return False
        return host.endswith(self.host[1:]) if self.wildcard else host == self.host

    def shown(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if not self.ports else ", ".join(f"{host}:{port}" for port in self.ports)


def entry(text: str, why: str = "", *, private_ok: bool = True) -> Entry:
    """An entry as written in crew.yaml: `host`, `host:port`, `[v6]:port`, `*.domain[:port]`.
    ValueError saying what is wrong and how to write it."""
    text = text.strip()
    hint = "; write a host (example.com), host:port (example.com:8443), [v6]:port or *.example.com"
    if "://" in text:
        raise ValueError(f"'{text}' is a URL{hint}")
    host, port = text, None
    if text.startswith("["):
        end = text.find("]")
        host, rest = text[: end + 1], text[end + 1 :]
        if end < 0 or (rest and not rest.startswith(":")):
            raise ValueError(f"'{text}' is not a host{hint}")
        port = rest[1:] if rest else None
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    try:
        ports = (_port(port, text),) if port is not None else ()
        if host.startswith("*."):
            return Entry("*." + canonical_host(host[2:]), ports, why, private_ok=False)
        return Entry(canonical_host(host), ports, why, private_ok)
    except ValueError as exc:
        raise ValueError(f"{exc}{hint}") from None


def from_url(url: str, why: str) -> Entry | None:
    """The entry of a base URL the user configured (its host and port, the scheme's by default);
    None when `url` is not an http(s) URL with a host."""
    from urllib.parse import urlsplit  # for start-up speed: only a configured base URL needs it

    try:
        parts = urlsplit(url.strip())
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme.lower())
        host = parts.hostname
        if port is None or not host:
            return None
        return Entry(canonical_host(f"[{host}]" if ":" in host else host), (port,), why, private_ok=True)
    except ValueError:
        return None


def is_loopback(host: str) -> bool:
    """Whether canonical `host` names this machine's loopback (a name, or an address)."""
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class AllowList:
    """The destinations a process may reach, in order."""

    entries: tuple[Entry, ...] = ()

    def find(self, host: str, port: int) -> Entry | None:
        """The first entry that allows canonical `host` at `port` (an exact one before a wildcard)."""
        found = [one for one in self.entries if one.matches(host, port)]
        return min(found, key=lambda one: one.wildcard, default=None)

    def plus(self, more: Iterable[Entry]) -> AllowList:
        return AllowList((*self.entries, *(one for one in more if one not in self.entries)))

    def loopback(self) -> list[tuple[str, int]]:
        """The loopback destinations named exactly (a local base URL): crew carries them into a
        network namespace at the same address and port, as they are reached directly."""
        return [(one.host, port) for one in self.entries if is_loopback(one.host) for port in one.ports]

    def shown(self) -> str:
        """The entries, those from one place together: `a, b (its API), c (X_BASE_URL)`."""
        groups: list[tuple[str, list[str]]] = []
        for one in self.entries:
            if groups and groups[-1][0] == one.why:
                groups[-1][1].append(one.shown())
            else:
                groups.append((one.why, [one.shown()]))
        return ", ".join(", ".join(shown) + (f" ({why})" if why else "") for why, shown in groups) or "nothing"


def forbidden(address: Address) -> str | None:
    """Why a process may not be led to `address` by a name: what kind of address it is; None for a
    public one."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or _nat64(address)
        if embedded is not None:
            address = embedded
    if address.is_unspecified:
        return "an unspecified address (this machine)"
    if address.is_loopback:
        return "a loopback address (this machine)"
    if address.is_link_local:
        return "a link-local address (the cloud metadata service's among them)"
    if address.is_multicast:
        return "a multicast address"
    if address.is_private:
        return "a private address"
    if not address.is_global:
        return "an address that is not public"
    return None


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def _nat64(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address a NAT64 address leads to."""
    return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF) if address in _NAT64 else None
