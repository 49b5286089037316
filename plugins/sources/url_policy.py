"""Where a portal may send the crawler, and where its credentials may go.

A portal's listing names the URLs we download, and its servers name the redirects we follow, so a
hostile or compromised portal could point the crawler (and the portal's API key or app token) at
any host: another service on the crawler's machine, a cloud metadata address, a server that logs
credentials. The policy here is checked on the first URL and again on every redirect hop:

* a URL must be http(s), carry no user:password, and name the portal's own host or a host in
  `crawl.allowed_hosts` (`host` for any port, `host:port`, or `*.domain` for subdomains);
* a URL whose host resolves to a private, loopback, link-local or otherwise non-global address is
  refused unless the portal itself is on such an address (a portal on the intranet or on loopback
  may link to its neighbours; a public portal may not reach inside);
* credentials go only to the portal's own origin (scheme, host and port; an upgrade from http to
  https on the same host is the same origin). Once a redirect leaves that origin, they are dropped
  for the rest of the chain.

The address check runs twice: on the URL (so a refused dataset says why before any request), and
when the HTTP client opens a connection, which resolves the host itself, refuses it if any address
is non-public, and connects to the addresses it checked, so a DNS answer that changes between the
two (rebinding) cannot lead inside either.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}

Resolver = Callable[[str], list[str]]


def resolve_addresses(host: str) -> list[str]:
    """Every address `host` resolves to; [] when it does not resolve (the fetch then fails by itself)."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError, OSError):
        return []
    return sorted({str(info[4][0]) for info in infos})


def is_internal(address: str) -> bool:
    """True for an address that is not on the public internet (private, loopback, link-local, …)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return True
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not ip.is_global or ip.is_multicast


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str
    port: int

    @classmethod
    def of(cls, url: str) -> Origin:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        try:
            port = parts.port
        except ValueError:
            port = None
        return cls(scheme, (parts.hostname or "").lower().rstrip("."), port or DEFAULT_PORTS.get(scheme, 0))

    def same_site(self, other: Origin) -> bool:
        """Same origin, or the http->https upgrade of the same host on default ports."""
        if self == other:
            return True
        return (
            self.host == other.host
            and self.scheme == "http"
            and other.scheme == "https"
            and self.port == 80
            and other.port == 443
        )


def _host_matches(entry: str, origin: Origin) -> bool:
    entry = entry.strip().lower().rstrip(".")
    if entry.startswith("*."):
        return origin.host.endswith(entry[1:]) and origin.host != entry[2:]
    host, sep, port = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
    if sep:
        return origin.host == host and port.isdigit() and origin.port == int(port)
    return origin.host == entry.strip("[]")


class UrlPolicy:
    """The policy of one source: its own URL, the operator's allow-list and a resolver (answers are
    kept for the policy's lifetime, one crawl, so a listing of many resources resolves each host once)."""

    def __init__(
        self, home: str, allowed_hosts: tuple[str, ...] = (), *, resolver: Resolver = resolve_addresses
    ) -> None:
        self.home, self.allowed_hosts = home, tuple(allowed_hosts)
        self.origin = Origin.of(home)
        self._resolver = resolver
        self._resolved: dict[str, list[str]] = {}

    def __repr__(self) -> str:
        return f"UrlPolicy({self.home!r}, allowed_hosts={self.allowed_hosts!r})"

    def _addresses(self, host: str) -> list[str]:
        if host not in self._resolved:
            self._resolved[host] = self._resolver(host)
        return self._resolved[host]

    def home_is_internal(self) -> bool:
        """Whether the portal itself is on a non-public address (then so may its links be)."""
        return any(is_internal(a) for a in self._addresses(self.origin.host))

    def refusal(self, url: str) -> str | None:
        """Why `url` may not be fetched for this source, or None when it may."""
        parts = urlsplit(url)
        if parts.scheme.lower() not in DEFAULT_PORTS:
            return f"only http and https URLs are fetched, not {parts.scheme or 'a relative URL'!r}"
        if parts.username is not None or parts.password is not None:
            return "URLs with a user name or password are not fetched"
        target = Origin.of(url)
        if not target.host:
            return "the URL names no host"
        if not (self.origin.same_site(target) or any(_host_matches(e, target) for e in self.allowed_hosts)):
            return (
                f"host {target.host}:{target.port} is neither the portal's own "
                f"({self.origin.host}:{self.origin.port}) nor in crawl.allowed_hosts"
            )
        internal = [a for a in self._addresses(target.host) if is_internal(a)]
        if internal and not self.home_is_internal():
            return f"host {target.host} resolves to the non-public address {internal[0]}"
        return None

    def credentials_for(self, url: str, headers: Mapping[str, str]) -> dict[str, str]:
        """`headers` when `url` is on the portal's own origin, else none of them."""
        return dict(headers) if self.origin.same_site(Origin.of(url)) else {}
