"""``toolhub tasks list | show ID | logs ID [--follow] | kill ID``: background commands.

With ``--redis``/``TOOLHUB_REDIS_URL`` the tasks are the durable ones in Redis (every session's,
or one session's with ``--session``), followed live through their event streams. Embedded,
a background command belongs to the process that started it: its state dies with that process
but its log stays in the session directory, so ``list``, ``show`` and ``logs`` read the logs and
``kill`` is refused (use the ``kill_task`` tool from the session that started it).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from .embedded import RedisOpt
from .output import fail, print_json, stderr, stdout
from .task_table import task_tables
from .terminal_safe import clean

tasks_app = typer.Typer(help="Background commands: list, show, logs, kill.", no_args_is_help=True)

SessionOpt = Annotated[str | None, typer.Option("--session", help="Only this session's tasks.")]
WorkspaceOpt = Annotated[Path | None, typer.Option(help="Workspace (embedded).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def register(app: typer.Typer) -> None:
    app.add_typer(tasks_app, name="tasks")


# -- distributed -----------------------------------------------------------------------------------


class RedisTasks:
    def __init__(self, redis_url: str) -> None:
        from toolhub.distributed.settings import Settings
        from toolhub.distributed.shared import shared_backend
        from toolhub.tasks.redis import RedisBackgroundTasks

        settings = Settings.from_env(redis_url)
        self.store, app = shared_backend(settings)
        self.tasks = RedisBackgroundTasks(self.store.client, app, settings, "")

    @classmethod
    def connect(cls, redis_url: str) -> RedisTasks:
        """The Redis task backend, or exit 1 with a clear message when Redis is unreachable."""
        from redis.exceptions import RedisError

        from toolhub.errors import redis_reason

        backend = cls(redis_url)
        try:
            backend.store.client.ping()
        except RedisError as exc:
            fail(f"cannot reach Redis: {redis_reason(exc)}")
        return backend

    def list(self, session: str | None) -> Sequence[Any]:
        return self.tasks.list(session) if session else self.tasks.list_all()

    def logs(self, task_id: str, follow: bool) -> None:
        from toolhub.core import CallResult

        if self.tasks.snapshot(task_id) is None:
            fail(f"no background task {task_id!r}")
        last = 0
        for event in self.store.read_events(task_id):
            last = event.seq
            _write_delta(event.item)
            if isinstance(event.item, CallResult):
                return
        if follow:
            asyncio.run(self._follow(task_id, last))

    async def _follow(self, task_id: str, after: int) -> None:
        async for event in self.store.follow(task_id, after):
            _write_delta(event.item)


def _write_delta(item: Any) -> None:
    payload = getattr(item, "payload", None)
    if isinstance(payload, dict) and isinstance(payload.get("delta"), str):
        stdout.file.write(clean(payload["delta"]))
        stdout.file.flush()
    elif getattr(item, "subkind", None) == "retry":
        attempt = payload.get("attempt") if isinstance(payload, dict) else None
        stderr.print(
            "[yellow]-- host lost: the command restarted from the beginning"
            + (f" (attempt {attempt})" if attempt else "")
            + " --[/]"
        )


# -- embedded ------------------------------------------------------------------------------------


def _terminal_dir(workspace: Path | None, session: str | None) -> Path:
    from toolhub.assembly import toolhub_home, workspace_session_id

    root = (workspace or Path(os.environ.get("TOOLHUB_WORKSPACE", "."))).expanduser().resolve()
    sid = session or workspace_session_id(root)
    return toolhub_home() / "sessions" / sid / "terminal"


def _embedded_logs(workspace: Path | None, session: str | None) -> list[Path]:
    directory = _terminal_dir(workspace, session)
    if not directory.is_dir():
        return []
    return sorted(directory.glob("task-*.log"), key=lambda p: p.stat().st_mtime)


def _embedded_log(workspace: Path | None, session: str | None, task_id: str) -> Path:
    known = [p.stem for p in _embedded_logs(workspace, session)]
    if known and task_id not in known:
        task_id = _resolve(task_id, known)
    path = _terminal_dir(workspace, session) / f"{task_id}.log"
    if not path.is_file():
        fail(f"no background task {task_id!r} in this workspace's embedded session")
    return path


def _mtime(path: Path) -> str:
    return datetime.fromtimestamp(path.stat().st_mtime, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _resolve(task_id: str, known: Sequence[str]) -> str:
    """``task_id`` itself, or the one known id it is a prefix of; a clear failure otherwise."""
    if task_id in known:
        return task_id
    matches = sorted(k for k in known if k.startswith(task_id))
    if len(matches) == 1:
        return matches[0]
    if matches:
        fail(f"{task_id!r} is ambiguous: {', '.join(matches[:10])}")
    fail(f"no background task {task_id!r}")


def _redis_task(backend: RedisTasks, task_id: str) -> str:
    if backend.tasks.snapshot(task_id) is not None:
        return task_id
    return _resolve(task_id, [t.task_id for t in backend.list(None)])


# -- commands --------------------------------------------------------------------------------------


@tasks_app.command("list")
def list_tasks(
    session: SessionOpt = None,
    workspace: WorkspaceOpt = None,
    redis: RedisOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Every background task (of one session with --session)."""
    if redis:
        backend = RedisTasks.connect(redis)
        tasks = backend.list(session)
        if as_json:
            print_json([t.model_dump(mode="json", exclude={"output"}) for t in tasks])
            return
        if not tasks:
            stderr.print("no background tasks", highlight=False)
        for table in task_tables(tasks, stdout.width):
            stdout.print(table)
        return
    logs = _embedded_logs(workspace, session)
    if as_json:
        print_json(
            [{"task_id": p.stem, "log_path": str(p), "bytes": p.stat().st_size} for p in logs]
        )
        return
    table = Table(title=f"{len(logs)} embedded background task log(s)")
    for column in ("task", "log bytes", "last output (UTC)"):
        table.add_column(column, no_wrap=True)
    table.add_column("log", overflow="fold")
    for path in logs:
        table.add_row(path.stem, str(path.stat().st_size), _mtime(path), str(path))
    stdout.print(table)
    stderr.print(
        "[dim]embedded tasks live in the process that started them; set TOOLHUB_REDIS_URL "
        "(or --redis) for the tasks of a running stack[/]",
        highlight=False,
    )


