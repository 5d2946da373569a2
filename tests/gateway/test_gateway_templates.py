"""Hostile description overrides through a real gateway: each answers 422 with a
`template_render` violation, quickly, while `/healthz` keeps answering (issue 13, item 3)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolhub.toolset.render_process import RENDER_BUDGET_S

pytestmark = pytest.mark.timeout(60)

NESTED_LOOPS = "${% for i in range(10000) %}${% for j in range(10000) %}${% endfor %}${% endfor %}"
REFUSED_AT_ONCE = [
    "${{ 9**(9**9) }}",
    "${{ (2**(2**24))|string }}",
    "${{ range(10**9)|list }}",
    "${{ 'a' * 10**8 }}",
    "${% macro f() %}${{ f() }}${% endmacro %}${{ f() }}",
    "${{ 1 / 0 }}",
]


def _config(description: str, tool: str = "Main:echo") -> dict[str, Any]:
    return {"config": {"tools": [{"id": tool, "description": description}]}}


def _violation(response: httpx.Response, tool: str = "Main:echo") -> dict[str, Any]:
    assert response.status_code == 422, response.text
    (violation,) = response.json()["detail"]
    assert violation["category"] == "template_render"
    assert violation["tool"] == tool and violation["field_path"] == "description"
    assert violation["message"].startswith("template could not be rendered: ")
    return violation  # type: ignore[no-any-return]


def test_hostile_overrides_answer_422_at_once(gateway_url: str) -> None:
    with httpx.Client(base_url=gateway_url, timeout=10) as client:
        for description in REFUSED_AT_ONCE:
            start = time.monotonic()
            _violation(client.post("/v1/sessions", json=_config(description)))
            assert time.monotonic() - start < 5.0, description  # at once, not after a render
        assert client.get("/healthz").status_code == 200


def test_slow_overrides_answer_422_while_healthz_keeps_answering(
    open_gateway: tuple[str, Path],
) -> None:
    """In a gateway process of its own (``toolhub serve``): in the test process, a pause of
    pytest's own heap or threads would be counted against the gateway's event loop."""
    url, _ = open_gateway
    slowest_health = 0.0
    stop = threading.Event()

    def poll_health() -> int:
        nonlocal slowest_health
        answered = 0
        with httpx.Client(base_url=url, timeout=5) as client:
            while not stop.is_set():
                start = time.monotonic()
                assert client.get("/healthz").status_code == 200
                slowest_health = max(slowest_health, time.monotonic() - start)
                answered += 1
                time.sleep(0.02)
        return answered

    def create(description: str) -> tuple[httpx.Response, float]:
        with httpx.Client(base_url=url, timeout=20) as client:
            start = time.monotonic()
            body = _config(description, tool="Main:read_file")
            return client.post("/v1/sessions", json=body), time.monotonic() - start

    with ThreadPoolExecutor(4) as pool:
        health = pool.submit(poll_health)
        hostile = [pool.submit(create, NESTED_LOOPS) for _ in range(2)]
        results = [f.result() for f in hostile]
        stop.set()
        answered = health.result()
    for response, elapsed in results:
        assert "took longer than" in _violation(response, "Main:read_file")["message"]
        # Stopped near the budget, not run to its end; a busy machine adds seconds.
        assert elapsed < RENDER_BUDGET_S + 8
    assert answered >= 10 and slowest_health < 0.5

    with httpx.Client(base_url=url, timeout=10) as client:  # and the gateway still works
        listing = "Beside ${% for k, v in tools.by_kind|dictsort %}${{ v }} ${% endfor %}"
        body = _config(listing, tool="Main:read_file")
        body["config"]["tools"].append({"id": "Main:web_fetch"})
        ok = client.post("/v1/sessions", json=body)
        assert ok.status_code == 201, ok.text
        tools = client.get(f"/v1/sessions/{ok.json()['session_id']}/tools").json()
        assert tools[0]["function"]["description"] == "Beside read_file web_fetch "
