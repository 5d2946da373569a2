"""Embedded call overhead: one no-op tool call through ``Session.call_sync`` against a direct
pydantic validate + dump of the same models, and LangChain's ``StructuredTool.invoke`` of the
same no-op. Targets: <= 20 us per call, >= 10x faster than LangChain."""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable

from pydantic import BaseModel

from toolhub import Session, Tool, ToolContext, ToolKind, ToolSetBuilder


class NoopArgs(BaseModel):
    text: str = ""


class NoopOutput(BaseModel):
    text: str


class Noop(Tool[NoopArgs, NoopOutput]):
    id = "noop"
    kind = ToolKind.OTHER
    description_template = "Do nothing."

    def run(self, ctx: ToolContext, args: NoopArgs) -> NoopOutput:
        return NoopOutput(text=args.text)


def p50_us(fn: Callable[[], object], *, rounds: int = 30, inner: int = 2000) -> float:
    for _ in range(inner):
        fn()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - start) / inner * 1e6)
    return statistics.median(samples)


def main() -> None:
    builder = ToolSetBuilder(plugins=False).register(Noop)
    with tempfile.TemporaryDirectory() as ws, tempfile.TemporaryDirectory() as state:
        session = Session.embedded(
            {"tools": [{"id": "Main:noop"}]}, ws, state_dir=state, builder=builder
        )
        args = {"text": "hi"}
        assert session.call_sync("noop", args).prompt_text == "hi"
        toolhub_us = p50_us(lambda: session.call_sync("noop", args))

        def direct() -> object:
            return NoopOutput(text=NoopArgs.model_validate(args).text).model_dump(mode="json")

        direct_us = p50_us(direct)

        from langchain_core.tools import StructuredTool

        lc = StructuredTool.from_function(
            func=lambda text="": NoopOutput(text=text).model_dump(),
            name="noop",
            description="Do nothing.",
            args_schema=NoopArgs,
        )
        lc_us = p50_us(lambda: lc.invoke(args), inner=500)
        session.close()

    print("| measurement | p50 per call | ratio |")
    print("|---|---|---|")
    print(f"| direct pydantic validate + dump | {direct_us:.2f} us | 1.00x |")
    print(
        f"| toolhub `Session.call_sync` (embedded) | {toolhub_us:.2f} us | "
        f"{toolhub_us / direct_us:.2f}x direct |"
    )
    print(
        f"| LangChain `StructuredTool.invoke` | {lc_us:.2f} us | {lc_us / direct_us:.2f}x direct |"
    )
    print()
    verdict_abs = "PASS" if toolhub_us <= 20 else "MISS"
    verdict_lc = "PASS" if lc_us / toolhub_us >= 10 else "MISS"
    print(f"target <= 20 us per call: {verdict_abs} ({toolhub_us:.2f} us)")
    print(f"target >= 10x faster than LangChain: {verdict_lc} ({lc_us / toolhub_us:.1f}x)")


if __name__ == "__main__":
    main()
