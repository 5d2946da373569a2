"""The immutable tool set: lookup by client name, argument remapping and validation, context
building, and post-processing (model text, reminders, state persistence).

Only external tools change after build; they are swapped in copy-on-write, so a call in flight
never sees a half-updated table and lookups take no lock.
"""

from __future__ import annotations

import difflib
import logging
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from toolhub.core import (
    CallResult,
    CancelToken,
    Container,
    ErasedTool,
    Outcome,
    Progress,
    Reminder,
    TemplateRenderer,
    Tool,
    ToolContext,
    ToolError,
    ToolKind,
    VersionWarning,
    closing,
    drain,
    parse_arguments,
    wrap_reminders,
)
from toolhub.core.reminders import RemindersEnabled
from toolhub.core.tool import ListContext

from .config import ToolSetConfig
from .external import ExternalHandler, ExternalSpec, ExternalTool
from .formats import Definition, render_definitions
from .registry import EXTERNAL_SEPARATOR, NAME_PATTERN, valid_external_name

logger = logging.getLogger("toolhub.toolset")


@dataclass(slots=True)
class Entry:
    """One enabled tool as the client sees it."""

    client_name: str
    fq_id: str
    kind: ToolKind | None
    handle: ErasedTool | ExternalTool
    definition: Definition
    params: BaseModel | None = None
    to_client: dict[str, str] = field(default_factory=dict)
    to_canonical: dict[str, str] = field(default_factory=dict)
    version: str | None = None
    workload: str = "fast"
    tool: Tool[Any, Any] | None = None
    #: Policy when a worker running a call is lost: ``rerun`` or ``fail`` (``ToolConfig``).
    on_worker_lost: str = "fail"

    @property
    def external(self) -> bool:
        return self.tool is None

    @property
    def read_only(self) -> bool:
        return self.tool.is_read_only() if self.tool is not None else False


@dataclass(slots=True)
class Prepared:
    """A validated call, ready for an executor: the entry, typed args and the context."""

    entry: Entry
    args: Any
    ctx: ToolContext
    arguments: dict[str, Any]
    #: Notes of ``before`` hooks (``toolhub.hooks``): the model reads them after the result.
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.entry.client_name


