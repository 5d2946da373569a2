"""The tool contract (execution) and its metadata (description, kind, requirements, versions).

A tool is a class with pydantic ``Args`` and ``Output`` models given as type parameters::

    class Echo(Tool[EchoArgs, EchoOutput]):
        id = "echo"
        kind = ToolKind.OTHER
        description_template = "Echo text."

        def run(self, ctx: ToolContext, args: EchoArgs) -> EchoOutput: ...

It implements either ``run`` (sync or async, one result) or ``execute`` (an async generator that
yields ``Progress`` items and finally the output). Everything a tool needs from the outside world
comes from ``ctx.container``; that is what lets one tool run unchanged embedded or on a worker.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar, get_args, get_origin

from pydantic import BaseModel

from .container import Container
from .errors import ErrorKind, ToolError
from .kinds import ToolKind
from .requirements import TRUE, Expr
from .stream import Progress
from .templates import TemplateRenderer
from .versions import BehaviorVersion

if TYPE_CHECKING:
    from .result import CallResult, ToolOutput

ArgsT = TypeVar("ArgsT", bound=BaseModel)
OutputT = TypeVar("OutputT", bound=BaseModel)

#: Why a call's token fires when nobody cancelled the call, only this attempt of it: the worker
#: hands the call back (shutdown), another attempt took it over, or Redis stayed unreachable.
#: Workers fire them (``workers/calls/runtime.py``); a tool that started work elsewhere and recorded
#: it for the next attempt (a remote MCP task) leaves that work running on these.
HANDOFF = "handoff"
LEASE_LOST = "lease_lost"
REDIS_LOST = "redis_lost"
INTERNAL_REASONS = frozenset({HANDOFF, LEASE_LOST, REDIS_LOST})


#: The lock of every token: what it guards is a flag and a list, never a callback (those run
#: after it is released), and a lock per token was an allocation on every call.
_TOKENS_LOCK = threading.Lock()


class CancelToken:
    """Cancellation that never waits on the tool: ``cancel()`` sets the flag and runs the
    registered callbacks (kill a process group, close a socket) at once, from any thread.

    One is made per call, so it is deliberately cheap: a flag, a callback list and a lock
    shared by all tokens."""

    __slots__ = ("_callbacks", "_cancelled", "reason")

    def __init__(self) -> None:
        self._cancelled = False
        self._callbacks: list[Callable[[], None]] = []
        self.reason = "cancelled"

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self, reason: str = "cancelled") -> None:
        with _TOKENS_LOCK:
            if self._cancelled:
                return
            self.reason = reason
            self._cancelled = True
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` on cancel (now, if already cancelled); returns an unregister."""
        with _TOKENS_LOCK:
            if not self._cancelled:
                self._callbacks.append(callback)
                return lambda: self._discard(callback)
        callback()
        return lambda: None

    def _discard(self, callback: Callable[[], None]) -> None:
        with _TOKENS_LOCK, _suppress_value_error():
            self._callbacks.remove(callback)

    def raise_if_cancelled(self) -> None:
        if self._cancelled:
            raise ToolError.cancelled()

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait (asynchronously) until cancelled or ``timeout``; True when cancelled."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()

        def settle() -> None:
            if not future.done():
                future.set_result(None)

        def wake() -> None:
            loop.call_soon_threadsafe(settle)

        remove = self.on_cancel(wake)
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            pass
        finally:
            remove()
        return self.cancelled


class _suppress_value_error:
    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: object, exc: object, tb: object) -> bool:
        return exc_type is ValueError


class InternalDispatch(Protocol):
    """How a meta-tool calls another tool: lookup by client name and param remapping, but no
    reminders and no persistence (the outer call does those once)."""

    async def __call__(self, name: str, arguments: Mapping[str, Any]) -> CallResult: ...


