"""The client's tool-set configuration (YAML or JSON): which tools, under which names, with which
parameters and behavior versions. Shape: docs/contract.md, "Configuration file"."""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolhub.approvals.rules import Permissions
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
    #: Which calls run, wait for a person's approval, or are refused (docs/approvals.md).
    permissions: Permissions | None = None
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

    @classmethod
    def salvage(cls, source: ConfigSource) -> Salvaged:
        """The config and its shape's violations, for a validation that reports every problem
        at once: when the shape is wrong, what it is wrong in (an unknown key of a tool entry;
        else the entry, server, hub or top-level key) is left out and the rest is the config,
        so the checks against the registry still run on it. No config when nothing is left to
        check (a file that does not parse, a source that is not a mapping)."""
        try:
            return Salvaged(cls.load(source))
        except ConfigError as err:
            violations = list(err.violations)
        if isinstance(source, str | Path):
            try:
                source = _read_file(Path(source))
            except ConfigError:
                return Salvaged(None, violations)
        if not isinstance(source, dict):
            return Salvaged(None, violations)
        try:
            cls.model_validate(source)
        except ValidationError as exc:
            pruned, kept = _without(source, exc.errors())
        try:
            return Salvaged(cls.model_validate(pruned), violations, kept)
        except ValidationError:
            return Salvaged(None, violations)

    def config_hash(self) -> str:
        """A stable hash of the config: workers cache built tool sets by it."""
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]


ConfigSource = ToolSetConfig | dict[str, Any] | str | Path | None


@dataclass
class Salvaged:
    """``ToolSetConfig.salvage``'s answer: ``kept[j]`` is the index in the source of the
    config's tool entry ``j`` (None: every entry is where it was)."""

    config: ToolSetConfig | None
    violations: list[ConfigViolation] = field(default_factory=list)
    kept: list[int] | None = None

    def source_path(self, path: str) -> str:
        """A later check's ``tools[j]...`` path, as the index in the source."""
        found = _TOOL_INDEX.match(path)
        if self.kept is None or found is None or int(found.group(1)) >= len(self.kept):
            return path
        return f"tools[{self.kept[int(found.group(1))]}]{path[found.end() :]}"


_TOOL_INDEX = re.compile(r"^tools\[(\d+)\]")


def default_client_name(fq_id: str) -> str:
    """The part after the first colon: ``Main:read_file`` → ``read_file``."""
    return fq_id.split(":", 2)[1] if ":" in fq_id else fq_id


def _read_file(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _unreadable(path, "no such file") from None
    except IsADirectoryError:
        raise _unreadable(path, "a directory, not a config file") from None
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise _unreadable(path, f"cannot read it: {reason}") from None
    try:
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise _unreadable(path, f"JSON syntax error at {where}: {exc.msg}") from None
    except yaml.YAMLError as exc:
        raise _unreadable(path, _yaml_error(exc)) from None


def _unreadable(path: Path, message: str) -> ConfigError:
    return ConfigError([ConfigViolation(str(path), message, category="config_parse")])


def _yaml_error(exc: yaml.YAMLError) -> str:
    """A YAML error in one sentence: where, what, and what it was inside of."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is None or problem is None:
        return f"YAML syntax error: {exc}"
    text = f"YAML syntax error at line {mark.line + 1}, column {mark.column + 1}: {problem}"
    context, context_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context and context_mark is not None:
        text += f" ({context} at line {context_mark.line + 1}, column {context_mark.column + 1})"
    return text


def _without(source: dict[str, Any], errors: list[Any]) -> tuple[dict[str, Any], list[int] | None]:
    """``source`` without what pydantic's ``errors`` point into: an unknown key of a tool
    entry, or else the whole entry, server, hub or top-level key; and the source index of
    each tool entry kept."""
    pruned = dict(source)
    tools = list(pruned["tools"]) if isinstance(pruned.get("tools"), list) else None
    bad_tools: set[int] = set()
    for err in errors:
        loc = err["loc"]
        if not loc:
            continue
        key = loc[0]
        if key == "tools" and tools is not None and len(loc) >= 2 and isinstance(loc[1], int):
            entry = tools[loc[1]] if loc[1] < len(tools) else None
            if err["type"] == "extra_forbidden" and len(loc) == 3 and isinstance(entry, dict):
                tools[loc[1]] = {k: v for k, v in entry.items() if k != loc[2]}
            else:
                bad_tools.add(loc[1])
        elif key in ("mcp_servers", "hubs") and len(loc) >= 2 and isinstance(pruned.get(key), dict):
            pruned[key] = {k: v for k, v in pruned[key].items() if k != loc[1]}
        else:
            pruned.pop(key, None)
    if tools is None or "tools" not in pruned:
        return pruned, None
    kept = [i for i in range(len(tools)) if i not in bad_tools]
    pruned["tools"] = [tools[i] for i in kept]
    return pruned, kept


def _violation(err: Any, source: dict[str, Any]) -> ConfigViolation:
    loc = err["loc"]
    path = _path(loc)
    tool = "(config)"
    if len(loc) >= 2 and loc[0] == "tools" and isinstance(loc[1], int):
        entries = source.get("tools") or []
        entry = entries[loc[1]] if loc[1] < len(entries) else None
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            tool = entry["id"]
    kind = err["type"]
    category = {"extra_forbidden": "unknown_field", "missing": "missing_field"}.get(
        kind, "config_type"
    )
    if kind == "extra_forbidden":
        key = str(loc[-1])
        close = difflib.get_close_matches(key, _fields_at(loc[:-1]), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return ConfigViolation(
            tool, f"unknown key {key!r}{hint}", category=category, field_path=path
        )
    message = "this key is required" if kind == "missing" else err["msg"]
    actual = None if kind == "missing" else err.get("input")
    return ConfigViolation(tool, message, category=category, field_path=path, actual=actual)


def _path(loc: tuple[Any, ...]) -> str:
    """``tools[0].id``: the path as validation's later stages write it."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _fields_at(loc: tuple[Any, ...]) -> list[str]:
    """The keys allowed where ``loc`` points (the mapping an unknown key was found in)."""
    model: type[BaseModel] = ToolSetConfig
    if loc[:1] == ("tools",) and len(loc) == 2:
        model = ToolConfig
    elif loc[:1] in (("mcp_servers",), ("hubs",)) and len(loc) == 2:
        model = McpServerConfig if loc[0] == "mcp_servers" else HubConfig
    elif loc:
        return []
    return list(model.model_fields)
