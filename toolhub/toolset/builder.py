"""The tool-set builder: registers the catalog it is given (``catalog.py``), plugins and
reminders, validates a configuration and produces the immutable ``ToolSet`` (seed sections 7
and 9)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib.metadata import entry_points
from typing import Any

from toolhub.core import (
    ConfigError,
    ConfigViolation,
    Container,
    Reminder,
    ResourceKey,
    TemplateRenderer,
    TemplateRenderError,
    Tool,
)
from toolhub.core.reminders import RemindersEnabled
from toolhub.core.requirements import EvalContext
from toolhub.core.schema import rename_properties
from toolhub.core.tool import ListContext

from .catalog import Catalog
from .config import ConfigSource, ToolConfig, ToolSetConfig
from .external import ExternalSpec
from .formats import Definition
from .merge import merge
from .registry import Registry, ToolSetPreset
from .render_process import render_client_template
from .toolset import Entry, ToolSet
from .validate import Report, Resolved, proposed_tools, validate

#: Checks that depend on every tool entry: not run on a config with entries left out.
_DEPENDENT = {"requirements", "not_checked"}

logger = logging.getLogger("toolhub.builder")

PLUGIN_GROUP = "toolhub.plugins"


class ToolSetBuilder:
    """Collects what can be enabled; ``build(config)`` turns a client config into a ToolSet.

    Plugins are callables published under the ``toolhub.plugins`` entry-point group; each
    receives the builder and registers its tools, reminders or presets.
    """

    def __init__(self, catalog: Catalog | None = None, *, plugins: bool = True) -> None:
        """``catalog``: the tools to start from (the built-ins are ``toolhub.tools.CATALOG``;
        none: only what is registered here and what the plugins add)."""
        self.registry = Registry()
        self.plugin_errors: list[str] = []
        self.providers: list[tuple[Any, Callable[[Container], Any]]] = []
        if catalog is not None:
            self._add(catalog)
        if plugins:
            self._load_plugins()

    def register(self, *tools: type[Tool[Any, Any]]) -> ToolSetBuilder:
        for tool_cls in tools:
            self.registry.add_tool(tool_cls)
        return self

    def register_reminder(self, reminder: Reminder) -> ToolSetBuilder:
        self.registry.reminders.append(reminder)
        return self

    def register_preset(self, name: str, pins: dict[str, str]) -> ToolSetBuilder:
        """A behavior preset: versions pinned for many tools (``preset: legacy-1``)."""
        if name in self.registry.toolset_presets:
            raise ValueError(f"preset {name!r} is already a tool-set preset")
        self.registry.presets[name] = dict(pins)
        return self

    def register_toolset_preset(
        self, name: str, tools: Sequence[Mapping[str, Any]], description: str = ""
    ) -> ToolSetBuilder:
        """A tool-set preset: a tool list in the config's ``tools:`` form (``preset: coding``).
        The entries are parsed now, so a malformed one fails here rather than in a client's
        config; whether the tools exist and fit together is checked per config, like any."""
        if name in self.registry.presets:
            raise ValueError(f"preset {name!r} is already a behavior preset")
        entries = tuple(ToolConfig.model_validate(dict(entry)) for entry in tools)
        self.registry.toolset_presets[name] = ToolSetPreset(name, description, entries)
        return self

    def provide(self, key: Any, factory: Callable[[Container], Any]) -> ToolSetBuilder:
        """A resource every tool set built here gets: ``factory(container)`` is inserted under
        ``key`` unless the container already has one. This is how a plugin gives workers what
        a host gives an embedded session by hand (``SubagentRunner`` for ``task``): a worker
        builds each session's tool set with the plugins of ``TOOLHUB_PLUGINS``."""
        self.providers.append((key, factory))
        return self

    def set_default_tools(self, fq_ids: Iterable[str]) -> ToolSetBuilder:
        self.registry.default_tools = list(fq_ids)
        return self

    def _add(self, catalog: Catalog) -> None:
        self.register(*catalog.tools)
        for reminder in catalog.reminders:
            self.register_reminder(reminder)
        for name, pins in catalog.presets.items():
            self.register_preset(name, dict(pins))
        for name, preset in catalog.toolset_presets.items():
            self.register_toolset_preset(name, preset["tools"], preset.get("description", ""))
        self.registry.default_tools = list(catalog.default_tool_ids)

    def _load_plugins(self) -> None:
        for ep in entry_points(group=PLUGIN_GROUP):
            try:
                plugin: Callable[[ToolSetBuilder], Any] = ep.load()
                plugin(self)
            except Exception as exc:
                message = f"plugin {ep.name!r} ({ep.value}) failed to load: {exc}"
                logger.warning(message)
                self.plugin_errors.append(message)

    # -- validation and build -------------------------------------------------------------------

    def validate(self, config: ConfigSource = None) -> Report:
        """Every violation at once; never raises for a bad config. A config whose shape is
        wrong is checked without the parts its shape is wrong in (``ToolSetConfig.salvage``),
        and then not for requirements between tools: one left out may be what meets them."""
        salvaged = ToolSetConfig.salvage(config)
        if salvaged.config is None:
            return Report(violations=salvaged.violations)
        report = validate(merge(salvaged.config, self.registry).config, self.registry)
        if not salvaged.violations:
            return report
        later = [v for v in report.violations if v.category not in _DEPENDENT]
        for violation in later:
            if violation.field_path:
                violation.field_path = salvaged.source_path(violation.field_path)
        return Report(violations=[*salvaged.violations, *later], warnings=report.warnings)

    def build(
        self,
        config: ConfigSource = None,
        *,
        container: Container | None = None,
        session_id: str = "",
        external: Sequence[ExternalSpec] = (),
    ) -> ToolSet:
        cfg = ToolSetConfig.load(config)
        merged = merge(cfg, self.registry, external)
        report = validate(merged.config, self.registry)
        if not report.ok:
            raise ConfigError(report.violations)
        container = container if container is not None else Container()
        renderer = _renderer(report.resolved)
        container.insert(renderer)
        _install(container, report.resolved, cfg)
        for key, factory in self.providers:
            if container.get(key) is None:
                container.insert(factory(container), key)
        entries: list[Entry] = []
        problems: list[ConfigViolation] = []
        for item in report.resolved:
            try:
                entries.append(_entry(item, renderer, container))
            except TemplateRenderError as err:
                problems.append(
                    ConfigViolation(
                        item.config.id,
                        err.detail,
                        category="template_render",
                        field_path="description",
                    )
                )
        if problems:
            raise ConfigError(problems)
        tools = proposed_tools(report.resolved)
        reminders = [r for r in self.registry.reminders if r.requires.evaluate(EvalContext(tools))]
        for reminder in reminders:
            for model in getattr(reminder, "state_models", ()):
                container.register_persisted(ResourceKey("state", model), _resource_id(model))
        for warning in report.warnings:
            logger.warning(warning.message)
        return ToolSet(
            config=merged.config,
            entries=entries,
            container=container,
            renderer=renderer,
            reminders=reminders,
            warnings=report.warnings,
            session_id=session_id,
        )


