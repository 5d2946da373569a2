"""The self-fence: a claimed run whose lease Redis has not confirmed for ``fence_after`` is
stopped (its token fires ``lease_lost``, which kills its command), before the lease can end;
a confirmed renewal moves the moment on; unclaimed and already stopped runs are left alone.
The partition itself, on real workers: tests/distributed/test_fault_partition.py."""

from __future__ import annotations

import subprocess
import time

from toolhub.backends.process import KILL_GRACE_S
from toolhub.core import CancelToken
from toolhub.core.tool import LEASE_LOST
from workers.calls.running import Running
from workers.lifecycle.fencing import SelfFence, confirmed, fence_after, gave_up


def test_the_margin_leaves_the_kill_its_grace_inside_the_lease() -> None:
    for lease in (6.0, 15.0, 60.0):
        assert fence_after(lease) + KILL_GRACE_S + lease / 6 <= lease + 1e-9
    # Short leases fence at two thirds: renewals come every sixth, so a busy worker survives.
    assert fence_after(1.5) == 1.0
    assert fence_after(4.0) == 4.0 * 2 / 3


def test_an_unconfirmed_run_is_fenced_and_its_process_killed() -> None:
    proc = subprocess.Popen(["sleep", "60"])
    token = CancelToken()
    token.on_cancel(proc.kill)
    stale = Running("c-stale", token, attempt=1, leased_at=time.monotonic() - 20)
    fresh = Running("c-fresh", CancelToken(), attempt=1)
    unclaimed = Running("c-unclaimed", CancelToken(), attempt=0, leased_at=0.0)
    fenced: list[Running] = []
    fence = SelfFence(lambda: [stale, fresh, unclaimed], 15.0, on_fence=fenced.append)
    assert fence.check(time.monotonic()) == [stale]
    assert fenced == [stale]
    assert stale.token.reason == LEASE_LOST and gave_up(stale)
    assert proc.wait(10) is not None
    assert not fresh.token.cancelled and not unclaimed.token.cancelled
    # Once stopped, a run is not fenced again.
    assert fence.check(time.monotonic()) == []


def test_a_confirmed_renewal_moves_the_fence_on() -> None:
    running = Running("c-renewed", CancelToken(), attempt=1, leased_at=time.monotonic() - 20)
    fence = SelfFence(lambda: [running], 15.0)
    confirmed(running, time.monotonic())
    assert fence.check(time.monotonic()) == []
    # An older confirmation never moves it back.
    confirmed(running, 0.0)
    assert fence.check(time.monotonic() + fence_after(15.0) - 1) == []
    assert fence.check(time.monotonic() + fence_after(15.0) + 1) == [running]


def test_the_fence_thread_acts_on_its_own() -> None:
    running = Running("c-thread", CancelToken(), attempt=1)
    fence = SelfFence(lambda: [running], 0.6)
    fence.start()
    try:
        deadline = time.monotonic() + 10
        while not running.token.cancelled and time.monotonic() < deadline:
            time.sleep(0.02)
        assert running.token.reason == LEASE_LOST
    finally:
        fence.stop()
        fence.join(5)