class ToolSet:
    def __init__(
        self,
        *,
        config: ToolSetConfig,
        entries: Sequence[Entry],
        container: Container,
        renderer: TemplateRenderer,
        reminders: Sequence[Reminder],
        warnings: Sequence[VersionWarning] = (),
        session_id: str = "",
    ) -> None:
        self.config = config
        self.container = container
        self.renderer = renderer
        self.reminders = tuple(reminders)
        #: Each reminder's ``collect``, bound once: every call's ``finalize`` runs them.
        self._collectors = tuple(r.collect for r in self.reminders)
        self.warnings = tuple(warnings)
        self.session_id = session_id
        self._entries: dict[str, Entry] = {e.client_name: e for e in entries}
        self._write_lock = threading.Lock()
        self.on_finalize: Callable[[], None] | None = None
        self.external_listeners: list[Callable[[ExternalSpec, bool], None]] = []

    # -- lookup ----------------------------------------------------------------------------------

    @property
    def entries(self) -> Mapping[str, Entry]:
        return self._entries

    def lookup(self, name: str) -> Entry:
        entry = self._entries.get(name)
        if entry is None:
            close = difflib.get_close_matches(name, list(self._entries), n=3, cutoff=0.5)
            hint = f" Did you mean: {', '.join(f'`{c}`' for c in close)}?" if close else ""
            raise ToolError.not_found(f"Unknown tool `{name}`.{hint}", tool=name, suggestions=close)
        return entry

    def definitions(
        self, format: str = "openai", *, include_external: bool = True, strict: bool = False
    ) -> list[Any]:
        """The listed tools in ``format``; ``strict``: in OpenAI strict form (``strict.py``)."""
        entries = [
            e
            for e in self._entries.values()
            if (include_external or not e.external) and self._listed(e)
        ]
        return render_definitions([e.definition for e in entries], format, strict=strict)

    def _listed(self, entry: Entry) -> bool:
        if entry.tool is None:
            return True
        ctx = ListContext(
            self.renderer, entry.params, entry.client_name, entry.to_client, self.container
        )
        return entry.tool.should_list(ctx)

    # -- calls -----------------------------------------------------------------------------------

    def prepare(self, name: str, arguments: Any, call_id: str) -> Prepared:
        """Find, remap and validate; raises ``ToolError`` for anything the caller got wrong."""
        entry = self.lookup(name)
        args, original = parse_arguments(arguments, name=name)
        canonical = _to_canonical(args, entry) if entry.to_client else args
        typed = entry.handle.parse_args(
            canonical,
            client_name=name,
            client_names=entry.to_client,
            original=original if original is not None else args,
        )
        return self._prepared(entry, typed, canonical, call_id)

    def prepare_canonical(self, name: str, arguments: dict[str, Any], call_id: str) -> Prepared:
        """Validate arguments that are already under their canonical names (what a dispatcher
        put on the wire after its own ``prepare``): the worker validates again, it never
        remaps, so remapping lives in one place."""
        entry = self.lookup(name)
        typed = entry.handle.parse_args(
            arguments, client_name=name, client_names=entry.to_client, original=arguments
        )
        return self._prepared(entry, typed, arguments, call_id)

    def _prepared(
        self, entry: Entry, typed: Any, canonical: dict[str, Any], call_id: str
    ) -> Prepared:
        # Positional, in the fields' order: with ten keywords the dataclass's ``__init__`` took
        # twice as long, on every call.
        ctx = ToolContext(
            call_id,
            self.container,
            self.renderer,
            entry.client_name,
            entry.to_client,
            entry.version,
            CancelToken(),
            None,  # dispatch: set below, it needs the context
            self.session_id,
        )
        ctx.dispatch = _Dispatcher(self, ctx)
        return Prepared(entry, typed, ctx, canonical)

    def execute_sync(self, prepared: Prepared) -> CallResult:
        """Run a plain sync tool inline (the embedded fast path)."""
        return self.finalize(prepared, prepared.entry.handle.run_sync(prepared.ctx, prepared.args))

    async def execute(
        self, prepared: Prepared, *, internal: bool = False
    ) -> AsyncIterator[Progress | CallResult]:
        async with closing(prepared.entry.handle.stream(prepared.ctx, prepared.args)) as items:
            async for item in items:
                if isinstance(item, Outcome):
                    yield self.finalize(prepared, item, internal=internal)
                    return
                yield item

    def finalize(
        self, prepared: Prepared, outcome: Outcome, *, internal: bool = False
    ) -> CallResult:
        entry, ctx = prepared.entry, prepared.ctx
        if outcome.error is not None:
            return CallResult.failure(
                entry.client_name,
                outcome.error,
                tool_id=entry.fq_id,
                call_id=ctx.call_id,
                effective_tool_name=ctx.effective_tool_name,
            )
        text = outcome.text
        if not internal:
            text = wrap_reminders(text, self._collect(entry, outcome), self.config.reminder_tag)
            if self.on_finalize is not None:
                self.on_finalize()
        return CallResult(
            name=entry.client_name,
            output=outcome.output,
            prompt_text=text,
            tool_id=entry.fq_id,
            call_id=ctx.call_id,
            effective_tool_name=ctx.effective_tool_name,
            content=outcome.blocks,
        )

    def _collect(self, entry: Entry, outcome: Outcome) -> list[str]:
        assert outcome.output is not None
        flag = self.container.get(RemindersEnabled)
        if flag is not None and not flag.enabled:
            return []
        notes: list[str] = []
        sources: list[Callable[[Container, Any], list[str]]] = list(self._collectors)
        tool = entry.tool
        if tool is not None and type(tool).reminders is not Tool.reminders:  # the base has none
            sources.append(tool.reminders)
        for collect in sources:
            try:
                notes.extend(collect(self.container, outcome.output))
            except Exception:
                logger.exception("reminder %r failed; skipped", collect)
        return notes

    async def dispatch_internal(self, name: str, arguments: Any, parent: ToolContext) -> CallResult:
        """A meta-tool's call: same lookup and validation, no reminders, no persistence, and no
        further internal dispatch (meta-tools cannot recurse)."""
        try:
            prepared = self.prepare(name, arguments, parent.call_id)
        except ToolError as err:
            return CallResult.failure(name, err, call_id=parent.call_id)
        prepared.ctx.cancel = parent.cancel
        prepared.ctx.dispatch = None
        return await drain(self.execute(prepared, internal=True))

    # -- external tools --------------------------------------------------------------------------

    def register_external(self, spec: ExternalSpec, handler: ExternalHandler) -> None:
        """Add an external tool (``server__tool``) at runtime; JSON in, JSON out, kind other."""
        hub_name = "hub" in spec.source and NAME_PATTERN.match(spec.name) is not None
        if not valid_external_name(spec.name) and not hub_name:
            raise ToolError.invalid_arguments(
                f"invalid external tool name {spec.name!r}: use `server{EXTERNAL_SEPARATOR}tool` "
                "with characters from [A-Za-z0-9_-]"
            )
        entry = Entry(
            client_name=spec.name,
            fq_id=f"External:{spec.name}",
            kind=ToolKind.OTHER,
            handle=ExternalTool(spec, handler),
            definition=Definition(spec.name, spec.description, spec.input_schema),
        )
        with self._write_lock:
            if spec.name in self._entries and not self._entries[spec.name].external:
                raise ToolError.invalid_arguments(
                    f"`{spec.name}` is already the name of a built-in tool"
                )
            self._entries = {**self._entries, spec.name: entry}
        for listener in self.external_listeners:
            listener(spec, True)

    def unregister_external(self, name: str) -> bool:
        with self._write_lock:
            entry = self._entries.get(name)
            if entry is None or not isinstance(entry.handle, ExternalTool):
                return False
            self._entries = {k: v for k, v in self._entries.items() if k != name}
        for listener in self.external_listeners:
            listener(entry.handle.spec, False)
        return True

    def external_specs(self) -> list[ExternalSpec]:
        return [e.handle.spec for e in self._entries.values() if isinstance(e.handle, ExternalTool)]

    def render_prompt(self, text: str) -> str:
        return self.renderer.render(text)


