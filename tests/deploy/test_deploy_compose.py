"""compose/docker-compose.yml against the Compose Specification schema, plus the Dockerfile:
every command must be one the image really provides."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import redis as redis_client
import yaml

from tests.deploy.deploy_helpers import (
    COMPOSE,
    DOCKERFILE,
    HEALTHCHECK_MODULE,
    QUEUES,
    REPO,
    check_toolhub_command,
    image_programs,
)
from toolhub.ports import free_port
from toolhub.stack.redis_server import find_redis_server

SPEC = json.loads((Path(__file__).parent / "compose-spec.json").read_text())
RAW = COMPOSE.read_text()
DOC: dict[str, Any] = yaml.safe_load(RAW)  # SafeLoader resolves the `<<` merge keys
SERVICES: dict[str, dict[str, Any]] = DOC["services"]
TOOLHUB_IMAGE_SERVICES = [n for n, s in SERVICES.items() if "build" in s]
#: Programs each third-party image provides.
OTHER_IMAGE_PROGRAMS = {
    "redis": {"redis-server", "redis-cli", "sh"},
    "opentelemetry-collector": {"/otelcol"},
}


def test_compose_file_matches_the_compose_specification() -> None:
    validator = jsonschema.Draft7Validator(SPEC)
    problems = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(DOC)]
    assert problems == []


def test_schema_actually_rejects_a_broken_file() -> None:
    broken = {"services": {"w": {"image": "x", "restart": "sometimes", "ports": [{"x": 1}]}}}
    assert list(jsonschema.Draft7Validator(SPEC).iter_errors(broken))


def test_one_worker_service_per_queue() -> None:
    queues = {}
    for name, svc in SERVICES.items():
        cmd = svc.get("command", [])
        if cmd[:2] == ["toolhub", "worker"]:
            queues[cmd[cmd.index("--queues") + 1]] = name
            assert int(cmd[cmd.index("--concurrency") + 1]) >= 1
            assert "container_name" not in svc and "ports" not in svc, f"{name} must scale"
    assert set(queues) == QUEUES
    assert queues["toolhub.fast"] == "worker-fast"


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_service_commands_are_provided_by_their_image(name: str) -> None:
    svc = SERVICES[name]
    cmd = svc["command"]
    assert isinstance(cmd, list), "exec form keeps tini (the image ENTRYPOINT) as PID 1"
    test = svc.get("healthcheck", {}).get("test", [])
    if name in TOOLHUB_IMAGE_SERVICES:
        assert check_toolhub_command(cmd) == []
        if test:
            assert test[0] == "CMD" and check_toolhub_command(test[1:]) == []
    else:
        image = svc["image"].split(":")[0].split("/")[-1]
        # A command of flags only runs under the service's entrypoint.
        entry = svc.get("entrypoint")
        program = entry[0] if entry and cmd[0].startswith("-") else cmd[0]
        assert program in OTHER_IMAGE_PROGRAMS[image]
        if test:
            assert test[1].split()[0] in OTHER_IMAGE_PROGRAMS[image]


def test_image_programs_come_from_pyproject_and_dockerfile() -> None:
    assert {"toolhub", "celery", "python", "tini"} <= image_programs()
    assert check_toolhub_command(["toolhub", "frobnicate"]) != []
    assert check_toolhub_command(["gunicorn", "app"]) != []
    assert check_toolhub_command(["python", "-m", "workers.nope"]) != []


def test_workers_use_the_heartbeat_healthcheck_and_a_long_stop_grace() -> None:
    for name, svc in SERVICES.items():
        if not name.startswith("worker-"):
            continue
        test = svc["healthcheck"]["test"]
        assert test[1:4] == ["python", "-m", HEALTHCHECK_MODULE] and "--ready" in test
        assert "inspect" not in json.dumps(svc)
        env = svc["environment"]
        max_fg = 600
        soft = 60
        grace = re.fullmatch(r"\$\{TOOLHUB_STOP_GRACE_PERIOD:-(\d+)s\}", svc["stop_grace_period"])
        assert grace and int(grace.group(1)) > max_fg + soft
        assert env["TOOLHUB_HEARTBEAT_FILE"].startswith("/tmp/")
        assert "/tmp" in "".join(svc["tmpfs"])


def test_redis_is_pinned_durable_and_never_evicts() -> None:
    redis = SERVICES["redis"]
    assert re.fullmatch(r"redis:\d+\.\d+\.\d+-alpine", redis["image"])
    cmd = " ".join(redis["command"])
    assert "--appendonly yes" in cmd and "--maxmemory-policy noeviction" in cmd
    assert "--hash-max-listpack-value 1024" in cmd
    assert "redis-cli ping" in " ".join(redis["healthcheck"]["test"])
    assert "ports" not in redis, "Redis must not be published on the host"
    for name in TOOLHUB_IMAGE_SERVICES:
        deps = SERVICES[name]["depends_on"]
        assert deps["redis"]["condition"] == "service_healthy"


def test_flower_always_has_basic_auth() -> None:
    flower = SERVICES["flower"]
    assert flower["command"][:4] == ["celery", "--app", "workers.app:app", "flower"]
    assert re.fullmatch(
        r"\$\{FLOWER_BASIC_AUTH:\?[^}]+\}", flower["environment"]["FLOWER_BASIC_AUTH"]
    )
    assert "FLOWER_UNAUTHENTICATED_API" not in json.dumps(DOC)
    assert SERVICES["gateway"]["environment"]["TOOLHUB_API_TOKEN"].startswith(
        "${TOOLHUB_API_TOKEN:?"
    )


def test_workspace_volume_is_shared_and_containers_are_hardened() -> None:
    for name in TOOLHUB_IMAGE_SERVICES:
        svc = SERVICES[name]
        assert svc["user"] == "10001:10001" and svc["read_only"] is True
        assert svc["cap_drop"] == ["ALL"] and "no-new-privileges:true" in svc["security_opt"]
        if name != "flower":
            assert "workspace:/workspace" in svc["volumes"]
            assert svc["environment"]["TOOLHUB_WORKSPACE"] == "/workspace"
            assert svc["environment"]["TOOLHUB_CONFIG"] == "/etc/toolhub/toolset.yaml"
    assert "workspace" in DOC["volumes"]
    assert (COMPOSE.parent / "toolset.yaml").is_file(), "bind-mounted default tool set"


def test_every_variable_is_in_env_example_and_readme() -> None:
    used = set(re.findall(r"\$\{([A-Z0-9_]+)", RAW))
    example = (COMPOSE.parent / ".env.example").read_text()
    readme = (COMPOSE.parent / "README.md").read_text()
    declared = set(re.findall(r"^([A-Z0-9_]+)=", example, re.M))
    assert used <= declared, f"missing from .env.example: {used - declared}"
    container_env = {k for s in SERVICES.values() for k in s.get("environment", {})}
    for var in used | container_env:
        assert f"`{var}`" in readme, f"{var} is not documented in compose/README.md"
    assert "docker compose up --scale worker-fast=4" in readme.replace(
        "-f compose/docker-compose.yml ", ""
    )


# --- Dockerfile ------------------------------------------------------------------------------

DOCKER = DOCKERFILE.read_text()
STAGES = re.split(r"^FROM\s+", DOCKER, flags=re.M)[1:]


def test_dockerfile_is_multi_stage_with_a_pinned_python_base() -> None:
    assert len(STAGES) >= 2
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", DOCKER, re.M)
    assert base and re.fullmatch(
        r"python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?", base.group(1)
    )
    assert all(s.split()[0] == "${PYTHON_IMAGE}" for s in STAGES)
    assert "latest" not in DOCKER


def test_runtime_stage_is_non_root_with_tini_and_no_compilers() -> None:
    runtime = STAGES[-1]
    assert not re.search(r"build-essential|\bgcc\b|\bcargo\b|\bclang\b", runtime)
    assert re.search(r"^USER 10001(:10001)?$", runtime, re.M)
    assert re.search(r'^ENTRYPOINT \["tini", "--"\]$', runtime, re.M)
    assert "COPY --from=builder /opt/venv /opt/venv" in runtime
    builder = STAGES[0]
    assert "[gateway,mcp,otel]" in builder and "flower" in builder and "pip wheel" in builder
    cmd = re.search(r"^CMD (\[.*\])$", runtime, re.M)
    assert cmd and check_toolhub_command(json.loads(cmd.group(1))) == []


def test_dockerignore_keeps_the_context_small() -> None:
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    assert ignore[ignore.index("*") :][:1] == ["*"], "allow-list style"
    allowed = {ln[1:].rstrip("/") for ln in ignore if ln.startswith("!")}
    assert allowed == {"pyproject.toml", "README.md", "toolhub", "workers", "toolhub_start.py"}
    copied = set(re.findall(r"^COPY (?!--from)(.+) \S+$", DOCKER, re.M))
    for line in copied:
        for src in line.split():
            assert src in allowed, f"Dockerfile copies {src}, which .dockerignore excludes"


def test_redis_requires_the_password_and_every_url_carries_it() -> None:
    redis = SERVICES["redis"]
    assert redis["environment"]["REDIS_PASSWORD"].startswith("${REDIS_PASSWORD:?")
    assert "$$REDIS_PASSWORD" in RAW and "--requirepass" in " ".join(redis["entrypoint"])
    assert "protected-mode" not in " ".join(redis["command"])
    urls = [
        s["environment"]["TOOLHUB_REDIS_URL"]
        for s in SERVICES.values()
        if "TOOLHUB_REDIS_URL" in s.get("environment", {})
    ]
    assert urls and all(u.startswith("redis://:${REDIS_PASSWORD:?") for u in urls), urls


def test_the_redis_entrypoint_really_sets_the_password(tmp_path: Path) -> None:
    """The compose entrypoint run by a real shell with a real redis-server. The image's
    docker-entrypoint.sh (which, not running as root, just execs its arguments) is the one
    part that comes from the image; here it is a two-line exec."""
    shim = tmp_path / "docker-entrypoint.sh"
    shim.write_text('#!/bin/sh\nexec "$@"\n')
    shim.chmod(0o755)
    (tmp_path / "redis-server").symlink_to(find_redis_server())
    entry = SERVICES["redis"]["entrypoint"]
    script = entry[2].replace("$$", "$")
    port = free_port("127.0.0.1")
    argv = [*entry[:2], script, entry[3], "redis-server", "--port", str(port), "--save", ""]
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "REDIS_PASSWORD": "pw-9c2e"}
    proc = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL)
    try:
        client = redis_client.Redis(port=port, password="pw-9c2e", socket_timeout=5)
        for _ in range(100):
            try:
                assert client.ping()
                break
            except redis_client.ConnectionError:
                time.sleep(0.05)
        else:
            raise AssertionError("redis did not start")
        with pytest.raises(redis_client.AuthenticationError):
            redis_client.Redis(port=port, socket_timeout=5).set("k", "v")
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        assert b"pw-9c2e" not in cmdline, "the password must not stay in the process title"
    finally:
        proc.kill()
        proc.wait()


def _mounts(svc: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Container path → (host source, options) of each short-syntax volume."""
    out = {}
    for volume in svc.get("volumes", []):
        match = re.fullmatch(r"(\$\{[^}]*\}|[^:]+):([^:]+)(?::(\w+))?", volume)
        assert match, volume
        source, target, options = match.groups()
        out[target] = (source, options or "rw")
    return out