@dataclass(slots=True, weakref_slot=True)
class ToolContext:
    """What a tool gets besides its arguments. Resources live in ``container``.

    Weakly referable: its ``dispatch`` refers back to it weakly, so a finished call's context
    is freed by its reference count, not left for the cyclic garbage collector."""

    call_id: str
    container: Container
    renderer: TemplateRenderer = field(default_factory=TemplateRenderer)
    client_name: str = ""
    param_names: Mapping[str, str] = field(default_factory=dict)
    behavior_version: str | None = None
    cancel: CancelToken = field(default_factory=CancelToken)
    dispatch: InternalDispatch | None = None
    session_id: str = ""
    effective_tool_name: str | None = None

    def param_name(self, canonical: str) -> str:
        """The name the *client* uses for one of this tool's parameters (for hints)."""
        return self.param_names.get(canonical, canonical)


@dataclass(frozen=True, slots=True)
class Capabilities:
    read_only: bool
    streaming: bool = False
    timeout_ms: int | None = None


@dataclass(frozen=True, slots=True)
class ListContext:
    """What ``description`` and ``should_list`` may look at: names and effective params."""

    renderer: TemplateRenderer
    params: BaseModel | None
    client_name: str
    param_names: Mapping[str, str]
    container: Container | None = None


class Tool(Generic[ArgsT, OutputT]):
    """Base class of every built-in and plugin tool. See the module docstring."""

    id: ClassVar[str]
    namespace: ClassVar[str] = "Main"
    kind: ClassVar[ToolKind] = ToolKind.OTHER
    description_template: ClassVar[str] = ""
    read_only: ClassVar[bool | None] = None
    requires: ClassVar[Expr] = TRUE
    versions: ClassVar[tuple[BehaviorVersion, ...]] = ()
    params_model: ClassVar[type[BaseModel] | None] = None
    state_models: ClassVar[tuple[type[BaseModel], ...]] = ()
    variant_family: ClassVar[str | None] = None
    workload: ClassVar[str] = "fast"

    Args: ClassVar[type[BaseModel]]
    Output: ClassVar[type[BaseModel]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            if get_origin(base) is Tool:
                args_t, output_t = get_args(base)
                if isinstance(args_t, type) and isinstance(output_t, type):
                    cls.Args = args_t
                    cls.Output = output_t

    @classmethod
    def fq_id(cls) -> str:
        return f"{cls.namespace}:{cls.id}"

    @classmethod
    def is_read_only(cls) -> bool:
        """The per-tool override when given, else what the kind says."""
        return cls.kind.is_read_only if cls.read_only is None else cls.read_only

    def capabilities(self) -> Capabilities:
        return Capabilities(read_only=self.is_read_only(), streaming=self.is_streaming())

    @classmethod
    def is_streaming(cls) -> bool:
        return cls.execute is not Tool.execute

    def description(self, ctx: ListContext) -> str:
        return ctx.renderer.render(self.description_template, self.template_extra(ctx.params))

    def should_list(self, ctx: ListContext) -> bool:
        return True

    def template_extra(self, params: BaseModel | None) -> dict[str, Any]:
        """Extra template variables for this tool's description (e.g. its limits)."""
        return {}

    def adjust_schema(self, schema: dict[str, Any], params: BaseModel | None) -> dict[str, Any]:
        """Change the exported input schema for the effective params (hide a disabled flag)."""
        return schema

    def reminders(self, container: Container, output: ToolOutput) -> list[str]:
        """Tool-internal reminders, evaluated after this tool's own calls."""
        return []

    def run(self, ctx: ToolContext, args: ArgsT) -> OutputT | Awaitable[OutputT]:
        raise ToolError(ErrorKind.NOT_IMPLEMENTED, f"{self.fq_id()} does not implement run")

    async def execute(self, ctx: ToolContext, args: ArgsT) -> AsyncIterator[Progress | OutputT]:
        """Stream progress, then yield the output last. The default wraps ``run``."""
        result = self.run(ctx, args)
        if isinstance(result, Awaitable):
            result = await result
        yield result
