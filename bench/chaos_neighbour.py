"""``make chaos``'s noisy-neighbour scenario (issue 38): one tenant attacks the fleet five ways
at once while another runs an ordinary workload. Did every call of the well-behaved tenant
succeed, and did any toolhub process die?

    .venv/bin/python bench/chaos_neighbour.py [--seconds 60] [--forks 1500]
                                              [--attacks memory,fork,...] [--keep]

Starts ``toolhub up``'s stack (``toolhub.stack.local.LocalStack``: Redis, two workers, the
gateway, Flower when installed) with one API key for each of two tenants (``toolhub keys
create``). Then, at once, each attack in its own thread with its own sessions, tenant ``noisy``:

* memory bomb: commands that start 40 processes holding 90 MB each, one after another;
* fork bomb: commands that each start ``--forks`` sleeping processes, 3 at a time (bounded: an
  unbounded bomb would take down the machine running the scenario wherever no pid limit holds);
* output flood: commands printing 3 MB each, 8 at a time;
* session flood: new sessions, as fast as the gateway answers;
* background-task flood: 600 background commands from one session;

while tenant ``good`` makes one small command and one file read after another, in one session,
for ``--seconds``. Every request of the attacks is counted by its outcome (HTTP status, or the
result's error kind): what the branch contains shows there. Every toolhub process is checked at
the end: still its first pid, or died (exited, or restarted by the supervisor).

Prints the report; exits non-zero unless every good call succeeded and no process died. Run it
where a runaway can hurt nothing else: a container-sized cgroup, as the issue's was (3 GiB, 3000
pids, 1.5 CPUs); the containment itself is issue 38's kernel, bytes and quotas work.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from toolhub.ports import free_port  # noqa: E402
from toolhub.stack.local import LocalStack, toolhub_command  # noqa: E402

MEMORY_BOMB = "for i in $(seq 40); do head -c 90M /dev/zero | tail > /dev/null & done; wait"
FORK_BOMB = "for i in $(seq {n}); do sleep 30 & done; wait"
OUTPUT_FLOOD = "head -c 3000000 /dev/zero | tr '\\0' x"
GOOD_COMMAND = "echo good > note.txt && cat note.txt"


def outcome(response: httpx.Response) -> str:
    """An HTTP status, or for a call answered 200 the result's error kind (``ok`` if none)."""
    if response.status_code != 200:
        return f"HTTP {response.status_code}"
    body = response.json()
    if not body.get("is_error"):
        return "ok"
    return str((body.get("error") or {}).get("kind") or "error")


class Tenant:
    """One tenant's HTTP client on the gateway."""

    def __init__(self, url: str, key: str) -> None:
        self.http = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=900
        )

    def session(self) -> httpx.Response:
        return self.http.post("/v1/sessions", json={})

    def new_session(self) -> str:
        response = self.session()
        response.raise_for_status()
        return str(response.json()["session_id"])

    def bash(self, sid: str, command: str, *, background: bool = False) -> httpx.Response:
        arguments = {"command": command, "description": "chaos", "is_background": background}
        return self.http.post(
            f"/v1/sessions/{sid}/calls", json={"name": "bash", "arguments": arguments}
        )

    def read(self, sid: str, path: str) -> httpx.Response:
        return self.http.post(
            f"/v1/sessions/{sid}/calls", json={"name": "read_file", "arguments": {"path": path}}
        )


class Tally:
    """Outcomes per attack, shared by the attack threads."""

    def __init__(self) -> None:
        self.counts: dict[str, Counter[str]] = {}
        self._lock = threading.Lock()

    def add(self, attack: str, result: str) -> None:
        with self._lock:
            self.counts.setdefault(attack, Counter())[result] += 1

    def attempt(self, attack: str, request: Callable[[], httpx.Response]) -> None:
        try:
            self.add(attack, outcome(request()))
        except httpx.HTTPError as exc:
            self.add(attack, f"transport: {type(exc).__name__}")


#: The attacks, by the name ``--attacks`` takes.
ATTACKS = ("memory", "fork", "output", "sessions", "background")


def attacks(
    noisy: Tenant, tally: Tally, stop: threading.Event, forks: int
) -> dict[str, Callable[[], None]]:
    """The attacks by name, each a function its own thread runs until ``stop`` (or done)."""

    def repeat(attack: str, command: str, parallel: int) -> Callable[[], None]:
        def run() -> None:
            sid = noisy.new_session()

            def one() -> None:
                while not stop.is_set():
                    tally.attempt(attack, lambda: noisy.bash(sid, command))

            with ThreadPoolExecutor(parallel) as pool:
                for _ in range(parallel):
                    pool.submit(one)

        return run

    def sessions() -> None:
        while not stop.is_set():
            tally.attempt("session flood", noisy.session)

    def background() -> None:
        sid = noisy.new_session()
        for _ in range(600):
            if stop.is_set():
                return
            tally.attempt("background flood", lambda: noisy.bash(sid, "sleep 60", background=True))

    return {
        "memory": repeat("memory bomb", MEMORY_BOMB, 1),
        "fork": repeat("fork bomb", FORK_BOMB.format(n=forks), 3),
        "output": repeat("output flood", OUTPUT_FLOOD, 8),
        "sessions": sessions,
        "background": background,
    }


