"""``toolhub approvals list | approve CALL_ID | deny CALL_ID``: calls on a fleet awaiting a
person's approval (docs/approvals.md).

The operator's face, straight on Redis (``--redis``/``TOOLHUB_REDIS_URL``): ``list`` shows
every session's waiting calls (or one session's); ``approve`` and ``deny`` take the call's
session (``--session``), rebuild it from its stored config as a gateway replica would, and
decide as ``operator:<user>`` (or ``--as``), under the operator policy (``TOOLHUB_POLICY``).
A tenant decides through the gateway (``POST …/calls/{id}/approval``).
"""

from __future__ import annotations

import getpass
import json
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.table import Table

from .embedded import RedisOpt
from .output import fail, print_json, stdout
from .terminal_safe import clean

approvals_app = typer.Typer(
    help="Calls awaiting approval: list, approve, deny.", no_args_is_help=True
)

SessionOpt = Annotated[str | None, typer.Option("--session", help="The call's session id.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
AsOpt = Annotated[str | None, typer.Option("--as", help="Who decides (default: operator:USER).")]


def register(app: typer.Typer) -> None:
    app.add_typer(approvals_app, name="approvals")


def _store(redis: str | None) -> Any:
    from redis.exceptions import RedisError

    from toolhub.distributed.settings import Settings
    from toolhub.distributed.shared import shared_backend

    if not redis:
        fail("approvals live in Redis: give --redis or TOOLHUB_REDIS_URL")
    store, _ = shared_backend(Settings.from_env(redis))
    try:
        store.client.ping()
    except RedisError as exc:
        fail(f"cannot reach Redis: {exc}")
    return store


@approvals_app.command("list")
def list_approvals(
    redis: RedisOpt = None, session: SessionOpt = None, json_: JsonOpt = False
) -> None:
    """Calls awaiting approval, oldest first."""
    store = _store(redis)
    keys = store.keys
    if session:
        sessions = [session]
    else:
        pattern = keys.approvals("*")
        prefix, suffix = pattern.split("*")
        sessions = [
            k.decode()[len(prefix) : -len(suffix)] for k in store.client.scan_iter(match=pattern)
        ]
    rows = []
    for sid in sorted(sessions):
        for cid in store.approvals.waiting(sid):
            record = store.approvals.record(cid)
            if record is None or record.get("status") != "awaiting_approval":
                continue
            approval = record.get("approval") or {}
            rows.append(
                {
                    "session_id": sid,
                    "call_id": cid,
                    "name": record.get("name"),
                    "arguments": approval.get("arguments"),
                    "rule": approval.get("rule"),
                    "expires_at": approval.get("expires_at"),
                }
            )
    if json_:
        print_json(rows)
        return
    if not rows:
        stdout.print("No call awaits approval.")
        return
    table = Table("session", "call", "tool", "arguments", "rule", "expires")
    for row in rows:
        expires = datetime.fromtimestamp(float(row["expires_at"] or 0), UTC)
        table.add_row(
            clean(row["session_id"]),
            clean(row["call_id"]),
            clean(str(row["name"])),
            clean(json.dumps(row["arguments"])[:200]),
            clean(str(row["rule"])),
            expires.strftime("%H:%M:%S"),
        )
    stdout.print(table)


@approvals_app.command("approve")
def approve(
    call_id: str,
    session: SessionOpt = None,
    arguments: Annotated[
        str | None, typer.Option("--arguments", help="Edited arguments (a JSON object).")
    ] = None,
    redis: RedisOpt = None,
    who: AsOpt = None,
) -> None:
    """Approve a waiting call: it is queued, once, and runs on a worker."""
    edited = None
    if arguments is not None:
        try:
            edited = json.loads(arguments)
        except ValueError as exc:
            fail(f"--arguments is not JSON: {exc}")
        if not isinstance(edited, dict):
            fail("--arguments must be a JSON object")
    _decide(
        redis, session, call_id, lambda s, p: s.approve(call_id, arguments=edited, principal=p), who
    )


@approvals_app.command("deny")
def deny(
    call_id: str,
    session: SessionOpt = None,
    reason: Annotated[str | None, typer.Option("--reason", help="Why.")] = None,
    redis: RedisOpt = None,
    who: AsOpt = None,
) -> None:
    """Deny a waiting call: its caller gets `permission_denied`; nothing runs."""
    _decide(redis, session, call_id, lambda s, p: s.deny(call_id, reason, principal=p), who)


def _decide(
    redis: str | None, session: str | None, call_id: str, act: Any, who: str | None
) -> None:
    from toolhub import Session
    from toolhub.approvals.base import ApprovalRefused
    from toolhub.tenancy.policy import OperatorPolicy

    store = _store(redis)
    record = store.approvals.record(call_id)
    sid = session or (record or {}).get("session_id")
    stored = store.get_session(sid) if sid else None
    if record is None or stored is None or record.get("session_id") != sid:
        fail(f"no call {call_id!r} awaits approval" + (f" in session {sid!r}" if sid else ""))
    policy = OperatorPolicy.load()
    opened = Session.connect(
        redis or "",
        json.loads(stored["config"]),
        stored["workspace"],
        session_id=sid,
        permissions=policy.permissions,
    )
    principal = who or f"operator:{getpass.getuser()}"
    try:
        done = act(opened, principal)
    except ApprovalRefused as refused:
        fail(f"{refused.detail} ({refused.code})")
    finally:
        opened.close()
    stdout.print(f"{clean(call_id)}: {clean(str(done.get('status')))} (by {clean(principal)})")
