"""A pretend network for SSRF tests: names resolve where the test says, and a "public" address
is routed to a server on 127.0.0.1, the way a network namespace would route it. The guard under
test sees exactly what it would see on the internet."""

from __future__ import annotations

import ipaddress
import ssl

import httpx

from toolhub.backends.providers.netguard import IPAddress

PUBLIC_IP = "93.184.215.14"


class StaticResolver:
    """Resolves from a fixed table; records every lookup."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.lookups: list[str] = []

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        self.lookups.append(host)
        return [ipaddress.ip_address(a) for a in self.table.get(host, [])]


class RoutingTransport(httpx.AsyncBaseTransport):
    """Delivers connections for ``routes`` addresses to 127.0.0.1 (same port); appends every
    address dialled to ``log``."""

    def __init__(
        self, routes: set[str], log: list[str], verify: ssl.SSLContext | bool = True
    ) -> None:
        self.routes = routes
        self.inner = httpx.AsyncHTTPTransport(verify=verify, trust_env=False)
        self.dialled = log

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.dialled.append(request.url.host)
        if request.url.host in self.routes:
            request.url = request.url.copy_with(host="127.0.0.1")
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()
