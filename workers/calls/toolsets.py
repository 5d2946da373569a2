"""The worker's tool sets: one per (session, config hash), built on first use and cached.

A worker rebuilds exactly the tool set the dispatcher validated against: the config is fetched
by the hash the message carries and assembled by the same code as the dispatcher's
(``toolhub/assembly.py``: workspace, local and Redis-backed resources, compare-and-set state,
the config's MCP servers and hubs, so a meta-tool running on the worker reaches their tools;
stdio servers start here only, inside the session's sandbox, and their tools are published for
the dispatchers: ``mcp_tools.py``). Its sources are disconnected, and its stdio servers
stopped, when the tool set leaves the cache. The cache is bounded (``TOOLHUB_WORKER_SESSIONS``,
256, least recently used out), and a tool set still running a call when it leaves is only
retired: it is closed when its last call ends, so an eviction never cancels a call
(``LocalExecutor.close`` cancels what runs) nor cuts its MCP sources.

The stored config is admitted again against the worker's own operator policy
(``TOOLHUB_POLICY``) for the session's tenant (read from its id), with the tenant's root judged
from the stored workspace (``stored_tenant_root``): a config that reached Redis without the
gateway's admission builds nothing, and its calls fail with ``policy_refused``.

With a fleet key (``toolhub.distributed.signing``) the session record must carry a valid
signature over its id, workspace and config hash, and the stored config must hash to that
hash: a record or config written to Redis by anyone without the key builds nothing.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from celery import Celery

from toolhub.assembly import Fleet, assemble, toolhub_home
from toolhub.core import ConfigError, ToolError
from toolhub.distributed.quota import QuotaLimits
from toolhub.distributed.settings import Settings
from toolhub.distributed.signing import FleetKeys
from toolhub.distributed.store import RedisStore
from toolhub.errors import ErrorCode
from toolhub.executors.local import LocalExecutor
from toolhub.redaction import redact
from toolhub.sources.attach import AttachedSources
from toolhub.state.redis import RedisStateSync
from toolhub.tenancy import OperatorPolicy, admit, tenant_of_session
from toolhub.tenancy.admission import stored_tenant_root
from toolhub.tools import CATALOG
from toolhub.toolset import ToolSet, ToolSetBuilder, ToolSetConfig
from workers.holder.session_records import session_dir, verified_config, verified_session

from .mcp_tools import tools_publisher

logger = logging.getLogger("toolhub.worker")


def worker_builder(settings: Settings) -> ToolSetBuilder:
    """Built-ins (unless ``TOOLHUB_BUILTINS=0``), entry-point plugins, and the plugin modules
    named in ``TOOLHUB_PLUGINS`` (``module`` with a ``register(builder)``, or ``module:func``)."""
    builder = ToolSetBuilder(CATALOG if settings.builtins else None)
    for spec in settings.plugins:
        module_name, _, attr = spec.partition(":")
        register: Callable[[ToolSetBuilder], Any] = getattr(
            importlib.import_module(module_name), attr or "register"
        )
        register(builder)
    return builder


@dataclass(slots=True)
class SessionRuntime:
    toolset: ToolSet
    executor: LocalExecutor
    state: RedisStateSync
    workspace: Path
    sources: AttachedSources | None = None
    #: With stdio MCP servers: publishes their tools for the dispatchers (``mcp_tools.py``).
    publish_tools: Callable[[], None] | None = None

    def close(self) -> None:
        self.executor.close()
        if self.sources is not None:
            self.sources.close()


class ToolSets:
    """``keys``: the fleet keys session records must be signed with (None: unsigned fleet)."""

    def __init__(
        self,
        store: RedisStore,
        app: Celery,
        builder: ToolSetBuilder,
        keys: FleetKeys | None,
        *,
        policy: OperatorPolicy,
        workspace_root: Path | None = None,
        capacity: int = 256,
    ) -> None:
        self.store = store
        self.app = app
        self.builder = builder
        self.keys = keys
        self.capacity = capacity
        self.policy = policy
        #: the gateway's workspace root, when this worker is told it (``stored_tenant_root``)
        self.workspace_root = workspace_root
        self._cache: OrderedDict[tuple[str, str], SessionRuntime] = OrderedDict()
        #: calls running per key, and the tool sets that left the cache while some ran
        self._users: dict[tuple[str, str], int] = {}
        self._retired: dict[tuple[str, str], SessionRuntime] = {}
        self._lock = threading.Lock()
        self._home = toolhub_home()

    def get(self, session_id: str, config_hash: str) -> SessionRuntime:
        """The tool set, for a short look (its workspace, its sandbox); a call runs inside
        ``in_use`` instead."""
        key = (session_id, config_hash)
        with self._lock:
            cached = self._touch(key)
            if cached is not None:
                return cached
            built = self._retired.pop(key, None) or self._build(session_id, config_hash)
            self._cache[key] = built
            evicted = self._evict()
        for runtime in evicted:
            runtime.close()
        return built

    def _touch(self, key: tuple[str, str]) -> SessionRuntime | None:
        """Under the lock: the cached tool set of ``key``, now the most recently used."""
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
        return cached

    @contextmanager
    def in_use(self, session_id: str, config_hash: str) -> Iterator[None]:
        """Marks the session's tool set busy while a call runs: if it leaves the cache
        meanwhile, it is closed when the last such block ends, not at once."""
        key = (session_id, config_hash)
        with self._lock:
            self._users[key] = self._users.get(key, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._users.pop(key) - 1
                if left:
                    self._users[key] = left
                done = None if left else self._retired.pop(key, None)
            if done is not None:
                done.close()

    def _evict(self) -> list[SessionRuntime]:
        """Under the lock: drop the least recently used beyond capacity; returns those to
        close now (the busy ones are retired instead)."""
        closing = []
        while len(self._cache) > self.capacity:
            key, evicted = self._cache.popitem(last=False)
            if self._users.get(key):
                self._retired[key] = evicted
            else:
                closing.append(evicted)
        return closing

    def close(self) -> None:
        with self._lock:
            cached = [*self._cache.values(), *self._retired.values()]
            self._cache.clear()
            self._retired.clear()
        for session in cached:
            session.close()

    def workspace(self, session_id: str) -> Path:
        return Path(self._session(session_id)["workspace"])

    def _session(self, session_id: str) -> dict[str, str]:
        return verified_session(self.store, self.keys, session_id)

    def session_dir(self, session_id: str) -> Path:
        return session_dir(self._home, session_id)

    def _admit(self, session_id: str, config: ToolSetConfig, workspace: Path) -> ToolSetConfig:
        """The stored config, admitted again against this worker's own policy for the
        session's tenant: a config that reached Redis without the gateway's admission (or under
        another policy) builds nothing."""
        tenant = tenant_of_session(session_id)
        try:
            root = stored_tenant_root(workspace, tenant, self.workspace_root)
            return admit(
                config, self.policy, tenant=tenant, tenant_root=root, registry=self.builder.registry
            )
        except ValueError as outside:
            why = str(outside)
        except ConfigError as refused:
            why = "; ".join(v.summary() for v in refused.violations)
        logger.warning("session %s (tenant %s): tool set refused: %s", session_id, tenant, why)
        raise ToolError.custom(
            ErrorCode.POLICY_REFUSED,
            redact(f"refused by the operator policy: {why}; nothing ran"),
            tenant=tenant,
        )

    def _build(self, session_id: str, config_hash: str) -> SessionRuntime:
        info = self._session(session_id)
        config, workspace = verified_config(self.store, self.keys, session_id, info, config_hash)
        config = self._admit(session_id, config, workspace)
        tenant = tenant_of_session(session_id)
        quotas = QuotaLimits.of(tenant, self.policy.quotas.for_tenant(tenant))
        parts = assemble(
            config,
            workspace=workspace,
            session_id=session_id,
            session_dir=self.session_dir(session_id),
            builder=self.builder,
            fleet=Fleet(
                self.store.client, self.app, self.store.settings, runs_calls=True, quotas=quotas
            ),
        )
        assert parts.state is not None
        for warning in parts.warnings:
            logger.warning("session %s: %s", session_id, warning)
        logger.info("built tool set for session %s (config %s)", session_id, config_hash)
        toolset = parts.toolset
        publisher = tools_publisher(self.store, session_id, config_hash, toolset, parts.sources)
        return SessionRuntime(
            toolset, LocalExecutor(toolset), parts.state, workspace, parts.sources, publisher
        )
