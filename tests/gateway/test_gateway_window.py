"""The gateway holds a bounded window of each call (``window.py``), over HTTP on a real
gateway: calls printing 3 MB each leave at most the window per call in the gateway's logs
(the bytes its logs hold, counted, not the process' RSS), a client resuming from the start
reads the marker saying how much was trimmed, and a result larger than the window is cut with
a note naming where the full output is."""

from __future__ import annotations

from pathlib import Path

import httpx
from pydantic import BaseModel

from tests.gateway.support import sse_events
from toolhub import Progress, Session, Tool, ToolContext, ToolKind
from toolhub.core import CallResult
from toolhub.core.trimmed import TRIMMED
from toolhub.gateway import GatewaySettings, ThreadedServer, create_app
from toolhub.gateway.calllog import CallLog
from toolhub.toolset import ToolSetBuilder

WINDOW = 64 << 10
CHUNK = 16 << 10
FLOOD = 3_000_000


class FloodArgs(BaseModel):
    result_bytes: int = 10


class FloodOutput(BaseModel):
    text: str

    def model_text(self) -> str:
        return self.text


class Flood(Tool[FloodArgs, FloodOutput]):
    """Prints 3 MB as progress, then returns ``result_bytes`` of text."""

    id = "flood"
    kind = ToolKind.EXECUTE
    description_template = "Print a lot."

    async def execute(self, ctx: ToolContext, args: FloodArgs):  # type: ignore[override]
        for i in range(FLOOD // CHUNK):
            yield Progress.of_text(f"{i:06d}" + "y" * (CHUNK - 6))
        yield FloodOutput(text="z" * args.result_bytes)


def _gateway(tmp_path: Path) -> tuple[ThreadedServer, object]:
    builder = ToolSetBuilder(plugins=False)
    builder.register(Flood)
    builder.set_default_tools(["Main:flood"])

    def make(config, workspace: Path, session_id: str) -> Session:
        state = tmp_path / "state" / session_id
        return Session.embedded(
            config, workspace, session_id=session_id, state_dir=state, builder=builder
        )

    settings = GatewaySettings(workspace=tmp_path, keepalive_s=0.5, call_window_bytes=WINDOW)
    app = create_app(settings, factory=make)
    return ThreadedServer(app).start(), app.state.gateway


def test_an_output_flood_leaves_at_most_the_window_per_call(tmp_path: Path) -> None:
    server, gw = _gateway(tmp_path)
    try:
        with httpx.Client(base_url=server.url, timeout=60) as c:
            sid = c.post("/v1/sessions", json={}).json()["session_id"]
            calls = 8
            for n in range(calls):
                body = {"name": "flood", "arguments": {}, "call_id": f"f{n}"}
                reply = c.post(f"/v1/sessions/{sid}/calls", json=body)
                assert reply.status_code == 200 and reply.json()["is_error"] is False
            logs: list[CallLog] = [gw.calls.logs.get(f"f{n}") for n in range(calls)]  # type: ignore[attr-defined]
            # Each log holds at most its window (plus the newest event), far below 3 MB.
            assert all(0 < log.held <= WINDOW + 2 * CHUNK for log in logs)
            assert sum(log.held for log in logs) <= calls * (WINDOW + 2 * CHUNK)
            assert all(log.trimmed >= FLOOD - WINDOW - 2 * CHUNK for log in logs)
            # A client replaying from the start reads the marker first, then the newest
            # progress in order, then the result.
            text = c.get(f"/v1/sessions/{sid}/calls/f0/events").text
            events = sse_events(text)
            first = events[0]["data"]
            assert first["subkind"] == TRIMMED and first["payload"]["by"] == "gateway"
            assert "bytes of earlier output trimmed" in first["payload"]["text"]
            seqs = [e["id"] for e in events]
            assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
            assert events[-1]["event"] == "result"
            # Resuming after the marker reads what follows it, nothing repeated.
            after = c.get(
                f"/v1/sessions/{sid}/calls/f0/events", headers={"Last-Event-ID": str(seqs[0])}
            ).text
            assert [e["id"] for e in sse_events(after)] == seqs[1:]
    finally:
        server.stop()


def test_a_result_larger_than_the_window_is_cut_with_a_note(tmp_path: Path) -> None:
    server, gw = _gateway(tmp_path)
    try:
        with httpx.Client(base_url=server.url, timeout=60) as c:
            sid = c.post("/v1/sessions", json={}).json()["session_id"]
            body = {"name": "flood", "arguments": {"result_bytes": FLOOD}, "call_id": "big"}
            result = c.post(f"/v1/sessions/{sid}/calls", json=body).json()
            assert result["is_error"] is False
            assert len(result["prompt_text"]) < WINDOW
            assert "cut by the gateway" in result["prompt_text"]
            assert "full output" in result["prompt_text"]
            log = gw.calls.logs.get("big")  # type: ignore[attr-defined]
            assert isinstance(log.events[-1].item, CallResult) and log.held <= WINDOW + 2 * CHUNK
    finally:
        server.stop()
