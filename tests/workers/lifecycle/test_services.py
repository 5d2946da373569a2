"""Every background thread of a worker goes through one ``Services`` stack: started in order,
each name once, stopped in reverse, and one that fails to stop does not keep the others
running."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from workers.lifecycle.services import Services, Timer


class Recorder:
    def __init__(self, name: str, log: list[str], fail_stop: bool = False) -> None:
        self.name = name
        self.log = log
        self.fail_stop = fail_stop

    def start(self) -> None:
        self.log.append(f"start {self.name}")

    def stop(self) -> None:
        self.log.append(f"stop {self.name}")
        if self.fail_stop:
            raise RuntimeError("stuck")


def test_services_start_in_order_and_stop_in_reverse() -> None:
    log: list[str] = []
    services = Services()
    services.start(Recorder("heartbeat", log), Recorder("metrics", log))
    services.start(Recorder("leases", log))
    assert services.names == ["heartbeat", "metrics", "leases"]
    services.stop()
    assert log == [
        "start heartbeat",
        "start metrics",
        "start leases",
        "stop leases",
        "stop metrics",
        "stop heartbeat",
    ]
    assert services.names == []
    services.stop()  # nothing left: a second stop does nothing
    assert len(log) == 6


def test_a_name_is_started_once() -> None:
    log: list[str] = []
    services = Services()
    services.start(Recorder("leases", log))
    with pytest.raises(ValueError, match="already started"):
        services.start(Recorder("leases", log))
    assert log == ["start leases"]


def test_a_service_that_fails_to_stop_does_not_keep_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log: list[str] = []
    services = Services()
    services.start(Recorder("a", log), Recorder("b", log, fail_stop=True), Recorder("c", log))
    with caplog.at_level(logging.ERROR, logger="toolhub.worker.services"):
        services.stop()
    assert log[3:] == ["stop c", "stop b", "stop a"]
    assert "service b failed to stop" in caplog.text


def test_threads_are_services() -> None:
    """A worker's threads (here a ``Timer``) run while started and end when stopped."""
    fired = threading.Event()
    services = Services()
    timer = Timer("toolhub-hand-back", 0.05, fired.set)
    services.start(timer)
    assert fired.wait(30)
    late = threading.Event()
    never = Timer("never", 30.0, late.set)
    services.start(never)
    started = time.monotonic()
    services.stop()
    never.join(30)
    assert not never.is_alive() and not late.is_set()
    assert time.monotonic() - started < 25
