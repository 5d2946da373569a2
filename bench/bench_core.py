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
from toolhub.tools import CATALOG


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


def p50s_us(fns: dict[str, tuple[Callable[[], object], int]], rounds: int = 30) -> dict[str, float]:
    """Each function's median time per call, in microseconds, over ``rounds`` blocks of its
    ``inner`` calls; the blocks of all functions taken in turn, so that a slow phase of the
    machine (they last about a second) weighs on every side alike instead of on the one being
    timed then."""
    for fn, inner in fns.values():
        for _ in range(inner):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, (fn, inner) in fns.items():
            start = time.perf_counter()
            for _ in range(inner):
                fn()
            samples[name].append((time.perf_counter() - start) / inner * 1e6)
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    builder = ToolSetBuilder(CATALOG, plugins=False).register(Noop)
    with tempfile.TemporaryDirectory() as ws, tempfile.TemporaryDirectory() as state:
        session = Session.embedded(
            {"tools": [{"id": "Main:noop"}]}, ws, state_dir=state, builder=builder
        )
        args = {"text": "hi"}
        assert session.call_sync("noop", args).prompt_text == "hi"

        def direct() -> object:
            return NoopOutput(text=NoopArgs.model_validate(args).text).model_dump(mode="json")

        from langchain_core.tools import StructuredTool

        lc = StructuredTool.from_function(
            func=lambda text="": NoopOutput(text=text).model_dump(),
            name="noop",
            description="Do nothing.",
            args_schema=NoopArgs,
        )
        p50 = p50s_us(
            {
                "toolhub": (lambda: session.call_sync("noop", args), 2000),
                "direct": (direct, 2000),
                "langchain": (lambda: lc.invoke(args), 500),
            }
        )
        toolhub_us, direct_us, lc_us = p50["toolhub"], p50["direct"], p50["langchain"]
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
