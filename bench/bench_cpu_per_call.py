"""CPU per call, by process, against the floor a bare Redis worker sets, raw Celery and Ray.

    .venv/bin/python bench/bench_cpu_per_call.py [--calls 1000] [--bash-calls 200] [--rounds 3]

(Not ``bench_costs.py``: that one measures how cost grows with tool sets, sessions and task
history; this one what a call costs the machine.)

On one redis-server, in the same run, each side answers bursts of concurrent calls (all in
flight at once) from this process: a no-op, and ``bash -c true``:

* toolhub: two ``toolhub worker`` processes (threads, concurrency 4); the command runs in the
  sandbox (bwrap/Landlock, as in production);
* the floor: two ``floor_worker.py`` processes, one ``BRPOP`` and one ``PUBLISH`` a call with
  redis-py and nothing else; the caller ``LPUSH``es each call and reads the replies on one
  subscription (its command runs unsandboxed);
* raw Celery: two workers of ``celery_baseline.py`` (threads, concurrency 4, Redis result
  backend; the command unsandboxed);
* Ray, when it can be imported: ``@ray.remote`` tasks on a local ``ray.init(num_cpus=2)``;
  printed, not judged (its own processes stand in for workers and Redis both).

CPU is read around each burst: the caller from ``/proc/self/stat``, each side's worker
processes and all their descendants from ``/proc/<pid>/stat`` (user + system, with the children
they reaped: a command's process is counted in its parent), Redis from ``INFO cpu``. Sides go in
turn, then in reverse, per round; each figure is the median of its bursts. Targets (issue 43):
toolhub's no-op CPU per call (caller + workers + Redis) <= 2.5x the floor's and <= 0.5x raw
Celery's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil
from redis import Redis

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.bench_distributed import Baseline  # noqa: E402
from bench.floor_worker import QUEUE, REPLIES  # noqa: E402
from tests.distributed.plugin_tools import CONFIG, TOOLS  # noqa: E402
from tests.fixtures_stack import STACK_ENV, Stack  # noqa: E402
from toolhub import Session, ToolSetBuilder  # noqa: E402
from toolhub.tools import CATALOG  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
GROUPS = ("caller", "workers", "Redis")
BASH = {"command": "true", "description": "true"}
#: (measure, bound, lower is better): toolhub's no-op total against each baseline's.
TARGETS = (("floor", 2.5), ("raw Celery", 0.5))


def proc_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and of the children it reaped (``/proc/<pid>/stat``)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    # After the command name: state is field 3; utime, stime, cutime, cstime are 14-17.
    return sum(int(v) for v in fields[11:15]) / TICK


def tree_cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            kids = [c.pid for c in psutil.Process(pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            kids = []
        total += sum(proc_cpu(p) for p in [pid, *kids])
    return total


def redis_cpu(client: Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


class Meter:
    """Reads the CPU of the caller, one side's workers and Redis around a burst."""

    def __init__(self, workers: Callable[[], list[int]], redis: Redis | None) -> None:
        self.workers = workers
        self.redis = redis

    def read(self) -> dict[str, float]:
        return {
            "caller": proc_cpu(os.getpid()),
            "workers": tree_cpu(self.workers()),
            "Redis": redis_cpu(self.redis) if self.redis is not None else 0.0,
        }

    def burst(self, run: Callable[[], None], calls: int) -> dict[str, float]:
        """Microseconds per call of each group over ``run``."""
        before = self.read()
        run()
        after = self.read()
        return {g: (after[g] - before[g]) / calls * 1e6 for g in GROUPS}


class Floor:
    """Two floor workers and the caller's side of their protocol."""

    def __init__(self, url: str, home: Path) -> None:
        self.url = url
        self.home = home
        self.procs: list[subprocess.Popen[bytes]] = []
        self.client = Redis.from_url(url)
        self.sub = self.client.pubsub()

    def start(self, workers: int = 2) -> Floor:
        for i in range(workers):
            log = (self.home / f"floor{i}.log").open("ab")
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, str(REPO / "bench" / "floor_worker.py"), self.url],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        self.sub.subscribe(REPLIES)
        self.sub.get_message(timeout=5)
        self.burst(20, "noop")
        return self

    def burst(self, n: int, kind: str) -> None:
        for i in range(n):
            self.client.lpush(QUEUE, f"{i}|{kind}")
        seen = 0
        deadline = time.monotonic() + 120
        while seen < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"floor: {seen} of {n} replies")
            message = self.sub.get_message(timeout=1)
            if message and message["type"] == "message":
                seen += 1

    def stop(self) -> None:
        self.sub.close()
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.wait(10)


def celery_burst(n: int, queue: str, kind: str) -> None:
    from bench.celery_baseline import bash_true, noop

    task = noop if kind == "noop" else bash_true
    results = [task.apply_async(queue=queue) for _ in range(n)]
    for result in results:
        result.get(timeout=120)


async def toolhub_burst(session: Session, n: int, kind: str, tag: str) -> None:
    name, args = ("noop", {}) if kind == "noop" else ("bash", BASH)
    results = await asyncio.gather(
        *(session.call(name, args, call_id=f"{tag}-{i}") for i in range(n))
    )
    bad = [r.prompt_text for r in results if r.is_error]
    assert not bad, bad[:3]


