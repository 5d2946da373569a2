"""Scoring and the table of the chaos run (``bench/chaos.py``).

Per call: *succeeded* (an answer that is not an error), *typed error* (an answer that is an
error, any kind), *hung* (no answer by the deadline). From the call's side-effect file (one
line per run): *lost* = succeeded with no line; *duplicated* = two or more lines, *said* when
the caller was told it may have run more than once (toolhub: the record counts a lost attempt,
``lost > 0``, or the answer is a ``worker_lost`` error), *unsaid* otherwise (always, for
Celery: it cannot announce a re-run).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Outcome:
    cid: str
    answered_at: float | None = None
    is_error: bool = False
    code: str = ""
    said_rerun: bool = False
    lines: int = 0

    @property
    def hung(self) -> bool:
        return self.answered_at is None

    @property
    def succeeded(self) -> bool:
        return not self.hung and not self.is_error

    @property
    def typed_error(self) -> bool:
        return not self.hung and self.is_error


@dataclass
class Score:
    system: str
    outcomes: list[Outcome]
    started: float
    finished: float
    orphans: list[Any] = field(default_factory=list)
    worker_kills: int = 0
    redis_restarts: int = 0
    dispatcher_kills: int = 0
    workers_lost: list[Any] = field(default_factory=list)
    outlived: list[Any] = field(default_factory=list)
    background: dict[str, Any] | None = None
    probe: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def submitted(self) -> int:
        return len(self.outcomes)

    def count(self, what: str) -> int:
        return sum(1 for o in self.outcomes if getattr(o, what))

    @property
    def lost(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.succeeded and o.lines == 0]

    @property
    def duplicated(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.lines >= 2]

    @property
    def dup_said(self) -> int:
        return sum(1 for o in self.duplicated if o.said_rerun)

    @property
    def dup_unsaid(self) -> list[Outcome]:
        return [o for o in self.duplicated if not o.said_rerun]

    @property
    def error_codes(self) -> Counter[str]:
        return Counter(o.code or "?" for o in self.outcomes if o.typed_error)

    @property
    def seconds(self) -> float:
        return self.finished - self.started


def is_worker_lost(error: dict[str, Any] | None) -> bool:
    """Whether an error answer says the call lost its worker (so it may have partly run)."""
    if not error:
        return False
    details = error.get("details") or {}
    return "worker_lost" in {error.get("code"), details.get("code"), details.get("reason")} or (
        details.get("may_have_run") is True
    )


def background_cell(bg: dict[str, Any] | None) -> str:
    if bg is None:
        return "not run"
    if bg.get("error"):
        return f"FAILED: {bg['error']}"
    parts = [
        "output 1..{n} intact".format(**bg) if bg["output_ok"] else f"output {bg['output']!r}",
        "ran once" if bg["ran_once"] else f"side effects {bg['sidefx']!r} (restarted)",
        f"attempts {bg['attempts']}",
        f"worker killed {bg['killed_after']:.1f} s in" if bg.get("killed_after") else "no kill",
    ]
    return "; ".join(parts)


def probe_cell(probe: dict[str, Any] | None) -> str:
    if probe is None:
        return "not run"
    if probe.get("celery"):
        return (
            f"kill {probe['delay_ms']:.0f} ms after the enqueue of {probe['burst']}: "
            f"{probe['hung']} never answered"
        )
    text = (
        f"{probe['taken']} of {probe['burst']} taken before claim (try {probe['tries']}, kill "
        f"{probe['delay_ms']:.0f} ms after the enqueue, at freeze {probe['freezes']}); "
    )
    if not probe["taken"]:
        return text + "not exercised"
    if probe["hung"]:
        text += f"{probe['hung']} never answered"
    else:
        text += f"all answered, the last {probe['slowest']:.1f} s after the kill"
        if probe.get("slowest_start") is not None:
            text += f" (re-run started by {probe['slowest_start']:.1f} s)"
    return text + f"; lease {probe['lease']:g} s"


def table(scores: list[Score]) -> str:
    head = "| | " + " | ".join(s.system for s in scores) + " |"
    rule = "|---|" + "---|" * len(scores)
    rows = [
        ("submitted", lambda s: str(s.submitted)),
        ("succeeded", lambda s: str(s.count("succeeded"))),
        ("typed errors", lambda s: str(s.count("typed_error"))),
        ("hung", lambda s: str(s.count("hung"))),
        ("lost side effects", lambda s: str(len(s.lost))),
        (
            "duplicated side effects (said / unsaid)",
            lambda s: f"{s.dup_said} / {len(s.dup_unsaid)}",
        ),
        ("orphan processes", lambda s: str(len(s.orphans))),
        (
            "command processes alive 1 s after their worker's SIGKILL",
            lambda s: str(len(s.outlived)),
        ),
        ("workers lost to the Redis restart", lambda s: str(len(s.workers_lost))),
        ("time to finish", lambda s: f"{s.seconds:.1f} s"),
        (
            "faults: worker SIGKILLs / Redis restarts / dispatcher SIGKILLs",
            lambda s: f"{s.worker_kills} / {s.redis_restarts} / {s.dispatcher_kills}",
        ),
        ("background command through a worker SIGKILL", lambda s: background_cell(s.background)),
        ("take-before-claim SIGKILL", lambda s: probe_cell(s.probe)),
    ]
    lines = [head, rule]
    for label, cell in rows:
        lines.append(f"| {label} | " + " | ".join(cell(s) for s in scores) + " |")
    for s in scores:
        codes = ", ".join(f"{code} {n}" for code, n in s.error_codes.most_common())
        if codes:
            lines.append(f"\n{s.system} typed errors by code: {codes}")
        for note in s.notes:
            lines.append(f"{s.system}: {note}")
    return "\n".join(lines)


def details(score: Score, limit: int = 12) -> str:
    """The calls behind the bad cells, for the log."""
    out = []
    for label, items in (
        ("hung", [o for o in score.outcomes if o.hung]),
        ("lost", score.lost),
        ("unsaid duplicates", score.dup_unsaid),
    ):
        if items:
            shown = ", ".join(f"{o.cid}({o.lines})" for o in items[:limit])
            out.append(f"{score.system} {label}: {len(items)}: {shown}")
    if score.orphans:
        shown = "; ".join(f"{s.cid} pid {s.pid} {s.cmdline[:60]!r}" for s in score.orphans[:limit])
        out.append(f"{score.system} orphans: {len(score.orphans)}: {shown}")
    for exit_ in score.workers_lost:
        out.append(f"{score.system} worker {exit_.name} (pid {exit_.pid}) exited: {exit_.code}")
    return "\n".join(out)