@tasks_app.command("show")
def show(
    task_id: Annotated[str, typer.Argument(help="Task id, or a unique prefix of one.")],
    session: SessionOpt = None,
    workspace: WorkspaceOpt = None,
    redis: RedisOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One task: status, exit code, timings and the tail of its output."""
    if redis:
        backend = RedisTasks.connect(redis)
        snap = backend.tasks.snapshot(_redis_task(backend, task_id))
        if snap is None:
            fail(f"no background task {task_id!r}")
        if as_json:
            print_json(snap.model_dump(mode="json"))
            return
        stdout.print(f"[bold]{snap.task_id}[/]  ", end="", highlight=False)
        stdout.print(clean(snap.status_text), highlight=False, markup=False)
        if snap.restart_note:
            stdout.print(f"  {clean(snap.restart_note)}", highlight=False, markup=False)
        for label, value in (
            ("command", snap.command),
            ("session", snap.owner_session),
            ("exit code", snap.exit_code),
            ("started", snap.started_at.isoformat()),
            ("finished", snap.finished_at.isoformat() if snap.finished_at else None),
            ("output bytes", snap.output_bytes),
        ):
            if value not in (None, ""):
                stdout.print(clean(f"  {label}: {value}"), highlight=False, markup=False)
        if snap.output:
            stdout.print("  output (tail):", highlight=False)
            typer.echo(clean(snap.output))
        return
    path = _embedded_log(workspace, session, task_id)
    if as_json:
        print_json({"task_id": task_id, "log_path": str(path), "bytes": path.stat().st_size})
        return
    stdout.print(f"[bold]{task_id}[/]  (embedded; log {path})", highlight=False)
    typer.echo(clean(path.read_bytes()[-8000:].decode("utf-8", "replace")))


@tasks_app.command("logs")
def logs(
    task_id: Annotated[str, typer.Argument(help="Task id, or a unique prefix of one.")],
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new output.")
    ] = False,
    session: SessionOpt = None,
    workspace: WorkspaceOpt = None,
    redis: RedisOpt = None,
) -> None:
    """The task's whole output; with --follow, live until it ends."""
    if redis:
        backend = RedisTasks.connect(redis)
        backend.logs(_redis_task(backend, task_id), follow)
        return
    path = _embedded_log(workspace, session, task_id)
    with path.open("rb") as handle:
        while True:
            chunk = handle.read(65536)
            if chunk:
                stdout.file.write(clean(chunk.decode("utf-8", "replace")))
                stdout.file.flush()
            elif not follow:
                return
            else:
                time.sleep(0.2)


@tasks_app.command("kill")
def kill(
    task_id: Annotated[str, typer.Argument(help="Task id, or a unique prefix of one.")],
    redis: RedisOpt = None,
) -> None:
    """Kill a running task (its whole process group)."""
    if not redis:
        fail(
            "embedded background tasks can only be killed by the process that started them "
            "(the kill_task tool); set TOOLHUB_REDIS_URL for the tasks of a running stack"
        )
    backend = RedisTasks.connect(redis)
    task_id = _redis_task(backend, task_id)
    outcome = backend.tasks.kill(task_id)
    if outcome == "not_found":
        fail(f"no background task {task_id!r}")
    typer.echo(f"{task_id}: {outcome.replace('_', ' ')}")
