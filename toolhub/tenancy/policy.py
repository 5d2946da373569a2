"""The operator's policy: the limits every tenant's tool-set config must stay within.

A tenant may enable tools, rename them and set their params; on a shared fleet each of those is
a way out unless the operator bounds it. The threat is a tenant's own config: one that turns
the sandbox off (``sandbox.mode: full``), reads the fleet's secrets (``sandbox.read`` of
``$TOOLHUB_HOME``, an ``lsp`` server command), runs a command on the gateway host
(``mcp_servers``), sends the gateway's environment to an arbitrary host (``${VAR}``), raises a
limit, or slips a command-running tool into ``mode: read_only`` by a ``kind`` override.

The policy is a YAML or JSON file named by ``TOOLHUB_POLICY``; with none, the defaults below
hold, and they are strict: every installed tool and preset may be enabled, but the sandbox can
only be narrowed, limits only lowered, no MCP server, no ``${VAR}``. Admission against it:
``toolhub.tenancy.admission``; the format, with an example: docs/sandbox.md, "Operator policy".
"""

from __future__ import annotations

import fnmatch
import json
import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolhub.approvals.rules import OperatorPermissions
from toolhub.core import ConfigError, ConfigViolation
from toolhub.env_refs import is_toolhub_secret, restrict
from toolhub.sandbox.policy import SandboxMode

from .hook_policy import HookPolicy
from .quotas import TenantQuotas

#: The environment variable naming the policy file.
POLICY_ENV = "TOOLHUB_POLICY"


class SandboxRules(BaseModel):
    """What a tenant may say in ``Main:bash``'s ``params.sandbox``. What no field here can
    allow: ``require: false``, ``scrub_env: false``, removing a default ``read_only`` path."""

    model_config = ConfigDict(extra="forbid")

    modes: list[SandboxMode] = Field(
        default_factory=lambda: [SandboxMode.READ_ONLY, SandboxMode.WORKSPACE_WRITE],
        description="Sandbox modes a tenant may pick; `full` (no sandbox) only when listed.",
    )
    network_any: bool = Field(
        False, description="Whether a tenant may set `network: true` (any host)."
    )
    network_hosts: list[str] = Field(
        default_factory=list,
        description="Hosts (globs: `*.pythonhosted.org`) a tenant may list in `network`; "
        "empty: `network: false` only.",
    )
    env: list[str] = Field(
        default_factory=list,
        description="Worker environment variables a tenant may pass through (`env`); exact "
        "names or globs. toolhub's own (`TOOLHUB_*`) never pass, even when listed.",
    )
    read: list[str] = Field(
        default_factory=list,
        description="Absolute host paths a tenant may add to `read` besides its own root.",
    )


class McpServerGrant(BaseModel):
    """A stdio MCP server the operator lets tenants enable by name."""

    model_config = ConfigDict(extra="forbid")

    command: list[str] = Field(min_length=1, description="The command, as the operator runs it.")
    env: dict[str, str] = Field(default_factory=dict, description="The operator's environment.")
    tenant_env: list[str] = Field(
        default_factory=list,
        description="Variables a tenant's entry may set in the server's environment (none by "
        "default: `LD_PRELOAD` and the like would run the tenant's code).",
    )


