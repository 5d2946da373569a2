"""``toolhub policy show`` and ``check``, and ``toolhub mcp`` refusing to serve a config its
operator policy refuses: run as an operator runs them (in this process, ``tests/cli/in_process.py``;
``tests/cli/test_cli_errors.py`` runs the CLI as a real process)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.cli.in_process import run_cli

FULL_SANDBOX = "tools:\n  - id: Main:bash\n    params: {sandbox: {mode: full}}\n"
LEGIT = (
    "tools:\n  - id: Main:bash\n    params: {max_timeout_ms: 1000, sandbox: {mode: read_only}}\n"
)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No TOOLHUB_* setting of this process, a private home, a wide terminal for the tables."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TOOLHUB_")}
    return {**environ, "TOOLHUB_HOME": str(tmp_path / "home"), "COLUMNS": "300"}


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(args, env, cwd)


def test_show_prints_the_effective_policy(env: dict[str, str], tmp_path: Path) -> None:
    shown = run(["policy", "show", "--tenant", "acme", "--json"], env, tmp_path)
    assert shown.returncode == 0, shown.stderr
    effective = json.loads(shown.stdout)
    assert effective["tenant"] == "acme"
    assert effective["sandbox"]["modes"] == ["read_only", "workspace_write"]
    assert effective["tools"]["Main:bash"]["limits"]["max_timeout_ms"] == 600_000
    table = run(["policy", "show"], env, tmp_path)
    assert table.returncode == 0 and "max_timeout_ms <= 600000" in table.stdout


def test_check_lists_violations_and_exits_1(env: dict[str, str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(FULL_SANDBOX)
    checked = run(["policy", "check", str(bad), "--tenant", "acme"], env, tmp_path)
    assert checked.returncode == 1
    assert "tools[0].params.sandbox.mode" in checked.stderr and "full" in checked.stderr
    good = tmp_path / "good.yaml"
    good.write_text(LEGIT)
    admitted = run(["policy", "check", str(good)], env, tmp_path)
    assert admitted.returncode == 0, admitted.stderr
    assert "admitted" in admitted.stdout


def test_a_policy_file_that_allows_full_admits_it(env: dict[str, str], tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("sandbox:\n  modes: [read_only, workspace_write, full]\n")
    config = tmp_path / "full.yaml"
    config.write_text(FULL_SANDBOX)
    checked = run(
        ["policy", "check", str(config)], {**env, "TOOLHUB_POLICY": str(policy)}, tmp_path
    )
    assert checked.returncode == 0, checked.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("sandbox: {modes: [everything]}\n")
    refused = run(["policy", "show", "--policy", str(broken)], env, tmp_path)
    assert refused.returncode == 1 and "sandbox.modes.0" in refused.stderr


def test_mcp_refuses_to_serve_a_config_the_policy_refuses(
    env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "server.yaml"
    config.write_text(
        "mcp_servers:\n  x: {command: [sh, -c, 'touch pwned']}\n"
        "hubs:\n  h: {url: 'https://hub.example.com', token: '${TOOLHUB_API_TOKEN}'}\n"
    )
    policy = tmp_path / "policy.yaml"
    policy.write_text("{}\n")  # the strict defaults, named by the operator
    started = run(
        ["mcp", "--config", str(config)], {**env, "TOOLHUB_POLICY": str(policy)}, tmp_path
    )
    assert started.returncode == 1
    assert "mcp_servers.x.command" in started.stderr and "hubs.h.token" in started.stderr
    # Served over HTTP (to principals) the config is admitted with or without a policy file.
    over_http = run(["mcp", "--transport", "http", "--config", str(config)], env, tmp_path)
    assert over_http.returncode == 1 and "mcp_servers.x.command" in over_http.stderr
    assert not (tmp_path / "pwned").exists()
