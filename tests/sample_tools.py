"""Small tools for the core and toolset tests: each exercises one part of the contract."""

from __future__ import annotations

import asyncio
import math
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from toolhub.core import Progress, State, Tool, ToolContext, ToolError, ToolKind
from toolhub.core.requirements import IfParams, Kind, ParamIs
from toolhub.core.versions import BehaviorVersion, Lifecycle


class EchoArgs(BaseModel):
    text: str = Field(description="Text to echo; read files with ${{ tools.by_kind.read }}.")
    times: int = Field(default=1, ge=1, le=10)


class EchoOutput(BaseModel):
    echoed: str

    def model_text(self) -> str:
        return f"echo: {self.echoed}"


class Echo(Tool[EchoArgs, EchoOutput]):
    id = "echo"
    kind = ToolKind.READ
    description_template = "Echo text. Edit with ${{ tools.by_kind.edit }}. Literal {{ braces }}."

    def run(self, ctx: ToolContext, args: EchoArgs) -> EchoOutput:
        return EchoOutput(echoed=args.text * args.times)


class NoArgs(BaseModel):
    pass


class Empty(BaseModel):
    pass


class Noop(Tool[NoArgs, Empty]):
    id = "noop"
    kind = ToolKind.OTHER

    def run(self, ctx: ToolContext, args: NoArgs) -> Empty:
        return Empty()


class CountArgs(BaseModel):
    n: int = 3
    delay: float = 0.0


class CountOutput(BaseModel):
    total: int


class Count(Tool[CountArgs, CountOutput]):
    """Streams ``n`` progress items."""

    id = "count"
    kind = ToolKind.EXECUTE
    workload = "command"

    async def execute(self, ctx: ToolContext, args: CountArgs):  # type: ignore[override]
        for i in range(args.n):
            yield Progress.of_text(f"step {i}")
            if args.delay:
                await asyncio.sleep(args.delay)
        yield CountOutput(total=args.n)


class Silent(Tool[NoArgs, Empty]):
    """A stream that ends without a result."""

    id = "silent"

    async def execute(self, ctx: ToolContext, args: NoArgs):  # type: ignore[override]
        yield Progress.of_text("thinking")


class Boom(Tool[NoArgs, Empty]):
    id = "boom"

    def run(self, ctx: ToolContext, args: NoArgs) -> Empty:
        raise RuntimeError("disk on fire")


class Denied(Tool[NoArgs, Empty]):
    id = "denied"

    def run(self, ctx: ToolContext, args: NoArgs) -> Empty:
        raise ToolError.permission_denied("not here")


class NaNOutput(BaseModel):
    value: Any


class Unencodable(Tool[NoArgs, NaNOutput]):
    id = "unencodable"

    def run(self, ctx: ToolContext, args: NoArgs) -> NaNOutput:
        return NaNOutput(value=object())


class InfOutput(BaseModel):
    value: float


class Infinite(Tool[NoArgs, InfOutput]):
    id = "infinite"

    def run(self, ctx: ToolContext, args: NoArgs) -> InfOutput:
        return InfOutput(value=math.inf)


class Notes(BaseModel):
    resource_id: ClassVar[str] = "tests.notes"
    items: list[str] = Field(default_factory=list)


class NoteArgs(BaseModel):
    note: str


class NoteOutput(BaseModel):
    count: int


class AddNote(Tool[NoteArgs, NoteOutput]):
    """Changes persisted state through ``Container.update``."""

    id = "add_note"
    kind = ToolKind.PLAN
    state_models = (Notes,)

    def run(self, ctx: ToolContext, args: NoteArgs) -> NoteOutput:
        notes = ctx.container.update(State[Notes], lambda n: Notes(items=[*n.items, args.note]))
        return NoteOutput(count=len(notes.items))


class WriterParams(BaseModel):
    needs_reader: bool = True
    limit: int = Field(default=100, ge=1)
    style: str = "plain"


class WriteArgs(BaseModel):
    path: str
    content: str


class WriteOutput(BaseModel):
    written: int


class Writer(Tool[WriteArgs, WriteOutput]):
    id = "writer"
    kind = ToolKind.WRITE
    params_model = WriterParams
    requires = IfParams(ParamIs("needs_reader", True), Kind(ToolKind.READ))
    versions = (
        BehaviorVersion("current"),
        BehaviorVersion("legacy-1", Lifecycle.DEPRECATED, replacement="current"),
        BehaviorVersion("legacy-0", Lifecycle.REMOVAL_CANDIDATE),
    )
    description_template = (
        "Write files (limit ${{ limit }}). Then check with ${{ tools.by_kind.read }}."
    )

    def template_extra(self, params: BaseModel | None) -> dict[str, Any]:
        assert isinstance(params, WriterParams)
        return {"limit": params.limit}

    def run(self, ctx: ToolContext, args: WriteArgs) -> WriteOutput:
        return WriteOutput(written=len(args.content))


class Sleeper(Tool[CountArgs, CountOutput]):
    """Ignores cancellation entirely: cancel must not wait on it."""

    id = "sleeper"

    async def execute(self, ctx: ToolContext, args: CountArgs):  # type: ignore[override]
        yield Progress.of_text("sleeping")
        await asyncio.sleep(args.delay)
        yield CountOutput(total=0)


class ReadA(Tool[EchoArgs, EchoOutput]):
    id = "read_file"
    namespace = "Alpha"
    kind = ToolKind.READ
    variant_family = "files"

    def run(self, ctx: ToolContext, args: EchoArgs) -> EchoOutput:
        return EchoOutput(echoed=args.text)


class ReadB(ReadA):
    namespace = "Beta"


ALL = [Echo, Noop, Count, Silent, Boom, Denied, Unencodable, Infinite, AddNote, Writer, Sleeper]
