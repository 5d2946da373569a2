"""The parts a ``Session`` is made of, for each way it runs: ``Session.embedded`` (the assembled
tool set, its state file and the in-process executor) and ``Session.connect`` (the tool set on
the fleet, its state in Redis, the session stored for the workers and the Celery executor).

Both start from ``assembly.assemble``, so a dispatcher validates against exactly the tool set a
worker runs; what differs (state, executor, where the session is stored) is here. Also here: the
process's one default builder (built-ins and plugins registered once) and ``Resources``, the
session's read and write access to its container.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from toolhub.assembly import Assembled, Fleet, assemble, toolhub_home, workspace_session_id
from toolhub.core import ConfigError, Container
from toolhub.core.container import Key
from toolhub.tenancy import Quotas, tenant_of_session
from toolhub.tools import CATALOG
from toolhub.toolset import ConfigSource, ToolSet, ToolSetBuilder, ToolSetConfig

if TYPE_CHECKING:
    from celery import Celery

    from toolhub.approvals.rules import OperatorPermissions
    from toolhub.distributed.store import RedisStore
    from toolhub.executors import Executor
    from toolhub.sources.attach import AttachedSources
    from toolhub.state import DebouncedWriter


T = TypeVar("T")


@dataclass(slots=True)
class SessionParts:
    """What a ``Session`` is made of."""

    toolset: ToolSet
    executor: Executor
    session_id: str
    workspace: Path
    warnings: list[str]
    sources: AttachedSources | None = None
    writer: DebouncedWriter | None = None


def embedded_parts(
    config: ConfigSource,
    workspace: str | os.PathLike[str],
    session_id: str | None,
    state_dir: str | os.PathLike[str] | None,
    builder: ToolSetBuilder,
    permissions: OperatorPermissions | None = None,
) -> SessionParts:
    """The ``Session`` of ``Session.embedded``: the assembled tool set, its state file (loaded,
    and written back debounced after calls) and the in-process executor."""
    from toolhub.executors import LocalExecutor
    from toolhub.executors.approvals import gated
    from toolhub.hooks import SessionHooks
    from toolhub.state import DebouncedWriter, StateFile

    root = Path(workspace).expanduser().resolve()
    sid = session_id or workspace_session_id(root)
    session_dir = Path(state_dir) if state_dir else toolhub_home() / "sessions" / sid
    parts = assemble(
        ToolSetConfig.load(config),
        workspace=root,
        session_id=sid,
        session_dir=session_dir,
        builder=builder,
    )
    toolset = parts.toolset
    state = StateFile(session_dir / "state.json")
    state.load_into(toolset.container)
    writer = DebouncedWriter(toolset.container, state)
    toolset.on_finalize = writer.notify
    return SessionParts(
        toolset,
        gated(
            LocalExecutor(toolset, SessionHooks.of(toolset.config.hooks, sid)),
            toolset,
            operator=permissions,
            workspace=str(root),
        ),
        sid,
        root,
        [*parts.warnings, *state.problems],
        parts.sources,
        writer,
    )


def connected_parts(
    redis_url: str,
    config: ConfigSource,
    workspace: str | os.PathLike[str],
    session_id: str | None,
    builder: ToolSetBuilder,
    quotas: Quotas | None = None,
    permissions: OperatorPermissions | None = None,
) -> SessionParts:
    """The ``Session`` of ``Session.connect``: the assembled tool set on the fleet behind
    ``redis_url``, its state read from Redis, the session stored for the workers (config by
    hash), and the Celery executor, which holds the session's calls to ``quotas`` (the
    operator's, for the session's tenant; None: none). The config's stdio MCP servers run on
    the workers only: once the session is stored, a worker starts them and publishes their
    tools, which are shown here (``toolhub.sources.mcp_fleet_tools.worker_stdio_tools``;
    ``ConfigError`` when the workers refuse them or none answers). ``RedisUnavailable`` when
    Redis cannot be reached."""
    from redis.exceptions import RedisError

    from toolhub.distributed.quota import QuotaLimits
    from toolhub.distributed.settings import Settings
    from toolhub.distributed.shared import shared_backend
    from toolhub.errors import RedisUnavailable
    from toolhub.executors.approvals import gated
    from toolhub.executors.celery import CeleryExecutor

    root = Path(workspace).expanduser().resolve()
    settings = Settings.from_env(redis_url)
    store, app = shared_backend(settings)
    cfg = ToolSetConfig.load(config)
    sid = session_id or workspace_session_id(root)
    limits = QuotaLimits.of(tenant_of_session(sid), quotas) if quotas is not None else None
    parts = assemble(
        cfg,
        workspace=root,
        session_id=sid,
        session_dir=toolhub_home() / "sessions" / sid,
        builder=builder,
        fleet=Fleet(store.client, app, settings, quotas=limits),
    )
    assert parts.state is not None
    warnings = parts.warnings
    try:
        version = parts.state.load_into(parts.toolset.container)
        config_hash = cfg.config_hash()
        store.put_session(
            sid, config=cfg.model_dump_json(), config_hash=config_hash, workspace=str(root)
        )
        if any(server.command for server in cfg.mcp_servers.values()):
            warnings = [*warnings, *_show_worker_tools(parts, store, app, sid, config_hash)]
    except RedisError as exc:
        parts.close_sources()
        raise RedisUnavailable(redis_url, exc) from None
    except (ConfigError, RedisUnavailable):
        parts.close_sources()
        raise
    executor = CeleryExecutor(
        parts.toolset,
        store,
        app,
        settings=settings,
        session_id=sid,
        config_hash=config_hash,
        workspace=str(root),
        state=parts.state,
        state_version=version,
        quotas=limits,
    )
    gate = gated(executor, parts.toolset, operator=permissions, workspace=str(root))
    return SessionParts(parts.toolset, gate, sid, root, warnings, parts.sources)


def _show_worker_tools(
    parts: Assembled, store: RedisStore, app: Celery, session_id: str, config_hash: str
) -> list[str]:
    """The tools of the session's stdio MCP servers, as a worker running them lists them, shown
    in its tool set and removed when its sources close; returns the warnings."""
    from toolhub.sources.attach import AttachedSources
    from toolhub.sources.mcp_fleet_tools import worker_stdio_tools

    shown, warnings = worker_stdio_tools(parts.toolset, store, app, session_id, config_hash)
    if parts.sources is None:
        parts.sources = AttachedSources()
    parts.sources.connections.append(shown)
    return warnings


_default_builder: ToolSetBuilder | None = None
_builder_lock = threading.Lock()


def default_builder() -> ToolSetBuilder:
    """One builder per process: registering built-ins and plugins is done once."""
    global _default_builder
    with _builder_lock:
        if _default_builder is None:
            _default_builder = ToolSetBuilder(CATALOG)
        return _default_builder


class Resources:
    """Read and write access to the session's container (seed: resource read/write)."""

    __slots__ = ("_container",)

    def __init__(self, container: Container) -> None:
        self._container = container

    def get(self, key: Key[T]) -> T | None:
        return self._container.get(key)

    def require(self, key: Key[T]) -> T:
        return self._container.require(key)

    def set(self, value: T, key: Key[T] | None = None) -> None:
        if key is None:
            self._container.insert(value)
        else:
            self._container.insert(value, key)