def _renderer(resolved: Sequence[Resolved]) -> TemplateRenderer:
    """kind → first tool's client name (config order); kind → canonical → client param names
    across every tool of that kind."""
    by_kind: dict[str, str] = {}
    params: dict[str, dict[str, str]] = {}
    for item in resolved:
        kind = item.kind.value
        by_kind.setdefault(kind, item.client_name)
        names = params.setdefault(kind, {})
        for prop in item.registered.erased.properties:
            names.setdefault(prop, prop)
        names.update(item.config.rename)
    return TemplateRenderer(by_kind=by_kind, params=params)


def _install(container: Container, resolved: Sequence[Resolved], cfg: ToolSetConfig) -> None:
    container.insert(RemindersEnabled(cfg.reminders))
    for item in resolved:
        tool = item.registered.tool
        if item.params is not None:
            container.insert(item.params, ResourceKey("params", type(item.params)))
        for model in tool.state_models:
            container.register_persisted(ResourceKey("state", model), _resource_id(model))


def _entry(item: Resolved, renderer: TemplateRenderer, container: Container) -> Entry:
    tool = item.registered.tool
    to_client = {k: v for k, v in item.config.rename.items() if k != v}
    extra = tool.template_extra(item.params)
    template = item.config.description
    ctx = ListContext(renderer, item.params, item.client_name, to_client, container)
    description = (  # an override is the client's: it renders in a render process
        render_client_template(template, renderer.context(extra))
        if template is not None
        else tool.description(ctx)
    )
    schema = tool.adjust_schema(item.registered.erased.input_schema, item.params)
    schema = rename_properties(renderer.render_schema(schema, extra), to_client)
    return Entry(
        client_name=item.client_name,
        fq_id=item.registered.fq_id,
        kind=item.kind,
        handle=item.registered.erased,
        definition=Definition(item.client_name, description, schema),
        params=item.params,
        to_client=to_client,
        to_canonical={v: k for k, v in to_client.items()},
        version=item.version,
        workload=tool.workload,
        tool=tool,
        on_worker_lost=item.config.on_worker_lost or ("rerun" if tool.is_read_only() else "fail"),
    )


def _resource_id(model: type[Any]) -> str:
    resource_id = getattr(model, "resource_id", None)
    if not isinstance(resource_id, str) or not resource_id:
        raise TypeError(f"state model {model.__name__} needs a `resource_id: ClassVar[str]`")
    return resource_id