class RaySide:
    """A local Ray on this machine's cores, or the reason it cannot run."""

    def __init__(self) -> None:
        self.reason = ""
        self.ray = None
        try:
            import ray
        except ImportError as exc:
            self.reason = f"ray cannot be imported ({exc}); `pip install ray` to compare"
            return
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        except Exception as exc:  # a local cluster that will not start is a note, not a failure
            self.reason = f"ray.init failed: {exc}"
            return
        self.ray = ray

        @ray.remote
        def noop() -> None:
            return None

        @ray.remote
        def bash_true() -> None:
            subprocess.run(["bash", "-c", "true"], check=False)

        self.tasks = {"noop": noop, "bash": bash_true}
        self.burst(50, "noop")

    def pids(self) -> list[int]:
        """Every process Ray started (GCS, raylet, its workers): children of this one."""
        return [c.pid for c in psutil.Process().children() if "ray" in " ".join(c.cmdline())]

    def burst(self, n: int, kind: str) -> None:
        assert self.ray is not None
        task = self.tasks[kind]
        self.ray.get([task.remote() for _ in range(n)], timeout=300)

    def stop(self) -> None:
        if self.ray is not None:
            self.ray.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--bash-calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()

    production = {"TOOLHUB_LEASE_SECONDS": "15"}
    os.environ.update({**STACK_ENV, **production})
    stack = Stack(workers=2, env=production).start()
    os.environ["BENCH_REDIS_URL"] = stack.url
    redis = Redis.from_url(stack.url)
    workspace = Path(tempfile.mkdtemp(prefix="bench-cpu-"))
    builder = ToolSetBuilder(CATALOG, plugins=False).register(*TOOLS)
    command_tools = ("Main:bash", "Main:task_output", "Main:kill_task")
    config = {"tools": [*CONFIG["tools"], *({"id": i} for i in command_tools)]}
    session = Session.connect(stack.url, config, workspace, builder=builder)
    celery = Baseline(stack.url, stack.home, events=False)
    floor = Floor(stack.url, stack.home)
    ray: RaySide | None = None
    loop = asyncio.new_event_loop()
    #: (side, kind) -> one dict of microseconds per group per burst
    seen: dict[tuple[str, str], list[dict[str, float]]] = {}
    try:
        celery.start()
        floor.start()
        celery.activate()
        celery_burst(20, celery.queue, "noop")
        loop.run_until_complete(toolhub_burst(session, 20, "noop", "warm"))
        loop.run_until_complete(toolhub_burst(session, 5, "bash", "warm-bash"))
        meters = {
            "toolhub": Meter(lambda: [w.pid for w in stack.workers], redis),
            "floor": Meter(lambda: [p.pid for p in floor.procs], redis),
            "raw Celery": Meter(lambda: [p.pid for p in celery.procs], redis),
        }
        for r in range(args.rounds):
            for kind, n in (("noop", args.calls), ("bash", args.bash_calls)):
                runs: dict[str, Callable[[], None]] = {
                    "toolhub": lambda n=n, kind=kind, r=r: loop.run_until_complete(
                        toolhub_burst(session, n, kind, f"{kind}{r}-{time.monotonic_ns()}")
                    ),
                    "floor": lambda n=n, kind=kind: floor.burst(n, kind),
                    "raw Celery": lambda n=n, kind=kind: celery_burst(n, celery.queue, kind),
                }
                order = list(runs)
                for side in [*order, *reversed(order)]:
                    seen.setdefault((side, kind), []).append(meters[side].burst(runs[side], n))
        if not args.no_ray:
            ray = RaySide()
            if ray.ray is not None:
                meter = Meter(ray.pids, None)
                for _ in range(args.rounds):
                    for kind, n in (("noop", args.calls), ("bash", args.bash_calls)):
                        run = lambda n=n, kind=kind: ray.burst(n, kind)  # noqa: E731
                        seen.setdefault(("Ray", kind), []).append(meter.burst(run, n))
    finally:
        loop.close()
        if ray is not None:
            ray.stop()
        floor.stop()
        if celery.procs:
            celery.stop()
        session.close()
        stack.stop()
    return report(seen, args, ray)


def report(
    seen: dict[tuple[str, str], list[dict[str, float]]],
    args: argparse.Namespace,
    ray: RaySide | None,
) -> int:
    med = statistics.median

    def total(side: str, kind: str) -> float:
        return med(sum(b.values()) for b in seen[(side, kind)])

    print("| side | call | caller | workers | Redis | total CPU per call |")
    print("|---|---|---|---|---|---|")
    for (side, kind), bursts in seen.items():
        cells = " | ".join(f"{med(b[g] for b in bursts):.0f} us" for g in GROUPS)
        if side == "Ray":
            cells = f"{med(b['caller'] for b in bursts):.0f} us | (Ray's processes) " + (
                f"{med(b['workers'] for b in bursts):.0f} us | —"
            )
        label = "no-op" if kind == "noop" else "`bash -c true`"
        print(f"| {side} | {label} | {cells} | {total(side, kind):.0f} us |")
    print(
        f"\nbursts of {args.calls} concurrent no-op calls and {args.bash_calls} `bash -c true`, "
        f"median of {2 * args.rounds} bursts a side (in turn, then reversed, per round); "
        f"toolhub's command sandboxed, the others' not; {os.cpu_count()} CPUs. Ray: "
        + (
            "median of its bursts after the others (printed, not judged)."
            if ray is not None and ray.ray is not None
            else (ray.reason if ray is not None else "skipped (--no-ray).")
        )
    )
    ours = total("toolhub", "noop")
    met = True
    for base, bound in TARGETS:
        ratios = [
            sum(a.values()) / sum(b.values())
            for a, b in zip(seen[("toolhub", "noop")], seen[(base, "noop")], strict=True)
        ]
        ratio = ours / total(base, "noop")
        ok = ratio <= bound
        met = met and ok
        print(
            f"toolhub no-op CPU per call / {base}'s: {ratio:.2f}x (bursts "
            f"{', '.join(f'{x:.2f}x' for x in ratios)}); target <= {bound}x: "
            f"{'PASS' if ok else 'MISS'}"
        )
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