class _Dispatcher:
    """``ctx.dispatch`` for a call: internal dispatch that records the effective tool name.

    It holds its context weakly. The context holds it, and a strong reference back made every
    call's context, dispatcher and cancel token a cycle that only the cyclic garbage collector
    frees: a young collection every ~140 embedded calls, each one traversing what the executor's
    kept records hold. The context outlives any use of its dispatcher (the call holds it)."""

    __slots__ = ("_ctx", "toolset")

    def __init__(self, toolset: ToolSet, ctx: ToolContext) -> None:
        self.toolset = toolset
        self._ctx = weakref.ref(ctx)

    async def __call__(self, name: str, arguments: Mapping[str, Any]) -> CallResult:
        ctx = self._ctx()
        if ctx is None:  # kept past its call by something that dropped the call's context
            return CallResult.failure(
                name, ToolError.cancelled("The call that dispatched this has ended.")
            )
        ctx.effective_tool_name = name
        return await self.toolset.dispatch_internal(name, dict(arguments), ctx)


def _to_canonical(args: dict[str, Any], entry: Entry) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in args.items():
        if key in entry.to_canonical:
            out[entry.to_canonical[key]] = value
        elif key in entry.to_client and entry.to_client[key] != key:
            raise ToolError.invalid_arguments(
                f"Failed to parse arguments for tool `{entry.client_name}`: unknown argument "
                f"`{key}` (this tool calls it `{entry.to_client[key]}`)"
            )
        else:
            out[key] = value
    return out
