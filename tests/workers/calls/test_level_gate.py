"""The worker's level gate: a sunk call starts behind a young level-0 call, never for long."""

from __future__ import annotations

import threading
import time

from toolhub.distributed.fair import SUNK_PRIORITY
from workers.calls.level_gate import LevelGate


def _start_sunk(gate: LevelGate, started: list[float]) -> threading.Thread:
    def sunk() -> None:
        with gate.running(SUNK_PRIORITY):
            started.append(time.monotonic())

    thread = threading.Thread(target=sunk)
    thread.start()
    return thread


def test_a_sunk_call_starts_once_the_level0_call_ended() -> None:
    gate = LevelGate(hold_s=60.0)
    started: list[float] = []
    with gate.running(0):
        thread = _start_sunk(gate, started)
        time.sleep(0.2)
        assert started == []  # held while the level-0 call runs
        ended = time.monotonic()
    thread.join(timeout=30)
    assert started and started[0] >= ended


def test_a_sunk_call_waits_no_longer_than_the_hold() -> None:
    gate = LevelGate(hold_s=0.1)
    started: list[float] = []
    with gate.running(0):
        began = time.monotonic()
        thread = _start_sunk(gate, started)
        thread.join(timeout=30)  # the level-0 call is still running
        assert started and started[0] - began >= 0.1


def test_level0_calls_and_sunk_calls_alone_never_wait() -> None:
    gate = LevelGate(hold_s=60.0)
    with gate.running(0), gate.running(None), gate.running(0):
        pass  # level-0 calls never wait on each other
    began = time.monotonic()
    with gate.running(SUNK_PRIORITY), gate.running(SUNK_PRIORITY):
        pass  # no level-0 call runs: nothing to wait for
    assert time.monotonic() - began < 30


def test_a_hold_of_zero_turns_the_gate_off() -> None:
    gate = LevelGate(hold_s=0)
    started: list[float] = []
    with gate.running(0):
        _start_sunk(gate, started).join(timeout=30)
        assert started


def test_level0_calls_that_keep_coming_hold_a_sunk_call_no_longer_than_the_hold() -> None:
    gate = LevelGate(hold_s=0.3)
    started: list[float] = []
    stop = threading.Event()

    def level0_stream() -> None:  # a new level-0 call every 50 ms, each overlapping the last
        while not stop.is_set():
            threading.Thread(target=lambda: _run_level0(gate, 0.1)).start()
            time.sleep(0.05)

    stream = threading.Thread(target=level0_stream)
    stream.start()
    try:
        time.sleep(0.1)
        began = time.monotonic()
        _start_sunk(gate, started).join(timeout=30)
        held = started[0] - began
    finally:
        stop.set()
        stream.join(timeout=30)
    assert held < 10  # the hold (0.3 s), not the stream's length (unbounded without it)


def _run_level0(gate: LevelGate, seconds: float) -> None:
    with gate.running(0):
        time.sleep(seconds)
