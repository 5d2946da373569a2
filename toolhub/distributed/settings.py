"""Settings of the distributed stack, shared by dispatchers and workers.

Every value comes from a ``TOOLHUB_*`` environment variable so that a compose file, a Helm chart
or a test can tune a fleet without code. The defaults are production values; tests shorten the
lease and the shutdown window to keep failure drills fast.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .redis_address import SENTINEL_SCHEMES

DEFAULT_REDIS_URL = "redis://localhost:6379/0"

#: Workload (``Tool.workload``) → Celery queue. Separate queues mean a thousand background
#: commands never starve a ``read_file``.
QUEUES = {
    "fast": "toolhub.fast",
    "command": "toolhub.command",
    "background": "toolhub.background",
}
ALL_QUEUES = tuple(QUEUES.values())
#: How many messages a queue's sunk list holds before calls wait in its backlog (``backlog.py``).
DEFAULT_BACKLOG_WINDOW = 1000


#: How far apart dispatcher, worker and Redis clocks may be without reopening a replay window.
CLOCK_MARGIN_SECONDS = 300


def queue_for(workload: str) -> str:
    """The queue for a tool's workload; unknown workloads go to the fast queue."""
    return QUEUES.get(workload, QUEUES["fast"])


def _float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return float(raw) if raw not in (None, "") else default


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return int(raw) if raw not in (None, "") else default


def _bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw in (None, ""):
        return default
    return raw.strip().lower() in {"1", "true", "yes", "on"}


