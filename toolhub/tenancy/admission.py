"""Admission: a tenant's tool-set config checked against the operator's policy before anything
is built from it. The gateway admits a config when a session is created, a worker admits it
again before it builds the session's tool set, ``toolhub mcp`` admits the config it serves.

A config that asks for more than the policy allows is refused with every violation listed (the
config error shape: category ``policy``, the field, what was asked, what is allowed), never
clamped, and each violation is logged at WARNING with the tenant. The threat: a tenant's config
is the tenant's, not the operator's (``toolhub.tenancy.policy``).

What admission changes in an admitted config is the operator's, never the tenant's request: a
stdio MCP server named from the policy runs the operator's command (and environment), a tenant
that asked for the default tools gets the default tools the policy allows, and a limit the
tenant left unset runs at the operator's cap when the built-in default (or a preset's value)
is above it.
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path
from typing import Any

from toolhub.core import ConfigError, ConfigViolation
from toolhub.redaction import redact
from toolhub.tools import CATALOG
from toolhub.toolset.builder import ToolSetBuilder
from toolhub.toolset.config import ConfigSource, McpServerConfig, ToolConfig, ToolSetConfig
from toolhub.toolset.merge import baseline_tools
from toolhub.toolset.registry import Registry

from .hook_policy import hook_violations, tenant_view
from .param_rules import caps, entry_violations
from .policy import OperatorPolicy
from .principal import DEFAULT_TENANT
from .remote import reference_violations, url_violations

logger = logging.getLogger("toolhub.tenancy")

#: The behavior preset a config names when it names none: always allowed.
DEFAULT_PRESET = "current"


@functools.cache
def installed_registry() -> Registry:
    """What this process can build: the built-ins and the entry-point plugins."""
    return ToolSetBuilder(CATALOG).registry


def admit(
    config: ConfigSource,
    policy: OperatorPolicy,
    *,
    tenant: str,
    tenant_root: Path,
    registry: Registry | None = None,
) -> ToolSetConfig:
    """``config`` as the policy admits it for ``tenant`` (whose workspaces are under
    ``tenant_root``), or ``ConfigError`` listing every violation. ``registry``: the tools this
    process builds with (default: ``installed_registry()``)."""
    cfg = ToolSetConfig.load(config)
    reg = registry if registry is not None else installed_registry()
    violations = [
        *_preset_violations(cfg, policy),
        *_tool_violations(cfg, policy, reg, tenant, tenant_root),
        *_mcp_violations(cfg, policy),
        *_hub_violations(cfg, policy),
        *permission_violations(cfg, policy),
        *hook_violations(cfg.hooks, policy.hooks),
    ]
    if violations:
        for violation in violations:
            logger.warning("tenant %s: config refused: %s", tenant, redact(violation.summary()))
        raise ConfigError(violations)
    return _admitted(cfg, policy, reg, tenant)


def permission_violations(cfg: ToolSetConfig, policy: OperatorPolicy) -> list[ConfigViolation]:
    """A config's ``permissions`` where the operator takes them from tenants, or an approval
    that would wait longer than the operator lets one."""
    asked, bounds = cfg.permissions, policy.permissions
    if asked is None:
        return []
    if not bounds.tenant_rules:
        return [
            ConfigViolation(
                "(global)",
                "refused by the operator policy: permission rules are the operator's",
                category="policy",
                field_path="permissions",
                expected="not set",
                actual="set",
            )
        ]
    if asked.approval_seconds > bounds.max_approval_seconds:
        return [
            ConfigViolation(
                "(global)",
                "refused by the operator policy: approvals may not wait this long",
                category="policy",
                field_path="permissions.approval_seconds",
                expected=f"<= {bounds.max_approval_seconds}",
                actual=asked.approval_seconds,
            )
        ]
    return []


def _preset_violations(cfg: ToolSetConfig, policy: OperatorPolicy) -> list[ConfigViolation]:
    if cfg.preset == DEFAULT_PRESET or policy.allows_preset(cfg.preset):
        return []
    return [
        ConfigViolation(
            "(global)",
            "refused by the operator policy: this preset is not allowed",
            category="policy",
            field_path="preset",
            expected=", ".join(policy.presets) or "none",
            actual=cfg.preset,
        )
    ]


def _tool_violations(
    cfg: ToolSetConfig, policy: OperatorPolicy, reg: Registry, tenant: str, tenant_root: Path
) -> list[ConfigViolation]:
    out: list[ConfigViolation] = []
    own_ids = set()
    for index, entry in enumerate(cfg.tools or []):
        own_ids.add(entry.id)
        if not policy.allows_tool(entry.id):
            out.append(_not_allowed(entry.id, f"tools[{index}].id", policy))
        registered = reg.tools.get(entry.id)
        out.extend(
            entry_violations(
                entry,
                index,
                model=registered.tool.params_model if registered else None,
                own_kind=registered.tool.kind if registered else None,
                mode=cfg.mode,
                policy=policy,
                tenant=tenant,
                tenant_root=tenant_root,
            )
        )
    if cfg.preset in reg.toolset_presets:
        for entry in reg.toolset_presets[cfg.preset].tools:
            if entry.id not in own_ids and not policy.allows_tool(entry.id):
                out.append(_not_allowed(entry.id, "preset", policy))
    return out


def _not_allowed(fq_id: str, path: str, policy: OperatorPolicy) -> ConfigViolation:
    return ConfigViolation(
        fq_id,
        "refused by the operator policy: this tool may not be enabled",
        category="policy",
        field_path=path,
        expected=", ".join(policy.tools) or "none",
        actual=fq_id,
    )


def _mcp_violations(cfg: ToolSetConfig, policy: OperatorPolicy) -> list[ConfigViolation]:
    out: list[ConfigViolation] = []
    for name, server in cfg.mcp_servers.items():
        at = f"mcp_servers.{name}"
        if server.command is None and server.url is not None:
            out.extend(url_violations(name, f"{at}.url", server.url, policy))
        else:
            out.extend(_stdio_violations(name, at, server, policy))
        texts = {f"{at}.headers.{k}": v for k, v in server.headers.items()}
        texts.update({f"{at}.env.{k}": v for k, v in server.env.items()})
        texts.update({f"{at}.command[{i}]": v for i, v in enumerate(server.command or [])})
        if server.url is not None:
            texts[f"{at}.url"] = server.url
        out.extend(reference_violations(name, texts, policy))
    return out


def _stdio_violations(
    name: str, at: str, server: McpServerConfig, policy: OperatorPolicy
) -> list[ConfigViolation]:
    grant = policy.mcp_servers.get(name)
    if grant is None:
        return [
            ConfigViolation(
                name,
                "refused by the operator policy: a stdio MCP server runs a command on the "
                "fleet; only servers the operator lists may be enabled, by name",
                category="policy",
                field_path=f"{at}.command",
                expected=", ".join(sorted(policy.mcp_servers)) or "none",
                actual=server.command,
            )
        ]
    out: list[ConfigViolation] = []
    if server.command is not None and server.command != grant.command:
        out.append(
            ConfigViolation(
                name,
                "refused by the operator policy: the command must be the operator's (or omitted)",
                category="policy",
                field_path=f"{at}.command",
                expected=repr(grant.command),
                actual=server.command,
            )
        )
    operators = {key for key, value in server.env.items() if grant.env.get(key) == value}
    for key in sorted(set(server.env) - set(grant.tenant_env) - operators):
        out.append(
            ConfigViolation(
                name,
                "refused by the operator policy: this server's environment is the operator's",
                category="policy",
                field_path=f"{at}.env.{key}",
                expected=", ".join(grant.tenant_env) or "none",
                actual=key,
            )
        )
    return out


def stored_tenant_root(workspace: Path, tenant: str, workspace_root: Path | None) -> Path:
    """The root of ``tenant``, judged by a process that knows a session only from its stored
    record (a worker): the ``<root>/tenants/<tenant>`` the stored workspace lies in; else, when
    the process knows the gateway's workspace root (``TOOLHUB_WORKSPACE_ROOT``), that root for
    the default tenant of a one-tenant gateway; else the workspace itself (the strictest
    choice: ``read`` paths only inside it). ``ValueError`` when the workspace is not where the
    tenant's workspaces live."""
    workspace = Path(os.path.normpath(workspace))
    expected = None if workspace_root is None else Path(os.path.normpath(workspace_root))
    for parent in (workspace, *workspace.parents):
        if parent.name == tenant and parent.parent.name == "tenants":
            if expected is not None and parent != expected / "tenants" / tenant:
                break
            return parent
    if expected is None:
        return workspace
    if tenant == DEFAULT_TENANT and workspace.is_relative_to(expected):
        return expected
    raise ValueError(
        f"the workspace {workspace} is not under tenant {tenant!r}'s root in {expected}"
    )


