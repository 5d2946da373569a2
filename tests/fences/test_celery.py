"""Celery's fence (``toolhub/fences/celery.py``), both paths, on Celery's real worker-state
registry and its real ``safe_say``: with the fence on, the worker's requests are read from
Celery and its signal notices routed to toolhub's writer; with ``TOOLHUB_PLAIN_LIBRARIES=celery``
no request is read (except by the redacted inspect commands, which have no plain path) and
``safe_say`` is left as Celery wrote it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TextIO

import pytest
from celery.apps import worker as celery_worker
from celery.worker import state

from toolhub.fences import celery as fence


class _Request:
    """Stands in for a Celery ``Request`` in the worker's own registry (only identity is read)."""


@pytest.fixture(params=["fenced", "plain"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "plain":
        monkeypatch.setenv("TOOLHUB_PLAIN_LIBRARIES", "celery")
    else:
        monkeypatch.delenv("TOOLHUB_PLAIN_LIBRARIES", raising=False)
    return str(request.param)


@pytest.fixture
def held() -> Iterator[_Request]:
    """One request in Celery's registries, as a worker's consumer puts it there."""
    request = _Request()
    state.requests["task-1"] = request
    state.reserved_requests.add(request)
    state.active_requests.add(request)
    yield request
    state.requests.pop("task-1", None)
    state.reserved_requests.discard(request)
    state.active_requests.discard(request)


def test_held_requests_are_read_only_on_the_fenced_path(path: str, held: _Request) -> None:
    fenced = path == "fenced"
    assert (fence.held_request("task-1") is held) is fenced
    assert fence.held_request("task-unknown") is None
    assert (held in fence.reserved_requests()) is fenced
    # The redacted inspect commands read the registry on both paths.
    assert held in fence.reserved_requests(for_inspection=True)
    assert held in fence.active_requests()


def test_signal_notices_are_routed_only_on_the_fenced_path(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(celery_worker, "safe_say", celery_worker.safe_say)
    stock = celery_worker.safe_say
    said: list[str] = []

    def say(msg: str, f: TextIO | None = None) -> None:
        said.append(msg)

    routed = fence.route_signal_notices(say)
    assert routed is (path == "fenced")
    assert (celery_worker.safe_say is say) is routed
    assert (celery_worker.safe_say is stock) is not routed
