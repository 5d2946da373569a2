"""Call ids scoped to their session: on a real gateway with named keys, two tenants (and two
sessions of one tenant) run a call of the same client-chosen id at the same time, each gets its
own result, record and events under that id, and none is told the id is "taken"; a second call
of that id in the same session is still refused while the first runs. What a tool says about
its call (an ``ask_user`` question, a forwarded call) names it by the client's id, and the
client answers by that id. The one-tenant case stores the client's id unchanged."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.conftest import MakeGateway
from tests.gateway.support import sse_events
from tests.gateway.test_gateway_guard import target  # noqa: F401 (fixture)
from tests.gateway.test_gateway_tenants import Fleet, create, fleet  # noqa: F401 (fixture)
from toolhub.gateway.call_ids import client_call_id, shown, stored_call_id
from toolhub.tenancy.keys import KeyFile

pytestmark = pytest.mark.timeout(120)


def test_the_default_tenant_keeps_the_clients_call_id() -> None:
    assert stored_call_id("s1", "c1") == "c1"
    assert client_call_id("s1", "c1") == "c1"


def test_a_named_tenants_call_is_stored_under_its_session_and_shown_by_the_clients_id() -> None:
    stored = stored_call_id("acme~s1", "c1")
    assert stored == "acme~s1/c1"
    assert stored != stored_call_id("globex~s1", "c1") != stored_call_id("acme~s2", "c1")
    assert client_call_id("acme~s1", stored) == "c1"
    data = {
        "call_id": stored,
        "prompt_text": f"Tool `x` failed: call id {stored!r} is taken",
        "payload": {"call_id": stored, "questions": []},
        "result": {"call_id": stored, "error": {"detail": f"call {stored} gone"}},
    }
    assert shown(data, stored, "c1") == {
        "call_id": "c1",
        "prompt_text": "Tool `x` failed: call id 'c1' is taken",
        "payload": {"call_id": "c1", "questions": []},
        "result": {"call_id": "c1", "error": {"detail": "call c1 gone"}},
    }


def _echo(client: httpx.Client, sid: str, text: str) -> httpx.Response:
    body = {"name": "echo", "arguments": {"text": text}, "call_id": "c-same"}
    return client.post(f"/v1/sessions/{sid}/calls", json=body)


def test_two_tenants_and_two_sessions_use_the_same_call_id_at_once(
    fleet: Fleet,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="toolhub")
    with fleet.client("acme") as a, fleet.client("globex") as b, fleet.client("default") as d:
        for client, sid in ((a, "s1"), (a, "s2"), (b, "s1"), (d, "s1")):
            assert create(client, session_id=sid).status_code == 201
        slow = {"name": "count", "arguments": {"n": 3, "delay": 1.0}, "call_id": "c-same"}
        with a.stream(
            "POST", "/v1/sessions/s1/calls", json=slow, headers={"Accept": "text/event-stream"}
        ) as running:
            lines = running.iter_lines()
            for line in lines:
                if line.startswith("event: progress"):
                    break
            # acme's call runs: the same id is free for every other tenant and session.
            for client, sid, text in ((b, "s1", "globex"), (d, "s1", "default"), (a, "s2", "s2")):
                own = _echo(client, sid, text)
                assert own.status_code == 200, own.text
                assert own.json()["call_id"] == "c-same"
                assert own.json()["output"]["value"]["echoed"] == text
            # In its own session the id is still the running call's.
            again = _echo(a, "s1", "again")
            assert again.status_code == 409
            assert again.json() == {"detail": "call c-same is still running"}
            assert "principal acme/" in caplog.text and "c-same is still running" in caplog.text
            rest = "\n".join(lines)
        events = sse_events(rest + "\n\n")
        assert events[-1]["event"] == "result", events
        assert events[-1]["data"]["call_id"] == "c-same"
        assert events[-1]["data"]["output"]["value"] == {"total": 3}

        # Each reads its own record and events under the id, named by the client's ids.
        for client, sid, name in ((a, "s1", "count"), (a, "s2", "echo"), (b, "s1", "echo")):
            record = client.get(f"/v1/sessions/{sid}/calls/c-same").json()
            assert record["name"] == name and record["session_id"] == sid, record
            assert record["result"]["call_id"] == "c-same", record
            replay = sse_events(client.get(f"/v1/sessions/{sid}/calls/c-same/events").text)
            assert replay[-1]["data"]["call_id"] == "c-same"
            assert len(replay) == (4 if name == "count" else 1)
        finished = b.delete("/v1/sessions/s1/calls/c-same")
        assert finished.status_code == 202 and finished.json() == {
            "call_id": "c-same",
            "cancelled": False,
        }


def test_a_named_tenant_asks_answers_and_forwards_by_its_own_call_id(
    make_gateway: MakeGateway,
    tmp_path: Path,
    target: tuple[str, list[dict[str, Any]]],  # noqa: F811
) -> None:
    keys = KeyFile(tmp_path / "keys.json")
    key = keys.create("acme")[1]
    url = make_gateway(keys_file=keys.path, forward_private=True)
    auth = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=url, timeout=30, headers=auth) as a:
        assert a.post("/v1/sessions", json={"session_id": "s1"}).status_code == 201
        ask = {
            "name": "ask",
            "arguments": {"questions": [{"question": "Tabs or spaces?"}]},
            "call_id": "c-ask",
        }
        with a.stream(
            "POST", "/v1/sessions/s1/calls", json=ask, headers={"Accept": "text/event-stream"}
        ) as running:
            lines = running.iter_lines()
            for line in lines:
                if line.startswith("data:") and "input_required" in line:
                    payload = json.loads(line[len("data: ") :])["payload"]
                    assert payload["call_id"] == "c-ask", payload
                    break
            answered = a.post("/v1/sessions/s1/answers/c-ask", json={"answers": ["spaces"]})
            assert answered.json() == {"call_id": "c-ask", "delivered": True}
            rest = "\n".join(lines)
        result = sse_events(rest + "\n\n")[-1]["data"]
        assert result["call_id"] == "c-ask" and result["prompt_text"] == "answers: ['spaces']"

        forward_url, received = target
        body = {"forward": {"url": f"{forward_url}/add"}}
        assert a.put("/v1/sessions/s1/external-tools/math__add", json=body).is_success
        call = {"name": "math__add", "arguments": {"a": 1, "b": 2}, "call_id": "c-ext"}
        done = a.post("/v1/sessions/s1/calls", json=call).json()
        assert done["output"]["value"] == {"sum": 3} and done["call_id"] == "c-ext"
        assert received[0]["body"]["call_id"] == "c-ext"
        assert received[0]["body"]["session_id"] == "s1"
