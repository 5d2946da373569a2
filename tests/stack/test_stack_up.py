"""``toolhub up`` as a user runs it: the stack starts, a call goes through the gateway to a
worker, and SIGINT leaves no process behind."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest
from redis import Redis
from redis.exceptions import RedisError

from toolhub.ports import free_port
from toolhub.stack.supervisor import descendants

pytestmark = pytest.mark.timeout(240)

TOOLHUB = str(Path(sys.executable).with_name("toolhub"))


def clean_env(home: Path) -> dict[str, str]:
    """This environment without any TOOLHUB_* setting (other suites export some)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TOOLHUB_") or k == "TOOLHUB_ALLOW_ROOT"
    }
    return {**env, "TOOLHUB_HOME": str(home)}


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]
    except (FileNotFoundError, IndexError):
        return True
    return state == "Z"


def ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _redis_server(pids: set[int]) -> tuple[int, Path]:
    """The stack's Redis port (from its process title, ``redis-server 127.0.0.1:<port>``) and
    its working directory."""
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            title = proc.cmdline()
            if title and "redis-server" in title[0]:
                return int(" ".join(title).rsplit(":", 1)[1].split()[0]), Path(proc.cwd())
        except (psutil.Error, ValueError, IndexError):
            continue
    raise AssertionError("no redis-server in the stack")


def test_up_serves_a_call_and_stops_everything_on_sigint(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "hello.txt").write_text("hello from the stack\n")
    port, flower_port, redis_port_asked = free_port(), free_port(), free_port()
    env = {**clean_env(tmp_path / "home"), "COLUMNS": "80"}
    proc = subprocess.Popen(
        [
            TOOLHUB,
            "up",
            "--workers",
            "1",
            "--port",
            str(port),
            "--flower-port",
            str(flower_port),
            "--redis-port",
            str(redis_port_asked),
            "--metrics-port",
            str(free_port()),  # not the default: another stack on this host may hold it
        ],
        cwd=workspace,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    printed: list[str] = []
    reader = threading.Thread(target=lambda: printed.extend(proc.stdout or []), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120  # a busy machine: seen at 60 s with a CPU job beside
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            if ok(f"{url}/readyz") and ok(f"http://127.0.0.1:{flower_port}/healthcheck"):
                break
            assert time.monotonic() < deadline, "stack not ready in 120s"
            time.sleep(0.2)
        family = descendants(proc.pid)
        assert len(family) >= 4, "redis, a worker, the gateway and Flower"
        with httpx.Client(base_url=url, timeout=30) as client:
            sid = client.post("/v1/sessions", json={}).json()["session_id"]
            result = client.post(
                f"/v1/sessions/{sid}/calls",
                json={"name": "read_file", "arguments": {"path": "hello.txt"}},
            ).json()
            assert "hello from the stack" in result["prompt_text"], result
            record = client.get(f"/v1/sessions/{sid}/calls/{result['call_id']}").json()
            assert record["status"] == "succeeded" and record.get("worker"), record
        # The connect lines it prints, pasted into another shell, reach this very stack.
        deadline = time.monotonic() + 30
        while not any("python: " in line for line in printed):
            assert time.monotonic() < deadline, "".join(printed)
            time.sleep(0.1)
        export = next(line.strip() for line in printed if line.strip().startswith("export "))
        assert f"127.0.0.1:{redis_port_asked}/0" in export and "TOOLHUB_FLEET_KEY" in export
        script = (
            "import os; from toolhub import Session; "
            f"s = Session.connect(os.environ['TOOLHUB_REDIS_URL'], workspace={str(workspace)!r}); "
            "print(s.call_sync('read_file', {'path': 'hello.txt'}).prompt_text); s.close()"
        )
        pasted = subprocess.run(
            ["bash", "-c", f"{export}; {sys.executable} -c {shlex.quote(script)}"],
            env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert "hello from the stack" in pasted.stdout, pasted.stderr
        # ... and `toolhub top` there reads the workers' metrics too, with no flags of its own.
        assert "TOOLHUB_METRICS_URLS=" in export
        top = subprocess.run(
            ["bash", "-c", f"{export}; {shlex.quote(TOOLHUB)} top --once --interval 0.5"],
            env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert top.returncode == 0, top.stderr
        assert "metrics: 1/1 up" in top.stdout and "Main:read_file" in top.stdout, top.stdout
        family |= descendants(proc.pid)
        redis_port, redis_dir = _redis_server(family)
        assert redis_port == redis_port_asked
        # Redis wants a password, kept in a file only its owner reads (not on the command
        # line, which any local user reads with ps).
        with pytest.raises(RedisError, match="authenticat"):
            Redis(port=redis_port, socket_timeout=5).ping()
        auth_conf = redis_dir / "auth.conf"
        assert auth_conf.stat().st_mode & 0o077 == 0
        assert "requirepass" in auth_conf.read_text()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        err = proc.stderr.read() if proc.stderr else ""
        reader.join(10)
    assert proc.returncode == 0, err
    out = "".join(printed)
    assert f"http://127.0.0.1:{port}" in out and f"http://127.0.0.1:{flower_port}" in out
    assert "password" in out and "stopped" in err
    # At 80 columns every value of the banner is whole on its line (issue 40).
    login = next(line for line in out.splitlines() if "Flower login" in line)
    assert re.fullmatch(r"\s+Flower login\s+user toolhub, password \S{16,}", login), login
    assert any(f"http://127.0.0.1:{flower_port}" in line for line in out.splitlines())
    # The Redis URL shown once, with its password, is the one that works.
    shown = next(word for word in out.split() if word.startswith("redis://:"))
    assert f"127.0.0.1:{redis_port}/0" in shown
    deadline = time.monotonic() + 10
    while not all(gone(pid) for pid in family) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [pid for pid in family if not gone(pid)] == [], "every process of the stack exited"
