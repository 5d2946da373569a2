"""The take-before-claim probe of the chaos run's toolhub side (``bench/chaos_toolhub.py``).

A worker that dies after kombu took a message off the queue but before it claimed the call
leaves the call queued with no worker on it until the sweep re-enqueues it. The probe aims a
SIGKILL at that window (milliseconds wide) and checks that every call it caught is re-enqueued
and answered within about a lease.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
from typing import Any

from bench.chaos_dispatcher import answer_line, bash_args, stream_answer
from bench.chaos_plan import probe_calls
from bench.chaos_procs import call_command, wait_all_ready
from bench.chaos_report import Outcome

COMMAND_QUEUE = "toolhub.command"
#: How long the probe keeps freezing its victim at random instants, looking for a message it
#: took and has not claimed, and how long each freeze lasts before it looks.
HUNT_SECONDS = 3.0
SETTLE_SECONDS = 0.03


def take_before_claim(chaos: Any, attempt: int) -> dict[str, Any]:
    """One probe: a burst of short calls, a worker SIGKILLed while it holds a message it took
    and has not claimed, and how soon that call ran again."""
    p = chaos.profile
    wait_all_ready(chaos.workers)
    calls = probe_calls(p, attempt)
    cids = [c.cid for c in calls]
    deadline = [time.time() + 3600.0]
    loop_done = threading.Event()

    async def one(call: Any) -> None:
        command = call_command(chaos.run_tag, call.cid, chaos.sidefx, call.first_s, call.rerun_s)
        items = chaos.session.stream("bash", bash_args(command), call_id=call.cid)
        try:
            result, retry = await asyncio.wait_for(
                stream_answer(items), max(0.1, deadline[0] - time.time())
            )
        except TimeoutError:
            return
        if result is not None:
            chaos.answers[call.cid] = answer_line(call.cid, result, "probe", retry)

    async def all_calls() -> None:
        await asyncio.gather(*(one(c) for c in calls))

    thread = threading.Thread(target=lambda: (asyncio.run(all_calls()), loop_done.set()))
    thread.start()
    client = chaos.store.client
    keys = [chaos.store.keys.call(cid) for cid in cids]
    while sum(client.exists(*keys[i : i + 100]) for i in range(0, len(keys), 100)) < len(keys):
        time.sleep(0.002)
    enqueued = time.time()
    time.sleep(max(0.0, enqueued + chaos.rng.uniform(0.005, 0.030) - time.time()))
    victim = chaos.supervisor.pick(chaos.rng)
    frozen_at, candidates, freezes = time.time(), [], 0
    if victim is not None:
        # Freeze the victim at random instants until it holds a message it took and has not
        # claimed, then SIGKILL it: a SIGKILL at the instant of the freeze (a stopped process
        # does nothing more), aimed at a window only milliseconds wide.
        while not loop_done.is_set() and time.time() < enqueued + HUNT_SECONDS:
            victim.signal(signal.SIGSTOP)
            frozen_at = time.time()
            freezes += 1
            time.sleep(SETTLE_SECONDS)  # live workers claim what they took within this
            candidates = taken_unclaimed(client, keys, cids)
            if candidates:
                break
            victim.signal(signal.SIGCONT)
            time.sleep(chaos.rng.uniform(0.002, 0.020))
        chaos.supervisor.kill(victim)
    killed_at = frozen_at
    deadline[0] = killed_at + p.hung_after
    thread.join(p.hung_after + 30)
    # A live worker claims what it took within milliseconds; what the dead one took starts
    # only once recovered (one claim deadline, about a lease), or never.
    taken, starts = [], {}
    for cid in candidates:
        attempts = (chaos.session.record_sync(cid) or {}).get("attempts") or []
        first = attempts[0].get("started_at") if attempts else None
        if first is None or first > killed_at + p.lease / 2:
            taken.append(cid)
            starts[cid] = None if first is None else attempts[-1]["started_at"] - killed_at
    probe = {
        "attempt": attempt,
        "cids": cids,
        "killed_at": killed_at,
        "delay_ms": (killed_at - enqueued) * 1000,
        "freezes": freezes,
        "candidates": candidates,
        "taken": taken,
        "starts": starts,
        "victim": victim.name if victim is not None else None,
    }
    (chaos.home / f"probe{attempt}.json").write_text(json.dumps(probe, indent=1))
    return probe


def taken_unclaimed(client: Any, keys: list[bytes], cids: list[str]) -> list[str]:
    """Queued calls whose message is no longer in the queue: taken by a worker, not claimed."""
    pipe = client.pipeline(transaction=True)
    pipe.lrange(COMMAND_QUEUE, 0, -1)
    for key in keys:
        pipe.hmget(key, "status", "attempt")
    queued_blob, *states = pipe.execute()
    blob = b"".join(queued_blob)
    return [
        cid
        for cid, (status, att) in zip(cids, states, strict=True)
        if status == b"queued"
        and int(att or 0) == 0
        and f"'{cid}'".encode() not in blob
        and f'"{cid}"'.encode() not in blob
    ]


def summary(
    probes: list[dict[str, Any]], records: dict[str, Any], outcomes: list[Outcome], lease: float
) -> dict[str, Any] | None:
    """The last probe's numbers for the table (the one that caught a message, if any)."""
    if not probes:
        return None
    probe = probes[-1]
    killed = probe["killed_at"]
    by_id = {o.cid: o for o in outcomes}
    taken = probe["taken"]
    answers = [by_id[c].answered_at for c in taken]
    starts = [s for s in probe["starts"].values() if s is not None]
    return {
        "burst": len(probe["cids"]),
        "delay_ms": probe["delay_ms"],
        "candidates": len(probe["candidates"]),
        "taken": len(taken),
        "requeued": sum(int((records.get(c) or {}).get("requeued") or 0) > 0 for c in taken),
        "hung": sum(1 for a in answers if a is None),
        "slowest": max((a - killed for a in answers if a is not None), default=None),
        "slowest_start": max(starts, default=None),
        "lease": lease,
        "tries": len(probes),
        "freezes": probe.get("freezes", 0),
    }
