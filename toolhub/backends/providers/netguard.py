"""SSRF protection for tools that fetch URLs a model chose.

A URL is only as safe as the address it finally connects to, so the guard decides on addresses,
after DNS: it resolves the host itself, refuses the whole URL when *any* address is local
(loopback, private, link-local, CGNAT, multicast, unspecified, reserved) or a cloud metadata
endpoint, and hands back the vetted address to connect to. The connection goes to that address
(with the original name in ``Host`` and TLS SNI), so a DNS answer that changes between check and
connect (rebinding) cannot slip a private address in. Redirects are vetted again at every hop by
the caller.

``allow_local`` lifts the local-address refusal for development (a server on 127.0.0.1);
metadata addresses stay refused even then: no fetch tool ever needs them.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import httpx

from toolhub.core import ToolError
from toolhub.errors import ErrorCode

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
)
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_IETF = ipaddress.ip_network("192.0.0.0/24")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
SCHEMES = ("http", "https")


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one tunnels to (mapped, 6to4, Teredo, NAT64):
    ``::ffff:127.0.0.1`` must be judged as 127.0.0.1."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def refusal(address: IPAddress, *, allow_local: bool) -> str | None:
    """Why connecting to ``address`` is refused, or None when it is allowed."""
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if isinstance(address, ipaddress.IPv6Address):
        inner = embedded_ipv4(address)
        if inner is not None:
            reason = refusal(inner, allow_local=allow_local)
            return None if reason is None else f"{reason} (embedded in {address})"
    if allow_local:
        return None
    checks = (
        (address.is_unspecified, "an unspecified address"),
        (address.is_loopback, "a loopback address"),
        (address.is_link_local, "a link-local address"),
        (address.is_multicast, "a multicast address"),
        (address in _CGNAT, "a shared (CGNAT) address"),
        (address in _IETF, "a special-purpose address"),
        (address.is_private, "a private address"),
        (address.is_reserved, "a reserved address"),
        (not address.is_global, "a non-public address"),
    )
    return next((reason for refused, reason in checks if refused), None)


def parse_ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


class Resolver(Protocol):
    """Name → addresses. A container resource, so hosts (and tests) can supply their own."""

    async def resolve(self, host: str, port: int) -> list[IPAddress]: ...


class SystemResolver:
    """The operating system's resolver (``getaddrinfo``), run off the event loop."""

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise ToolError.custom(
                ErrorCode.NETWORK_ERROR, f"could not resolve `{host}`: {exc}", host=host
            ) from None
        found: list[IPAddress] = []
        for info in infos:
            address = parse_ip(str(info[4][0]))
            if address is not None and address not in found:
                found.append(address)
        return found


class TransportFactory:
    """How network tools open connections: a fresh httpx transport per exchange (pools belong
    to one event loop). The default ignores proxy environment variables, so the vetted address
    is the one really dialled; hosts may supply a proxying or custom-TLS transport instead."""

    def __init__(self, make: Callable[[], httpx.AsyncBaseTransport] | None = None) -> None:
        self._make = make

    def __call__(self) -> httpx.AsyncBaseTransport:
        if self._make is not None:
            return self._make()
        return httpx.AsyncHTTPTransport(trust_env=False)


@dataclass(frozen=True, slots=True)
class Target:
    """One vetted hop: the URL as asked, and the address the connection must use."""

    url: httpx.URL
    address: IPAddress

    def request_url(self) -> httpx.URL:
        return self.url.copy_with(host=str(self.address))

    def headers(self) -> dict[str, str]:
        return {"Host": self.url.netloc.decode("ascii")}

    def extensions(self) -> dict[str, str]:
        """TLS must verify the certificate against the name, not the pinned address."""
        if self.url.scheme == "https":
            return {"sni_hostname": self.url.raw_host.decode("ascii")}
        return {}


class NetGuard:
    """Checks URLs and pins them to vetted addresses. One per fetch; cheap to build."""

    def __init__(
        self, resolver: Resolver, *, allow_local: bool, allowed_domains: Sequence[str] = ()
    ) -> None:
        self.resolver = resolver
        self.allow_local = allow_local
        self.allowed_domains = tuple(d.lower().strip(".") for d in allowed_domains if d.strip())

    def check_url(self, url: httpx.URL) -> None:
        """Everything decidable without DNS: scheme, credentials, host, allowed domains."""
        if url.scheme not in SCHEMES:
            raise ToolError.invalid_arguments(
                f"only http and https URLs can be fetched, not `{url.scheme}:`"
            )
        if url.userinfo:
            raise ToolError.invalid_arguments("URLs with embedded credentials are not fetched")
        host = url.host.lower().rstrip(".")
        if not host:
            raise ToolError.invalid_arguments(f"the URL `{url}` has no host")
        if self.allowed_domains and not any(
            host == d or host.endswith("." + d) for d in self.allowed_domains
        ):
            raise ToolError.permission_denied(
                f"`{host}` is not in the allowed domains ({', '.join(self.allowed_domains)})",
                host=host,
            )
        if not self.allow_local and (host == "localhost" or host.endswith(".localhost")):
            raise self._refused(host, "a loopback name")

    async def vet(self, url: httpx.URL) -> Target:
        """The hop's target, or ``permission_denied`` naming the refused address."""
        self.check_url(url)
        host = url.raw_host.decode("ascii").rstrip(".")
        literal = parse_ip(host)
        port = url.port or (443 if url.scheme == "https" else 80)
        addresses = [literal] if literal is not None else await self.resolver.resolve(host, port)
        if not addresses:
            raise ToolError.custom(ErrorCode.NETWORK_ERROR, f"`{host}` has no addresses", host=host)
        for address in addresses:
            reason = refusal(address, allow_local=self.allow_local)
            if reason is not None:
                raise self._refused(host, reason, None if literal is not None else address)
        return Target(url, addresses[0])

    def _refused(self, host: str, reason: str, address: IPAddress | None = None) -> ToolError:
        via = " is" if address is None else f" resolves to {address}, which is"
        return ToolError.permission_denied(
            f"refusing to fetch from `{host}`: it{via} {reason}", host=host, reason=reason
        )