def test_the_policy_reaches_the_gateway_and_every_worker_at_the_same_path() -> None:
    from toolhub.tenancy import OperatorPolicy

    loaders = [n for n in TOOLHUB_IMAGE_SERVICES if n != "flower"]
    assert set(loaders) == {"gateway"} | {n for n in SERVICES if n.startswith("worker-")}
    for name in loaders:
        svc = SERVICES[name]
        path = svc["environment"]["TOOLHUB_POLICY"]
        assert path == "/etc/toolhub-policy/policy.yaml", name
        assert _mounts(svc)[path] == ("${TOOLHUB_POLICY_FILE:-./policy.yaml}", "ro"), name
    assert "TOOLHUB_POLICY" not in json.dumps(SERVICES["flower"])
    # The shipped file holds no rule: the strict defaults, as with no file at all.
    shipped = OperatorPolicy.load(COMPOSE.parent / "policy.yaml")
    assert shipped == OperatorPolicy()


def test_the_keys_directory_reaches_the_gateway_only_read_only() -> None:
    gateway = SERVICES["gateway"]
    path = gateway["environment"]["TOOLHUB_KEYS_FILE"]
    assert path == "/etc/toolhub-keys/keys.json"
    # The directory, not the file: a replaced keys.json reaches the running gateway.
    assert _mounts(gateway)["/etc/toolhub-keys"] == ("${TOOLHUB_KEYS_DIR:-./keys}", "ro")
    assert gateway["environment"]["TOOLHUB_API_TOKEN"].startswith("${TOOLHUB_API_TOKEN:?")
    for name, svc in SERVICES.items():
        if name != "gateway":
            assert "keys" not in json.dumps(svc.get("volumes", [])), name
            assert "TOOLHUB_KEYS_FILE" not in svc.get("environment", {}), name
    ignored = (COMPOSE.parent / "keys" / ".gitignore").read_text().split()
    assert "*" in ignored, "keys.json is never committed"
