"""The gateway end to end over real HTTP (embedded sessions): sessions, definitions, calls as
JSON and SSE, records, replay and resume, cancellation, answers, metrics."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.gateway.support import sse_events

pytestmark = pytest.mark.timeout(60)


def test_probes_and_openapi(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok", "deployment": "embedded", "checks": {}}
    assert client.get("/readyz").status_code == 200
    spec = client.get("/openapi.json").json()
    for path in (
        "/v1/sessions",
        "/v1/sessions/{session_id}/tools",
        "/v1/sessions/{session_id}/calls",
        "/v1/sessions/{session_id}/calls/{call_id}",
        "/v1/sessions/{session_id}/calls/{call_id}/events",
        "/v1/sessions/{session_id}/answers/{call_id}",
        "/v1/sessions/{session_id}/external-tools/{name}",
        "/metrics",
    ):
        assert path in spec["paths"], path


def test_session_and_definitions(client: httpx.Client, sid: str) -> None:
    openai = client.get(f"/v1/sessions/{sid}/tools").json()
    assert {t["function"]["name"] for t in openai} == {"echo", "count", "nap", "ask"}
    mcp = client.get(f"/v1/sessions/{sid}/tools", params={"format": "mcp"}).json()
    assert all("inputSchema" in t for t in mcp)
    assert client.get(f"/v1/sessions/{sid}/tools", params={"format": "xml"}).status_code == 422
    again = client.post("/v1/sessions", json={"session_id": sid})
    assert again.status_code == 200 and again.json()["created"] is False
    assert client.get("/v1/sessions/nope/tools").status_code == 404


def test_session_config_and_workspace(client: httpx.Client) -> None:
    body = {"config": {"tools": [{"id": "Main:echo", "name": "say"}]}, "workspace": "sub/dir"}
    created = client.post("/v1/sessions", json=body)
    assert created.status_code == 201, created.text
    sid = created.json()["session_id"]
    names = [t["name"] for t in client.get(f"/v1/sessions/{sid}/tools?format=mcp").json()]
    assert names == ["say"]
    assert client.post("/v1/sessions", json={"workspace": "../escape"}).status_code == 400
    bad = client.post("/v1/sessions", json={"config": {"tools": [{"id": "Main:nothing"}]}})
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["tool"] == "Main:nothing"
    assert client.delete(f"/v1/sessions/{sid}").status_code == 204
    assert client.delete(f"/v1/sessions/{sid}").status_code == 404


def test_call_json_with_object_or_string_arguments(client: httpx.Client, sid: str) -> None:
    as_object = client.post(
        f"/v1/sessions/{sid}/calls", json={"name": "echo", "arguments": {"text": "hi", "times": 2}}
    ).json()
    assert as_object["prompt_text"] == "echo: hihi" and as_object["is_error"] is False
    as_string = client.post(
        f"/v1/sessions/{sid}/calls",
        json={"name": "echo", "arguments": json.dumps({"text": "yo"}), "call_id": "c-str"},
    ).json()
    assert as_string["output"]["value"] == {"echoed": "yo"} and as_string["call_id"] == "c-str"
    broken = client.post(
        f"/v1/sessions/{sid}/calls", json={"name": "echo", "arguments": "{not json"}
    ).json()
    assert broken["is_error"] and broken["error"]["kind"] == "invalid_arguments"
    unknown = client.post(f"/v1/sessions/{sid}/calls", json={"name": "ech"}).json()
    assert unknown["error"]["kind"] == "not_found" and "echo" in unknown["prompt_text"]


def test_call_sse_then_record_replay_and_resume(client: httpx.Client, sid: str) -> None:
    body = {"name": "count", "arguments": {"n": 5}, "call_id": "c-sse"}
    response = client.post(
        f"/v1/sessions/{sid}/calls", json=body, headers={"Accept": "text/event-stream"}
    )
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response.text)
    assert [e["event"] for e in events] == ["progress"] * 5 + ["result"]
    assert [e["id"] for e in events] == [1, 2, 3, 4, 5, 6]
    assert events[-1]["data"]["output"]["value"] == {"total": 5}

    record = client.get(f"/v1/sessions/{sid}/calls/c-sse").json()
    assert record["status"] == "succeeded" and record["name"] == "count"

    replay = sse_events(client.get(f"/v1/sessions/{sid}/calls/c-sse/events").text)
    assert replay == events
    resumed = sse_events(
        client.get(f"/v1/sessions/{sid}/calls/c-sse/events", headers={"Last-Event-ID": "3"}).text
    )
    assert [e["id"] for e in resumed] == [4, 5, 6]
    bad = client.get(f"/v1/sessions/{sid}/calls/c-sse/events", headers={"Last-Event-ID": "x"})
    assert bad.status_code == 400
    assert client.get(f"/v1/sessions/{sid}/calls/nope").status_code == 404
    assert client.get(f"/v1/sessions/{sid}/calls/nope/events").status_code == 404


def test_a_call_refused_before_it_ran_has_a_record(client: httpx.Client, sid: str) -> None:
    answer = client.post(
        f"/v1/sessions/{sid}/calls",
        json={"name": "count", "arguments": {"n": "lots"}, "call_id": "c-refused"},
    )
    assert answer.json()["is_error"] is True
    record = client.get(f"/v1/sessions/{sid}/calls/c-refused")
    assert record.status_code == 200, record.text
    assert record.json()["status"] == "failed" and record.json()["attempt"] == 0


def test_dropped_connection_resumes_without_gap_or_duplicate(gateway_url: str, sid: str) -> None:
    body = {"name": "count", "arguments": {"n": 30, "delay": 0.03}, "call_id": "c-drop"}
    seen: list[dict] = []
    with (
        httpx.Client(base_url=gateway_url, timeout=20) as first,
        first.stream(
            "POST",
            f"/v1/sessions/{sid}/calls",
            json=body,
            headers={"Accept": "text/event-stream"},
        ) as response,
    ):
        buffer = ""
        for chunk in response.iter_text():
            buffer += chunk
            seen = sse_events(buffer[: buffer.rfind("\n\n") + 2])
            if len(seen) >= 4:
                break
    last = seen[-1]["id"]
    with httpx.Client(base_url=gateway_url, timeout=20) as second:
        rest = sse_events(
            second.get(
                f"/v1/sessions/{sid}/calls/c-drop/events", headers={"Last-Event-ID": str(last)}
            ).text
        )
    ids = [e["id"] for e in seen] + [e["id"] for e in rest]
    assert ids == list(range(1, 32)), "every event exactly once, in order"
    assert rest[-1]["event"] == "result" and rest[-1]["data"]["is_error"] is False


def test_disconnect_does_not_cancel_unless_asked(gateway_url: str, sid: str) -> None:
    with httpx.Client(base_url=gateway_url, timeout=20) as c:
        for call_id, flag in (("c-keep", "false"), ("c-cancel", "true")):
            with c.stream(
                "POST",
                f"/v1/sessions/{sid}/calls?cancel_on_disconnect={flag}",
                json={"name": "nap", "arguments": {"seconds": 1.0}, "call_id": call_id},
                headers={"Accept": "text/event-stream"},
            ) as response:
                for chunk in response.iter_text():
                    if "event: progress" in chunk:
                        break
        kept = _wait_status(c, sid, "c-keep")
        cancelled = _wait_status(c, sid, "c-cancel")
    assert kept == "succeeded"
    assert cancelled == "cancelled"


def test_json_call_cancel_on_disconnect(gateway_url: str, sid: str) -> None:
    with httpx.Client(base_url=gateway_url, timeout=0.5) as c, pytest.raises(httpx.ReadTimeout):
        c.post(
            f"/v1/sessions/{sid}/calls?cancel_on_disconnect=true",
            json={"name": "nap", "arguments": {"seconds": 30}, "call_id": "c-json-drop"},
        )
    with httpx.Client(base_url=gateway_url, timeout=20) as c:
        assert _wait_status(c, sid, "c-json-drop") == "cancelled"


def test_delete_cancels_a_running_call(client: httpx.Client, sid: str, gateway_url: str) -> None:
    with (
        httpx.Client(base_url=gateway_url, timeout=20) as other,
        other.stream(
            "POST",
            f"/v1/sessions/{sid}/calls",
            json={"name": "nap", "arguments": {"seconds": 60}, "call_id": "c-run"},
            headers={"Accept": "text/event-stream"},
        ) as response,
    ):
        lines = response.iter_lines()
        for line in lines:
            if line.startswith("event: progress"):
                break
        dup = client.post(f"/v1/sessions/{sid}/calls", json={"name": "echo", "call_id": "c-run"})
        assert dup.status_code == 409
        started = time.monotonic()
        cancel = client.delete(f"/v1/sessions/{sid}/calls/c-run")
        assert cancel.status_code == 202 and cancel.json()["cancelled"] is True
        text = "\n".join(lines)
    result = sse_events(text + "\n\n")[-1]
    assert result["event"] == "result" and result["data"]["error"]["kind"] == "cancelled"
    assert time.monotonic() - started < 5
    assert client.delete(f"/v1/sessions/{sid}/calls/c-run").json()["cancelled"] is False
    assert client.delete(f"/v1/sessions/{sid}/calls/never").status_code == 404


def test_answer_an_ask_user_question(client: httpx.Client, sid: str, gateway_url: str) -> None:
    body = {"name": "ask", "arguments": {"questions": [{"question": "Tabs or spaces?"}]}}
    with (
        httpx.Client(base_url=gateway_url, timeout=20) as other,
        other.stream(
            "POST",
            f"/v1/sessions/{sid}/calls",
            json={**body, "call_id": "c-ask"},
            headers={"Accept": "text/event-stream"},
        ) as response,
    ):
        lines = response.iter_lines()
        for line in lines:
            if line.startswith("data:") and "input_required" in line:
                payload = json.loads(line[len("data: ") :])["payload"]
                assert payload == {
                    "call_id": "c-ask",
                    "questions": [{"question": "Tabs or spaces?"}],
                }
                break
        answered = client.post(f"/v1/sessions/{sid}/answers/c-ask", json={"answers": ["spaces"]})
        assert answered.status_code == 200 and answered.json()["delivered"] is True
        rest = "\n".join(lines)
    result = sse_events(rest + "\n\n")[-1]["data"]
    assert result["prompt_text"] == "answers: ['spaces']"
    again = client.post(f"/v1/sessions/{sid}/answers/c-ask", json={"answers": ["tabs"]})
    assert again.status_code == 409


def test_metrics_count_calls_by_tool_and_outcome(client: httpx.Client, sid: str) -> None:
    client.post(f"/v1/sessions/{sid}/calls", json={"name": "echo", "arguments": {"text": "a"}})
    client.post(f"/v1/sessions/{sid}/calls", json={"name": "echo", "arguments": {}})
    client.post(f"/v1/sessions/{sid}/calls", json={"name": "made_up_name"})
    text = client.get("/metrics").text
    assert 'toolhub_calls_total{outcome="ok",tool="echo"} 1.0' in text
    assert 'toolhub_calls_total{outcome="invalid_arguments",tool="echo"} 1.0' in text
    assert 'toolhub_calls_total{outcome="not_found",tool="(unknown)"} 1.0' in text
    assert "made_up_name" not in text
    assert 'toolhub_call_duration_seconds_bucket{le="0.001",tool="echo"}' in text
    assert "toolhub_calls_in_flight 0.0" in text
    assert 'route="/v1/sessions/{session_id}/calls"' in text
    assert 'toolhub_gc_pause_seconds_bucket{generation="2",le="+Inf"}' in text


def _wait_status(client: httpx.Client, sid: str, call_id: str, timeout: float = 10) -> str:
    deadline = time.monotonic() + timeout
    status = ""
    while time.monotonic() < deadline:
        response = client.get(f"/v1/sessions/{sid}/calls/{call_id}")
        if response.status_code == 200:
            status = response.json()["status"]
            if status not in {"queued", "running"}:
                return status
        time.sleep(0.05)
    return status


def test_metrics_count_what_each_tenant_used_on_an_embedded_gateway(
    client: httpx.Client, sid: str
) -> None:
    """An embedded gateway runs its calls itself: its /metrics counts their usage per tenant
    and tool (the one-token gateway's tenant is ``default``)."""
    for text in ("one", "two"):
        response = client.post(
            f"/v1/sessions/{sid}/calls", json={"name": "echo", "arguments": {"text": text}}
        )
        assert response.status_code == 200, response.text
    record = client.get(f"/v1/sessions/{sid}/calls/{response.json()['call_id']}").json()
    assert record["output_bytes"] > 0 and record["wall_seconds"] >= 0
    assert record["cpu_seconds"] == 0 and record["peak_memory_bytes"] == 0
    families = {
        sample.name: sample
        for family in text_string_to_metric_families(client.get("/metrics").text)
        for sample in family.samples
        if sample.labels.get("tenant") == "default" and sample.labels.get("tool") == "Main:echo"
    }
    assert families["toolhub_usage_calls_total"].value == 2
    assert families["toolhub_usage_output_bytes_total"].value >= 2 * record["output_bytes"] - 1
    assert "toolhub_usage_wall_seconds_total" in families
    assert "toolhub_usage_cpu_seconds_total" in families
