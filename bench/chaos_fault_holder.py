"""Fault scenario ``holder``: the host's background holder is frozen (SIGSTOP) for 40-45 s while
background commands start, then thawed (SIGCONT).

The threat: a worker whose start request to the holder times out runs the command itself, and
the thawed holder then works through the stale start requests still queued on its socket and
starts the same attempt again: two copies, one record saying "attempt 1", one ``task_output``
interleaving both. The bar: every command ran exactly once, or its record says it ran more
than once (a later attempt); its output is one copy's; none hung.

Each command appends a line to its own side-effect file in the workspace when it starts, then
prints 1..N; the side-effect file counts the copies that ran, whatever the record says.
``freeze_and_start`` is the scenario's core, shared with its bounded test
(``tests/distributed/test_fault_holder.py``).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.chaos_faults import Verdict  # noqa: E402
from tests.distributed.helpers import TASK_TOOLS  # noqa: E402
from tests.fixtures_stack import Stack  # noqa: E402
from toolhub import Session  # noqa: E402
from toolhub.distributed.settings import Settings  # noqa: E402
from workers.holder.client import HolderClient  # noqa: E402

#: The fleet of the scenario: the chaos runs' lease, two workers on one host (one holder).
FLEET_ENV = {"TOOLHUB_LEASE_SECONDS": "4"}
COUNT_TO = 5


@dataclass
class Started:
    """One background command started while the holder was frozen, and what became of it."""

    name: str
    count_to: int = COUNT_TO
    task_id: str = ""
    copies: int = 0
    attempts: int = 0
    status: str = ""
    output: list[str] = field(default_factory=list)
    error: str = ""
    #: The call's answer as the record keeps it (``CallResult.to_dict``).
    result: dict[str, Any] = field(default_factory=dict)

    @property
    def honest(self) -> bool:
        """Ran once, or the record says how many times it ran."""
        return self.copies == 1 or (self.copies > 1 and self.attempts >= self.copies)

    @property
    def clean_output(self) -> bool:
        """One copy's output (the last attempt's when it was re-run), never two interleaved."""
        return self.output == [str(i) for i in range(1, self.count_to + 1)]


def command(name: str, count_to: int = COUNT_TO) -> str:
    return f"echo ran >> {name}.runs; for i in $(seq 1 {count_to}); do echo $i; sleep 1; done"


def holder_pid(stack: Stack) -> int:
    """The pid of the stack's holder (spawned by a worker's first background command)."""
    reply = HolderClient(Settings.from_env(stack.url), home=stack.home).ping()
    if reply is None:
        raise RuntimeError("no holder answers")
    return int(reply["pid"])


def _start(session: Session, item: Started) -> None:
    result = session.call_sync(
        "bash",
        {"command": command(item.name, item.count_to), "description": "c", "is_background": True},
    )
    if result.is_error or result.output is None:
        item.error = result.prompt_text[:200]
    else:
        item.task_id = str(result.output.value["task_id"])


def _last_attempt(session: Session, task_id: str) -> list[str]:
    """The output deltas after the last ``retry`` marker: what ``task_output`` shows."""
    shown = session.call_sync("task_output", {"task_ids": [task_id]})
    if shown.is_error or shown.output is None:
        return [f"error: {shown.prompt_text[:120]}"]
    snap = (shown.output.value.get("tasks") or [{}])[0]
    return str(snap.get("output") or "").split()


def freeze_and_start(
    stack: Stack,
    ws: Path,
    *,
    freeze_s: float,
    start_at: list[float],
    say: Callable[[str], None] = print,
    wait_s: float = 90.0,
    count_to: int = COUNT_TO,
    held: int = 0,
) -> list[Started]:
    """Freeze the stack's holder for ``freeze_s``, starting one background command (counting
    to ``count_to``) at each offset of ``start_at`` (seconds into the freeze); thaw it, wait
    for every command, and return what each one came to. ``held``: first start one command
    counting to that, which the holder runs as it freezes (listed last)."""
    sid = f"frozen-{uuid.uuid4().hex[:8]}"
    items = [Started(f"c{i}", count_to) for i in range(len(start_at))]
    with Session.connect(stack.url, TASK_TOOLS, ws, session_id=sid) as session:
        warm = Started("warm", 0)
        _start(session, warm)  # so the holder runs before it is frozen
        if not warm.task_id:
            raise RuntimeError(f"warm-up command refused: {warm.error}")
        session.call_sync("wait_tasks", {"task_ids": [warm.task_id], "timeout_ms": 30_000})
        if held:
            # One command the holder runs when it freezes: its lease runs out meanwhile.
            running = Started("held", held)
            _start(session, running)
            limit = time.monotonic() + 30
            while not (ws / "held.runs").exists() and time.monotonic() < limit:
                time.sleep(0.1)
            items.append(running)
        pid = holder_pid(stack)
        os.kill(pid, signal.SIGSTOP)
        frozen = time.monotonic()
        say(f"  holder {pid} frozen for {freeze_s:g} s")
        starters = []
        try:
            for at, item in zip(start_at, items[: len(start_at)], strict=True):
                time.sleep(max(0.0, frozen + at - time.monotonic()))
                thread = threading.Thread(target=_start, args=(session, item), daemon=True)
                thread.start()
                starters.append(thread)
            time.sleep(max(0.0, frozen + freeze_s - time.monotonic()))
        finally:
            os.kill(pid, signal.SIGCONT)
        say(f"  holder thawed after {time.monotonic() - frozen:.1f} s")
        for thread in starters:
            thread.join(30)
        ids = [item.task_id for item in items if item.task_id]
        session.call_sync(
            "wait_tasks", {"task_ids": ids, "mode": "wait_all", "timeout_ms": int(wait_s * 1000)}
        )
        for item in items:
            if not item.task_id:
                continue
            record: dict[str, Any] = session.record_sync(item.task_id) or {}
            item.status = str(record.get("status"))
            item.attempts = int(record.get("attempt") or 0)
            item.result = record.get("result") or {}
            item.output = _last_attempt(session, item.task_id)
            runs = ws / f"{item.name}.runs"
            item.copies = len(runs.read_text().split()) if runs.exists() else 0
    return items


def judge(name: str, items: list[Started]) -> Verdict:
    verdict = Verdict(name)
    ended = {"succeeded", "failed", "cancelled"}
    verdict.rows = {
        "commands (started while frozen, + 1 running)": len(items),
        "refused at start": sum(bool(i.error) for i in items),
        "ran exactly once": sum(i.copies == 1 for i in items),
        "ran twice, record says so": sum(i.copies > 1 and i.honest for i in items),
        "ran twice, unsaid": sum(i.copies > 1 and not i.honest for i in items),
        "never ran": sum(i.copies == 0 for i in items),
        "hung (not ended)": sum(bool(i.task_id) and i.status not in ended for i in items),
        "output of one copy": sum(i.clean_output for i in items),
        "per command (copies/attempts/status)": ", ".join(
            f"{i.name}:{i.copies}/{i.attempts}/{i.status or i.error[:40]}" for i in items
        ),
    }
    if verdict.rows["ran twice, unsaid"]:
        verdict.missed.append("a command ran twice while its record says once")
    if verdict.rows["hung (not ended)"]:
        verdict.missed.append("a command never ended")
    succeeded = [i for i in items if i.status == "succeeded"]
    if any(not i.clean_output for i in succeeded):
        verdict.missed.append("a succeeded command's output is not one copy's 1..N")
    if any(i.status == "succeeded" and i.copies == 0 for i in items):
        verdict.missed.append("a command says it succeeded but never ran")
    if verdict.rows["refused at start"]:
        verdict.missed.append("a background start was refused to the caller")
    return verdict


def run(home: Path, say: Callable[[str], None]) -> Verdict:
    home.mkdir(parents=True, exist_ok=True)
    ws = home / "ws"
    ws.mkdir(exist_ok=True)
    stack = Stack(workers=2, env=FLEET_ENV).start()
    try:
        # Starts early in the freeze (its request times out, and is retried, for 40 s), in the
        # middle, and late (its first request still waits when the holder thaws).
        items = freeze_and_start(
            stack, ws, freeze_s=42.0, start_at=[1.0, 12.0, 30.0], say=say, held=15
        )
        return judge("holder", items)
    finally:
        stack.stop()


if __name__ == "__main__":
    import tempfile

    from bench.chaos_faults import table

    print(table([run(Path(tempfile.mkdtemp(prefix="toolhub-fault-holder-")), print)]))