class OperatorPolicy(BaseModel):
    """Everything a tenant's config may ask for. Tool and preset patterns are globs
    (``Main:*``); ``params``, ``limits`` and ``fixed_params`` key tools by glob too."""

    model_config = ConfigDict(extra="forbid")

    tools: list[str] = Field(
        default_factory=lambda: ["*"],
        description="Tools (fq ids or globs) a tenant may enable; default: every installed one.",
    )
    presets: list[str] = Field(
        default_factory=lambda: ["*"],
        description="Presets (behavior and tool-set) a tenant may name; default: every one.",
    )
    fixed_params: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Tool glob → params a tenant may not set at all.",
    )
    limits: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="Tool glob → param → the largest value a tenant may set. Unlisted limit "
        "params (timeouts, output, memory, processes) are capped at their built-in default.",
    )
    sandbox: SandboxRules = Field(default_factory=SandboxRules)
    lsp_servers: dict[str, list[str]] = Field(
        default_factory=lambda: {"python": ["pylsp"]},
        description="Language → the server command a tenant may configure for `Main:lsp`.",
    )
    mcp_servers: dict[str, McpServerGrant] = Field(
        default_factory=dict,
        description="Stdio MCP servers a tenant may enable by name; none by default.",
    )
    remote_hosts: list[str] = Field(
        default_factory=list,
        description="Hosts (globs) HTTP MCP servers and hubs may be on; empty: any public host.",
    )
    allow_local_urls: bool = Field(
        False,
        description="Let HTTP MCP servers and hubs be on loopback or private addresses "
        "(development); cloud metadata addresses stay refused.",
    )
    env_vars: list[str] = Field(
        default_factory=list,
        description="Variables a config may reference as `${VAR}` (MCP headers, env, url; hub "
        "url and token); toolhub's own (`TOOLHUB_*`) never, even when listed.",
    )
    permissions: OperatorPermissions = Field(
        default_factory=OperatorPermissions,
        description="Permission rules every tenant's calls are held to (docs/approvals.md).",
    )
    quotas: TenantQuotas = Field(
        default_factory=TenantQuotas,
        description="What each tenant may consume of the fleet (``toolhub.tenancy.quotas``).",
    )
    hooks: HookPolicy = Field(
        default_factory=HookPolicy,
        description="Hooks around each call (``toolhub.tenancy.hook_policy``, docs/hooks.md).",
    )

    @classmethod
    def load(cls, path: str | Path | None = None) -> OperatorPolicy:
        """The policy in ``path`` (default: the file ``TOOLHUB_POLICY`` names), or the strict
        defaults when there is none. A file that cannot be read or is malformed raises
        ``ConfigError``: a fleet must not start on a policy it did not mean."""
        if path is None:
            named = os.environ.get(POLICY_ENV, "").strip()
            if not named:
                return cls()
            path = named
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
            data = json.loads(text) if file.suffix == ".json" else yaml.safe_load(text)
        except (OSError, ValueError, yaml.YAMLError) as exc:
            raise _policy_error(str(file), f"cannot read the operator policy: {exc}") from None
        return cls.parse(data if data is not None else {}, source=str(file))

    @classmethod
    def parse(cls, data: Any, *, source: str = "(policy)") -> OperatorPolicy:
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(
                [
                    ConfigViolation(
                        source,
                        err["msg"],
                        category="policy_file",
                        field_path=".".join(str(p) for p in err["loc"]),
                        actual=err.get("input"),
                    )
                    for err in exc.errors()
                ]
            ) from None

    def restrict_expansion(self) -> None:
        """Let this process expand only the policy's ``env_vars`` in any config (a process
        serving tenants calls this once it has loaded its policy)."""
        restrict([name for name in self.env_vars if not is_toolhub_secret(name)])

    # -- questions admission asks ---------------------------------------------------------------

    def allows_tool(self, fq_id: str) -> bool:
        return _matches(fq_id, self.tools)

    def allows_preset(self, name: str) -> bool:
        return _matches(name, self.presets)

    def fixed(self, fq_id: str) -> set[str]:
        return {p for glob, names in self.fixed_params.items() if _glob(fq_id, glob) for p in names}

    def limit_overrides(self, fq_id: str) -> dict[str, float]:
        """The operator's caps for ``fq_id``; a more specific glob (longer) wins."""
        out: dict[str, float] = {}
        for glob in sorted(self.limits, key=len):
            if _glob(fq_id, glob):
                out.update(self.limits[glob])
        return out

    def allows_env_var(self, name: str) -> bool:
        """Whether a config may reference ``${name}``."""
        return not is_toolhub_secret(name) and name in self.env_vars

    def allows_passthrough(self, name: str) -> bool:
        """Whether a tenant's sandbox may pass the worker's ``name`` (or ``PREFIX_*``) on."""
        prefix = name.rstrip("*").upper()
        if is_toolhub_secret(prefix) or (name.endswith("*") and "TOOLHUB".startswith(prefix)):
            return False
        return _matches(name, self.sandbox.env)

    def allows_network_host(self, host: str) -> bool:
        return _matches(host.lower(), [h.lower() for h in self.sandbox.network_hosts])

    def allows_remote_host(self, host: str) -> bool:
        patterns = [h.lower() for h in self.remote_hosts]
        return not patterns or _matches(host.lower(), patterns)


def _glob(value: str, pattern: str) -> bool:
    return value == pattern or fnmatch.fnmatchcase(value, pattern)


def _matches(value: str, patterns: list[str]) -> bool:
    return any(_glob(value, p) for p in patterns)


def _policy_error(source: str, message: str) -> ConfigError:
    return ConfigError([ConfigViolation(source, message, category="policy_file")])
