"""Assembling a session's tool set: the one place that does it, for every way a session runs.

``Session.embedded``, ``Session.connect`` and a worker building the tool set a call was
dispatched with all need the same thing: a container with the workspace's local resources
(and, on a fleet, the Redis-backed ones, with compare-and-set state attached), the tool set
built from the config into it, the tool catalog the meta-tools search, and the MCP servers and
hubs the config names. Doing it in one place means a worker runs exactly the tool set its
dispatcher validated against. What differs stays with the caller: the embedded session's state
file, the dispatcher's stored session and executor, the worker's cache.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from toolhub.answers import AnswerBox, LocalAnswerBox
from toolhub.backends import (
    PathLocks,
    ProcessRunner,
    ResourceLimits,
    Ripgrep,
    SessionInfo,
    Workspace,
)
from toolhub.backends.disk_budget import DiskBudget
from toolhub.backends.tool_index import EnabledToolNames, InMemoryToolIndex, ToolEntry, ToolIndex
from toolhub.backends.worktrees import GitWorktrees
from toolhub.core import ConfigError, Container, Params, ToolError
from toolhub.errors import ErrorCode
from toolhub.sandbox import Mechanism, SandboxPolicy, default_settings, enforce
from toolhub.tasks import BackgroundTasks, LocalBackgroundTasks
from toolhub.tenancy import DEFAULT_TENANT, Quotas, tenant_of_session
from toolhub.tenancy.kernel_quota import session_quota
from toolhub.tenancy.session_quotas import quotas_of_session
from toolhub.tools.shell import BashParams
from toolhub.toolset import ConfigSource, ExternalSpec, ToolSet, ToolSetBuilder, ToolSetConfig

if TYPE_CHECKING:
    from celery import Celery
    from redis import Redis

    from toolhub.approvals.rules import OperatorPermissions
    from toolhub.distributed.quota import QuotaLimits
    from toolhub.distributed.settings import Settings
    from toolhub.distributed.store import RedisStore
    from toolhub.executors import Executor
    from toolhub.sources.attach import AttachedSources
    from toolhub.state import DebouncedWriter
    from toolhub.state.redis import RedisStateSync


logger = logging.getLogger("toolhub.assembly")


def toolhub_home() -> Path:
    """Where toolhub keeps per-session files: ``$TOOLHUB_HOME``, default ``~/.toolhub``."""
    return Path(os.environ.get("TOOLHUB_HOME", "~/.toolhub")).expanduser()


def workspace_session_id(workspace: Path) -> str:
    """A stable id per workspace, so embedded state survives restarts without configuration."""
    return "ws-" + hashlib.sha256(str(workspace).encode()).hexdigest()[:16]


def _tasks_per_session(session_id: str) -> int | None:
    """The cap on a session's running background tasks: its tenant's quota."""
    return quotas_of_session(session_id).background_tasks_per_session


def install_local_resources(
    container: Container,
    *,
    workspace: Path,
    session_dir: Path,
    session_id: str,
    limits: ResourceLimits | None = None,
    tasks: BackgroundTasks | None = None,
) -> None:
    """Insert the embedded implementations: workspace, process runner (logs under
    ``session_dir/terminal``), background tasks, answer box, path locks, ripgrep and git
    worktrees (under ``session_dir/worktrees``).

    Pass ``tasks`` to share one background-task backend between sessions (each task remembers
    its owning session, and the tools only show a session its own tasks).
    """
    ws = Workspace(workspace)
    runner = ProcessRunner(
        ws.root, Path(session_dir) / "terminal", limits=limits, workspace_pin=ws.pin
    )
    runner.quota = session_quota(session_id)
    container.insert(ws)
    container.insert(SessionInfo(session_id, Path(session_dir)))
    disk_limit = quotas_of_session(session_id).disk_per_session
    container.insert(DiskBudget((ws.root, Path(session_dir)), disk_limit))
    container.insert(runner)
    if tasks is None:
        tasks = LocalBackgroundTasks(runner, per_session=_tasks_per_session)
    container.insert(tasks, BackgroundTasks)
    container.insert(LocalAnswerBox(), AnswerBox)
    container.insert(PathLocks())
    container.insert(Ripgrep())
    container.insert(GitWorktrees(ws.root, Path(session_dir) / "worktrees", runner))


def configure_sandbox(
    container: Container, *, workspace: Path, session_dir: Path
) -> SandboxPolicy | None:
    """Confine the session's commands as the ``bash`` tool's ``sandbox`` param says, else as
    the process default (``toolhub.sandbox.use_by_default``; none unless a worker turned it
    on). The policy hides toolhub's state dirs and gives the session a private tmp under
    ``session_dir``; an unenforceable one raises ``SandboxUnavailable`` or, when not required,
    falls back loudly to unconfined (``toolhub.sandbox.enforcement``). Returns what applies."""
    runner = container.get(ProcessRunner)
    if runner is None:
        return None
    params = container.get(Params[BashParams])
    chosen = params.sandbox if params is not None else None
    default, require = default_settings()
    settings = chosen if chosen is not None else default
    if settings is None:
        return None
    session_dir = Path(session_dir)
    policy = settings.policy(
        Path(workspace),
        tmp_dir=session_dir / "tmp",
        hidden=(toolhub_home(), session_dir),
    )
    must = settings.require if settings.require is not None else require
    runner.sandbox = enforce(policy, require=must)
    info = container.get(SessionInfo)
    if info is not None:
        runner.refusal = landlock_refusal(runner.sandbox, info.session_id)
    return runner.sandbox


def landlock_refusal(policy: SandboxPolicy | None, session_id: str) -> ToolError | None:
    """Why a session's commands must not run under ``policy``, or None. Landlock cannot hide
    other processes' command lines and environments (``/proc/*/cmdline``: no pid namespace),
    so it runs commands only for sessions of the default tenant (a one-tenant fleet); a
    session of a named tenant needs bwrap (docs/sandbox.md, "Landlock and tenants")."""
    if policy is None or policy.mechanism is not Mechanism.LANDLOCK:
        return None
    tenant = tenant_of_session(session_id)
    if tenant == DEFAULT_TENANT:
        return None
    return ToolError.custom(
        ErrorCode.SANDBOX_UNAVAILABLE,
        f"refused: commands of tenant {tenant!r} cannot run here: this worker confines commands "
        "with Landlock, which cannot hide other sessions' processes; multi-tenant sessions "
        "need bwrap",
        tenant=tenant,
    )


def session_sandbox(
    config: ToolSetConfig,
    *,
    workspace: Path,
    session_id: str,
    session_dir: Path,
    builder: ToolSetBuilder,
) -> tuple[SandboxPolicy | None, Workspace]:
    """The sandbox a session's commands run under and its pinned workspace, from its config
    alone (no fleet resources, no MCP sources): for the host's background holder, which
    derives them itself instead of trusting what a request says."""
    container = Container()
    install_local_resources(
        container, workspace=workspace, session_dir=session_dir, session_id=session_id
    )
    builder.build(config, container=container, session_id=session_id)
    ws = container.get(Workspace)
    assert ws is not None
    return configure_sandbox(container, workspace=workspace, session_dir=session_dir), ws


@dataclass(frozen=True, slots=True)
class Fleet:
    """What a session on a fleet needs for its Redis-backed resources."""

    client: Redis
    app: Celery
    settings: Settings
    #: This process runs the fleet's calls under their records (a worker): its external MCP
    #: calls record the remote tasks they poll. A dispatcher runs external calls with no record
    #: to keep one in, so it spares them the lookup.
    runs_calls: bool = False
    #: The session's tenant's quotas: its background tasks count against them.
    quotas: QuotaLimits | None = None


@dataclass(slots=True)
class Assembled:
    toolset: ToolSet
    #: The compare-and-set state attached to the container (fleet sessions only).
    state: RedisStateSync | None = None
    sources: AttachedSources | None = None
    warnings: list[str] = field(default_factory=list)

    def close_sources(self) -> None:
        if self.sources is not None:
            self.sources.close()


def assemble(
    config: ToolSetConfig,
    *,
    workspace: Path,
    session_id: str,
    session_dir: Path,
    builder: ToolSetBuilder,
    fleet: Fleet | None = None,
) -> Assembled:
    """Build a session's tool set; ``fleet`` for one whose calls and state live in Redis."""
    container = Container()
    install_local_resources(
        container, workspace=workspace, session_dir=session_dir, session_id=session_id
    )
    state = None
    if fleet is not None:
        state = _install_fleet_resources(container, fleet, session_id, config)
    toolset = builder.build(config, container=container, session_id=session_id)
    configure_sandbox(container, workspace=workspace, session_dir=session_dir)
    wire_tool_catalog(toolset)
    from toolhub.sources.attach import attach_toolset_sources

    # A fleet's dispatcher starts no stdio MCP server: workers do
    # (``toolhub/sources/mcp_fleet_tools.py``).
    stdio = fleet is None or fleet.runs_calls
    sources = attach_toolset_sources(
        toolset, session_id=session_id, workspace=workspace, stdio=stdio
    )
    warnings = [*builder.plugin_errors, *(w.message for w in toolset.warnings)]
    if sources is not None:
        warnings += sources.warnings
    return Assembled(toolset, state, sources, warnings)


