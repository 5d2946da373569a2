"""The operator policy's rules for one tool entry of a tenant's config: its params and its
``kind`` override. Each check returns every violation it finds; none changes the entry.

The threats, each a param the seed lets a client set: ``sandbox`` (turn it off, read the host,
pass the worker's secrets, open the network), a limit raised (a timeout, output, memory or
process cap, above the operator's per-command ceilings of the tenant's ``quotas`` too),
``lsp`` server commands (any program, and its installation made readable),
``web_fetch``'s ``allow_local`` (the fleet's private network), ``task``'s ``subagent_mode``
(sub-agents with more than the session's mode), and ``kind`` (a command runner admitted as a
reader into ``mode: read_only``).
"""

from __future__ import annotations

import os
import re
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from toolhub.core import CapabilityMode, ConfigViolation, ToolKind
from toolhub.sandbox.policy import DEFAULT_READ_ONLY
from toolhub.sandbox.settings import SandboxSettings
from toolhub.tools.lsp_models import LspParams
from toolhub.toolset.config import ToolConfig

from .policy import OperatorPolicy
from .quotas import Quotas

#: A numeric param with this in its name bounds what a call may consume: a tenant may only
#: lower it (timeouts, output and body sizes, result counts, memory, processes, depth).
LIMIT_NAME = re.compile(
    r"max|timeout|limit|cpu_seconds|address_space|output_bytes|tail_lines|memory_mb"
)
_MIB = 1 << 20
#: Limit params the kernel holds per command, and the tenant's quota that is their ceiling
#: (``memory_mb`` in MiB): a command's cgroup never gets more, so a config may not ask for it.
QUOTA_CEILINGS: dict[str, Callable[[Quotas], float]] = {
    "max_processes": lambda q: q.pids_per_command,
    "memory_mb": lambda q: q.memory_per_command // _MIB,
}


def limit_params(model: type[BaseModel] | None) -> dict[str, float | None]:
    """The limit params of ``model`` with their built-in defaults (None: unlimited)."""
    if model is None:
        return {}
    out: dict[str, float | None] = {}
    for name, info in model.model_fields.items():
        if LIMIT_NAME.search(name) and _numeric(info.annotation):
            default = info.default
            out[name] = default if isinstance(default, int | float) else None
    return out


def _numeric(annotation: Any) -> bool:
    if annotation in (int, float):
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return bool(args) and all(a in (int, float) for a in args)
    return False


def caps(
    model: type[BaseModel] | None, fq_id: str, policy: OperatorPolicy, tenant: str
) -> dict[str, float | None]:
    """Param → the largest value ``tenant`` may set for ``fq_id`` (None: no cap): the
    built-in default or the operator's ``limits``, and never above the tenant's quota
    ceiling of a limit the kernel holds (``QUOTA_CEILINGS``)."""
    found = limit_params(model)
    found.update(policy.limit_overrides(fq_id))
    quotas = policy.quotas.for_tenant(tenant)
    for name, ceiling in QUOTA_CEILINGS.items():
        if name in found:
            cap = found[name]
            found[name] = ceiling(quotas) if cap is None else min(cap, ceiling(quotas))
    return found


def entry_violations(
    entry: ToolConfig,
    index: int,
    *,
    model: type[BaseModel] | None,
    own_kind: ToolKind | None,
    mode: CapabilityMode,
    policy: OperatorPolicy,
    tenant: str,
    tenant_root: Path,
) -> list[ConfigViolation]:
    at = f"tools[{index}]"
    out = _kind_violations(entry, at, own_kind)
    params = entry.params or {}
    fixed = policy.fixed(entry.id)
    for name in sorted(fixed & set(params)):
        out.append(
            _refuse(
                entry.id,
                f"{at}.params.{name}",
                "the operator fixes this param",
                asked=params[name],
                allowed="not set",
            )
        )
    for name, cap in caps(model, entry.id, policy, tenant).items():
        if name in params and name not in fixed:
            out.extend(_limit_violation(entry.id, f"{at}.params.{name}", params[name], cap))
    if "sandbox" in params and isinstance(params["sandbox"], dict):
        out.extend(
            _sandbox_violations(
                entry.id, f"{at}.params.sandbox", params["sandbox"], policy, tenant_root
            )
        )
    if model is LspParams and isinstance(params.get("servers"), dict):
        out.extend(_lsp_violations(entry.id, f"{at}.params.servers", params["servers"], policy))
    if params.get("allow_local") is True and not policy.allow_local_urls:
        out.append(
            _refuse(
                entry.id,
                f"{at}.params.allow_local",
                "fetching from loopback and private addresses is the operator's to allow",
                asked=True,
                allowed="false",
            )
        )
    sub = params.get("subagent_mode")
    if isinstance(sub, str) and _widens_mode(sub, mode):
        out.append(
            _refuse(
                entry.id,
                f"{at}.params.subagent_mode",
                f"sub-agents may not have more than the session's mode {mode.value!r}",
                asked=sub,
                allowed=f"{mode.value} or read_only",
            )
        )
    return out


def _refuse(tool: str, path: str, why: str, *, asked: Any, allowed: str) -> ConfigViolation:
    return ConfigViolation(
        tool,
        f"refused by the operator policy: {why}",
        category="policy",
        field_path=path,
        expected=allowed,
        actual=asked,
    )


