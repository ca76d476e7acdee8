"""Where the HTTP tools may connect: public addresses only, checked at every connection.

docs/architecture.md, "Security defaults": http_request and fetch_webpage refuse private, loopback
and link-local addresses unless allowed. Here a host name is resolved once per
connection, every address it resolves to is checked, and the connection is made to a
checked address, never by resolving again (so DNS rebinding between check and connect
cannot slip through). Each redirect opens its connection through the same check.

Refused (unless inside a network of `[tools] http_allow_networks`): loopback, private
(RFC 1918, fc00::/7), link-local, CGNAT (100.64.0.0/10), multicast, unspecified,
reserved and documentation ranges, cloud metadata (169.254.169.254, fd00:ec2::254), and
IPv6 forms that carry such an IPv4 address (::ffff:a.b.c.d, 64:ff9b::/96, 2002::/16).

Example:
    backend = GuardedBackend(allowed_networks(["10.0.0.0/8"]))
    httpcore.AsyncConnectionPool(network_backend=backend)
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from typing import Any

import httpcore

from opencrab.errors import ValidationError

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
)
CGNAT = ipaddress.ip_network("100.64.0.0/10")
NAT64 = ipaddress.ip_network("64:ff9b::/96")


class AddressRefused(ValidationError):
    """A host resolved to an address the HTTP tools may not connect to."""


def allowed_networks(entries: Iterable[str]) -> list[IpNetwork]:
    """The allow-list of `[tools] http_allow_networks` as networks."""
    return [ipaddress.ip_network(e, strict=False) for e in entries]


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def refusal(ip: IpAddress) -> str | None:
    """Why the HTTP tools may not connect to `ip` (None when it is a public address)."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_ipv4(ip)
        if inner is not None:
            why = refusal(inner)
            return None if why is None else f"{why} (inside the IPv6 address {ip})"
    checks = (
        (ip in METADATA, "a cloud metadata address"),
        (ip.is_unspecified, "the unspecified address"),
        (ip.is_loopback, "a loopback address"),
        (ip.is_link_local, "a link-local address"),
        (ip.is_multicast, "a multicast address"),
        (isinstance(ip, ipaddress.IPv4Address) and ip in CGNAT, "a CGNAT (shared) address"),
        (ip.is_private, "a private address"),
        (ip.is_reserved, "a reserved address"),
        (not ip.is_global, "not a public address"),
    )
    for hit, why in checks:
        if hit:
            return why
    return None


def check_address(ip: IpAddress, host: str, allow: list[IpNetwork]) -> None:
    """AddressRefused naming `host` and why, unless `ip` is public or allow-listed."""
    if any(ip.version == net.version and ip in net for net in allow):
        return
    why = refusal(ip)
    if why is not None:
        shown = host if host == str(ip) else f"{host} ({ip})"
        raise AddressRefused(
            f"refused to connect to {shown}: {why}; the HTTP tools reach only public "
            "addresses unless the operator allow-lists a network ([tools] "
            "http_allow_networks)"
        )


async def resolve(host: str, port: int) -> list[IpAddress]:
    """Every address `host` resolves to (a literal address resolves to itself)."""
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ValidationError(f"cannot resolve host {host!r}: {exc.strerror}") from None
    found: list[IpAddress] = []
    for _family, _type, _proto, _name, address in infos:
        ip = ipaddress.ip_address(str(address[0]).split("%", 1)[0])
        if ip not in found:
            found.append(ip)
    if not found:
        raise ValidationError(f"host {host!r} has no address")
    return found


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend that connects only to checked addresses."""

    def __init__(self, allow: list[IpNetwork], inner: httpcore.AsyncNetworkBackend | None = None):
        self.allow = allow
        self.inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Resolve `host`, refuse it if any address is refused, connect to a checked one."""
        addresses = await resolve(host, port)
        for ip in addresses:  # one bad answer refuses the name: no mixing public and private
            check_address(ip, host, self.allow)
        last: Exception | None = None
        for ip in addresses:
            try:
                return await self.inner.connect_tcp(
                    str(ip), port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        """Never: the HTTP tools speak TCP only."""
        raise AddressRefused("the HTTP tools do not connect to Unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)
