"""Escape 4: a command that finds the host's holder (under Landlock its socket is listed in
``/proc/net/unix`` and a pathname socket can be connected to) can ask it for nothing. Every
request must carry the workers' capability, which lives in a 0600 file of the home every
sandbox hides; a ``start`` that names its own workspace and sandbox gets neither; a worker's
``ping`` lists the commands of the session it names only. Real redis-server, real holder, a
command confined by real Landlock (and bwrap) as the workers confine theirs."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.fixtures_stack import Stack
from toolhub.backends.process import ProcessRunner
from toolhub.distributed.settings import Settings
from toolhub.sandbox import Mechanism, SandboxMode, SandboxPolicy, default_hidden, probe
from toolhub.sandbox.landlock_syscalls import abi_version
from workers.holder.client import HolderClient

pytestmark = pytest.mark.timeout(120)

#: What the command tries: the holder socket it finds listed, asked for a ping and for a start of
#: an unconfined command in ``/`` (with a guessed capability), the capability file itself, and
#: the holder's environment (its Redis URL, the fleet key).
ATTACK = r"""
import json, socket, sys
secret_file, ours, holder_pid = sys.argv[1], sys.argv[2], sys.argv[3]
# Only this test's holder: other holders of the host belong to other stacks.
paths = sorted({l.split()[-1] for l in open("/proc/net/unix") if l.split()[-1] == ours})
print("SOCKETS", len(paths))
forged = {"op": "start", "attempt": 1, "workspace": "/", "log_dir": "/tmp", "sandbox": None,
          "secret": "0" * 64,
          "message": {"call_id": "forged", "session_id": "victim", "command": "id",
                      "timeout_s": 5}}
for path in paths:
    for request in ({"op": "ping"}, forged):
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(10)
                s.connect(path)
                s.sendall(json.dumps(request).encode() + b"\n")
                print("REPLY", s.recv(65536).decode().strip())
        except OSError as exc:
            print("CONNECT-REFUSED", exc)
try:
    open(secret_file).read()
    print("SECRET-READ")
except OSError:
    print("SECRET-REFUSED")
try:
    open(f"/proc/{holder_pid}/environ", "rb").read()
    print("HOLDER-ENV-READ")
except OSError:
    print("HOLDER-ENV-REFUSED")
"""


def _mechanisms() -> list[object]:
    return [
        pytest.param(
            Mechanism.LANDLOCK, marks=pytest.mark.skipif(abi_version() < 1, reason="no Landlock")
        ),
        pytest.param(
            Mechanism.BWRAP, marks=pytest.mark.skipif(not probe().available, reason="no bwrap")
        ),
    ]


@pytest.mark.parametrize("mechanism", _mechanisms())
def test_a_command_can_ask_the_holder_for_nothing(
    live: Stack, tmp_path: Path, mechanism: Mechanism, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = HolderClient(Settings.from_env(live.url), home=live.home)
    assert client.keep(), "no holder answers the worker"
    holder = client.ping()
    assert holder is not None
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "attack.py").write_text(ATTACK)
    monkeypatch.setenv("TOOLHUB_HOME", str(live.home))
    policy = SandboxPolicy(
        ws,
        SandboxMode.WORKSPACE_WRITE,
        tmp_dir=tmp_path / "session" / "tmp",
        hidden=default_hidden(),
        mechanism=mechanism,
    )
    runner = ProcessRunner(ws, tmp_path / "logs", sandbox=policy)
    res = runner.run(
        f"python3 attack.py {client.paths.secret} {client.paths.socket} {holder['pid']}",
        log_name="attack",
        timeout_s=60,
    )
    out = res.output.head_and_tail(1 << 20)[0]
    assert "SECRET-REFUSED" in out and "HOLDER-ENV-REFUSED" in out, out
    replies = [json.loads(line[6:]) for line in out.splitlines() if line.startswith("REPLY ")]
    if mechanism is Mechanism.LANDLOCK:
        # Landlock hides no socket: it is found and reached, and the capability must hold.
        assert "SOCKETS 1" in out and len(replies) == 2, out
    for reply in replies:
        assert reply["ok"] is False and "capability" in reply["error"], out
        assert "commands" not in reply
    assert not (tmp_path / "logs" / "forged.log").exists()
    # The worker, holding the capability, is answered; a ping names its session's commands.
    answered = client.ping(session_id="victim")
    assert answered is not None and answered["commands"] == []


def test_a_request_without_the_capability_is_refused_and_logged(live: Stack) -> None:
    client = HolderClient(Settings.from_env(live.url), home=live.home)
    assert client.keep()
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(client.paths.socket))
        sock.sendall(json.dumps({"op": "ping"}).encode() + b"\n")
        reply = json.loads(sock.recv(65536))
    assert reply == {
        "ok": False,
        "error": "refused: the request does not carry the workers' capability",
    }
    log = client.paths.log.read_text()
    assert "refused a request from pid" in log and "WARNING" in log
    assert client.paths.secret.stat().st_mode & 0o077 == 0