def good_workload(good: Tenant, seconds: float) -> Counter[str]:
    sid = good.new_session()
    results: Counter[str] = Counter()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for request in (lambda: good.bash(sid, GOOD_COMMAND), lambda: good.read(sid, "note.txt")):
            try:
                results[outcome(request())] += 1
            except httpx.HTTPError as exc:
                results[f"transport: {type(exc).__name__}"] += 1
    return results


def create_key(home: Path, tenant: str) -> str:
    argv = [*toolhub_command(), "keys", "create", "--file", str(home / "keys.json")]
    done = subprocess.run(
        [*argv, "--tenant", tenant, "--name", f"{tenant}-chaos"],
        capture_output=True,
        text=True,
        check=True,
        env=os.environ,
    )
    return done.stdout.strip().splitlines()[-1]


def run(
    home: Path,
    seconds: float,
    forks: int,
    say: Callable[[str], None] = print,
    chosen: tuple[str, ...] = ATTACKS,
) -> bool:
    """The scenario with the ``chosen`` attacks; whether every good call succeeded and no
    toolhub process died."""
    os.environ.update(
        {
            "TOOLHUB_HOME": str(home),
            "TOOLHUB_KEYS_FILE": str(home / "keys.json"),
            **({"TOOLHUB_ALLOW_ROOT": "1"} if os.geteuid() == 0 else {}),
        }
    )
    home.mkdir(parents=True, exist_ok=True)
    keys = {tenant: create_key(home, tenant) for tenant in ("noisy", "good")}
    workspace = home / "workspace"
    workspace.mkdir()
    died: list[str] = []
    stack = LocalStack(
        workers=2, port=free_port(), flower_port=free_port(), metrics_port=0,
        workspace=workspace, report=lambda line: died.append(line) if "exited" in line else None,
    )  # fmt: skip
    info = stack.start()
    first = {child.spec.name: child.pid for child in stack.supervisor.children}
    say(f"stack up: {', '.join(f'{name} {pid}' for name, pid in first.items())}")
    tally, stop = Tally(), threading.Event()
    noisy, good = Tenant(info.gateway_url, keys["noisy"]), Tenant(info.gateway_url, keys["good"])
    threads = [
        threading.Thread(target=attack, daemon=True)
        for name, attack in attacks(noisy, tally, stop, forks).items()
        if name in chosen
    ]
    try:
        for thread in threads:
            thread.start()
        results = good_workload(good, seconds)
        stop.set()
        for thread in threads:
            thread.join(timeout=120)
        after = {
            child.spec.name: (child.pid, child.alive, child.restarts)
            for child in stack.supervisor.children
        }
    finally:
        stop.set()
        stack.stop()
    return report(results, tally, first, after, died, say)


def report(
    results: Counter[str],
    tally: Tally,
    first: dict[str, int | None],
    after: dict[str, tuple[int | None, bool, int]],
    died: list[str],
    say: Callable[[str], None],
) -> bool:
    good_total, good_ok = sum(results.values()), results["ok"]
    say(f"\ngood tenant: {good_ok} of {good_total} calls succeeded ({dict(results)})")
    say("noisy tenant, per attack (outcome: requests):")
    for attack, counts in sorted(tally.counts.items()):
        say(f"  {attack}: {dict(counts.most_common())}")
    dead = [
        name
        for name, (pid, alive, restarts) in after.items()
        if not alive or restarts or pid != first.get(name)
    ]
    say("toolhub processes: " + ", ".join(
        f"{name} {'died' if name in dead else 'alive'}" for name in after
    ))  # fmt: skip
    for line in died:
        say(f"  supervisor: {line}")
    ok = good_total > 0 and good_ok == good_total and not dead
    calls = "every good call succeeded" if good_ok == good_total else "good calls failed"
    procs = "no toolhub process died" if not dead else "died: " + ", ".join(dead)
    say(f"\nnoisy neighbour: {calls}, {procs}: {'PASS' if ok else 'MISS'}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--forks", type=int, default=1500)
    parser.add_argument(
        "--attacks", default=",".join(ATTACKS), help=f"some of {','.join(ATTACKS)} (all)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    chosen = tuple(name for name in args.attacks.split(",") if name)
    if set(chosen) - set(ATTACKS):
        parser.error(f"--attacks: choose among {', '.join(ATTACKS)}")
    home = Path(tempfile.mkdtemp(prefix="toolhub-neighbour-"))
    try:
        ok = run(home, args.seconds, args.forks, lambda t: print(t, flush=True), chosen)
        return 0 if ok else 1
    finally:
        if args.keep:
            print(f"work directory kept: {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
