"""A Redis primary, a replica and three Sentinels, all real ``redis-server`` processes (the same
binary: ``redis-server --sentinel``), for failover tests and the chaos run's failover scenario.

Every node requires a password (``requirepass``/``masterauth``; the Sentinels their own), so the
URL a fleet gets exercises both credentials: ``redis+sentinel://:pw@h:p,h:p,h:p/toolhub?
sentinel_password=…``. Sentinels decide fast (``down-after-milliseconds`` 1000), well inside a
lease, as docs/operations.md asks of a production setup.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from redis import Redis
from redis.exceptions import RedisError

from toolhub.ports import free_port
from toolhub.stack import find_redis_server

SERVICE = "toolhub"
PASSWORD = "primary-secret"
SENTINEL_PASSWORD = "sentinel-secret"


class SentinelSet:
    """``start()`` a primary, a replica of it and three Sentinels monitoring it."""

    def __init__(self, home: Path, binary: str | None = None, sentinels: int = 3) -> None:
        self.home = home
        self.binary = binary or find_redis_server()
        self.ports = {"a": free_port(), "b": free_port()}
        self.sentinel_ports = [free_port() for _ in range(sentinels)]
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return (
            f"redis+sentinel://:{PASSWORD}@{hosts}/{SERVICE}/0"
            f"?sentinel_password={SENTINEL_PASSWORD}"
        )

    def start(self, timeout: float = 30.0) -> SentinelSet:
        self._start_node("a", replica_of=None)
        self._start_node("b", replica_of=self.ports["a"])
        for number, port in enumerate(self.sentinel_ports):
            self._start_sentinel(number, port)
        self.wait_replicated(timeout)
        self.wait_agreed(self.ports["a"], timeout)
        return self

    def _write(self, name: str, lines: list[str]) -> Path:
        self.home.mkdir(parents=True, exist_ok=True)
        path = self.home / f"{name}.conf"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as conf:
            conf.write("\n".join(lines) + "\n")
        return path

    def _spawn(self, name: str, args: list[str]) -> None:
        log = (self.home / f"{name}.log").open("ab")
        self.procs[name] = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        log.close()

    def _start_node(self, name: str, replica_of: int | None) -> None:
        port = self.ports[name]
        data = self.home / name
        data.mkdir(parents=True, exist_ok=True)
        lines = [
            f"port {port}",
            "bind 127.0.0.1",
            f"dir {data}",
            'save ""',
            "appendonly no",
            "maxmemory-policy noeviction",
            f'requirepass "{PASSWORD}"',
            f'masterauth "{PASSWORD}"',
        ]
        if replica_of is not None:
            lines.append(f"replicaof 127.0.0.1 {replica_of}")
        self._spawn(name, [self.binary, str(self._write(name, lines))])
        self._wait_ping(port, PASSWORD)

    def _start_sentinel(self, number: int, port: int) -> None:
        name = f"sentinel{number}"
        conf = self._write(
            name,
            [
                f"port {port}",
                "bind 127.0.0.1",
                f"dir {self.home}",
                f'requirepass "{SENTINEL_PASSWORD}"',
                f"sentinel monitor {SERVICE} 127.0.0.1 {self.ports['a']} 2",
                f'sentinel auth-pass {SERVICE} "{PASSWORD}"',
                f"sentinel down-after-milliseconds {SERVICE} 1000",
                f"sentinel failover-timeout {SERVICE} 5000",
                f"sentinel parallel-syncs {SERVICE} 1",
            ],
        )
        self._spawn(name, [self.binary, str(conf), "--sentinel"])
        self._wait_ping(port, SENTINEL_PASSWORD)

    def _wait_ping(self, port: int, password: str, timeout: float = 15.0) -> None:
        client = Redis(port=port, password=password, socket_connect_timeout=0.5)
        deadline = time.monotonic() + timeout
        try:
            while True:
                with contextlib.suppress(RedisError):
                    if client.ping():
                        return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"redis-server on port {port} did not start")
                time.sleep(0.05)
        finally:
            client.close()

    def node(self, port: int) -> Redis:
        return Redis(port=port, password=PASSWORD, socket_connect_timeout=1, socket_timeout=2)

    def wait_replicated(self, timeout: float, port: int | None = None) -> None:
        replica = self.node(port or self.ports["b"])
        deadline = time.monotonic() + timeout
        try:
            while replica.info("replication").get("master_link_status") != "up":
                if time.monotonic() > deadline:
                    raise TimeoutError("the replica did not sync with the primary")
                time.sleep(0.1)
        finally:
            replica.close()

    def primary_port(self) -> int | None:
        """The primary's port as the first Sentinel that answers names it."""
        for port in self.sentinel_ports:
            client = Redis(port=port, password=SENTINEL_PASSWORD, socket_timeout=1)
            try:
                host_port = client.sentinel_get_master_addr_by_name(SERVICE)
            except RedisError:
                continue
            finally:
                client.close()
            if host_port:
                return int(host_port[1])
        return None

    def wait_agreed(self, port: int, timeout: float) -> float:
        """Seconds until every Sentinel names ``port`` as the primary."""
        start = time.monotonic()
        while True:
            named = set()
            for sentinel_port in self.sentinel_ports:
                client = Redis(port=sentinel_port, password=SENTINEL_PASSWORD, socket_timeout=1)
                try:
                    answer = client.sentinel_get_master_addr_by_name(SERVICE)
                    named.add(int(answer[1]) if answer else None)
                except RedisError:
                    named.add(None)
                finally:
                    client.close()
            if named == {port}:
                return time.monotonic() - start
            if time.monotonic() - start > timeout:
                raise TimeoutError(f"Sentinels name {named}, not {port}")
            time.sleep(0.1)

    def kill_primary(self) -> tuple[int, int]:
        """SIGKILL the primary, as a crash would. Returns (old primary port, its replica's)."""
        old = self.primary_port()
        name = next(n for n, p in self.ports.items() if p == old)
        self.procs[name].send_signal(signal.SIGKILL)
        self.procs[name].wait(10)
        other = next(p for n, p in self.ports.items() if n != name)
        return int(old or 0), other

    def restart(self, port: int, timeout: float = 60.0) -> None:
        """Start the node on ``port`` again (after ``kill_primary``) as a replica of the
        current primary, as an operator (or a chart's start script) would, and wait until it
        holds the primary's data. Started with its old config it would come back an empty
        primary, and a failover to it before Sentinel demotes it would lose everything."""
        name = next(n for n, p in self.ports.items() if p == port)
        self._start_node(name, replica_of=self.primary_port())
        self.wait_replicated(timeout, port)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
