"""A real distributed stack for tests: a ``redis-server`` on a free port and ``toolhub worker``
subprocesses, shared across a test session (starting them costs seconds; the tests that break
things restart what they broke).

Workers get short leases and a short soft-shutdown window from the environment so failure
drills finish in seconds; the dispatcher in the test process reads the same variables.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from toolhub.ports import free_port
from toolhub.stack import RedisServer

REPO = Path(__file__).resolve().parent.parent
TOOLHUB = str(Path(sys.executable).with_name("toolhub"))

#: The workers' operator policy: the defaults, plus what the distributed MCP tests need.
FLEET_POLICY = REPO / "tests" / "fleet_policy.yaml"

#: Shared by the test process (dispatchers) and the workers.
STACK_ENV = {
    "TOOLHUB_LEASE_SECONDS": "1.5",
    "TOOLHUB_MAX_ATTEMPTS": "3",
    "TOOLHUB_SOFT_SHUTDOWN_SECONDS": "3",
    "TOOLHUB_FOLLOW_OUTAGE_SECONDS": "20",
    "TOOLHUB_PLUGINS": (
        "tests.distributed.plugin_tools,tests.distributed.plugin_subagents,"
        "tests.distributed.plugin_usage"
    ),
    # The tests, benches and chaos runs start their own workers: whoever runs them as root (CI
    # here) is the operator saying so (docs/sandbox.md, "Root").
    **({"TOOLHUB_ALLOW_ROOT": "1"} if os.geteuid() == 0 else {}),
}


class WorkerProcess:
    """One ``toolhub worker`` subprocess with its own heartbeat file and log."""

    def __init__(
        self,
        name: str,
        redis_url: str,
        home: Path,
        concurrency: int = 4,
        env: dict[str, str] | None = None,
        loglevel: str = "WARNING",
        command: list[str] | None = None,
        queues: str | None = None,
    ) -> None:
        """``command``: how to start ``toolhub`` (default: this venv's script), e.g. under
        another user with another interpreter; ``queues``: its ``--queues`` (default: all)."""
        self.name = name
        self.command = command or [TOOLHUB]
        self.redis_url = redis_url
        self.home = home
        self.concurrency = concurrency
        self.env = env or {}
        self.loglevel = loglevel
        self.queues = queues
        self.heartbeat = home / f"{name}.heartbeat"
        self.log_path = home / f"{name}.log"
        #: Its own metrics port (kept across restarts): workers share the host.
        self.metrics_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def start(self) -> WorkerProcess:
        self.heartbeat.unlink(missing_ok=True)
        env = {
            **os.environ,
            **STACK_ENV,
            "TOOLHUB_REDIS_URL": self.redis_url,
            "TOOLHUB_HOME": str(self.home),
            "TOOLHUB_HEARTBEAT_FILE": str(self.heartbeat),
            "TOOLHUB_METRICS_PORT": str(self.metrics_port),
            "TOOLHUB_METRICS_HOST": "127.0.0.1",
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
            "TOOLHUB_POLICY": str(FLEET_POLICY),
            **self.env,
        }
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                *self.command,
                "worker",
                f"--concurrency={self.concurrency}",
                f"--loglevel={self.loglevel}",
                *([f"--queues={self.queues}"] if self.queues else []),
            ],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        return self

    def wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"worker {self.name} exited:\n{self.tail()}")
            try:
                if self.heartbeat.read_text().strip() == "ready":
                    return
            except FileNotFoundError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"worker {self.name} not ready:\n{self.tail()}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        if self.alive:
            assert self.proc is not None
            self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int | None:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        self.signal(signal.SIGTERM)
        self.await_stop()

    def await_stop(self) -> None:
        """Wait for the exit a SIGTERM asked for; SIGKILL after 15 s."""
        if self.alive and self.wait(15) is None:
            self.signal(signal.SIGKILL)
            self.wait(5)

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


class Stack:
    """Redis plus N workers. ``heal()`` restarts any worker a test killed."""

    def __init__(
        self, workers: int = 2, *, persistent: bool = False, env: dict[str, str] | None = None
    ) -> None:
        """``env``: what the workers get beyond ``STACK_ENV`` (which wins over this process's
        own environment, so a bench's settings for its workers go here)."""
        self.home = Path(tempfile.mkdtemp(prefix="toolhub-stack-"))
        self.redis = RedisServer(persistent=persistent, data_dir=self.home / "redis")
        self.workers = [
            WorkerProcess(f"w{i + 1}", self.redis.url, self.home, env=env) for i in range(workers)
        ]

    @property
    def url(self) -> str:
        return self.redis.url

    def start(self) -> Stack:
        self.redis.start()
        for worker in self.workers:
            worker.start()
        for worker in self.workers:
            worker.wait_ready()
        return self

    def heal(self) -> None:
        restarted = [w.start() for w in self.workers if not w.alive]
        for worker in restarted:
            worker.wait_ready()

    def worker_by_pid(self, pid: int) -> WorkerProcess:
        return next(w for w in self.workers if w.alive and w.pid == pid)

    def logs(self) -> str:
        return "\n".join(f"--- {w.name} ---\n{w.tail()}" for w in self.workers)

    def stop(self) -> None:
        from toolhub.distributed.shared import close_shared_backends

        close_shared_backends()
        # All at once: an idle worker takes a second or more to wind down.
        for worker in self.workers:
            worker.signal(signal.SIGTERM)
        for worker in self.workers:
            worker.await_stop()
        self.redis.stop()
        shutil.rmtree(self.home, ignore_errors=True)


_shared: Stack | None = None


def shared_stack(request: pytest.FixtureRequest) -> Stack:
    """The one stack of this test session, started on first use (by the distributed suite or
    the contract tests' ``distributed`` param) and stopped when the session ends. Dead
    workers are restarted on every call."""
    global _shared
    if _shared is None:
        saved = {key: os.environ.get(key) for key in STACK_ENV}
        os.environ.update(STACK_ENV)
        stack = Stack(workers=2)
        _shared = stack

        def stop() -> None:
            global _shared
            stack.stop()
            _shared = None
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

        request.config.add_cleanup(stop)
        stack.start()
    _shared.heal()
    return _shared
