"""The bounded chaos run: ``make chaos``'s scenario at the ``quick`` size, in ``make test``.

Real redis-server, real ``toolhub worker`` processes, real dispatcher processes: 2 workers
SIGKILLed while calls with countable side effects run, the dispatcher SIGKILLed once (its
successor collects the answers by id), a background command through its worker's SIGKILL, and
the take-before-claim probe. Every call must get an answer, no side effect may be lost or
duplicated unsaid, no command may outlive its worker, and the background output must be
intact. ``make chaos`` adds the Redis restart, a bigger load and vanilla Celery beside it.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench.chaos import bars, run
from bench.chaos_plan import PROFILES

#: Whether a SIGKILL lands in the milliseconds between a message's take and its claim is
#: chance; the probe tries up to ``probe_tries`` times. When none is caught this run, the
#: deterministic version in test_recovery.py still covers the path; every other bar holds.
NOT_CAUGHT = "take-before-claim probe: no message was caught"


@pytest.mark.timeout(360)
def test_quick_chaos_run_meets_every_bar(tmp_path):
    # A call unanswered 30 s after the last fault is hung on an idle machine; a busy one (this
    # suite's other processes on 2 cores) gets the margin ``make chaos`` gives its big run.
    # Likewise the probe's re-run: 3.1 s against a 3 s bound was seen beside a CPU burner. Six
    # leases (9 s) still fail a call left to Celery's visibility timeout (minutes), the fault
    # the bound is there to catch; ``make chaos`` keeps the tight bound.
    profile = replace(PROFILES["quick"], hung_after=90.0, rerun_bound_leases=6.0)
    said: list[str] = []
    [score] = run(profile, tmp_path, say=said.append)

    missed = [m for m in bars(score, profile) if not m.startswith(NOT_CAUGHT)]
    assert missed == [], "\n".join([*missed, *said, *score.notes])
    assert score.submitted >= profile.calls
    assert score.count("hung") == 0
    assert score.worker_kills >= profile.kills
    assert score.dispatcher_kills == 1
    assert score.background is not None and score.background["ran_once"]