def _hub_violations(cfg: ToolSetConfig, policy: OperatorPolicy) -> list[ConfigViolation]:
    out: list[ConfigViolation] = []
    for name, hub in cfg.hubs.items():
        at = f"hubs.{name}"
        out.extend(url_violations(name, f"{at}.url", hub.url, policy))
        texts = {f"{at}.url": hub.url}
        if hub.token is not None:
            texts[f"{at}.token"] = hub.token
        out.extend(reference_violations(name, texts, policy))
    return out


def _admitted(
    cfg: ToolSetConfig, policy: OperatorPolicy, reg: Registry, tenant: str
) -> ToolSetConfig:
    update: dict[str, Any] = {}
    if cfg.mcp_servers:
        servers = {}
        for name, server in cfg.mcp_servers.items():
            grant = policy.mcp_servers.get(name) if server.command or not server.url else None
            servers[name] = (
                server
                if grant is None
                else server.model_copy(
                    update={"command": list(grant.command), "env": {**grant.env, **server.env}}
                )
            )
        update["mcp_servers"] = servers
    tools = _admitted_tools(cfg, policy, reg, tenant)
    if tools is not None:
        update["tools"] = tools
    return cfg.model_copy(update=update) if update else cfg


def _admitted_tools(
    cfg: ToolSetConfig, policy: OperatorPolicy, reg: Registry, tenant: str
) -> list[ToolConfig] | None:
    """The config's tool list with what the operator decides, or None when that is nothing:
    the default tools the policy allows (for a tenant that named none), and the operator's cap
    on each limit left above it (unset, so at a built-in default or a preset's value)."""
    defaulted = cfg.tools is None and cfg.preset not in reg.toolset_presets
    asked = list(cfg.tools or [])
    own = [e for e in baseline_tools(cfg, reg) if policy.allows_tool(e.id)] if defaulted else asked
    capped: dict[str, dict[str, float]] = {}
    for entry in baseline_tools(cfg.model_copy(update={"tools": own}), reg):
        registered = reg.tools.get(entry.id)
        model = registered.tool.params_model if registered is not None else None
        if model is None:
            continue
        params = entry.params or {}
        for name, cap in caps(model, entry.id, policy, tenant).items():
            if cap is None or (name not in params and name not in model.model_fields):
                continue
            value = params[name] if name in params else model.model_fields[name].default
            if value is None or (isinstance(value, int | float) and value > cap):
                capped.setdefault(entry.id, {})[name] = int(cap) if cap == int(cap) else cap
    if not capped and (not defaulted or len(own) == len(baseline_tools(cfg, reg))):
        return None
    out = [
        e.model_copy(update={"params": {**(e.params or {}), **capped.pop(e.id)}})
        if e.id in capped
        else e
        for e in own
    ]
    return [*out, *(ToolConfig(id=fq_id, params=params) for fq_id, params in capped.items())]