def _limit_violation(tool: str, path: str, value: Any, cap: float | None) -> list[ConfigViolation]:
    if cap is None:
        return []
    if value is None:
        return [
            _refuse(tool, path, "a limit may not be removed", asked=None, allowed=f"<= {cap:g}")
        ]
    if isinstance(value, int | float) and not isinstance(value, bool) and value > cap:
        return [
            _refuse(tool, path, "a limit may only be lowered", asked=value, allowed=f"<= {cap:g}")
        ]
    return []


def _kind_violations(entry: ToolConfig, at: str, own: ToolKind | None) -> list[ConfigViolation]:
    """A ``kind`` override may not put the tool into a capability mode its own kind is not
    admitted to, nor make a tool that is not read-only count as read-only."""
    if entry.kind is None or own is None:
        return []
    asked = ToolKind.parse(entry.kind)
    wider = [m.value for m in CapabilityMode if m.allows(asked) and not m.allows(own)]
    if asked.is_read_only and not own.is_read_only:
        wider = wider or ["read-only inference"]
    if not wider:
        return []
    return [
        _refuse(
            entry.id,
            f"{at}.kind",
            f"the override would admit a tool of kind {own.value!r} where it is not "
            f"({', '.join(wider)})",
            asked=entry.kind,
            allowed=f"a kind no wider than {own.value!r}",
        )
    ]


def _widens_mode(sub: str, mode: CapabilityMode) -> bool:
    try:
        asked = CapabilityMode(sub)
    except ValueError:
        return False  # validation reports it
    return any(asked.allows(kind) and not mode.allows(kind) for kind in ToolKind)


def _sandbox_violations(
    tool: str, at: str, raw: dict[str, Any], policy: OperatorPolicy, tenant_root: Path
) -> list[ConfigViolation]:
    try:
        asked = SandboxSettings.model_validate(raw)
    except ValidationError:
        return []  # validation reports a malformed sandbox
    rules = policy.sandbox
    out: list[ConfigViolation] = []
    if asked.mode not in rules.modes:
        out.append(
            _refuse(
                tool,
                f"{at}.mode",
                "this sandbox mode is not allowed",
                asked=asked.mode.value,
                allowed=", ".join(m.value for m in rules.modes),
            )
        )
    if asked.require is False:
        out.append(
            _refuse(
                tool,
                f"{at}.require",
                "the sandbox may not be made optional",
                asked=False,
                allowed="true or unset",
            )
        )
    if asked.scrub_env is False:
        out.append(
            _refuse(
                tool,
                f"{at}.scrub_env",
                "commands may not see the worker's environment",
                asked=False,
                allowed="true or unset",
            )
        )
    for n, name in enumerate(asked.env):
        if not policy.allows_passthrough(name):
            out.append(
                _refuse(
                    tool,
                    f"{at}.env[{n}]",
                    f"the worker's {name!r} may not be passed on",
                    asked=name,
                    allowed=", ".join(rules.env) or "none",
                )
            )
    out.extend(_network_violations(tool, f"{at}.network", asked.network, policy))
    missing = [p for p in DEFAULT_READ_ONLY if p not in asked.read_only]
    if missing:
        out.append(
            _refuse(
                tool,
                f"{at}.read_only",
                f"the defaults {missing} may not be removed",
                asked=asked.read_only,
                allowed=f"a list holding {list(DEFAULT_READ_ONLY)}",
            )
        )
    for n, path in enumerate(asked.read):
        if not _readable(path, policy, tenant_root):
            out.append(
                _refuse(
                    tool,
                    f"{at}.read[{n}]",
                    "a read path must lie inside the tenant's root",
                    asked=path,
                    allowed=", ".join([str(tenant_root), *rules.read]),
                )
            )
    return out


def _network_violations(
    tool: str, at: str, network: bool | list[str], policy: OperatorPolicy
) -> list[ConfigViolation]:
    rules = policy.sandbox
    hosts = rules.network_hosts
    allowed = "any" if rules.network_any else (f"false or hosts in {hosts}" if hosts else "false")
    if network is True and not rules.network_any:
        return [_refuse(tool, at, "commands may not reach any host", asked=True, allowed=allowed)]
    if isinstance(network, list) and not rules.network_any:
        return [
            _refuse(
                tool, f"{at}[{n}]", f"commands may not reach {host!r}", asked=host, allowed=allowed
            )
            for n, host in enumerate(network)
            if not policy.allows_network_host(host)
        ]
    return []


def _readable(path: str, policy: OperatorPolicy, tenant_root: Path) -> bool:
    """Whether ``path`` (absolute, no ``~``) lies inside the tenant root or an operator-listed
    path, judged both as written and with symlinks resolved."""
    if not os.path.isabs(path):
        return False
    roots = [tenant_root, *(Path(p) for p in policy.sandbox.read)]
    written = Path(os.path.normpath(path))
    real = Path(os.path.realpath(path))
    return any(
        written.is_relative_to(os.path.normpath(root))
        and real.is_relative_to(os.path.realpath(root))
        for root in roots
    )


def _lsp_violations(
    tool: str, at: str, servers: dict[str, Any], policy: OperatorPolicy
) -> list[ConfigViolation]:
    out: list[ConfigViolation] = []
    for language, command in servers.items():
        if policy.lsp_servers.get(language) != command:
            allowed = policy.lsp_servers.get(language)
            out.append(
                _refuse(
                    tool,
                    f"{at}.{language}",
                    "only the operator's server command may run for this language",
                    asked=command,
                    allowed=repr(allowed) if allowed else "none",
                )
            )
    return out
