"""Workers admit every session's stored config again against their own operator policy
(``workers/calls/toolsets.py``): a config that reached Redis without the gateway's admission — here,
written by a dispatcher that never admits — builds nothing, and its calls fail with
``policy_refused`` naming what was refused, while a session within the policy runs. The
tenant's root is judged from the stored workspace (``<root>/tenants/<tenant>``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_stack import shared_stack
from toolhub import Session

pytestmark = pytest.mark.timeout(180)


def bash_config(sandbox: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"enabled_background": False}
    if sandbox is not None:
        params["sandbox"] = sandbox
    return {"tools": [{"id": "Main:bash", "params": params}]}


def call(url: str, sid: str, config: dict[str, Any], workspace: Path, command: str) -> Any:
    workspace.mkdir(parents=True, exist_ok=True)
    with Session.connect(url, config, workspace, session_id=sid) as session:
        return session.call_sync("bash", {"command": command, "description": "probe"})


def test_a_config_outside_the_policy_runs_nothing_on_a_worker(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    stack = shared_stack(request)
    tag = time.time_ns()
    ws = tmp_path / "ws"
    unconfined = call(stack.url, f"pol-full-{tag}", bash_config({"mode": "full"}), ws, "touch ran")
    assert unconfined.is_error and unconfined.error is not None
    assert unconfined.error.code == "policy_refused", unconfined.error
    assert "sandbox.mode" in unconfined.error.detail and "nothing ran" in unconfined.error.detail
    assert not (ws / "ran").exists()
    legit = call(stack.url, f"pol-ro-{tag}", bash_config({"mode": "read_only"}), ws, "echo ok")
    assert not legit.is_error and legit.output is not None
    assert "ok" in legit.output.value["output"]
    assert "tool set refused" in stack.logs() and f"pol-full-{tag}" in stack.logs()


def test_read_paths_are_judged_against_the_stored_workspaces_tenant_root(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    stack = shared_stack(request)
    tag = time.time_ns()
    acme = tmp_path / "tenants" / "acme"
    (acme / "data").mkdir(parents=True)
    (acme / "data" / "notes.txt").write_text("acme's notes\n")
    (tmp_path / "tenants" / "other").mkdir()
    (tmp_path / "tenants" / "other" / "secret.txt").write_text("other's secret\n")
    own = bash_config({"read": [str(acme / "data")]})
    shared = call(stack.url, f"acme~pol-own-{tag}", own, acme / "ws", f"cat {acme}/data/notes.txt")
    assert not shared.is_error and shared.output is not None, shared.error
    assert "acme's notes" in shared.output.value["output"]
    other = bash_config({"read": [str(tmp_path / "tenants" / "other")]})
    command = f"cat {tmp_path}/tenants/other/secret.txt"
    stolen = call(stack.url, f"acme~pol-other-{tag}", other, acme / "ws", command)
    assert stolen.is_error and stolen.error is not None
    assert stolen.error.code == "policy_refused" and "sandbox.read[0]" in stolen.error.detail
