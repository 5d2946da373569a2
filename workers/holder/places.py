"""Where the holder runs a handed-over command: derived by the holder itself from the session.

Threat: the holder runs commands for every session of its host, and a request reaches it over a
unix socket. A request that said its own workspace and sandbox (as it once did) let anyone who
could write to that socket start an unsandboxed command in any directory. So a request names
the call and its session only, and the holder reads the session's record and config from Redis
(checked as a worker checks them: ``session_records.py``) and builds the sandbox from that
config and the process default (``workers/guards/sandboxing.py``), exactly as a worker does for the
session's foreground commands. Cached per (session, config hash), bounded.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from toolhub.assembly import session_sandbox
from toolhub.backends.cgroups import SessionQuota
from toolhub.backends.process import ProcessRunner
from toolhub.backends.workspace_pin import WorkspacePin
from toolhub.distributed.signing import FleetKeys
from toolhub.distributed.store import RedisStore
from toolhub.sandbox import SandboxPolicy
from toolhub.tenancy.kernel_quota import session_quota
from toolhub.toolset import ToolSetBuilder

from .session_records import session_dir, verified_config, verified_session

CAPACITY = 256


@dataclass(frozen=True, slots=True)
class Place:
    """Where a background command runs: the session's workspace (and its pin: a workspace
    swapped since the session was built runs nothing), the directory of its log, the
    sandbox of the session's commands (the one its foreground commands run under) and the
    session's kernel bounds (its commands' cgroups, ``toolhub.tenancy.kernel_quota``)."""

    workspace: Path
    log_dir: Path
    sandbox: SandboxPolicy | None
    pin: WorkspacePin | None = None

    quota: SessionQuota | None = None

    def runner(self) -> ProcessRunner:
        runner = ProcessRunner(
            self.workspace, self.log_dir, sandbox=self.sandbox, workspace_pin=self.pin
        )
        runner.quota = self.quota
        return runner


class SessionPlaces:
    """The ``Place`` of each session's background commands on this host. Thread-safe."""

    def __init__(
        self, store: RedisStore, keys: FleetKeys | None, builder: ToolSetBuilder, home: Path
    ) -> None:
        self.store = store
        self.keys = keys
        self.builder = builder
        self.home = home
        self._cache: OrderedDict[tuple[str, str], Place] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session_id: str, config_hash: str) -> Place:
        """The session's place; a ``ToolError`` (``session_unknown``, ``message_refused``,
        ``workspace_moved``) when its record cannot be trusted."""
        key = (session_id, config_hash)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return cached
        info = verified_session(self.store, self.keys, session_id)
        config, workspace = verified_config(self.store, self.keys, session_id, info, config_hash)
        directory = session_dir(self.home, session_id)
        sandbox, ws = session_sandbox(
            config,
            workspace=workspace,
            session_id=session_id,
            session_dir=directory,
            builder=self.builder,
        )
        place = Place(ws.root, directory / "terminal", sandbox, ws.pin, session_quota(session_id))
        with self._lock:
            self._cache[key] = place
            while len(self._cache) > CAPACITY:
                self._cache.popitem(last=False)
        return place
