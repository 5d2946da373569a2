"""The scenario of the chaos run: its size (``Profile``), the calls and the fault schedule.

Both systems get the same plan: the same calls (ids, sleeps, burst times) and the same faults
at the same offsets from the start of their phase.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class Profile:
    name: str
    workers: int
    concurrency: int
    lease: float
    calls: int
    burst: int
    burst_every: float
    short_sleep: tuple[float, float]
    #: every ``long_every``-th call sleeps ``long_leases`` leases on its first run
    long_every: int
    long_leases: float
    rerun_sleep: float
    kills: int
    first_kill_at: float
    kill_every: float
    redis_restart_at: float | None
    redis_outage: float
    dispatcher_kill_at: float | None
    background_seconds: int
    probe_burst: int
    #: probes until one catches a message taken before its claim (the window is milliseconds)
    probe_tries: int
    hung_after: float
    celery: bool
    seed: int = 7
    #: how soon after the kill the probe's caught call must run again, in leases: the sweep
    #: re-enqueues it within three quarters of a lease, then a worker must take and start it
    rerun_bound_leases: float = 1.0

    def with_(self, **changes: Any) -> Profile:
        return replace(self, **changes)


FULL = Profile(
    name="full",
    workers=3,
    concurrency=12,
    lease=5.0,
    calls=384,
    burst=64,
    burst_every=4.0,
    short_sleep=(0.2, 2.0),
    long_every=16,
    long_leases=2.5,
    rerun_sleep=0.5,
    kills=7,
    first_kill_at=2.5,
    kill_every=3.5,
    redis_restart_at=11.0,
    redis_outage=1.5,
    dispatcher_kill_at=14.0,
    background_seconds=20,
    probe_burst=64,
    probe_tries=6,
    hung_after=120.0,
    celery=True,
)

#: The bounded version ``make test`` runs: seconds, not minutes. No Redis restart and no
#: Celery side (each costs tens of seconds: workers restart after the outage, and Celery's
#: hung calls only show when the deadline passes); ``make chaos`` runs both.
QUICK = Profile(
    name="quick",
    workers=2,
    concurrency=8,
    lease=1.5,
    calls=40,
    burst=20,
    burst_every=1.5,
    short_sleep=(0.2, 0.8),
    long_every=8,
    long_leases=2.5,
    rerun_sleep=0.3,
    kills=2,
    first_kill_at=2.0,
    kill_every=1.5,
    redis_restart_at=None,
    redis_outage=1.0,
    dispatcher_kill_at=2.6,
    background_seconds=6,
    probe_burst=32,
    probe_tries=6,
    hung_after=30.0,
    celery=False,
    # The quick run shares two CI cores with the rest of the suite, and its lease is short:
    # a fixed scheduling delay of a few hundred milliseconds is a large share of it.
    rerun_bound_leases=2.0,
)

PROFILES = {"full": FULL, "quick": QUICK}


@dataclass(frozen=True)
class PlannedCall:
    cid: str
    at: float
    first_s: float
    rerun_s: float

    def to_dict(self) -> dict[str, Any]:
        return {"cid": self.cid, "at": self.at, "first_s": self.first_s, "rerun_s": self.rerun_s}


def make_calls(profile: Profile, prefix: str = "c") -> list[PlannedCall]:
    rng = random.Random(profile.seed)
    calls = []
    for i in range(profile.calls):
        if profile.long_every and i % profile.long_every == profile.long_every - 1:
            first = profile.long_leases * profile.lease
        else:
            first = rng.uniform(*profile.short_sleep)
        calls.append(
            PlannedCall(
                f"{prefix}-{i:04d}",
                (i // profile.burst) * profile.burst_every,
                round(first, 2),
                round(min(first, profile.rerun_sleep), 2),
            )
        )
    return calls


def probe_calls(profile: Profile, attempt: int) -> list[PlannedCall]:
    """Short calls, so the workers keep taking and claiming messages while the burst drains
    (a message is between its take and its claim for milliseconds only)."""
    rng = random.Random(profile.seed + 100 + attempt)
    return [
        PlannedCall(f"probe{attempt}-{i:03d}", 0.0, round(rng.uniform(0.0, 0.02), 2), 0.0)
        for i in range(profile.probe_burst)
    ]


@dataclass(frozen=True)
class Fault:
    at: float
    kind: str  # "kill" | "kill-background" | "redis" | "dispatcher"


def faults(profile: Profile, *, background: bool, dispatcher: bool) -> list[Fault]:
    out = []
    for k in range(profile.kills):
        kind = "kill-background" if k == 0 and background else "kill"
        out.append(Fault(profile.first_kill_at + k * profile.kill_every, kind))
    if profile.redis_restart_at is not None:
        out.append(Fault(profile.redis_restart_at, "redis"))
    if dispatcher and profile.dispatcher_kill_at is not None:
        out.append(Fault(profile.dispatcher_kill_at, "dispatcher"))
    return sorted(out, key=lambda f: f.at)


def last_fault_at(profile: Profile, schedule: list[Fault]) -> float:
    ends = [f.at + (profile.redis_outage if f.kind == "redis" else 0.0) for f in schedule]
    return max(ends, default=0.0)
