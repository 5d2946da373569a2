"""The embedded executor's calls, through a real embedded session."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

from pydantic import BaseModel

from toolhub import Session, Tool, ToolContext, ToolKind, ToolSetBuilder

CONTEXTS: list[weakref.ref[ToolContext]] = []


class TextArgs(BaseModel):
    text: str = ""


class TextOutput(BaseModel):
    text: str


class Remember(Tool[TextArgs, TextOutput]):
    """Keeps a weak reference to each call's context."""

    id = "remember"
    kind = ToolKind.OTHER

    def run(self, ctx: ToolContext, args: TextArgs) -> TextOutput:
        CONTEXTS.append(weakref.ref(ctx))
        return TextOutput(text=args.text)


def test_a_finished_embedded_call_is_freed_without_the_garbage_collector(tmp_path: Path) -> None:
    """A call's context, its dispatcher and its cancel token form no reference cycle: with the
    collector off, each is gone as soon as its call returned. (A cycle left every call's objects
    to a young collection, and each such collection walked what the kept records hold.)"""
    builder = ToolSetBuilder(plugins=False).register(Remember)
    config = {"tools": [{"id": "Main:remember"}]}
    with Session.embedded(config, tmp_path, state_dir=tmp_path / ".state", builder=builder) as s:
        s.call_sync("remember", {"text": "warm"})
        CONTEXTS.clear()
        gc.collect()
        gc.disable()
        try:
            for i in range(20):
                assert s.call_sync("remember", {"text": str(i)}).prompt_text == str(i)
                assert CONTEXTS[-1]() is None
        finally:
            gc.enable()
    assert len(CONTEXTS) == 20