@dataclass(frozen=True, slots=True)
class Settings:
    """One fleet's tuning, read from the environment by ``from_env``."""

    redis_url: str = DEFAULT_REDIS_URL
    prefix: str = "toolhub:"
    #: A running call's lease; renewed every sixth of it. A dead worker's calls are re-run
    #: once it has expired, so this bounds recovery time.
    lease_seconds: float = 15.0
    #: How many times a call may lose its worker before it fails with ``worker_lost``.
    max_attempts: int = 3
    #: How long a queued call's message may be out of its queue without being claimed (a worker
    #: took it and died) before a sweep re-enqueues it; 0 means half the lease.
    claim_seconds: float = 0.0
    #: How long a caller lets a call wait in its queue, as part of its overall deadline.
    max_queue_seconds: float = 600.0
    #: TTL of a session's config, state and task index, refreshed by every call it makes.
    session_ttl_seconds: int = 7 * 24 * 3600
    max_foreground_seconds: float = 600.0
    max_background_seconds: float = 4 * 3600.0
    #: Warm-shutdown window: calls still running after it are handed back to the queue.
    soft_shutdown_seconds: float = 60.0
    #: How long finished records and event streams stay in Redis.
    record_ttl_seconds: int = 24 * 3600
    #: How long a dispatcher keeps following a call while Redis is unreachable.
    follow_outage_seconds: float = 30.0
    #: Show call arguments in Celery events (Flower). Off: arguments may hold secrets.
    show_arguments: bool = False
    #: Plugin modules (``module:function`` or ``module`` with ``register``) loaded by workers.
    plugins: tuple[str, ...] = ()
    #: Whether workers register the built-in tools.
    builtins: bool = True
    #: Celery worker task events (``task-received`` … ``task-succeeded``): what Flower shows.
    #: Batched (``workers/lifecycle/consumer.py``), so they cost little; off only for unwatched
    #: fleets.
    task_events: bool = True
    #: The command sandbox a worker gives sessions whose config names none (docs/sandbox.md):
    #: ``workspace_write``, ``read_only``, or ``full`` (no sandbox: an explicit, logged opt-out).
    sandbox: str = "workspace_write"
    #: Whether sandboxed commands may open network sockets (off: a private loopback only).
    sandbox_network: bool = False
    #: What confines them: ``auto`` (bwrap where it runs, else Landlock), ``bwrap``, ``landlock``.
    sandbox_mechanism: str = "auto"
    #: The directory the fleet's session workspaces live in, hidden from every command (each
    #: sees only its own workspace inside it); unset: only toolhub's own dirs are hidden.
    workspace_root: str | None = None
    #: How many (session, config) tool sets a worker keeps built, least recently used first
    #: out; one still running a call is closed only when its last call ends.
    cached_sessions: int = 256
    #: ``TOOLHUB_VISIBILITY_TIMEOUT``: Celery's redelivery backstop when set, in seconds (else
    #: ``visibility_timeout`` derives it from the longest run).
    visibility_override: int | None = None
    #: ``TOOLHUB_MESSAGE_MAX_AGE_SECONDS``: how old a signed message a worker still runs, when
    #: set (else ``message_max_age_seconds`` derives it from the longest a call lives).
    message_age_override: float | None = None
    #: ``TOOLHUB_FAIR_SHARE``: how many of a tenant's calls may wait, queued and not yet
    #: claimed, at the normal priority; its further calls queue at the sunk one, behind every
    #: other tenant's (``fair.py``). 0 turns fair dispatch off (one FIFO for all).
    fair_share: int = 4
    #: ``TOOLHUB_FAIR_BURST``: from how many such calls on a tenant's further calls sink; from
    #: ``fair_share`` up to this many they queue at the over level, behind every tenant's
    #: level-0 calls but ahead of every sunk one (``fair.py``). At or below ``fair_share``: no
    #: over level.
    fair_burst: int = 32
    #: ``TOOLHUB_BACKLOG_WINDOW``: how many messages a queue's sunk list holds at most; a call
    #: past its tenant's share beyond them waits as its id in the queue's backlog, a Redis
    #: list toolhub's workers promote from as the sunk list drains (``backlog.py``). 0: no
    #: backlog, every such call's message goes to the sunk list at once.
    backlog_window: int = DEFAULT_BACKLOG_WINDOW
    #: ``TOOLHUB_FAIR_HOLD_MS``: how long, at most, a worker holds the start of its sunk calls
    #: while a call of the normal priority runs on it (``workers/calls/level_gate.py``); 0: never.
    fair_hold_ms: int = 20
    #: ``TOOLHUB_CLAIM_REPLICAS``: how many replicas must hold a claim before its call runs
    #: (``replication.py``); default 1 for a Sentinel URL, else 0 (no wait).
    claim_replicas: int = 0
    #: ``TOOLHUB_CLAIM_REPLICA_WAIT_MS``: how long a worker waits for them before it runs the
    #: call anyway (and counts it).
    claim_replica_wait_ms: int = 500

    @classmethod
    def from_env(cls, redis_url: str | None = None) -> Settings:
        plugins = tuple(p.strip() for p in os.environ.get("TOOLHUB_PLUGINS", "").split(",") if p)
        url = redis_url or os.environ.get("TOOLHUB_REDIS_URL") or DEFAULT_REDIS_URL
        sentinel = url.partition("://")[0].lower() in SENTINEL_SCHEMES
        return cls(
            redis_url=url,
            prefix=os.environ.get("TOOLHUB_PREFIX", "toolhub:"),
            lease_seconds=_float("TOOLHUB_LEASE_SECONDS", 15.0),
            max_attempts=_int("TOOLHUB_MAX_ATTEMPTS", 3),
            claim_seconds=_float("TOOLHUB_CLAIM_SECONDS", 0.0),
            max_queue_seconds=_float("TOOLHUB_MAX_QUEUE_SECONDS", 600.0),
            session_ttl_seconds=_int("TOOLHUB_SESSION_TTL_SECONDS", 7 * 24 * 3600),
            max_foreground_seconds=_float("TOOLHUB_MAX_FOREGROUND_SECONDS", 600.0),
            max_background_seconds=_float("TOOLHUB_MAX_BACKGROUND_SECONDS", 4 * 3600.0),
            soft_shutdown_seconds=_float("TOOLHUB_SOFT_SHUTDOWN_SECONDS", 60.0),
            record_ttl_seconds=_int("TOOLHUB_RECORD_TTL_SECONDS", 24 * 3600),
            follow_outage_seconds=_float("TOOLHUB_FOLLOW_OUTAGE_SECONDS", 30.0),
            show_arguments=_bool("TOOLHUB_SHOW_ARGUMENTS", False),
            plugins=plugins,
            builtins=_bool("TOOLHUB_BUILTINS", True),
            task_events=_bool("TOOLHUB_TASK_EVENTS", True),
            sandbox=(os.environ.get("TOOLHUB_SANDBOX") or "workspace_write").strip().lower(),
            sandbox_network=_bool("TOOLHUB_SANDBOX_NETWORK", False),
            sandbox_mechanism=(os.environ.get("TOOLHUB_SANDBOX_MECHANISM") or "auto").lower(),
            workspace_root=os.environ.get("TOOLHUB_WORKSPACE_ROOT") or None,
            cached_sessions=max(1, _int("TOOLHUB_WORKER_SESSIONS", 256)),
            visibility_override=_int("TOOLHUB_VISIBILITY_TIMEOUT", 0) or None,
            message_age_override=_float("TOOLHUB_MESSAGE_MAX_AGE_SECONDS", 0.0) or None,
            fair_share=max(0, _int("TOOLHUB_FAIR_SHARE", 4)),
            fair_burst=max(0, _int("TOOLHUB_FAIR_BURST", 32)),
            backlog_window=max(0, _int("TOOLHUB_BACKLOG_WINDOW", DEFAULT_BACKLOG_WINDOW)),
            fair_hold_ms=max(0, _int("TOOLHUB_FAIR_HOLD_MS", 20)),
            claim_replicas=max(0, _int("TOOLHUB_CLAIM_REPLICAS", 1 if sentinel else 0)),
            claim_replica_wait_ms=max(1, _int("TOOLHUB_CLAIM_REPLICA_WAIT_MS", 500)),
        )

    @property
    def visibility_timeout(self) -> int:
        """Celery's redelivery backstop: above the longest allowed run, so a healthy long call
        is never redelivered (leases, not this timeout, recover calls of dead workers). Read
        from the settings, not the environment: every dispatch asks for it (``active_ttl_seconds``),
        and an ``os.environ`` lookup per dispatch is a visible share of the caller's CPU."""
        if self.visibility_override:
            return self.visibility_override
        return int(max(self.max_foreground_seconds, self.max_background_seconds) + 300)

    @property
    def claim_deadline_seconds(self) -> float:
        """How long a queued call's message may be out of its queue unclaimed: half a lease by
        default, so with sweeps every quarter lease a message taken by a worker that died is
        re-enqueued within three quarters of a lease. Live workers touch the deadline of what
        they hold unstarted every sixth of a lease, so it never passes for them."""
        return self.claim_seconds or self.lease_seconds / 2

    def call_deadline_seconds(self, workload: str) -> float:
        """How long a caller waits for a call at most, from the call's own limits: its queue
        wait (``TOOLHUB_MAX_QUEUE_SECONDS``), then every attempt it may have at its longest
        run plus the lease that detects a lost worker, plus a margin. A call past it has an
        answer nobody will ever write; the caller gets a typed ``timeout`` instead."""
        background = workload == "background"
        run = self.max_background_seconds if background else self.max_foreground_seconds
        return self.max_queue_seconds + self.max_attempts * (run + 2 * self.lease_seconds) + 30.0

    def message_max_age_seconds(self, workload: str) -> float:
        """How far from a worker's clock a signed message's issue time may be for the worker
        to run it (``signing.py``): by default the longest a call of ``workload`` can
        legitimately live (``call_deadline_seconds``: its queue wait and every attempt, so a
        re-enqueue after a lost worker is never refused)."""
        return self.message_age_override or self.call_deadline_seconds(workload)

    def replay_marker_seconds(self, workload: str) -> int:
        """How long a finished run's marker is kept (``scripts.py``): while a message of it
        may still run, plus ``CLOCK_MARGIN_SECONDS`` for clocks a little apart."""
        return int(self.message_max_age_seconds(workload)) + CLOCK_MARGIN_SECONDS

    @property
    def active_ttl_seconds(self) -> int:
        """TTL of a queued or running record: long enough to outlive any run, finite so an
        abandoned dispatch never lives forever."""
        return self.visibility_timeout + self.record_ttl_seconds
