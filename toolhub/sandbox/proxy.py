"""The egress proxy: network for sandboxed commands limited to an allowlist of hosts.

Network on lets a command reach the worker's Redis, the cloud metadata service and anything on
the pod's network; network off breaks ``pip install``. Between the two, as Claude Code and Codex
do, the command gets no network of its own and one way out: an HTTP proxy, outside the sandbox,
that connects only to the hosts the config allows (``network: [pypi.org, "*.pythonhosted.org"]``).

* HTTPS goes through ``CONNECT host:port``; plain HTTP as an absolute-form request
  (``GET http://host/path``). Both are checked before any connection is made, and a refusal is
  a ``403`` whose body says which host and why. Nothing else (no SOCKS, no raw TCP).
* A name matches an entry exactly, or ``*.example.com`` matches its subdomains. Names are
  resolved here and every address must be public (``netguard.refusal``): an allowed name that
  resolves to 127.0.0.1 or 10.x (DNS rebinding, a typo-squatted internal name) is refused. An
  entry that is itself an IP address or ``localhost`` is the config's explicit choice and is
  dialled as written.
* One proxy per distinct allowlist per process, on a unix socket (bwrap: bound into the
  sandbox, where ``bridge.py`` turns it into ``127.0.0.1:PROXY_PORT`` inside the command's own
  network namespace) and on a loopback TCP port (Landlock: the command may connect to that port
  only). It runs on a daemon thread with its own event loop and lives as long as the process.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import logging
import os
import socket
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger("toolhub.sandbox.proxy")

#: Where commands find the proxy inside a bwrap sandbox (``bridge.py`` listens there).
PROXY_PORT = 3128
MAX_HEAD_BYTES = 16 * 1024
CONNECT_TIMEOUT_S = 15.0
_BLOCKED_METADATA = frozenset({"169.254.169.254", "fd00:ec2::254"})


def _is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


@dataclass(frozen=True)
class Allowlist:
    """The hosts a command may reach: exact names, ``*.domain`` for subdomains, IP literals."""

    entries: tuple[str, ...]

    @classmethod
    def of(cls, hosts: Iterable[str]) -> Allowlist:
        return cls(tuple(sorted({h.strip().lower().rstrip(".") for h in hosts if h.strip()})))

    def explicit(self, host: str) -> bool:
        """An entry naming this very host as an address (or ``localhost``): dialled as is."""
        return host in self.entries and (host == "localhost" or _is_ip(host))

    def allows(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        for entry in self.entries:
            if entry.startswith("*.") and host.endswith(entry[1:]) and host != entry[2:]:
                return True
            if host == entry:
                return True
        return False


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@dataclass
class EgressProxy:
    """A running proxy for one allowlist: ``unix_path`` (bwrap) and ``tcp_port`` (Landlock)."""

    allowlist: Allowlist
    unix_path: Path
    tcp_port: int = 0
    refused: int = 0
    _loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)

    def start(self) -> EgressProxy:
        ready = threading.Event()
        failure: list[BaseException] = []

        async def serve() -> None:
            try:
                self.unix_path.unlink(missing_ok=True)
                await asyncio.start_unix_server(self._handle, path=str(self.unix_path))
                os.chmod(self.unix_path, 0o666)  # a sandboxed command may run as another uid
                tcp = await asyncio.start_server(self._handle, "127.0.0.1", 0)
                self.tcp_port = tcp.sockets[0].getsockname()[1]
            except BaseException as exc:
                failure.append(exc)
            finally:
                ready.set()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.create_task(serve())
            self._loop.run_forever()

        threading.Thread(target=run, name="toolhub-egress-proxy", daemon=True).start()
        ready.wait(10)
        if failure:
            raise OSError(f"the sandbox's egress proxy could not start: {failure[0]}")
        return self

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), CONNECT_TIMEOUT_S)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            writer.close()
            return
        if len(head) > MAX_HEAD_BYTES:
            await self._refuse(writer, 431, "request head too large")
            return
        try:
            method, target, version = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
            host, port, rest = _destination(method, target, version, head)
        except ValueError as exc:
            await self._refuse(writer, 400, str(exc))
            return
        reason = await self._check(host, port)
        if reason is not None:
            await self._refuse(writer, 403, reason)
            return
        try:
            upstream_r, upstream_w = await asyncio.wait_for(
                asyncio.open_connection(host, port), CONNECT_TIMEOUT_S
            )
        except (OSError, TimeoutError) as exc:
            await self._refuse(writer, 502, f"cannot reach {host}:{port}: {exc}")
            return
        if rest is None:
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        else:
            upstream_w.write(rest)
        await asyncio.gather(_pipe(reader, upstream_w), _pipe(upstream_r, writer))

    async def _check(self, host: str, port: int) -> str | None:
        if not self.allowlist.allows(host):
            return f"`{host}` is not in the sandbox's network allowlist"
        if self.allowlist.explicit(host):
            return None
        if host in _BLOCKED_METADATA:
            return f"`{host}` is the cloud metadata service"
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
        except OSError as exc:
            return f"`{host}` does not resolve: {exc}"
        for info in infos:
            address = str(info[4][0])
            if not _is_public(address):
                return f"`{host}` resolves to {address}, which is not a public address"
        return None

    async def _refuse(self, writer: asyncio.StreamWriter, status: int, reason: str) -> None:
        self.refused += 1
        logger.info("sandbox egress refused: %s", reason)
        body = f"toolhub sandbox: {reason}\n".encode()
        writer.write(
            f"HTTP/1.1 {status} Refused\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        try:
            await writer.drain()
        finally:
            writer.close()


def _destination(
    method: str, target: str, version: str, head: bytes
) -> tuple[str, int, bytes | None]:
    """``(host, port, bytes to send upstream)``; ``None`` for a CONNECT tunnel."""
    if not version.startswith("HTTP/1."):
        raise ValueError("not an HTTP/1.x proxy request")
    if method == "CONNECT":
        host, _, port = target.rpartition(":")
        return host.strip("[]").lower(), int(port), None
    if not target.lower().startswith("http://"):
        raise ValueError("only CONNECT and absolute http:// requests go through this proxy")
    authority, _, path = target[7:].partition("/")
    host, _, port = authority.rpartition(":") if authority.count(":") == 1 else (authority, "", "")
    _, _, headers = head.partition(b"\r\n")
    line = f"{method} /{path} {version}".encode("latin-1")
    return host.strip("[]").lower(), int(port or 80), line + b"\r\n" + headers


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while chunk := await source.read(65536):
            sink.write(chunk)
            await sink.drain()
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        sink.close()


_proxies: dict[Allowlist, EgressProxy] = {}
_lock = threading.Lock()


def egress_proxy(hosts: Iterable[str]) -> EgressProxy:
    """The running proxy of this process for ``hosts``, started on first use."""
    allowlist = Allowlist.of(hosts)
    with _lock:
        proxy = _proxies.get(allowlist)
        if proxy is None:
            digest = hashlib.sha256("\n".join(allowlist.entries).encode()).hexdigest()[:12]
            directory = Path(tempfile.gettempdir()) / f"toolhub-egress-{os.getpid()}"
            directory.mkdir(mode=0o711, exist_ok=True)
            proxy = EgressProxy(allowlist, directory / f"{digest}.sock").start()
            _proxies[allowlist] = proxy
        return proxy


def proxy_env(url: str) -> dict[str, str]:
    """What points a command's HTTP clients (curl, pip, requests, git) at the proxy."""
    names = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy")
    return {**dict.fromkeys(names, url), "NO_PROXY": "", "no_proxy": ""}
