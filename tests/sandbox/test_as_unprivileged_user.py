"""The escapes of a session, as uid 10001 (the chart's user, every capability dropped,
``no_new_privs``) with bwrap (unprivileged user namespaces) and Landlock: a workspace swapped for
a symlink runs nothing (``workspace_moved``), kernel settings do not open for writing, and the
session's own work (``ls``, a file in the workspace, ``python -c``) runs. The probe runs on the
system's Python of this minor version with this checkout on ``PYTHONPATH`` (the test interpreter
lives under ``/root``, mode 700); skipped where the machine cannot do that."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UID = 10001

PROBE = r"""
import json, os, sys
from pathlib import Path
from toolhub.backends.process import ProcessRunner
from toolhub.core import ToolError
from toolhub.sandbox import Mechanism, SandboxMode, SandboxPolicy, probe
from toolhub.sandbox.landlock_syscalls import abi_version

base = Path(sys.argv[1])
found = {"uid": os.geteuid()}
for mechanism in (Mechanism.BWRAP, Mechanism.LANDLOCK):
    if (mechanism is Mechanism.BWRAP and not probe().available) or (
        mechanism is Mechanism.LANDLOCK and abi_version() < 1
    ):
        continue
    outer = base / mechanism.value / "outer"
    inner = outer / "inner"
    inner.mkdir(parents=True)
    tmp = base / mechanism.value / "tmp"
    policy = SandboxPolicy(inner, SandboxMode.WORKSPACE_WRITE, tmp_dir=tmp, mechanism=mechanism)
    runner = ProcessRunner(inner, base / mechanism.value / "logs", sandbox=policy)
    ok = runner.run(
        "echo made > made.txt; ls; python3 -c 'print(6*7)'; "
        "( : >> /proc/sys/kernel/core_pattern ) 2>/dev/null && echo WRITABLE; "
        "cat /etc/shadow 2>/dev/null | head -c 5",
        log_name="ok",
    )
    legit = ok.output.head_and_tail(1 << 20)[0]
    inner.rename(outer / "moved")
    inner.symlink_to(base)
    try:
        runner.run("echo pwned > planted.txt", log_name="swap")
        swapped = "RAN"
    except ToolError as exc:
        swapped = exc.code
    found[mechanism.value] = {"legit": legit, "swapped": swapped,
                              "planted": (base / "planted.txt").exists()}
print(json.dumps(found))
"""


def _command() -> list[str] | None:
    python = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    if os.geteuid() != 0 or shutil.which("setpriv") is None or not os.access(python, os.X_OK):
        return None
    path = os.pathsep.join([sysconfig.get_paths()["purelib"], str(REPO)])
    return [
        "setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups", "--inh-caps=-all",
        "--bounding-set=-all", "--no-new-privs", "--",
        "env", "-i", f"PYTHONPATH={path}", "PATH=/usr/local/bin:/usr/bin:/bin", python, "-c", PROBE,
    ]  # fmt: skip


def test_a_sessions_escapes_are_refused_as_uid_10001() -> None:
    command = _command()
    if command is None:
        pytest.skip(f"cannot run as uid {UID} here (root, setpriv, /usr/bin/python3.x)")
    base = Path(tempfile.mkdtemp(prefix="toolhub-uid-", dir="/var/tmp"))
    try:
        base.chmod(0o755)
        os.chown(base, UID, UID)
        out = subprocess.run(
            [*command, str(base)], capture_output=True, text=True, timeout=180, cwd="/"
        )
        if out.returncode != 0 and "No module named" in out.stderr:
            pytest.skip(f"this checkout's packages are not readable as uid {UID}: {out.stderr}")
        assert out.returncode == 0, out.stderr
        found = json.loads(out.stdout.splitlines()[-1])
        assert found["uid"] == UID
        ran = [m for m in ("bwrap", "landlock") if m in found]
        assert ran, found
        for mechanism in ran:
            result = found[mechanism]
            assert result["legit"].split() == ["made.txt", "42"], (mechanism, result)
            assert result["swapped"] == "workspace_moved" and not result["planted"], result
    finally:
        shutil.rmtree(base, ignore_errors=True)
