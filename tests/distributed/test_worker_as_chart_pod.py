"""The worker as the Helm chart runs it, emulated as closely as this machine allows: uid and gid
10001 (not root), every capability dropped from every set, ``no_new_privs`` (what
``allowPrivilegeEscalation: false`` sets), an interpreter and a toolhub that user can reach.
Two ways it confines commands there:

* ``landlock (chart)``: bwrap fails, as it does where the pod's RuntimeDefault seccomp profile
  refuses user namespaces, so ``auto`` falls back to Landlock, which needs no privilege;
* ``bwrap (unprivileged)``: a non-root worker on a host that allows unprivileged user
  namespaces (compose, a VM) keeps bubblewrap.

Either way the probe command of ``tests/workers/guards/test_sandboxing.py`` does its work and every
way out is refused. Not emulated: the seccomp filter itself (no container engine here), so bwrap's
failure under it is stood in for by a bwrap that fails.

Needs ``setpriv`` and a system Python of this venv's minor version outside ``/root`` (the test
interpreter under pyenv is not reachable for uid 10001); the test says so when they are absent.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures_stack import REPO, WorkerProcess
from tests.sandbox.conftest import requires_bwrap
from tests.workers.guards.test_sandboxing import (
    TOKEN,
    Fleet,
    _other,
    run_probe,
)
from toolhub.stack import RedisServer

pytestmark = [requires_bwrap, pytest.mark.timeout(120)]

CHART_UID = 10001
MECHANISMS = {"bwrap (unprivileged)": {}, "landlock (chart)": {"TOOLHUB_BWRAP": "/bin/false"}}


def _as_chart_user() -> list[str]:
    return [
        "setpriv",
        f"--reuid={CHART_UID}",
        f"--regid={CHART_UID}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]


def _chart_worker() -> tuple[list[str], str] | None:
    """How to start ``toolhub`` as the chart's user, and its ``PYTHONPATH``; ``None`` when this
    machine has no way (no ``setpriv``, no reachable interpreter of this minor version)."""
    python = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    if shutil.which("setpriv") is None or not os.access(python, os.X_OK):
        return None
    path = os.pathsep.join([sysconfig.get_paths()["purelib"], str(REPO)])
    check = [*_as_chart_user(), "env", "-i", f"PYTHONPATH={path}", python, "-c"]
    probe = subprocess.run(
        [*check, "import toolhub.cli.main, celery, redis"], capture_output=True, timeout=60
    )
    if probe.returncode != 0:
        return None
    return [*_as_chart_user(), python, "-c", "from toolhub.cli.main import main; main()"], path


@pytest.fixture(scope="module", params=sorted(MECHANISMS))
def fleet(request: pytest.FixtureRequest) -> Iterator[Fleet]:
    found = _chart_worker()
    if found is None:
        pytest.skip(f"cannot run toolhub as uid {CHART_UID} here (setpriv, /usr/bin/python3.x)")
    command, pythonpath = found
    base = Path(tempfile.mkdtemp(prefix="toolhub-chart-", dir="/var/tmp"))
    base.chmod(0o755)
    root, home = base / "workspaces", base / "home"
    for d in (root, home):
        d.mkdir()
        os.chown(d, CHART_UID, CHART_UID)
    redis = RedisServer().start()
    worker = WorkerProcess(
        "chart",
        redis.url,
        home,
        command=command,
        env={
            "TOOLHUB_SANDBOX": "",
            "TOOLHUB_WORKSPACE_ROOT": str(root),
            "TOOLHUB_API_TOKEN": TOKEN,
            "HOME": str(home),
            "PYTHONPATH": pythonpath,
            **MECHANISMS[request.param],
        },
    )
    try:
        worker.start()
        worker.wait_ready(60)
        yield Fleet(redis, worker, root, home)
    finally:
        worker.stop()
        redis.stop()
        shutil.rmtree(base, ignore_errors=True)


def test_the_worker_runs_as_the_charts_user_without_privilege(fleet: Fleet) -> None:
    status = Path(f"/proc/{fleet.worker.pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    assert fields["Uid"].split()[0] == str(CHART_UID)
    assert int(fields["CapEff"], 16) == 0 and int(fields["CapBnd"], 16) == 0
    assert fields["NoNewPrivs"].strip() == "1"


def test_a_command_is_confined_under_the_charts_security_context(fleet: Fleet) -> None:
    other = _other(fleet)
    os.chown(other, CHART_UID, CHART_UID)
    session, ws = fleet.session("a")
    os.chown(ws, CHART_UID, CHART_UID)
    run_probe(fleet, session, ws, other)
