"""The unified output and the execution result (the seed's "Core Data Structures").

Every output is a tagged value: ``tool`` (a built-in tool's typed model, by tool id), ``dynamic``
(external JSON passed through) or ``plain_text``. In the process that ran the tool the typed model
is kept as is; after a process boundary only JSON is left, and ``parse`` rebuilds the model.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel

from .errors import ToolError
from .stream import ContentBlock, Progress

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

OutputTag = Literal["tool", "dynamic", "plain_text"]


class ToolOutput:
    """A tool's output as one tagged value (the unified output enum)."""

    __slots__ = ("_model", "tag", "tool_id", "value")

    def __init__(
        self, tag: OutputTag, value: Any, tool_id: str | None = None, model: BaseModel | None = None
    ) -> None:
        self.tag = tag
        self.value = value
        self.tool_id = tool_id
        self._model = model

    @classmethod
    def typed(cls, tool_id: str, model: BaseModel, value: Any) -> ToolOutput:
        return cls("tool", value, tool_id, model)

    @classmethod
    def dynamic(cls, value: Any, tool_id: str | None = None) -> ToolOutput:
        return cls("dynamic", value, tool_id)

    @classmethod
    def plain_text(cls, text: str, tool_id: str | None = None) -> ToolOutput:
        return cls("plain_text", text, tool_id)

    @property
    def model(self) -> BaseModel | None:
        """The typed model when this output never left the process that produced it."""
        return self._model

    def parse(self, model_type: type[M]) -> M:
        """This output as ``model_type`` (the tool's own ``Output``), wherever it was produced."""
        if isinstance(self._model, model_type):
            return self._model
        return model_type.model_validate(self.value)

    def to_dict(self) -> dict[str, Any]:
        return {"tag": self.tag, "tool_id": self.tool_id, "value": self.value}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolOutput:
        return cls(data["tag"], data.get("value"), data.get("tool_id"))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolOutput):
            return NotImplemented
        return (self.tag, self.tool_id, self.value) == (other.tag, other.tool_id, other.value)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ToolOutput({self.tag!r}, tool_id={self.tool_id!r}, value={self.value!r})"


class CallResult:
    """The terminal item of a call: structured output, the text the model reads, and the error.

    ``prompt_text`` always holds what to send back to the model: the output's model text plus
    reminders on success, ``"Tool `name` failed: detail"`` on failure. ``content`` holds any
    content blocks (images) that belong next to the text in the model's view.
    """

    __slots__ = (
        "call_id",
        "content",
        "effective_tool_name",
        "error",
        "name",
        "output",
        "prompt_text",
        "tool_id",
    )

    def __init__(
        self,
        *,
        name: str,
        prompt_text: str,
        output: ToolOutput | None = None,
        error: ToolError | None = None,
        tool_id: str | None = None,
        call_id: str | None = None,
        effective_tool_name: str | None = None,
        content: tuple[ContentBlock, ...] = (),
    ) -> None:
        self.name = name
        self.content = content
        self.output = output
        self.prompt_text = prompt_text
        self.error = error
        self.tool_id = tool_id
        self.call_id = call_id
        self.effective_tool_name = effective_tool_name

    @property
    def is_error(self) -> bool:
        return self.error is not None

    @classmethod
    def failure(
        cls,
        name: str,
        error: ToolError,
        *,
        tool_id: str | None = None,
        call_id: str | None = None,
        effective_tool_name: str | None = None,
    ) -> CallResult:
        via = (
            f"Tool `{effective_tool_name}` failed via `{name}`: "
            if effective_tool_name and effective_tool_name != name
            else f"Tool `{name}` failed: "
        )
        return cls(
            name=name,
            # No name: the failure is not a tool's (a call id nobody knows), the detail says it.
            prompt_text=f"{via if name else ''}{error.detail}",
            error=error,
            tool_id=tool_id,
            call_id=call_id,
            effective_tool_name=effective_tool_name,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "tool_id": self.tool_id,
            "call_id": self.call_id,
            "output": None if self.output is None else self.output.to_dict(),
            "prompt_text": self.prompt_text,
            "error": None if self.error is None else self.error.to_dict(),
            "effective_tool_name": self.effective_tool_name,
            "content": [block.to_dict() for block in self.content],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CallResult:
        output = data.get("output")
        error = data.get("error")
        return cls(
            name=data["name"],
            prompt_text=data["prompt_text"],
            output=None if output is None else ToolOutput.from_dict(output),
            error=None if error is None else ToolError.from_dict(error),
            tool_id=data.get("tool_id"),
            call_id=data.get("call_id"),
            effective_tool_name=data.get("effective_tool_name"),
            content=tuple(ContentBlock.from_dict(b) for b in data.get("content") or ()),
        )

    def __repr__(self) -> str:
        state = f"error={self.error!r}" if self.error else f"output={self.output!r}"
        return f"CallResult({self.name!r}, {state})"


def default_model_text(value: Any) -> str:
    """What the model reads when an output does not say: a lone string field as is, else JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        (only,) = value.values()
        if isinstance(only, str):
            return only
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def new_call_id() -> str:
    """A fresh, unguessable call id (``call_`` + 16 hex digits): 8 bytes of the OS's randomness,
    drawn ``_IDS_PER_DRAW`` ids at a time, since every call makes one (one system call each was
    a fiftieth of an embedded no-op call). ``list.pop`` is whole under the GIL, so two threads
    never get the same id; a forked child starts with no ids of its parent's."""
    while True:
        try:
            return _ids.pop()
        except IndexError:
            drawn = os.urandom(8 * _IDS_PER_DRAW).hex()
            _ids.extend("call_" + drawn[i : i + 16] for i in range(0, len(drawn), 16))


_IDS_PER_DRAW = 64
_ids: list[str] = []
os.register_at_fork(after_in_child=_ids.clear)


class closing(Generic[T]):
    """``async with closing(items) as items``: ``items``, closed on leaving the block. An async
    generator left suspended at a ``yield`` (its reader stopped at the result, or was closed
    itself) is otherwise closed by the garbage collector, through a task on a loop that may
    never run again: its ``finally`` (a subscription to close) is skipped and asyncio reports
    a destroyed pending task. Unlike ``contextlib.aclosing`` it takes any ``AsyncIterator``
    (one without ``aclose`` is left as it is); a class, not a generator-based context manager,
    because every layer of every streamed call enters one."""

    __slots__ = ("items",)

    def __init__(self, items: AsyncIterator[T]) -> None:
        self.items = items

    async def __aenter__(self) -> AsyncIterator[T]:
        return self.items

    async def __aexit__(self, *exc_info: object) -> None:
        aclose = getattr(self.items, "aclose", None)
        if aclose is not None:
            await aclose()


async def drain(
    items: AsyncIterator[Progress | CallResult],
    on_progress: Callable[[Progress], None] | None = None,
) -> CallResult:
    """The ``CallResult`` that ends a call's stream (every executor ends one with exactly one),
    handing each progress item to ``on_progress`` on the way."""
    result: CallResult | None = None
    async for item in items:
        if isinstance(item, CallResult):
            result = item
        elif on_progress is not None:
            on_progress(item)
    if result is None:
        raise RuntimeError("the call's stream ended without a CallResult")
    return result
