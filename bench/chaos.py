"""``make chaos``: calls with side effects under faults, against toolhub and vanilla Celery.

    .venv/bin/python bench/chaos.py [--quick] [--calls N] [--kills N] [--burst N] [--lease S]
                                    [--hung-after S] [--no-celery] [--no-neighbour] [--keep]
                                    [--faults all|none|a,b] [--no-main]

Each call is a ``bash`` command that appends one line per run to its own side-effect file
(0 lines: lost, 2+: duplicated) and sleeps (a recognisable process: its environment names the
call). Calls go out in bursts while a chaos thread SIGKILLs a random worker every few seconds
(the harness plays the supervisor and restarts it), SIGKILLs Redis once and restarts it on the
same port (append-only file), and SIGKILLs the dispatcher once (a new one collects the old
one's calls by id). Before the load, a take-before-claim probe freezes a worker until it holds
a message it has not claimed, then SIGKILLs it (``chaos_probe.py``; Celery's side: a SIGKILL
30-90 ms after the burst); during the load, a background command runs through a SIGKILL of its
worker.
The same calls and faults then hit a plain Celery app (late acks, reject on worker lost).
Then (not in ``--quick``) the noisy-neighbour scenario of issue 38 (``chaos_neighbour.py``): one
tenant's memory bomb, fork bomb, output flood, session flood and background-task flood beside
another tenant's workload, which must all succeed with no toolhub process dying.
Then the fault scenarios of issue 45 (``chaos_faults.py``): each its own fleet and one fault class.

Prints both systems side by side and exits non-zero when toolhub misses a bar:
0 hung, 0 lost, 0 duplicates it does not announce, 0 orphan processes, 0 workers lost to the
Redis restart, the background output intact through the kill, the probe's calls answered
within one lease of the kill.

Modules: ``chaos_plan`` (profiles, calls, faults), ``chaos_procs`` (supervisor, processes,
scanner), ``chaos_toolhub`` (with ``chaos_dispatcher``, the process that submits the calls, and
``chaos_probe``), ``chaos_celery``, ``chaos_report`` (scoring, table). The ``quick`` profile runs
in ``make test`` (tests/distributed/test_chaos.py).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.chaos_plan import PROFILES, Profile  # noqa: E402
from bench.chaos_report import Score, details, table  # noqa: E402


def bars(score: Score, profile: Profile) -> list[str]:
    """What toolhub misses of the "done when" bars (empty: all met)."""
    missed = []
    hung = score.count("hung")
    if hung:
        missed.append(f"{hung} hung")
    if score.lost:
        missed.append(f"{len(score.lost)} lost side effects")
    if score.dup_unsaid:
        missed.append(f"{len(score.dup_unsaid)} unsaid duplicated side effects")
    if score.orphans:
        missed.append(f"{len(score.orphans)} orphan processes")
    if score.workers_lost:
        missed.append(f"{len(score.workers_lost)} workers lost (exited on their own)")
    if score.worker_kills < profile.kills:
        missed.append(f"only {score.worker_kills} of {profile.kills} worker SIGKILLs done")
    if profile.redis_restart_at is not None and score.redis_restarts < 1:
        missed.append("the Redis restart did not happen")
    if profile.dispatcher_kill_at is not None and score.dispatcher_kills < 1:
        missed.append("the dispatcher SIGKILL did not happen")
    if profile.background_seconds:
        bg = score.background
        if bg is None or bg.get("error"):
            missed.append("background command: no result")
        else:
            if not bg.get("killed_after"):
                missed.append("background command: its worker was not killed")
            if not bg["output_ok"]:
                missed.append(f"background output not 1..{bg['n']}: {bg['output']!r}")
            if not bg["ran_once"]:
                missed.append(f"background command restarted: side effects {bg['sidefx']!r}")
    if profile.probe_burst:
        probe = score.probe
        bound = profile.lease * profile.rerun_bound_leases
        if probe is None or not probe["taken"]:
            missed.append("take-before-claim probe: no message was caught taken before claim")
        elif probe["hung"]:
            missed.append(f"take-before-claim probe: {probe['hung']} never answered")
        elif probe["slowest_start"] is not None and probe["slowest_start"] > bound:
            missed.append(
                f"take-before-claim probe: re-run started {probe['slowest_start']:.1f} s after "
                f"the kill (bound {bound:.1f} s)"
            )
    return missed


def run(profile: Profile, home: Path, say=print) -> list[Score]:
    """Both sides, one after the other, on one Redis server (toolhub db 0, Celery db 1)."""
    from bench.chaos_toolhub import ToolhubChaos
    from toolhub.stack import RedisServer

    scores = []
    say(f"chaos run, profile {profile.name}: {profile}")
    redis = RedisServer(persistent=True, data_dir=home / "redis").start()
    try:
        started = time.monotonic()
        scores.append(ToolhubChaos(profile, home / "toolhub", say).run(redis))
        say(f"toolhub side done in {time.monotonic() - started:.0f} s")
        if profile.celery:
            from bench.chaos_celery import CeleryChaos

            started = time.monotonic()
            scores.append(CeleryChaos(profile, home / "celery", say).run(redis))
            say(f"Celery side done in {time.monotonic() - started:.0f} s")
    finally:
        redis.stop()
    return scores


def main_run(profile: Profile, home: Path) -> list[str]:
    """The side-by-side run; returns the bars toolhub missed."""
    scores = run(profile, home, say=lambda text: print(text, flush=True))
    print()
    print(table(scores))
    for score in scores:
        text = details(score)
        if text:
            print(text)
    return bars(scores[0], profile)


def fault_scenarios(home: Path, which: str) -> list[str]:
    """The fault scenarios of ``bench/chaos_faults.py``; returns what they missed."""
    from bench.chaos_faults import run_all
    from bench.chaos_faults import table as fault_table

    only = None if which == "all" else {name.strip() for name in which.split(",")}
    verdicts = run_all(home, say=lambda text: print(text, flush=True), only=only)
    if verdicts:
        print()
        print(fault_table(verdicts))
    return [f"{v.name}: {m}" for v in verdicts for m in v.missed]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the bounded profile (make test)")
    parser.add_argument("--calls", type=int)
    parser.add_argument("--kills", type=int)
    parser.add_argument("--burst", type=int)
    parser.add_argument("--lease", type=float)
    parser.add_argument("--hung-after", type=float)
    parser.add_argument("--no-celery", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument(
        "--no-neighbour", action="store_true", help="skip the noisy-neighbour scenario"
    )
    parser.add_argument(
        "--faults",
        default="all",
        help="fault scenarios to run after the main run: all, none, or names joined by commas",
    )
    parser.add_argument("--no-main", action="store_true", help="only the fault scenarios")
    args = parser.parse_args(argv)
    profile = PROFILES["quick" if args.quick else "full"]
    changes = {
        key: value
        for key, value in (
            ("calls", args.calls),
            ("kills", args.kills),
            ("burst", args.burst),
            ("lease", args.lease),
            ("hung_after", args.hung_after),
        )
        if value is not None
    }
    if args.no_celery:
        changes["celery"] = False
    profile = profile.with_(**changes)
    home = Path(tempfile.mkdtemp(prefix="toolhub-chaos-"))
    try:
        missed = [] if args.no_main else main_run(profile, home)
        if not args.quick and not args.no_neighbour and not args.no_main:
            from bench.chaos_neighbour import run as neighbour

            print("\nnoisy-neighbour scenario (bench/chaos_neighbour.py)", flush=True)
            if not neighbour(home / "neighbour", 60.0, 1500, say=lambda t: print(t, flush=True)):
                missed.append("noisy neighbour: a good call failed or a toolhub process died")
        if not args.quick and args.faults != "none":
            missed += fault_scenarios(home / "faults", args.faults)
        print()
        if missed:
            print("toolhub misses: " + "; ".join(missed))
        else:
            print("toolhub meets every bar")
        return 1 if missed else 0
    finally:
        if args.keep:
            print(f"work directory kept: {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
