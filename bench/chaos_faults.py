"""The fault scenarios of issue 45 that ``make chaos`` runs after the main run.

Each scenario is a module ``bench/chaos_fault_<name>.py`` with

    def run(home: Path, say: Callable[[str], None]) -> Verdict

that starts its own Redis, workers and holder under ``home``, injects one fault class, and
returns a ``Verdict``: the rows it measured (printed as a table) and the bars it missed
(empty: all met). The bars are the issue's: 0 hung, 0 wrong answers, 0 unannounced duplicates,
recovery without a restart.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# name -> module under bench/, run in this order
SCENARIOS: dict[str, str] = {
    "disk": "chaos_fault_disk",
    "holder": "chaos_fault_holder",
    "partition": "chaos_fault_partition",
    "redis_full": "chaos_fault_redis_full",
    "failover": "chaos_fault_failover",
}


@dataclass
class Verdict:
    """What one scenario measured and which bars it missed."""

    name: str
    rows: dict[str, object] = field(default_factory=dict)
    missed: list[str] = field(default_factory=list)


def run_all(home: Path, say: Callable[[str], None], only: set[str] | None = None) -> list[Verdict]:
    """Run every registered scenario (or those in ``only``), one after the other."""
    verdicts = []
    for name, module in SCENARIOS.items():
        if only is not None and name not in only:
            continue
        say(f"\nfault scenario: {name} (bench/{module}.py)")
        scenario = importlib.import_module(f"bench.{module}")
        try:
            verdict = scenario.run(home / name, say)
        except Exception as exc:  # a broken scenario is a missed bar, not a crash of the run
            verdict = Verdict(name, missed=[f"scenario failed: {type(exc).__name__}: {exc}"])
        verdicts.append(verdict)
    return verdicts


def table(verdicts: list[Verdict]) -> str:
    """One block per scenario: its rows, then met or what it missed."""
    lines = []
    for verdict in verdicts:
        lines.append(f"{verdict.name}:")
        for key, value in verdict.rows.items():
            lines.append(f"  {key:<44} {value}")
        lines.append("  missed: " + "; ".join(verdict.missed) if verdict.missed else "  met")
    return "\n".join(lines)
