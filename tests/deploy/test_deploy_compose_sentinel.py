"""``compose/sentinel.yml``: Redis with failover on one Docker host. No Docker engine runs
here, so the file is checked against the Compose specification and for what it gives each
toolhub service, and its Sentinel entrypoint is run by a real shell with a real
``redis-server --sentinel`` watching a real primary."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import redis as redis_client
import yaml

from tests.deploy.deploy_helpers import COMPOSE
from tests.deploy.test_deploy_compose import SERVICES, SPEC
from toolhub.distributed.redis_address import parse_redis_url
from toolhub.ports import free_port
from toolhub.stack import RedisServer, find_redis_server

OVERRIDE = COMPOSE.parent / "sentinel.yml"
DOC: dict[str, Any] = yaml.safe_load(OVERRIDE.read_text())
OVERRIDES: dict[str, dict[str, Any]] = DOC["services"]


def test_the_override_matches_the_compose_specification() -> None:
    validator = jsonschema.Draft7Validator(SPEC)
    problems = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(DOC)]
    assert problems == []


def test_every_toolhub_service_is_given_the_sentinels_not_the_primary() -> None:
    toolhub_services = {n for n, s in SERVICES.items() if "build" in s}
    for name in toolhub_services:
        url = OVERRIDES[name]["environment"]["TOOLHUB_REDIS_URL"]
        address = parse_redis_url(re.sub(r"\$\{REDIS_PASSWORD[^}]*\}", "pw", url))
        assert address.is_sentinel and address.service == "toolhub", name
        assert [h for h, _ in address.sentinels] == ["sentinel-1", "sentinel-2", "sentinel-3"]


def test_the_sentinels_watch_the_primary_under_the_urls_service_within_a_lease() -> None:
    for n in (1, 2, 3):
        script = OVERRIDES[f"sentinel-{n}"]["entrypoint"][2]
        assert "sentinel monitor toolhub redis 6379 2" in script
        down_after = int(re.search(r"down-after-milliseconds toolhub (\d+)", script)[1])
        assert down_after <= 5000, "detection must stay well inside a 15 s lease"


def test_the_sentinel_entrypoint_really_watches_a_primary(tmp_path: Path) -> None:
    """The entrypoint script as a real shell runs it (compose's ``$$`` undone), with the
    primary's host and the Sentinel's port swapped for this machine's free ones."""
    primary = RedisServer(password="pw-4b1d").start()
    port = free_port("127.0.0.1")
    (tmp_path / "redis-server").symlink_to(find_redis_server())
    entry = OVERRIDES["sentinel-1"]["entrypoint"]
    script = (
        entry[2]
        .replace("$$", "$")
        .replace("/tmp/sentinel.conf", str(tmp_path / "sentinel.conf"))
        .replace("port 26379", f"port {port}")
        .replace("toolhub redis 6379", f"toolhub 127.0.0.1 {primary.port}")
    )
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "REDIS_PASSWORD": "pw-4b1d"}
    proc = subprocess.Popen([*entry[:2], script], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL)
    try:
        client = redis_client.Redis(port=port, socket_timeout=5, decode_responses=True)
        deadline = time.monotonic() + 30
        while True:
            try:
                answer = client.sentinel_get_master_addr_by_name("toolhub")
                break
            except redis_client.ConnectionError:
                assert time.monotonic() < deadline, "the Sentinel did not start"
                time.sleep(0.1)
        assert answer == ("127.0.0.1", primary.port)
        flags = client.sentinel_master("toolhub")["flags"]
        assert "master" in flags and "disconnected" not in flags, flags
    finally:
        proc.kill()
        proc.wait()
        primary.stop()


@pytest.mark.parametrize("name", ["redis", "redis-replica"])
def test_every_node_knows_the_password_it_needs_as_a_replica(name: str) -> None:
    script = OVERRIDES[name]["entrypoint"][2]
    assert (
        '--masterauth "$$REDIS_PASSWORD"' in script and '--requirepass "$$REDIS_PASSWORD"' in script
    )
