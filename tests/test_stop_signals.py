"""``StopSignals``: a storm of signals while the main thread keeps entering ``wait`` never
deadlocks it. A handler that calls ``threading.Event.set`` does, within a few thousand
signals: that is how ``toolhub up`` once ignored Ctrl-C for ever."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

CHILD = """
import os, signal, sys
from toolhub.stop_signals import StopSignals

done = sys.argv[1]
rounds = 0
signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # what comes back: late signals do no harm
with StopSignals((signal.SIGUSR1,)) as stop:
    print("ready", flush=True)
    while True:
        stop.wait()
        stop.requested = False
        rounds += 1
        if os.path.exists(done):
            break
print("rounds", rounds, flush=True)
"""


def test_a_signal_storm_never_deadlocks_the_waiting_thread(tmp_path: Path) -> None:
    done = tmp_path / "done"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(done)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            for _ in range(200):
                os.kill(child.pid, signal.SIGUSR1)
        done.touch()
        stop_by = time.monotonic() + 60  # a busy machine's margin
        while child.poll() is None and time.monotonic() < stop_by:
            os.kill(child.pid, signal.SIGUSR1)
            time.sleep(0.05)
        assert child.poll() == 0, "the waiting thread is stuck"
        assert child.stdout.read().startswith("rounds ")
    finally:
        child.kill()
        child.wait()


def test_wait_returns_after_the_signal_and_handlers_come_back() -> None:
    before = signal.getsignal(signal.SIGUSR2)
    from toolhub.stop_signals import StopSignals

    with StopSignals((signal.SIGUSR2,)) as stop:
        assert not stop.requested
        os.kill(os.getpid(), signal.SIGUSR2)
        started = time.monotonic()
        stop.wait()
        assert time.monotonic() - started < 10  # woken by the signal, not blocked for good
    assert signal.getsignal(signal.SIGUSR2) is before
