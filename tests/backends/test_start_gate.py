"""``StartGate``: at most its width of threads inside ``held`` at once; a holder that steps out
(``released``) lets another in and takes a slot back after; outside ``held``, ``released``
gives nothing away."""

from __future__ import annotations

import threading
import time

from toolhub.backends.start_gate import StartGate


def test_no_more_than_its_width_hold_it_at_once() -> None:
    gate = StartGate(2)
    inside, most, lock = 0, 0, threading.Lock()

    def start() -> None:
        nonlocal inside, most
        with gate.held():
            with lock:
                inside += 1
                most = max(most, inside)
            time.sleep(0.02)
            with lock:
                inside -= 1

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert most == 2


def test_a_holder_waiting_elsewhere_lets_another_start_in() -> None:
    gate = StartGate(1)
    waiting, answered, other_done = threading.Event(), threading.Event(), threading.Event()
    back_inside = threading.Event()

    def stuck_start() -> None:
        with gate.held():
            with gate.released():
                waiting.set()
                answered.wait(10)
            back_inside.set()

    def other_start() -> None:
        with gate.held():
            other_done.set()

    stuck = threading.Thread(target=stuck_start)
    stuck.start()
    assert waiting.wait(5)
    other = threading.Thread(target=other_start)
    other.start()
    assert other_done.wait(5), "the other start waited for the one that stepped out"
    other.join(5)
    answered.set()
    assert back_inside.wait(5)
    stuck.join(5)
    # Both slots are back: the gate admits exactly one again.
    assert gate._slots.acquire(blocking=False)
    assert not gate._slots.acquire(blocking=False)


def test_released_outside_held_gives_nothing_away() -> None:
    gate = StartGate(1)
    with gate.released():
        pass
    assert gate._slots.acquire(blocking=False)
    assert not gate._slots.acquire(blocking=False)


def test_held_inside_held_on_one_thread_takes_no_second_slot() -> None:
    gate = StartGate(1)

    def nested() -> None:
        with gate.held(), gate.held():
            pass

    thread = threading.Thread(target=nested, daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), "a second acquire on the same thread never returned"
    assert gate._slots.acquire(blocking=False)