def effective(
    policy: OperatorPolicy, tenant: str, *, registry: Registry | None = None
) -> dict[str, Any]:
    """What ``tenant`` may ask for: the policy, and for each tool it may enable the largest
    value of each limit param (None: no cap). JSON-ready, for ``toolhub policy show`` and the
    gateway's policy route."""
    reg = registry if registry is not None else installed_registry()
    tools = {
        fq_id: caps(registered.tool.params_model, fq_id, policy, tenant)
        for fq_id, registered in sorted(reg.tools.items())
        if policy.allows_tool(fq_id)
    }
    presets = sorted(
        name
        for name in [*reg.presets, *reg.toolset_presets]
        if name == DEFAULT_PRESET or policy.allows_preset(name)
    )
    return {
        "tenant": tenant,
        "tools": {fq_id: {"limits": limits} for fq_id, limits in tools.items()},
        "presets": presets,
        "fixed_params": policy.fixed_params,
        "sandbox": {
            **policy.sandbox.model_dump(mode="json"),
            "read": ["(the tenant's root)", *policy.sandbox.read],
            "always": [
                "require may not be false",
                "scrub_env may not be false",
                "read_only keeps .git/hooks and .git/config",
                "toolhub's own variables (TOOLHUB_*) never pass",
            ],
        },
        "lsp_servers": policy.lsp_servers,
        "mcp_servers": {
            name: {"command": grant.command, "tenant_env": grant.tenant_env}
            for name, grant in policy.mcp_servers.items()
        },
        "remote_hosts": policy.remote_hosts or ["(any public host)"],
        "allow_local_urls": policy.allow_local_urls,
        "env_vars": [name for name in policy.env_vars if policy.allows_env_var(name)],
        "hooks": tenant_view(policy.hooks),
    }
