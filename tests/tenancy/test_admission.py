"""Admission of a tenant's config against the operator policy: every way out the default policy
closes is refused with a violation naming the field, what was asked and what is allowed (all of
them in one error, each logged at WARNING with the tenant), while a legitimate config is
admitted unchanged and a policy that widens things admits what it allows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolhub.core import ConfigError, ConfigViolation
from toolhub.session_parts import default_builder
from toolhub.tenancy import OperatorPolicy, admit, effective
from toolhub.tenancy.admission import stored_tenant_root
from toolhub.toolset import ToolSetConfig

DEFAULT = OperatorPolicy()


def bash(sandbox: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:
    return {"id": "Main:bash", "params": {**params, **({"sandbox": sandbox} if sandbox else {})}}


def refused(
    config: dict[str, Any], root: Path, policy: OperatorPolicy = DEFAULT
) -> dict[str, ConfigViolation]:
    """The violations of ``config``, by field path; every one is a ``policy`` violation."""
    with pytest.raises(ConfigError) as caught:
        admit(config, policy, tenant="acme", tenant_root=root)
    violations = caught.value.violations
    assert all(v.category == "policy" for v in violations), violations
    return {v.field_path or "": v for v in violations}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    tenant_root = tmp_path / "tenants" / "acme"
    (tenant_root / "ws").mkdir(parents=True)
    return tenant_root


def test_every_way_out_of_the_sandbox_is_refused_and_listed(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = root.parent.parent / "toolhub-home"
    sandbox = {
        "mode": "full",
        "read": [str(home), "/etc/shadow", str(root / ".." / "other")],
        "require": False,
        "scrub_env": False,
        "env": ["TOOLHUB_FLEET_KEY", "PATH_EXTRA"],
        "network": True,
        "read_only": [".git/hooks"],
    }
    with caplog.at_level("WARNING", logger="toolhub.tenancy"):
        found = refused({"tools": [bash(sandbox)]}, root)
    at = "tools[0].params.sandbox"
    assert found[f"{at}.mode"].actual == "full"
    assert found[f"{at}.mode"].expected == "read_only, workspace_write"
    assert found[f"{at}.require"].actual is False
    assert found[f"{at}.scrub_env"].actual is False
    assert found[f"{at}.network"].expected == "false"
    assert found[f"{at}.read_only"].actual == [".git/hooks"]
    reads = [v.actual for v in refused({"tools": [bash({"read": sandbox["read"]})]}, root).values()]
    assert reads == sandbox["read"]
    envs = refused({"tools": [bash({"env": sandbox["env"]})]}, root)
    assert envs[f"{at}.env[0]"].expected == "none" and f"{at}.env[1]" in envs
    assert "'TOOLHUB_FLEET_KEY' may not be passed on" in caplog.text
    assert caplog.text.count("tenant acme: config refused") >= 7


def test_network_hosts_only_within_the_operators_allowlist(root: Path) -> None:
    policy = OperatorPolicy.parse(
        {"sandbox": {"network_hosts": ["pypi.org", "*.pythonhosted.org"]}}
    )
    found = refused({"tools": [bash({"network": ["pypi.org", "evil.example"]})]}, root, policy)
    assert [v.actual for v in found.values()] == ["evil.example"]
    ok = {"tools": [bash({"network": ["pypi.org", "files.pythonhosted.org"]})]}
    assert admit(ok, policy, tenant="acme", tenant_root=root) == ToolSetConfig.load(ok)
    assert refused({"tools": [bash({"network": True})]}, root, policy)
    anywhere = OperatorPolicy.parse({"sandbox": {"network_any": True}})
    admit({"tools": [bash({"network": True})]}, anywhere, tenant="acme", tenant_root=root)


def test_read_paths_inside_the_tenant_root_are_admitted(root: Path) -> None:
    inside = {"tools": [bash({"read": [str(root / "shared-data")], "hide": ["secrets"]})]}
    assert admit(inside, DEFAULT, tenant="acme", tenant_root=root) == ToolSetConfig.load(inside)
    escape = root / "ws" / "link"
    escape.symlink_to("/etc")
    found = refused({"tools": [bash({"read": [str(escape), "relative/path", "~/x"]})]}, root)
    assert [v.actual for v in found.values()] == [str(escape), "relative/path", "~/x"]


def test_limits_may_be_lowered_never_raised_or_removed(root: Path) -> None:
    found = refused(
        {"tools": [bash(max_timeout_ms=10**9, address_space_mb=None, max_processes=100_000)]},
        root,
    )
    assert found["tools[0].params.max_timeout_ms"].expected == "<= 600000"
    assert found["tools[0].params.address_space_mb"].message.endswith("may not be removed")
    assert found["tools[0].params.max_processes"].actual == 100_000
    monitor = refused(
        {"tools": [{"id": "Main:monitor", "params": {"max_timeout_ms": 10**9}}]}, root
    )
    assert "tools[0].params.max_timeout_ms" in monitor
    lower = {"tools": [bash(max_timeout_ms=1000, output_limit_bytes=2000, cpu_seconds=10)]}
    assert admit(lower, DEFAULT, tenant="acme", tenant_root=root) == ToolSetConfig.load(lower)


def test_an_operator_cap_binds_below_or_above_the_builtin_default(root: Path) -> None:
    policy = OperatorPolicy.parse({"limits": {"Main:*": {"max_timeout_ms": 5000}}})
    assert refused({"tools": [bash(max_timeout_ms=6000)]}, root, policy)
    wider = OperatorPolicy.parse({"limits": {"Main:bash": {"max_timeout_ms": 3_600_000}}})
    admit({"tools": [bash(max_timeout_ms=3_600_000)]}, wider, tenant="acme", tenant_root=root)


def test_an_unset_limit_runs_at_an_operator_cap_below_the_default(root: Path) -> None:
    policy = OperatorPolicy.parse(
        {"limits": {"Main:bash": {"max_timeout_ms": 5000, "cpu_seconds": 60}}}
    )
    asked = {"tools": [bash(output_limit_bytes=2000, enabled_background=False)]}
    admitted = admit(asked, policy, tenant="acme", tenant_root=root)
    assert admitted.tools is not None
    assert admitted.tools[0].params == {
        "output_limit_bytes": 2000,
        "enabled_background": False,
        "max_timeout_ms": 5000,
        "cpu_seconds": 60,
    }
    assert admit(admitted, policy, tenant="acme", tenant_root=root) == admitted
    defaults = admit(None, policy, tenant="acme", tenant_root=root)
    capped = [t for t in defaults.tools or [] if t.id == "Main:bash"]
    assert capped and capped[0].params == {"max_timeout_ms": 5000, "cpu_seconds": 60}
    coding = admit({"preset": "coding"}, policy, tenant="acme", tenant_root=root)
    assert [t.params for t in coding.tools or [] if t.id == "Main:bash"] == [
        {"max_timeout_ms": 5000, "cpu_seconds": 60}
    ]
    for config in (admitted, defaults, coding):
        assert default_builder().validate(config).ok


def test_fixed_params_cannot_be_set(root: Path) -> None:
    policy = OperatorPolicy.parse({"fixed_params": {"Main:bash": ["enabled_background"]}})
    found = refused({"tools": [bash(enabled_background=False)]}, root, policy)
    assert found["tools[0].params.enabled_background"].expected == "not set"


def test_lsp_servers_only_the_operators(root: Path) -> None:
    lsp = {"id": "Main:lsp", "params": {"servers": {"python": ["/bin/sh", "-c", "id"]}}}
    found = refused({"tools": [lsp]}, root)
    assert found["tools[0].params.servers.python"].expected == "['pylsp']"
    own = {"tools": [{"id": "Main:lsp", "params": {"servers": {"python": ["pylsp"]}}}]}
    admit(own, DEFAULT, tenant="acme", tenant_root=root)


def test_kind_overrides_never_widen_a_capability_mode(root: Path) -> None:
    config = {"mode": "read_only", "tools": [{"id": "Main:bash", "kind": "read"}]}
    found = refused(config, root)
    assert found["tools[0].kind"].actual == "read" and "read_only" in found["tools[0].kind"].message
    writer = {"tools": [{"id": "Main:edit_file", "kind": "execute"}]}
    assert "tools[0].kind" in refused(writer, root)
    narrower = {"tools": [{"id": "Main:read_file", "kind": "search"}]}
    admit(narrower, DEFAULT, tenant="acme", tenant_root=root)


def test_subagents_and_fetches_get_no_more_than_the_session(root: Path) -> None:
    config = {
        "mode": "execute",
        "tools": [
            {"id": "Main:task", "params": {"subagent_mode": "all"}},
            {"id": "Main:web_fetch", "params": {"allow_local": True}},
        ],
    }
    found = refused(config, root)
    assert {"tools[0].params.subagent_mode", "tools[1].params.allow_local"} == set(found)


def test_mcp_servers_none_by_default(root: Path) -> None:
    config = {
        "mcp_servers": {
            "shell": {"command": ["sh", "-c", "cat /etc/passwd"]},
            "meta": {"url": "http://169.254.169.254/latest"},
            "loop": {"url": "http://127.0.0.1:6379/"},
            "local": {"url": "http://localhost:8000/mcp"},
            "creds": {"url": "https://user:pw@mcp.example.com/mcp"},
            "varhost": {"url": "https://${HOST}/mcp"},
        }
    }
    found = refused(config, root)
    assert found["mcp_servers.shell.command"].expected == "none"
    assert "cloud metadata" in found["mcp_servers.meta.url"].message
    assert "loopback" in found["mcp_servers.loop.url"].message
    assert "loopback name" in found["mcp_servers.local.url"].message
    assert "credentials" in found["mcp_servers.creds.url"].message
    assert "mcp_servers.varhost.url" in found
    public = {"mcp_servers": {"docs": {"url": "https://mcp.example.com/mcp"}}}
    assert admit(public, DEFAULT, tenant="acme", tenant_root=root) == ToolSetConfig.load(public)


def test_an_allowlisted_stdio_server_runs_the_operators_command(root: Path) -> None:
    policy = OperatorPolicy.parse(
        {
            "mcp_servers": {
                "time": {"command": ["python", "-m", "mcp_server_time"], "env": {"TZ": "UTC"}}
            }
        }
    )
    admitted = admit({"mcp_servers": {"time": {}}}, policy, tenant="acme", tenant_root=root)
    assert admitted.mcp_servers["time"].command == ["python", "-m", "mcp_server_time"]
    assert admitted.mcp_servers["time"].env == {"TZ": "UTC"}
    again = admit(admitted, policy, tenant="acme", tenant_root=root)  # a worker admits it again
    assert again == admitted
    found = refused(
        {"mcp_servers": {"time": {"command": ["sh"], "env": {"LD_PRELOAD": "/x.so"}}}}, root, policy
    )
    assert set(found) == {"mcp_servers.time.command", "mcp_servers.time.env.LD_PRELOAD"}


def test_env_references_only_from_the_operators_list_never_toolhubs(root: Path) -> None:
    policy = OperatorPolicy(
        env_vars=["DOCS_TOKEN", "TOOLHUB_FLEET_KEY"], remote_hosts=["*.example.com"]
    )
    config = {
        "mcp_servers": {
            "docs": {
                "url": "https://mcp.example.com/mcp?k=${TOOLHUB_API_TOKEN}",
                "headers": {
                    "Authorization": "Bearer ${TOOLHUB_FLEET_KEY}",
                    "X-Docs": "${DOCS_TOKEN}",
                },
            }
        },
        "hubs": {
            "far": {"url": "https://hub.example.com", "token": "${AWS_SECRET_ACCESS_KEY}"},
            "elsewhere": {"url": "https://hub.other.org"},
        },
    }
    found = refused(config, root, policy)
    assert set(found) == {
        "mcp_servers.docs.url",
        "mcp_servers.docs.headers.Authorization",
        "hubs.far.token",
        "hubs.elsewhere.url",
    }
    assert "toolhub's own" in found["mcp_servers.docs.headers.Authorization"].message
    assert found["mcp_servers.docs.headers.Authorization"].expected == "DOCS_TOKEN"
    assert "remote_hosts" in found["hubs.elsewhere.url"].message


def test_tools_and_presets_only_from_the_policy(root: Path) -> None:
    policy = OperatorPolicy.parse({"tools": ["Main:read_file", "Main:grep"], "presets": []})
    found = refused({"preset": "coding", "tools": [{"id": "Main:bash"}]}, root, policy)
    assert "preset" in found and "tools[0].id" in found
    defaults = admit(None, policy, tenant="acme", tenant_root=root)
    assert [t.id for t in defaults.tools or []] == ["Main:read_file", "Main:grep"]


def test_a_legitimate_config_is_admitted_unchanged(root: Path) -> None:
    config = {
        "mode": "all",
        "tools": [
            {
                "id": "Main:bash",
                "name": "run",
                "rename": {"is_background": "background"},
                "params": {
                    "max_timeout_ms": 60_000,
                    "sandbox": {"mode": "read_only", "mechanism": "landlock", "require": True},
                },
            },
            {"id": "Main:read_file"},
        ],
    }
    admitted = admit(config, DEFAULT, tenant="acme", tenant_root=root)
    assert admitted == ToolSetConfig.load(config)
    assert admit(None, DEFAULT, tenant="acme", tenant_root=root) == ToolSetConfig()


def test_a_policy_that_widens_admits_what_it_allows(root: Path) -> None:
    policy = OperatorPolicy.parse(
        {"sandbox": {"modes": ["read_only", "workspace_write", "full"], "env": ["PIP_*"]}}
    )
    config = {"tools": [bash({"mode": "full", "env": ["PIP_INDEX_URL"]})]}
    assert admit(config, policy, tenant="acme", tenant_root=root) == ToolSetConfig.load(config)


def test_effective_says_what_the_tenant_may_ask_for() -> None:
    shown = effective(OperatorPolicy(env_vars=["DOCS_TOKEN", "TOOLHUB_API_TOKEN"]), "acme")
    assert shown["tenant"] == "acme"
    assert shown["tools"]["Main:bash"]["limits"]["max_timeout_ms"] == 600_000
    assert shown["sandbox"]["modes"] == ["read_only", "workspace_write"]
    assert shown["env_vars"] == ["DOCS_TOKEN"] and shown["mcp_servers"] == {}
    assert "coding" in shown["presets"]


def test_a_worker_judges_the_tenant_root_from_the_stored_workspace(tmp_path: Path) -> None:
    root = tmp_path / "root"
    ws = root / "tenants" / "acme" / "s1"
    assert stored_tenant_root(ws, "acme", root) == root / "tenants" / "acme"
    assert stored_tenant_root(ws, "acme", None) == root / "tenants" / "acme"
    assert stored_tenant_root(root / "w", "default", root) == root
    assert stored_tenant_root(root / "w", "default", None) == root / "w"
    with pytest.raises(ValueError, match="not under tenant 'acme'"):
        stored_tenant_root(root / "tenants" / "other" / "s1", "acme", root)
    with pytest.raises(ValueError):
        stored_tenant_root(tmp_path / "elsewhere" / "tenants" / "acme" / "s", "acme", root)


def test_the_kernels_per_command_limits_stay_under_the_tenants_quota(root: Path) -> None:
    """``max_processes`` and ``memory_mb`` are held by the command's cgroup: a config may not
    remove them nor ask above the operator's ``pids_per_command`` / ``memory_per_command``
    (the tenant's own, where ``quotas.tenants`` overrides them)."""
    found = refused({"tools": [bash(max_processes=None, memory_mb=None)]}, root)
    assert found["tools[0].params.max_processes"].message.endswith("may not be removed")
    assert found["tools[0].params.memory_mb"].message.endswith("may not be removed")
    over = refused({"tools": [bash(max_processes=513, memory_mb=1025)]}, root)
    assert over["tools[0].params.max_processes"].expected == "<= 512"
    assert over["tools[0].params.memory_mb"].expected == "<= 1024"
    policy = OperatorPolicy.parse(
        {
            "limits": {"Main:bash": {"max_processes": 100_000}},  # never above the quota
            "quotas": {
                "tenants": {"acme": {"pids_per_command": 64, "memory_per_command": 1 << 27}}
            },
        }
    )
    tight = refused({"tools": [bash(max_processes=100, memory_mb=256)]}, root, policy)
    assert tight["tools[0].params.max_processes"].expected == "<= 64"
    assert tight["tools[0].params.memory_mb"].expected == "<= 128"
    admitted = admit({"tools": [bash()]}, policy, tenant="acme", tenant_root=root)
    assert admitted.tools is not None
    assert admitted.tools[0].params == {"max_processes": 64, "memory_mb": 128}
    ok = {"tools": [bash(max_processes=64, memory_mb=128)]}
    assert admit(ok, DEFAULT, tenant="acme", tenant_root=root) == ToolSetConfig.load(ok)


def test_permission_rules_stay_within_the_operators_bounds(root: Path) -> None:
    rules = {"permissions": {"rules": [{"decision": "allow"}], "approval_seconds": 7200}}
    closed = OperatorPolicy.parse({"permissions": {"tenant_rules": False}})
    assert set(refused(rules, root, closed)) == {"permissions"}
    short = OperatorPolicy.parse({"permissions": {"max_approval_seconds": 3600}})
    found = refused(rules, root, short)
    assert found["permissions.approval_seconds"].expected == "<= 3600"
    admitted = admit(rules, DEFAULT, tenant="acme", tenant_root=root)
    assert admitted.permissions is not None and admitted.permissions.approval_seconds == 7200
    with pytest.raises(ConfigError) as bad:
        OperatorPolicy.parse({"permissions": {"rules": [{"path": ["[x"], "decision": "ask"}]}})
    assert bad.value.violations[0].category == "policy_file"
