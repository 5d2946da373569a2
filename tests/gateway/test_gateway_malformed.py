"""Malformed input the security review found answered with a 500 or a traceback (issue 13.8):
each now gets a typed, short answer, and the gateway keeps serving."""

from __future__ import annotations

import httpx
import pytest


@pytest.mark.parametrize(
    ("workspace", "status", "says"),
    [
        ("a\x00b", 400, "NUL byte"),
        ("n" * 300, 400, "cannot be used"),  # a name longer than the filesystem allows
        ("x" * 5000, 422, "4096"),
        ("../outside", 400, "outside"),
    ],
)
def test_hostile_session_workspaces(
    client: httpx.Client, workspace: str, status: int, says: str
) -> None:
    answer = client.post("/v1/sessions", json={"workspace": workspace})
    assert answer.status_code == status, answer.text
    assert says in answer.text
    assert len(answer.text) < 2000, "the path is not echoed back whole"
    assert "Traceback" not in answer.text
    assert client.post("/v1/sessions", json={}).status_code == 201


def test_deeply_nested_json_arguments(client: httpx.Client, sid: str) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    answer = client.post(f"/v1/sessions/{sid}/calls", json={"name": "echo", "arguments": deep})
    assert answer.status_code == 200, answer.text
    error = answer.json()["error"]
    assert error["kind"] == "invalid_arguments" and "nested too deeply" in error["detail"]
    ok = client.post(
        f"/v1/sessions/{sid}/calls", json={"name": "echo", "arguments": {"text": "still here"}}
    )
    assert ok.json()["error"] is None
