"""The operator policy file: strict defaults with no file, a file that widens or narrows them,
a malformed file refused as a whole, and ``${VAR}`` expansion bounded in every process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolhub import env_refs
from toolhub.core import ConfigError
from toolhub.env_refs import ExpansionRefused, expand_env, is_toolhub_secret
from toolhub.sandbox.policy import SandboxMode
from toolhub.tenancy import POLICY_ENV, OperatorPolicy


@pytest.fixture
def unrestricted() -> Iterator[None]:
    """Expansion as a process with no policy has it, restored after the test."""
    env_refs.restrict(None)
    yield
    env_refs.restrict(None)


def test_no_file_means_the_strict_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(POLICY_ENV, raising=False)
    policy = OperatorPolicy.load()
    assert policy.sandbox.modes == [SandboxMode.READ_ONLY, SandboxMode.WORKSPACE_WRITE]
    assert not policy.sandbox.network_any and policy.sandbox.network_hosts == []
    assert policy.sandbox.env == [] and policy.env_vars == [] and policy.mcp_servers == {}
    assert policy.allows_tool("Main:bash") and policy.allows_preset("coding")
    assert not policy.allow_local_urls and policy.remote_hosts == []


def test_the_file_toolhub_policy_names_is_loaded(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    yaml_file = tmp_path / "policy.yaml"
    yaml_file.write_text(
        "tools: ['Main:*']\nsandbox:\n  modes: [read_only, workspace_write, full]\n"
        "limits:\n  'Main:bash': {max_timeout_ms: 3600000}\n"
    )
    monkeypatch.setenv(POLICY_ENV, str(yaml_file))
    policy = OperatorPolicy.load()
    assert SandboxMode.FULL in policy.sandbox.modes
    assert policy.allows_tool("Main:read_file") and not policy.allows_tool("Codex:read_file")
    assert policy.limit_overrides("Main:bash") == {"max_timeout_ms": 3600000}
    json_file = tmp_path / "policy.json"
    json_file.write_text(json.dumps({"env_vars": ["DOCS_TOKEN"]}))
    assert OperatorPolicy.load(json_file).env_vars == ["DOCS_TOKEN"]


def test_a_malformed_policy_is_refused_with_every_problem(tmp_path: Path) -> None:
    bad = tmp_path / "policy.yaml"
    bad.write_text("sandbox:\n  modes: [nothing]\nunknown_key: 1\n")
    with pytest.raises(ConfigError) as caught:
        OperatorPolicy.load(bad)
    fields = {v.field_path for v in caught.value.violations}
    assert {"sandbox.modes.0", "unknown_key"} <= fields
    assert all(v.category == "policy_file" for v in caught.value.violations)
    with pytest.raises(ConfigError, match="cannot read the operator policy"):
        OperatorPolicy.load(tmp_path / "missing.yaml")


def test_toolhub_secrets_are_never_allowed_even_when_listed() -> None:
    policy = OperatorPolicy(env_vars=["TOOLHUB_FLEET_KEY", "DOCS_TOKEN"])
    assert not policy.allows_env_var("TOOLHUB_FLEET_KEY")
    assert policy.allows_env_var("DOCS_TOKEN") and not policy.allows_env_var("OTHER")
    for name in ("TOOLHUB_FLEET_KEY_PREVIOUS", "TOOLHUB_API_TOKEN", "TOOLHUB_REDIS_URL"):
        assert is_toolhub_secret(name)
    assert not is_toolhub_secret("DOCS_TOKEN")


def test_passthrough_never_names_toolhub_variables_even_by_prefix() -> None:
    policy = OperatorPolicy.parse({"sandbox": {"env": ["*"]}})
    assert policy.allows_passthrough("MY_VAR") and policy.allows_passthrough("PIP_*")
    for name in ("TOOLHUB_FLEET_KEY", "TOOLHUB_*", "TOOL*", "T*", "*"):
        assert not policy.allows_passthrough(name), name


def test_expansion_refuses_toolhub_secrets_in_every_process(
    unrestricted: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLHUB_FLEET_KEY", "fleet-secret-value")
    monkeypatch.setenv("DOCS_TOKEN", "docs")
    assert expand_env("Bearer ${DOCS_TOKEN}") == "Bearer docs"
    with pytest.raises(ExpansionRefused, match="TOOLHUB_FLEET_KEY"):
        expand_env("Bearer ${TOOLHUB_FLEET_KEY}")
    with pytest.raises(ExpansionRefused):
        expand_env("${TOOLHUB_FLEET_KEY}", allowed=["TOOLHUB_FLEET_KEY"])


def test_a_process_with_a_policy_expands_only_its_names(
    unrestricted: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("DOCS_TOKEN", "docs")
    monkeypatch.setenv("HOME_DIR_SECRET", "other")
    OperatorPolicy(env_vars=["DOCS_TOKEN", "TOOLHUB_API_TOKEN"]).restrict_expansion()
    assert expand_env("${DOCS_TOKEN}") == "docs"
    with caplog.at_level("WARNING", logger="toolhub.env_refs"), pytest.raises(ExpansionRefused):
        expand_env("${HOME_DIR_SECRET}")
    assert "not in the policy's env_vars" in caplog.text and "other" not in caplog.text
    with pytest.raises(ExpansionRefused):
        expand_env("${TOOLHUB_API_TOKEN}")


def test_a_session_never_sends_toolhubs_secrets_even_unadmitted(
    unrestricted: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An embedded session (no admission) with ``${TOOLHUB_*}`` in a hub token and an MCP
    header: neither is connected, each says why, and the session's own tools still work."""
    from toolhub import Session
    from toolhub.ports import free_port

    monkeypatch.setenv("TOOLHUB_API_TOKEN", "api-token-value-9c1d")
    monkeypatch.setenv("TOOLHUB_FLEET_KEY", "fleet-key-value-4e7b")
    closed = free_port()
    config = {
        "tools": [{"id": "Main:read_file"}],
        "hubs": {"far": {"url": f"http://127.0.0.1:{closed}", "token": "${TOOLHUB_API_TOKEN}"}},
        "mcp_servers": {
            "leak": {
                "url": f"http://127.0.0.1:{closed}/mcp",
                "headers": {"Authorization": "Bearer ${TOOLHUB_FLEET_KEY}"},
            }
        },
    }
    (tmp_path / "a.txt").write_text("still works\n")
    with Session.embedded(config, tmp_path) as session:
        warnings = "\n".join(session.warnings)
        read = session.call_sync("read_file", {"path": "a.txt"})
    assert "${TOOLHUB_API_TOKEN} may not be expanded" in warnings
    assert "${TOOLHUB_FLEET_KEY} may not be expanded" in warnings
    assert "api-token-value" not in warnings and "fleet-key-value" not in warnings
    assert not read.is_error and "still works" in read.prompt_text
