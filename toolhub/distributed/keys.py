"""Redis key names of the distributed protocol (docs/distributed.md), under one prefix."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Keys:
    prefix: str = "toolhub:"

    def session(self, sid: str) -> str:
        return f"{self.prefix}session:{sid}"

    def state(self, sid: str) -> str:
        return f"{self.prefix}session:{sid}:state"

    def mcp_tools(self, sid: str, config_hash: str) -> str:
        """The tool lists of a session's stdio MCP servers, as a worker running them published
        them (``mcp_tools.py``)."""
        return f"{self.prefix}mcp-tools:{sid}:{config_hash}"

    def config(self, config_hash: str) -> str:
        """A config by its hash, so a worker always builds exactly the config a call was
        dispatched with, even after the session's config changed."""
        return f"{self.prefix}config:{config_hash}"

    def fair_queued(self, tenant: str) -> str:
        """Sorted set of a tenant's calls queued and not yet claimed, call id -> when the
        entry lapses: what fair dispatch counts (``fair.py``). The claim script reads its name
        from the record's ``fair`` field."""
        return f"{self.prefix}fair:{tenant}:queued"

    def call(self, cid: str) -> str:
        return f"{self.prefix}call:{cid}"

    def events(self, cid: str) -> str:
        return f"{self.prefix}call:{cid}:events"

    def remote_task(self, cid: str) -> str:
        """The remote MCP task an attempt of the call is polling (``redis_task_ledger.py``). The
        scripts derive it from ``call``, so its name must stay ``call + ':remote'``."""
        return f"{self.prefix}call:{cid}:remote"

    def channel(self, cid: str) -> str:
        return f"{self.prefix}call:{cid}"

    @property
    def control(self) -> str:
        return f"{self.prefix}control"

    @property
    def replication_marker(self) -> str:
        """The small write a worker sends ``WAIT`` after (``replication.py``)."""
        return f"{self.prefix}replication-marker"

    @property
    def leases(self) -> str:
        """Sorted set call id → lease expiry: what the sweeper scans for dead workers."""
        return f"{self.prefix}leases"

    @property
    def pending(self) -> str:
        """Sorted set call id → claim deadline of queued calls: what the sweeper scans for
        messages a dead worker took off the queue before claiming them. The scripts derive it
        from ``leases`` (``scripts.py``), so its name must stay ``leases + ':pending'``."""
        return f"{self.leases}:pending"

    def backlog(self, queue: str) -> str:
        """List of the ids of calls past their tenant's share that wait behind ``queue``'s
        sunk list, newest first: the workers of ``queue`` promote them into it as it drains
        (``backlog.py``). The scripts build it from the prelude's ``BACKLOG`` and the queue."""
        return f"{self.prefix}backlog:{queue}"

    @property
    def pushed(self) -> str:
        """Hash queue list -> how many messages toolhub's scripts pushed onto it: a queued call
        keeps its place among them (``qpos``), so the sweep tells a call still in its queue
        from one a worker took without scanning the list (``lua/sweep_unclaimed.lua``). The
        scripts read its name from the prelude's ``PUSHED`` (``scripts.py``)."""
        return f"{self.prefix}pushed"

    @property
    def deadletter(self) -> str:
        """List of queue items workers refused to run (``deadletter.py``), newest first."""
        return f"{self.prefix}deadletter"

    def questions(self, sid: str) -> str:
        """Hash call id → open ``ask_user`` questions of one session."""
        return f"{self.prefix}session:{sid}:questions"

    def approvals(self, sid: str) -> str:
        """Zset call id → approval expiry of one session's calls awaiting approval."""
        return f"{self.prefix}session:{sid}:approvals"

    @property
    def approvals_due(self) -> str:
        """Zset call id → approval expiry of every session's calls awaiting approval: the
        workers' sweep ends the expired ones nobody else looks at."""
        return f"{self.prefix}approvals"

    def answer(self, cid: str) -> str:
        """List the waiting ``ask_user`` call pops its answer (or a withdrawal) from."""
        return f"{self.prefix}answer:{cid}"

    def session_streams(self, sid: str) -> str:
        """Sorted set of the call keys whose streams hold a session's progress, scored by
        their first event (``emit.lua`` trims the oldest first when the session is over its
        bytes)."""
        return f"{self.prefix}session:{sid}:streams"

    def session_stream_bytes(self, sid: str) -> str:
        """Hash of the progress bytes each call stream of a session holds (field: the call
        key) and their ``total``."""
        return f"{self.prefix}session:{sid}:stream-bytes"

    def session_tasks(self, sid: str) -> str:
        """Sorted set of one session's background task ids, scored by start time; the score
        is negated once the task's completion was reported (``RedisBackgroundTasks._open``)."""
        return f"{self.prefix}session:{sid}:tasks"

    @property
    def every_session_tasks(self) -> str:
        """The SCAN pattern that matches ``session_tasks`` of every session."""
        return self.session_tasks("*")

    def session_of_tasks(self, key: str) -> str:
        """The session id in a ``session_tasks`` key."""
        return key[len(self.session("")) : -len(":tasks")]
