"""The whole distributed stack on one machine, without Docker: a Redis server, N workers across
the queues, the gateway and Flower, supervised. ``toolhub up`` runs it in the foreground;
``toolhub demo`` starts it in-process and stops it when the episode ends.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from importlib.util import find_spec
from pathlib import Path

import httpx

from toolhub.assembly import toolhub_home
from toolhub.backends.oom import protect
from toolhub.distributed.settings import ALL_QUEUES, QUEUES
from toolhub.errors import ErrorCode, ToolhubError

from .redis_server import RedisServer
from .supervisor import Child, ChildSpec, Report, Supervisor

HOST = "127.0.0.1"
STARTUP_TIMEOUT_S = 60.0
#: Workers of the local stack hand calls back quickly on Ctrl-C (production default: 60 s).
LOCAL_SOFT_SHUTDOWN_S = "5"
#: Flower's task list columns (``--tasks_columns``; compose and the Helm chart pass the same,
#: ``FLOWER_TASKS_COLUMNS`` overrides it here): ``kwargs`` shows each call's tool and call id,
#: ``exception`` a failed call's error kind.
FLOWER_TASKS_COLUMNS = "name,uuid,state,kwargs,exception,result,received,runtime,worker"


class StackError(ToolhubError, RuntimeError):
    """The local stack could not start (a port in use, a child that died or was not ready)."""

    code = ErrorCode.STACK_ERROR


class StartInterrupted(StackError):
    """Ctrl-C or SIGTERM came while the stack was starting: what had started was stopped."""


@dataclass(frozen=True)
class StackInfo:
    redis_url: str
    gateway_url: str
    flower_url: str | None
    flower_user: str | None
    flower_password: str | None
    logs: Path
    #: Each worker's ``/metrics`` (empty when turned off).
    metrics_urls: tuple[str, ...] = ()
    #: The user-only file holding the fleet key, for dispatchers of your own
    #: (``TOOLHUB_FLEET_KEY=$(cat …)``); the key itself is never shown.
    fleet_key_file: Path | None = None


def queue_plan(workers: int) -> list[list[str]]:
    """Queues per worker: one worker takes every queue; two split fast from the slow ones (so a
    long command never holds up a ``read_file``); three or more go round the queues."""
    if workers <= 1:
        return [list(ALL_QUEUES)]
    if workers == 2:
        return [[QUEUES["fast"]], [QUEUES["command"], QUEUES["background"]]]
    order = [QUEUES["fast"], QUEUES["command"], QUEUES["background"]]
    return [[order[i % len(order)]] for i in range(workers)]


def toolhub_command() -> list[str]:
    script = Path(sys.executable).with_name("toolhub")
    if script.is_file():
        return [str(script)]
    found = shutil.which("toolhub")
    if found:
        return [found]
    return [sys.executable, "-c", "from toolhub.cli.main import main; main()"]


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


class LocalStack:
    def __init__(
        self,
        *,
        workers: int = 2,
        port: int = 8000,
        flower_port: int | None = 5555,
        metrics_port: int = 9100,
        workspace: Path | None = None,
        config: Path | None = None,
        report: Report | None = None,
        redis_port: int | None = None,
        interrupted: Callable[[], bool] = lambda: False,
    ) -> None:
        if workers < 1:
            raise StackError("--workers must be at least 1")
        self.workers = workers
        self.port = port
        self.flower_port = flower_port
        #: Worker N serves metrics on ``metrics_port + N - 1``; 0 turns them off.
        self.metrics_port = metrics_port
        #: None: a free port chosen at start.
        self.redis_port = redis_port
        self.workspace = (workspace or Path.cwd()).resolve()
        self.config = config
        self.report = report or (lambda message: None)
        #: Read while waiting for each part: True stops the start (``StartInterrupted``).
        self.interrupted = interrupted
        self.run_dir = toolhub_home() / "up" / time.strftime("%Y%m%d-%H%M%S")
        self.supervisor = Supervisor(self.report)
        self.redis: RedisServer | None = None
        self.info: StackInfo | None = None

    def start(self, timeout: float = STARTUP_TIMEOUT_S) -> StackInfo:
        """Start everything and wait until each part is ready; on failure stop what started."""
        for name, option, port in (
            ("the gateway", "--port", self.port),
            ("Flower", "--flower-port", self.flower_port),
            ("Redis", "--redis-port", self.redis_port),
        ):
            if port is not None and not port_free(port):
                raise StackError(f"port {port} for {name} is in use (choose another {option})")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        # Before any child starts: Redis, the gateway, the workers and Flower inherit it, so a
        # command's memory costs the command, never a part of the stack (commands raise theirs).
        protect("the toolhub stack")
        deadline = time.monotonic() + timeout
        try:
            return self._start(deadline)
        except BaseException:
            self.stop()
            raise

    def _start(self, deadline: float) -> StackInfo:
        # Loopback only, and a password all the same: any local user could otherwise write a
        # session record and a message, and have a worker run a command of their choosing.
        self.redis = RedisServer(
            port=self.redis_port,
            data_dir=self.run_dir / "redis",
            password=secrets.token_urlsafe(24),
        )
        self.redis.data_dir.mkdir(parents=True, exist_ok=True)
        redis = self._spawn("redis", self.redis.command(), {}, grace=10)
        self._await(redis, deadline, lambda: self._redis_ready())
        url = self.redis.url
        # Workers run only what a dispatcher signed with it (toolhub/distributed/signing.py),
        # so a Redis write alone runs nothing. Generated per run unless given; never shown.
        fleet_key = os.environ.get("TOOLHUB_FLEET_KEY") or secrets.token_urlsafe(32)
        key_file = self.run_dir / "fleet.key"
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(fleet_key)
        base = {
            "TOOLHUB_REDIS_URL": url,
            "TOOLHUB_WORKSPACE": str(self.workspace),
            "TOOLHUB_FLEET_KEY": fleet_key,
        }
        if self.config is not None:
            base["TOOLHUB_CONFIG"] = str(self.config)
        started: list[tuple[Child, Path]] = []
        metrics_urls: list[str] = []
        for index, queues in enumerate(queue_plan(self.workers), 1):
            heartbeat = self.run_dir / f"worker-{index}.heartbeat"
            metrics_port = self._metrics_port(index)
            if metrics_port:
                metrics_urls.append(f"http://{HOST}:{metrics_port}/metrics")
            env = {
                **base,
                "TOOLHUB_HEARTBEAT_FILE": str(heartbeat),
                "TOOLHUB_METRICS_PORT": str(metrics_port),
                "TOOLHUB_METRICS_HOST": HOST,
                "TOOLHUB_SOFT_SHUTDOWN_SECONDS": os.environ.get(
                    "TOOLHUB_SOFT_SHUTDOWN_SECONDS", LOCAL_SOFT_SHUTDOWN_S
                ),
            }
            argv = [
                *toolhub_command(),
                "worker",
                f"--queues={','.join(queues)}",
                "--loglevel=WARNING",
            ]
            started.append((self._spawn(f"worker-{index}", argv, env, grace=20), heartbeat))
        for child, heartbeat in started:
            self._await(child, deadline, partial(_heartbeat_ready, heartbeat))
        gateway_url = f"http://{HOST}:{self.port}"
        serve = [*toolhub_command(), "serve", "--host", HOST, "--port", str(self.port)]
        gateway = self._spawn("gateway", serve, base, grace=10)
        self._await(gateway, deadline, lambda: _http_ok(f"{gateway_url}/readyz"))
        flower_url = user = password = None
        if self.flower_port is not None and find_spec("flower") is None:
            self.report(
                "Flower is not installed (pip install 'toolhub[stack]'): starting without it"
            )
        elif self.flower_port is not None:
            flower_url, user, password = self._start_flower(url, deadline)
        self.info = StackInfo(
            url,
            gateway_url,
            flower_url,
            user,
            password,
            self.run_dir,
            tuple(metrics_urls),
            key_file,
        )
        return self.info

    def _metrics_port(self, index: int) -> int:
        """Worker ``index``'s metrics port, or 0. A port in use is reported and skipped (the
        worker would log it and run without metrics anyway): metrics never block the stack."""
        if not self.metrics_port:
            return 0
        port = self.metrics_port + index - 1
        if not port_free(port):
            self.report(f"metrics port {port} is in use: worker-{index} serves no metrics")
            return 0
        return port

    def _start_flower(self, redis_url: str, deadline: float) -> tuple[str, str, str]:
        credentials = os.environ.get("FLOWER_BASIC_AUTH") or f"toolhub:{secrets.token_urlsafe(12)}"
        user, _, password = credentials.split(",")[0].partition(":")
        argv = [
            sys.executable,
            "-m",
            "celery",
            "--app",
            "workers.app:app",
            "flower",
            f"--port={self.flower_port}",
            f"--address={HOST}",
            f"--tasks_columns={os.environ.get('FLOWER_TASKS_COLUMNS') or FLOWER_TASKS_COLUMNS}",
        ]
        env = {"TOOLHUB_REDIS_URL": redis_url, "FLOWER_BASIC_AUTH": credentials}
        flower = self._spawn("flower", argv, env, grace=5)
        url = f"http://{HOST}:{self.flower_port}"
        self._await(flower, deadline, lambda: _http_ok(f"{url}/healthcheck", auth=(user, password)))
        return url, user, password

    def _spawn(self, name: str, argv: list[str], env: dict[str, str], *, grace: float) -> Child:
        spec = ChildSpec(name, argv, self.run_dir / f"{name}.log", env, self.workspace, grace)
        return self.supervisor.add(spec)

    def _redis_ready(self) -> bool:
        assert self.redis is not None
        try:
            self.redis.wait_ready(timeout=0.2)
        except (TimeoutError, RuntimeError):
            return False
        return True

    def _await(self, child: Child, deadline: float, ready: Callable[[], bool]) -> None:
        """Wait for ``ready``; a child that exits before it is ready fails the start, and so
        does an interruption (the caller's Ctrl-C)."""
        while not ready():
            if self.interrupted():
                raise StartInterrupted(f"interrupted while {child.spec.name} was starting")
            exited = child.proc is not None and child.proc.poll() is not None
            if exited or child.failures:
                raise StackError(f"{child.spec.name} exited during startup:\n{child.tail()}")
            if time.monotonic() > deadline:
                raise StackError(f"{child.spec.name} was not ready in time:\n{child.tail()}")
            time.sleep(0.1)

    def stop(self) -> None:
        self.supervisor.stop_all()

    def __enter__(self) -> StackInfo:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _heartbeat_ready(path: Path) -> bool:
    try:
        return path.read_text().strip() == "ready"
    except OSError:
        return False


def _http_ok(url: str, auth: tuple[str, str] | None = None) -> bool:
    try:
        return httpx.get(url, auth=auth, timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False
