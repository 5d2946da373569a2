"""The fleet the lease fault scenarios (``chaos_fault_partition``, ``chaos_fault_redis_full``)
run on: a redis-server and toolhub workers under ``home``, any of them reaching Redis through a
freezable TCP proxy (``tests/tcp_proxy.py``), with a short lease; plus the marked command whose
side-effect file records when each run started and ended.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.fixtures_stack import WorkerProcess  # noqa: E402
from tests.tcp_proxy import FreezableProxy  # noqa: E402
from toolhub.stack import RedisServer  # noqa: E402


class Fleet:
    """Redis and ``workers`` workers (``proxied`` of them behind one proxy each)."""

    def __init__(
        self, home: Path, workers: int, lease: float, proxied: int = 0, concurrency: int = 4
    ) -> None:
        self.home = home
        self.lease = lease
        self.env = {"TOOLHUB_LEASE_SECONDS": f"{lease:g}"}
        self.redis = RedisServer(data_dir=home / "redis").start()
        self.proxies: list[FreezableProxy] = []
        self.workers: list[WorkerProcess] = []
        for i in range(workers):
            url = self.redis.url
            if i < proxied:
                proxy = FreezableProxy(("127.0.0.1", self.redis.port))
                self.proxies.append(proxy)
                url = proxy.url()
            wdir = home / f"w{i + 1}"  # a holder per (home, URL): each worker its own
            wdir.mkdir(parents=True, exist_ok=True)
            self.workers.append(
                WorkerProcess(f"w{i + 1}", url, wdir, concurrency=concurrency, env=self.env)
            )
        self._saved = {key: os.environ.get(key) for key in self.env}
        os.environ.update(self.env)
        for worker in self.workers:
            worker.start()
        for worker in self.workers:
            worker.wait_ready()

    @property
    def url(self) -> str:
        return self.redis.url

    def pause(self, workers: list[WorkerProcess], on: bool) -> None:
        """SIGSTOP (``on``) or SIGCONT ``workers``: so the others take what is sent now."""
        for worker in workers:
            worker.signal(signal.SIGSTOP if on else signal.SIGCONT)

    def logs(self) -> str:
        return "\n".join(w.log_path.read_text(errors="replace") for w in self.workers)

    def stop(self) -> None:
        from toolhub.distributed.shared import close_shared_backends

        for proxy in self.proxies:
            proxy.thaw()
        close_shared_backends()
        for worker in self.workers:
            worker.signal(signal.SIGCONT)
            worker.stop()
        for proxy in self.proxies:
            proxy.close()
        self.redis.stop()
        for key, value in self._saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def timed_command(run_tag: str, cid: str, sidefx: Path, first_s: float, rerun_s: float) -> str:
    """Appends ``start <time>`` to the call's side-effect file, sleeps ``first_s`` on its
    first run (``rerun_s`` once the file had a line), then appends ``end <time>``. Its
    processes carry ``CHAOS_RUN``/``CHAOS_CALL`` (``chaos_procs.ProcessScanner`` finds them)."""
    path = sidefx / cid
    return (
        f"export CHAOS_RUN={run_tag} CHAOS_CALL={cid}; f={path}; "
        "echo start $(date +%s.%N) >> $f; "
        f'if [ "$(grep -c start $f)" -gt 1 ]; then sleep {rerun_s:.2f}; '
        f"else sleep {first_s:.2f}; fi; echo end $(date +%s.%N) >> $f"
    )


def runs_of(sidefx: Path, cid: str) -> list[tuple[str, float]]:
    """The (``start``|``end``, time) lines of a call's side-effect file."""
    try:
        lines = (sidefx / cid).read_text().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        word, _, at = line.partition(" ")
        out.append((word, float(at)))
    return out


def bash(command: str, **extra: Any) -> dict[str, Any]:
    return {"command": command, "description": "chaos call", **extra}


def work_dirs(home: Path, prefix: str) -> tuple[Path, Path, str]:
    """A scenario's workspace, its side-effect directory in it, and a tag unique to this run
    (what its commands' environments carry, for the process scanner)."""
    workspace = home / "ws"
    sidefx = workspace / "sidefx"
    sidefx.mkdir(parents=True, exist_ok=True)
    return workspace, sidefx, f"{prefix}{os.getpid()}x{int(time.time())}"