def _install_fleet_resources(
    container: Container, fleet: Fleet, session_id: str, config: ToolSetConfig
) -> RedisStateSync:
    """Replace the per-process background tasks and answer box with the Redis ones, so that
    ``task_output``/``wait_tasks``/``kill_task`` and ``Session.answer`` work from any
    dispatcher and worker, give a worker the ledger of remote MCP tasks (the attempt after a
    lost one polls the task instead of calling the tool again), and attach compare-and-set
    state (returned)."""
    from toolhub.answers.redis import RedisAnswerBox
    from toolhub.approvals.base import PendingApprovals
    from toolhub.backends.remote_task_ledger import RemoteTaskLedger
    from toolhub.distributed.approvals import WaitingApprovals
    from toolhub.distributed.keys import Keys
    from toolhub.distributed.redis_task_ledger import RedisRemoteTaskLedger
    from toolhub.state.redis import RedisStateSync
    from toolhub.tasks.redis import RedisBackgroundTasks

    settings, keys = fleet.settings, Keys(fleet.settings.prefix)
    tasks = RedisBackgroundTasks(
        fleet.client,
        fleet.app,
        settings,
        session_id,
        config.config_hash(),
        per_session=_tasks_per_session,
        quotas=fleet.quotas,
    )
    container.insert(tasks, BackgroundTasks)
    answers = RedisAnswerBox(fleet.client, keys, session_id, settings.record_ttl_seconds)
    container.insert(answers, AnswerBox)
    if fleet.runs_calls:
        container.insert(RedisRemoteTaskLedger(fleet.client, keys), RemoteTaskLedger)
    if fleet.runs_calls and config.permissions is not None:
        # The reminder of calls awaiting approval runs where calls finish: here, and only
        # for sessions with permission rules (it costs each call a round trip).
        container.insert(WaitingApprovals(fleet.client, keys, session_id), PendingApprovals)
    state = RedisStateSync(fleet.client, keys.state(session_id))
    container.attach_state_sync(state)
    return state


def wire_tool_catalog(toolset: ToolSet) -> None:
    """Give the meta-tools what they search and check: the enabled built-in names, and an
    index of external tools kept current as they are registered and unregistered."""
    container = toolset.container
    names = frozenset(name for name, entry in toolset.entries.items() if not entry.external)
    container.insert(EnabledToolNames(names))
    index = container.get(ToolIndex)
    if index is None:
        index = InMemoryToolIndex()
        container.insert(index, ToolIndex)
    if isinstance(index, InMemoryToolIndex):
        catalog = index

        def sync(spec: ExternalSpec, added: bool) -> None:
            if added:
                catalog.add(ToolEntry(spec.name, spec.description, spec.input_schema))
            else:
                catalog.remove(spec.name)

        toolset.external_listeners.append(sync)
        for spec in toolset.external_specs():
            sync(spec, True)


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
