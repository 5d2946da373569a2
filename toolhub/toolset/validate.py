"""Staged validation of a tool-set config against the registry.

Every independent violation is reported in one pass: each tool's id, version and params (an
unknown param does not hide a wrong type beside it), then names and renames and variant
conflicts among the tools that resolved. Requirements between tools are the one dependent
check: when a tool did not resolve, a requirement it would have met would be reported falsely,
so that stage is skipped and a ``not_checked`` entry says so and why. Validation never raises:
whatever the input, it returns violations.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from toolhub.core import ConfigViolation, ToolKind, VersionWarning, resolve_version
from toolhub.core.requirements import EvalContext, ProposedTool, unmet

from .config import ToolConfig, ToolSetConfig
from .merge import baseline_tools
from .registry import NAME_PATTERN, Registered, Registry

_PARAM_CATEGORIES = {
    "extra_forbidden": "params_unknown_field",
    "missing": "params_missing_field",
    "enum": "params_unknown_variant",
    "literal_error": "params_unknown_variant",
}


@dataclass
class Resolved:
    """A config entry that passed the per-tool stage, with everything the later stages need."""

    config: ToolConfig
    registered: Registered
    params: BaseModel | None
    version: str | None
    kind: ToolKind

    @property
    def client_name(self) -> str:
        return self.config.client_name


@dataclass
class Report:
    violations: list[ConfigViolation] = field(default_factory=list)
    warnings: list[VersionWarning] = field(default_factory=list)
    resolved: list[Resolved] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


def validate(config: ToolSetConfig, registry: Registry) -> Report:
    report = Report()
    # ``merge`` has already laid the config over its preset (or the defaults) and applied the
    # capability filter; expanding here again would bring back what the filter removed.
    entries = config.tools if config.tools is not None else baseline_tools(config, registry)
    for stage in (_stage_tools, _stage_names, _stage_variants):
        stage(config, entries, registry, report)
    _stage_requirements(
        config, entries, registry, report, complete=len(report.resolved) == len(entries)
    )
    if report.violations:
        report.resolved = []
    return report


def _stage_tools(
    config: ToolSetConfig, entries: list[ToolConfig], registry: Registry, report: Report
) -> None:
    preset = registry.presets.get(config.preset)
    if preset is None and config.preset in registry.toolset_presets:
        preset = {}  # a tool-set preset pins no versions
    if preset is None:
        report.violations.append(
            ConfigViolation(
                "(global)",
                f"unknown preset {config.preset!r}; known: {registry.preset_names()}",
                category="behavior_preset",
                field_path="preset",
                expected=registry.preset_names(),
                actual=config.preset,
            )
        )
        preset = {}
    for index, entry in enumerate(entries):
        registered = registry.tools.get(entry.id)
        if registered is None:
            close = difflib.get_close_matches(entry.id, list(registry.tools), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            if not close and not registry.default_tools:
                hint = (
                    "; this builder was given no catalog (ToolSetBuilder(CATALOG), with CATALOG"
                    " from toolhub.tools, has the built-in tools)"
                )
            report.violations.append(
                ConfigViolation(
                    entry.id,
                    f"unknown tool {entry.id!r}{hint}",
                    category="tool_not_found",
                    field_path=f"tools[{index}].id",
                    actual=entry.id,
                )
            )
            continue
        tool = registered.tool
        resolved = resolve_version(entry.id, tool.versions, entry.version, preset)
        if resolved.error is not None:
            report.violations.append(
                ConfigViolation(
                    entry.id,
                    resolved.error,
                    category="behavior_version",
                    field_path=f"tools[{index}].version",
                    expected=", ".join(v.version for v in tool.versions) or None,
                    actual=entry.version,
                )
            )
        elif resolved.warning is not None:
            report.warnings.append(resolved.warning)
        params, problems = _check_params(entry, tool.params_model)
        report.violations.extend(problems)
        if problems or resolved.error is not None:
            continue
        kind = ToolKind.parse(entry.kind) if entry.kind is not None else tool.kind
        report.resolved.append(Resolved(entry, registered, params, resolved.version, kind))


def check_params(
    tool: str, model: type[BaseModel] | None, values: dict[str, Any] | None
) -> tuple[BaseModel | None, list[ConfigViolation]]:
    """Validate ``values`` against a params model; every problem as a violation."""
    if model is None:
        if values:
            return None, [
                ConfigViolation(
                    tool,
                    "this tool takes no params",
                    category="params_unknown_field",
                    field_path="params",
                    actual=values,
                )
            ]
        return None, []
    values = values or {}
    problems = [
        ConfigViolation(
            tool,
            f"unknown param {key!r}",
            category="params_unknown_field",
            field_path=f"params.{key}",
            expected=", ".join(model.model_fields),
            actual=values[key],
        )
        for key in values
        if key not in model.model_fields
    ]
    # The known params are checked too: an unknown one must not hide a wrong type beside it.
    known = {k: v for k, v in values.items() if k in model.model_fields}
    try:
        params = model.model_validate(known)
    except ValidationError as exc:
        return None, [*problems, *(_param_violation(tool, err) for err in exc.errors())]
    except Exception as exc:
        return None, [*problems, ConfigViolation(tool, str(exc), category="params_constraint")]
    return (None, problems) if problems else (params, [])


def _check_params(
    entry: ToolConfig, model: type[BaseModel] | None
) -> tuple[BaseModel | None, list[ConfigViolation]]:
    return check_params(entry.id, model, entry.params)


def _param_violation(tool: str, err: Any) -> ConfigViolation:
    kind = err["type"]
    category = _PARAM_CATEGORIES.get(kind)
    if category is None:
        category = (
            "params_type"
            if kind.endswith(("_type", "_parsing")) or kind in {"bool_parsing", "int_from_float"}
            else "params_constraint"
        )
    path = ".".join(str(p) for p in err["loc"])
    expected = err.get("ctx", {}).get("expected") if isinstance(err.get("ctx"), dict) else None
    return ConfigViolation(
        tool,
        err["msg"],
        category=category,
        field_path=f"params.{path}" if path else "params",
        expected=str(expected) if expected is not None else _expected_from(kind),
        actual=err.get("input"),
    )


def _expected_from(kind: str) -> str | None:
    if kind.endswith(("_type", "_parsing")):
        return kind.removesuffix("_type").removesuffix("_parsing")
    return None


def _stage_names(
    config: ToolSetConfig, entries: list[ToolConfig], registry: Registry, report: Report
) -> None:
    seen: dict[str, str] = {}
    for item in report.resolved:
        name = item.client_name
        if not NAME_PATTERN.match(name):
            report.violations.append(
                ConfigViolation(
                    item.config.id,
                    f"invalid tool name {name!r}: use 1-64 characters from [A-Za-z0-9_-]",
                    category="invalid_name",
                    field_path="name",
                    expected="[A-Za-z0-9_-]{1,64}",
                    actual=name,
                )
            )
        elif name in seen:
            report.violations.append(
                ConfigViolation(
                    item.config.id,
                    f"client name {name!r} is also used by {seen[name]}; "
                    "set `name` to disambiguate",
                    category="duplicate_client_name",
                    field_path="name",
                    actual=name,
                )
            )
        else:
            seen[name] = item.config.id
        report.violations.extend(_rename_violations(item))


def _rename_violations(item: Resolved) -> list[ConfigViolation]:
    props = item.registered.erased.properties
    out: list[ConfigViolation] = []
    targets: dict[str, str] = {}
    for canonical, client in item.config.rename.items():
        path = f"rename.{canonical}"
        if canonical not in props:
            out.append(
                ConfigViolation(
                    item.config.id,
                    f"cannot rename unknown parameter {canonical!r}",
                    category="rename_unknown_param",
                    field_path=path,
                    expected=", ".join(sorted(props)),
                    actual=canonical,
                )
            )
        elif not NAME_PATTERN.match(client):
            out.append(
                ConfigViolation(
                    item.config.id,
                    f"invalid parameter name {client!r}",
                    category="invalid_name",
                    field_path=path,
                    expected="[A-Za-z0-9_-]{1,64}",
                    actual=client,
                )
            )
        elif (client in props and client not in item.config.rename and client != canonical) or (
            client in targets
        ):
            clash = targets.get(client, client)
            out.append(
                ConfigViolation(
                    item.config.id,
                    f"renaming {canonical!r} to {client!r} collides with parameter {clash!r}",
                    category="rename_collision",
                    field_path=path,
                    actual=client,
                )
            )
        else:
            targets[client] = canonical
    return out


def _stage_variants(
    config: ToolSetConfig, entries: list[ToolConfig], registry: Registry, report: Report
) -> None:
    families: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for item in report.resolved:
        family = item.registered.tool.variant_family
        if family is not None:
            families[family][item.registered.tool.namespace].append(item.config.id)
    for family, by_namespace in families.items():
        if len(by_namespace) > 1:
            listing = "; ".join(f"{ns}: {', '.join(ids)}" for ns, ids in by_namespace.items())
            for ids in by_namespace.values():
                for fq_id in ids:
                    report.violations.append(
                        ConfigViolation(
                            fq_id,
                            f"mutually exclusive variants of `{family}` enabled together "
                            f"({listing}); keep one namespace",
                            category="variant_conflict",
                        )
                    )


def proposed_tools(resolved: list[Resolved]) -> list[ProposedTool]:
    return [
        ProposedTool(
            item.registered.tool.namespace,
            item.registered.tool.id,
            item.kind,
            item.params.model_dump(mode="json") if item.params is not None else {},
            item.registered.erased.properties,
        )
        for item in resolved
    ]


def _stage_requirements(
    config: ToolSetConfig,
    entries: list[ToolConfig],
    registry: Registry,
    report: Report,
    *,
    complete: bool = True,
) -> None:
    """Requirements among the resolved tools. When some entry did not resolve (``complete``
    false), an unmet requirement may be one that entry would meet: it is reported as
    ``not_checked``, naming the entries to fix first, not as a violation of its own."""
    tools = proposed_tools(report.resolved)
    resolved_ids = {id(r.config) for r in report.resolved}
    pending = ", ".join(e.id for e in entries if id(e) not in resolved_ids)
    for item, proposed in zip(report.resolved, tools, strict=True):
        ctx = EvalContext(tools, proposed.params)
        missing = unmet(item.registered.tool.requires, ctx)
        if not missing:
            continue
        needs = "; ".join(part.explain() for part in missing)
        if complete:
            message = f"{item.client_name} requires {needs}, which the tool set does not enable"
            category = "requirements"
        else:
            message = (
                f"not checked: {item.client_name} requires {needs}, and the entries that could "
                f"not be resolved ({pending}) may provide it; fix those first"
            )
            category = "not_checked"
        report.violations.append(
            ConfigViolation(
                item.config.id,
                message,
                category=category,
                expected=item.registered.tool.requires.explain(),
            )
        )
