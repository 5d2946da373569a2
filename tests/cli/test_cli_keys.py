"""``toolhub keys create | list | revoke`` as an operator runs them (in this process,
``tests/cli/in_process.py``), and a real ``toolhub serve`` process that takes a created key and
refuses it once revoked, without a restart."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.cli.in_process import run_cli
from tests.cli.test_cli_servers import TOOLHUB, wait_http
from toolhub.ports import free_port

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No TOOLHUB_* setting of this process, a private home (and so key file)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TOOLHUB_")}
    root = {"TOOLHUB_ALLOW_ROOT": os.environ["TOOLHUB_ALLOW_ROOT"]} if os.geteuid() == 0 else {}
    return {**environ, **root, "TOOLHUB_HOME": str(tmp_path / "home")}


def keys(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(["keys", *args], env, cwd)


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_create_list_revoke(env: dict[str, str], tmp_path: Path) -> None:
    made = keys(["create", "--tenant", "acme", "--name", "ci bot"], env, tmp_path)
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    assert key.startswith("thk_") and made.stdout.count("\n") == 1, "the key alone on stdout"
    key_id = key.split("_")[1]
    assert key_id in made.stderr and "not shown again" in made.stderr
    path = Path(env["TOOLHUB_HOME"]) / "keys.json"
    assert key not in path.read_text()

    listed = keys(["list"], env, tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert key_id in listed.stdout and "acme" in listed.stdout and "ci bot" in listed.stdout
    stored = json.loads(path.read_text())["keys"][0]["sha256"]
    for shown in (listed.stdout + listed.stderr, keys(["list", "--json"], env, tmp_path).stdout):
        assert key not in shown and key.split("_", 2)[2] not in shown and stored not in shown
    rows = json.loads(keys(["list", "--json"], env, tmp_path).stdout)
    assert rows == [
        {
            "key_id": key_id,
            "tenant": "acme",
            "name": "ci bot",
            "created": rows[0]["created"],
            "revoked": False,
        }
    ]

    revoked = keys(["revoke", key_id], env, tmp_path)
    assert revoked.returncode == 0, revoked.stderr
    assert f"revoked key {key_id} of tenant acme" in revoked.stdout
    assert json.loads(keys(["list", "--json"], env, tmp_path).stdout)[0]["revoked"] is True


def test_the_file_is_named_by_the_environment_or_the_option(
    env: dict[str, str], tmp_path: Path
) -> None:
    named = tmp_path / "ops" / "fleet-keys.json"
    made = keys(["create", "--tenant", "acme"], {**env, "TOOLHUB_KEYS_FILE": str(named)}, tmp_path)
    assert made.returncode == 0, made.stderr
    assert named.is_file() and not (Path(env["TOOLHUB_HOME"]) / "keys.json").exists()
    listed = keys(["list", "--json", "--file", str(named)], env, tmp_path)
    assert [row["tenant"] for row in json.loads(listed.stdout)] == ["acme"]


def test_refusals_are_one_line(env: dict[str, str], tmp_path: Path) -> None:
    unknown = one_line_error(keys(["revoke", "feedfeedfeed"], env, tmp_path))
    assert "no key 'feedfeedfeed'" in unknown
    bad_tenant = one_line_error(keys(["create", "--tenant", "Not/A/Tenant"], env, tmp_path))
    assert "tenant name 'Not/A/Tenant'" in bad_tenant
    path = Path(env["TOOLHUB_HOME"]) / "keys.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[1, 2")
    assert "is malformed" in one_line_error(keys(["list"], env, tmp_path))
    assert "is malformed" in one_line_error(keys(["create", "--tenant", "acme"], env, tmp_path))


def test_serve_takes_a_key_and_refuses_it_once_revoked(env: dict[str, str], tmp_path: Path) -> None:
    kept = keys(["create", "--tenant", "acme", "--name", "kept"], env, tmp_path).stdout.strip()
    doomed = keys(["create", "--tenant", "acme", "--name", "leaked"], env, tmp_path).stdout.strip()
    port = free_port()
    proc = subprocess.Popen(
        [TOOLHUB, "serve", "--port", str(port), "--workspace", str(tmp_path)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/healthz", proc)
        with httpx.Client(base_url=url, timeout=30) as c:
            assert c.get("/v1/whoami").status_code == 401, "keys exist: no anonymous caller"
            me = c.get("/v1/whoami", headers={"Authorization": f"Bearer {doomed}"})
            assert me.json() == {"tenant": "acme", "key_id": doomed.split("_")[1]}

            assert keys(["revoke", doomed.split("_")[1]], env, tmp_path).returncode == 0
            deadline = time.monotonic() + 15
            while True:
                answer = c.get("/v1/whoami", headers={"Authorization": f"Bearer {doomed}"})
                if answer.status_code == 401:
                    break
                assert time.monotonic() < deadline, "the revoked key is still accepted"
                time.sleep(0.2)
            assert answer.json() == {"detail": "revoked API key"}
            still = c.get("/v1/whoami", headers={"Authorization": f"Bearer {kept}"})
            assert still.json()["tenant"] == "acme"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert "API keys, multi-tenant" in err
    assert doomed not in err and kept not in err, "no key reaches the log"
    assert "revoked API key" in err and doomed.split("_")[1] in err, "the refusal is logged"
