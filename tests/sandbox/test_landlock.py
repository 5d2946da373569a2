"""The Landlock fallback with the real kernel: in each confined mode, what a command tries
beyond its workspace is refused (another session's files, writes elsewhere, the worker's
``/proc/<pid>/environ``, TCP when network is off, its home), while its work is done; and where
bwrap cannot run, ``auto`` picks Landlock under the chart's security context as closely as this
machine can emulate it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from toolhub.sandbox import Mechanism, SandboxMode
from toolhub.sandbox.landlock_syscalls import abi_version

from .conftest import Layout, text

pytestmark = pytest.mark.skipif(abi_version() < 1, reason="the kernel has no Landlock")
REPO = Path(__file__).resolve().parents[2]


def _policy(layout: Layout, mode: SandboxMode, **kw: object):  # type: ignore[no-untyped-def]
    return layout.policy(mode, mechanism=Mechanism.LANDLOCK, **kw)


def _listener() -> tuple[socket.socket, int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    threading.Thread(target=lambda: server.accept(), daemon=True).start()
    return server, server.getsockname()[1]


@pytest.mark.parametrize("mode", [SandboxMode.WORKSPACE_WRITE, SandboxMode.READ_ONLY])
def test_a_command_reaches_nothing_beyond_its_workspace(
    layout: Layout, secrets: dict[str, str], mode: SandboxMode
) -> None:
    (layout.ws / "input.txt").write_text("data\n")
    server, port = _listener()
    try:
        res = layout.runner(_policy(layout, mode)).run(
            "cat input.txt; "
            f"cat {layout.other}/notes.txt 2>/dev/null || echo OTHER-REFUSED; "
            f"echo x > {layout.outside}/escape.txt 2>/dev/null || echo WRITE-REFUSED; "
            "echo x > link/via-symlink.txt 2>/dev/null || echo LINK-WRITE-REFUSED; "
            f"cat /proc/{os.getpid()}/environ 2>/dev/null || echo ENVIRON-REFUSED; "
            f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null || echo NET-REFUSED; "
            f"ls {Path.home()} >/dev/null 2>&1 || echo HOME-REFUSED; "
            'echo t > "$TMPDIR/t" && cat "$TMPDIR/t"; '
            "echo out > result.txt 2>/dev/null || echo WS-WRITE-REFUSED; "
            "env",
            log_name=f"ll-{mode.value}",
        )
    finally:
        server.close()
    out = text(res)
    assert out.startswith("data\n"), out
    for refused in (
        "OTHER-REFUSED",
        "WRITE-REFUSED",
        "LINK-WRITE-REFUSED",
        "ENVIRON-REFUSED",
        "NET-REFUSED",
        "HOME-REFUSED",
    ):
        assert refused in out, (refused, out)
    assert "c0nfidential-notes" not in out and "\nt\n" in out
    assert not any(value in out for value in secrets.values()), out
    assert not (layout.outside / "escape.txt").exists()
    if mode is SandboxMode.WORKSPACE_WRITE:
        assert (layout.ws / "result.txt").read_text() == "out\n"
    else:
        assert "WS-WRITE-REFUSED" in out and not (layout.ws / "result.txt").exists()


def test_network_true_lets_a_command_connect(layout: Layout) -> None:
    server, port = _listener()
    try:
        res = layout.runner(_policy(layout, SandboxMode.WORKSPACE_WRITE, network=True)).run(
            f"(exec 3<>/dev/tcp/127.0.0.1/{port}) && echo NET-OPEN", log_name="ll-net"
        )
    finally:
        server.close()
    assert text(res) == "NET-OPEN\n"


EMULATED = """
import json, sys
from pathlib import Path
from toolhub.backends.process import ProcessRunner
from toolhub.sandbox import SandboxSettings, enforce
base = Path(sys.argv[1])
settings = SandboxSettings(hide=[str(base / "other-session")])
policy = settings.policy(base / "ws", tmp_dir=base / "tmp")
chosen = enforce(policy, require=True)
res = ProcessRunner(base / "ws", base / "logs", sandbox=chosen).run(
    "echo legit > done.txt; cat ../other-session/notes.txt 2>/dev/null || echo OTHER-REFUSED",
    log_name="emulated")
out = res.output.head_and_tail(4096)[0]
print(json.dumps({"mechanism": chosen.mechanism.value, "output": out}))
"""


@pytest.mark.skipif(not Path("/usr/bin/setpriv").exists(), reason="needs util-linux setpriv")
def test_where_bwrap_cannot_run_auto_confines_with_landlock(layout: Layout) -> None:
    """The chart's pods: no capabilities, no privilege escalation, and a seccomp profile under
    which bwrap cannot create its namespaces. Emulated: every capability dropped from every
    set, ``no_new_privs``, and a bwrap that fails (``TOOLHUB_BWRAP=/bin/false``). Not emulated:
    uid 10001 (the interpreter lives under /root, mode 700) and the seccomp filter itself."""
    env = {**os.environ, "TOOLHUB_BWRAP": "/bin/false", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [
            "setpriv",
            "--inh-caps=-all",
            "--ambient-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            sys.executable,
            "-c",
            EMULATED,
            str(layout.base),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["mechanism"] == "landlock"
    assert "OTHER-REFUSED" in report["output"] and "c0nfidential" not in report["output"]
    assert (layout.ws / "done.txt").read_text() == "legit\n"
    assert "confined with Landlock" in done.stderr  # said once, at WARNING
