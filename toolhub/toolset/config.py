"""The client's tool-set configuration (YAML or JSON): which tools, under which names, with which
parameters and behavior versions. Shape: docs/contract.md, "Configuration file"."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolhub.core import CapabilityMode, ConfigError, ConfigViolation
from toolhub.core.reminders import DEFAULT_REMINDER_TAG


class ToolConfig(BaseModel):
    """One enabled tool and how the client sees it."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="Fully-qualified id, `Namespace:tool_id`.")
    name: str | None = Field(default=None, description="Client-visible name override.")
    params: dict[str, Any] | None = Field(default=None, description="Tool parameters.")
    rename: dict[str, str] = Field(default_factory=dict, description="Canonical → client param.")
    description: str | None = Field(default=None, description="Description override (rendered).")
    version: str | None = Field(default=None, description="Behavior version.")
    kind: str | None = Field(default=None, description="Classification override.")
    on_worker_lost: Literal["rerun", "fail"] | None = Field(
        default=None,
        description=(
            "Distributed mode: what happens when the worker running a call of this tool is "
            "lost. `rerun` runs it again from the start (the result says so); `fail` answers "
            "`worker_lost` and says the call may have partly run. Default: `rerun` for "
            "read-only tools, `fail` for every other."
        ),
    )

    @property
    def client_name(self) -> str:
        return self.name if self.name is not None else default_client_name(self.id)


class McpServerConfig(BaseModel):
    """An MCP server whose tools join the tool set as ``server__tool``."""

    model_config = ConfigDict(extra="forbid")

    command: list[str] | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    #: Speak protocol 2026-07-28 with the server (when it does) and take its MCP tasks: a
    #: long call answered with a task handle is polled to its result. Off by default: many
    #: servers that speak 2026-07-28 still announce tool list changes only on handshake-era
    #: connections, so toolhub would stop hearing of them.
    tasks: bool = False


class HubConfig(BaseModel):
    """A remote toolhub gateway whose tools merge at the lowest priority."""

    model_config = ConfigDict(extra="forbid")

    url: str
    token: str | None = None


class ToolSetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: CapabilityMode = CapabilityMode.ALL
    reminders: bool = True
    reminder_tag: str = DEFAULT_REMINDER_TAG
    preset: str = "current"
    tools: list[ToolConfig] | None = None
    mcp_servers: dict[str, McpServerConfig] = Field(default_factory=dict)
    hubs: dict[str, HubConfig] = Field(default_factory=dict)
    #: Hooks to run around each call besides the operator's (docs/hooks.md): names (or a
    #: webhook's URL) the operator policy lets tenants enable.
    hooks: list[str] = Field(default_factory=list)

    @classmethod
    def load(cls, source: ConfigSource) -> ToolSetConfig:
        """A config from a path (YAML or JSON), a mapping, a config, or None (the defaults).

        Anything malformed raises ``ConfigError`` with one violation per problem."""
        if source is None:
            return cls()
        if isinstance(source, ToolSetConfig):
            return source
        if isinstance(source, str | Path):
            source = _read_file(Path(source))
        if not isinstance(source, dict):
            raise ConfigError(
                [
                    ConfigViolation(
                        "(config)",
                        "the configuration must be a mapping",
                        category="config_parse",
                        expected="mapping",
                        actual=type(source).__name__,
                    )
                ]
            )
        try:
            return cls.model_validate(source)
        except ValidationError as exc:
            raise ConfigError([_violation(err, source) for err in exc.errors()]) from None

    def config_hash(self) -> str:
        """A stable hash of the config: workers cache built tool sets by it."""
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]


ConfigSource = ToolSetConfig | dict[str, Any] | str | Path | None


def default_client_name(fq_id: str) -> str:
    """The part after the first colon: ``Main:read_file`` → ``read_file``."""
    return fq_id.split(":", 2)[1] if ":" in fq_id else fq_id


def _read_file(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        raise ConfigError(
            [ConfigViolation(str(path), f"cannot read config: {exc}", category="config_parse")]
        ) from None
    try:
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(
            [ConfigViolation(str(path), f"malformed config: {exc}", category="config_parse")]
        ) from None


def _violation(err: Any, source: dict[str, Any]) -> ConfigViolation:
    loc = err["loc"]
    path = ".".join(str(p) for p in loc)
    tool = "(config)"
    if len(loc) >= 2 and loc[0] == "tools" and isinstance(loc[1], int):
        entries = source.get("tools") or []
        entry = entries[loc[1]] if loc[1] < len(entries) else None
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            tool = entry["id"]
    category = {
        "extra_forbidden": "unknown_field",
        "missing": "missing_field",
    }.get(err["type"], "config_type")
    return ConfigViolation(
        tool, err["msg"], category=category, field_path=path, actual=err.get("input")
    )
