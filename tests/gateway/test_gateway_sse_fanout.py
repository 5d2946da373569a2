"""SSE fan-out: every stream of a call is written by the step that logs each event, a slow
stream queues on its own and is dropped past its backlog, and what each client receives is
every event once, in order (``toolhub/gateway/sse.py``)."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
import uvicorn

from tests.gateway.support import session_factory, sse_events
from toolhub.core import CallResult, Progress
from toolhub.gateway import GatewaySettings, create_app, sse
from toolhub.gateway.calllog import CallLogs, LoggedEvent

pytestmark = pytest.mark.timeout(60)

IDS = re.compile(rb"^id: (\d+)$", re.MULTILINE)


def _start_count(gateway_url: str, sid: str, call_id: str, n: int, delay: float) -> None:
    with httpx.Client(base_url=gateway_url, timeout=30) as c:
        response = c.post(
            f"/v1/sessions/{sid}/calls",
            json={"name": "count", "arguments": {"n": n, "delay": delay}, "call_id": call_id},
            headers={"Accept": "text/event-stream"},
            timeout=httpx.Timeout(30, read=None),
        )
        assert response.status_code == 200


def _raw_follower(gateway_url: str, path: str, *, rcvbuf: int | None = None) -> socket.socket:
    parts = urlsplit(gateway_url)
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect((parts.hostname, parts.port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    return sock


def _read_all(sock: socket.socket) -> bytes:
    chunks = []
    while data := sock.recv(1 << 16):
        chunks.append(data)
    sock.close()
    return b"".join(chunks)


def test_many_followers_get_every_event_once_in_order(gateway_url: str, sid: str) -> None:
    caller = threading.Thread(target=_start_count, args=(gateway_url, sid, "fan", 60, 0.01))
    caller.start()
    path = f"/v1/sessions/{sid}/calls/fan/events"
    with httpx.Client(base_url=gateway_url, timeout=30) as c:
        while c.get(f"/v1/sessions/{sid}/calls/fan").status_code != 200:
            time.sleep(0.005)
    followers = [_raw_follower(gateway_url, path) for _ in range(40)]
    with ThreadPoolExecutor(len(followers)) as pool:
        bodies = list(pool.map(_read_all, followers))
    caller.join(30)
    for body in bodies:
        ids = [int(i) for i in IDS.findall(body)]
        assert ids == list(range(1, 62)), "each stream: every event once, in order"
        assert body.endswith(b"0\r\n\r\n"), "each response ends properly after the result"
    with httpx.Client(base_url=gateway_url, timeout=30) as c:
        late = sse_events(c.get(path, headers={"Last-Event-ID": "55"}).text)
    assert [e["id"] for e in late] == [56, 57, 58, 59, 60, 61]
    assert late[-1]["event"] == "result"


@pytest.fixture
def small_buffers_gateway(tmp_path: Path) -> Iterator[str]:
    """A gateway whose connections have a small, fixed kernel send buffer (set on the
    listening socket, inherited by each accepted one), so a client that stops reading stalls
    its stream after kilobytes rather than the megabytes loopback autotuning would take."""
    root = tmp_path / "root"
    root.mkdir()
    app = create_app(GatewaySettings(workspace=root), factory=session_factory(tmp_path))
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8192)
    listener.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", ws="none"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive()
        time.sleep(0.01)
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    server.should_exit = True
    thread.join(15)


def test_a_follower_that_stops_reading_is_dropped_and_holds_up_no_one(
    small_buffers_gateway: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that never reads fills its connection: its frames queue on their own, it is
    dropped past its backlog, the readers get everything meanwhile, and it resumes from the
    last event it received whole, with nothing lost or repeated."""
    monkeypatch.setattr(sse, "MAX_BACKLOG_BYTES", 32 * 1024)
    gateway_url = small_buffers_gateway
    with httpx.Client(base_url=gateway_url, timeout=30) as c:
        sid = c.post("/v1/sessions", json={}).json()["session_id"]
    n = 2000
    caller = threading.Thread(target=_start_count, args=(gateway_url, sid, "flood", n, 0.001))
    caller.start()
    path = f"/v1/sessions/{sid}/calls/flood/events"
    with httpx.Client(base_url=gateway_url, timeout=30) as c:
        while c.get(f"/v1/sessions/{sid}/calls/flood").status_code != 200:
            time.sleep(0.005)
    stalled = _raw_follower(gateway_url, path, rcvbuf=4096)
    readers = [_raw_follower(gateway_url, path) for _ in range(3)]
    with ThreadPoolExecutor(len(readers)) as pool:
        bodies = list(pool.map(_read_all, readers))
    caller.join(30)
    for body in bodies:
        assert [int(i) for i in IDS.findall(body)] == list(range(1, n + 2))
    # Only now does the stalled client read: what it got is a prefix, then the server closed.
    got = _read_all(stalled)
    assert not got.endswith(b"0\r\n\r\n"), "the stalled stream was cut, not completed"
    frames = got.split(b"\n\n")
    whole = [int(i) for frame in frames[:-1] for i in IDS.findall(frame)]
    assert whole == list(range(1, len(whole) + 1)) and len(whole) < n
    with httpx.Client(base_url=gateway_url, timeout=30) as c:
        rest = sse_events(c.get(path, headers={"Last-Event-ID": str(whole[-1])}).text)
    assert whole + [e["id"] for e in rest] == list(range(1, n + 2))


class _PausedSend:
    """An ASGI ``send`` whose connection stops taking bytes while ``paused`` is set."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.drained = asyncio.Event()
        self.drained.set()

    async def __call__(self, message: dict) -> None:
        await self.drained.wait()
        self.bodies.append(message["body"])


DONE = CallResult(name="t", prompt_text="done")


def _progress(n: int) -> Progress:
    return Progress.custom("n", n)


def _event(seq: int) -> LoggedEvent:
    return LoggedEvent(seq, _progress(seq))


def test_a_slow_follower_queues_in_order_and_the_others_are_written_at_once() -> None:
    async def body() -> None:
        log = CallLogs().open("c", "s")
        slow, fast = _PausedSend(), _PausedSend()
        slow_follower, fast_follower = sse.Follower(slow), sse.Follower(fast)
        log.listen(slow_follower.on_event)
        log.listen(fast_follower.on_event)
        slow.drained.clear()
        for seq in range(1, 4):
            log.append(_progress(seq))
        assert len(fast.bodies) == 3, "the fast follower was written in the appending step"
        assert slow.bodies == []
        log.append(DONE)
        assert fast_follower.ended.done() and fast_follower.ended.result() is True
        assert not slow_follower.ended.done()
        slow.drained.set()
        assert await asyncio.wait_for(slow_follower.ended, 1) is True
        # The send that waited, then everything queued meanwhile as one write.
        assert len(slow.bodies) == 2
        assert [int(i) for i in IDS.findall(b"".join(slow.bodies))] == [1, 2, 3, 4]
        assert b"".join(slow.bodies) == b"".join(fast.bodies)

    asyncio.run(body())


def test_a_backlog_past_its_limit_drops_the_follower(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sse, "MAX_BACKLOG_BYTES", 100)

    async def body() -> None:
        send = _PausedSend()
        send.drained.clear()
        follower = sse.Follower(send)
        for seq in range(1, 10):
            follower.on_event(_event(seq))
        assert follower.ended.done() and follower.ended.result() is False
        send.drained.set()
        await asyncio.sleep(0.01)
        assert send.bodies == [], "a dropped follower's pending send is abandoned"

    asyncio.run(body())


def test_listen_replays_then_hears_live_events_and_the_result_ends_it() -> None:
    async def body() -> None:
        log = CallLogs().open("c", "s")
        log.append(_progress(1))
        heard: list[int | None] = []
        stop = log.listen(lambda e: heard.append(e.seq if e else None), after=0)
        log.append(_progress(2))
        log.append(DONE)
        log_after = CallLogs().open("d", "s")
        cut: list[LoggedEvent | None] = []
        log_after.listen(cut.append)
        log_after.cut()
        stop()
        assert heard == [1, 2, 3]
        assert cut == [None], "a cut log tells its listeners, which then end"
        assert log.listen(heard.append, after=3)() is None and heard == [1, 2, 3]

    asyncio.run(body())


class _Recording:
    """An ASGI ``send`` that keeps every message it is sent."""

    def __init__(self) -> None:
        self.messages: list[dict] = []

    async def __call__(self, message: dict) -> None:
        self.messages.append(message)


def test_frames_go_to_the_server_send_and_the_start_and_end_through_the_app() -> None:
    """With the server's ``send`` in the scope, the frames in the middle of the response are
    sent with it; the start and the end go through the ``send`` the route was given, so the
    middleware sees the response begin and finish. Without it, everything goes through that
    ``send``, with the same bytes."""

    async def stream(scope: dict) -> tuple[_Recording, _Recording]:
        log = CallLogs().open("c", "s")
        log.append(_progress(1))
        log.append(DONE)
        through_app, server = _Recording(), _Recording()
        if scope:
            scope[sse.SERVER_SEND] = server

        async def receive() -> dict:
            await asyncio.Event().wait()
            return {"type": "http.disconnect"}

        await sse.EventStream(log)(scope, receive, through_app)
        return through_app, server

    through_app, server = asyncio.run(stream({"type": "http"}))
    start, end = through_app.messages
    assert start["type"] == "http.response.start" and start["status"] == 200
    assert end == {"type": "http.response.body", "body": b"", "more_body": False}
    frames = b"".join(m["body"] for m in server.messages)
    assert all(m["more_body"] for m in server.messages)
    assert [int(i) for i in IDS.findall(frames)] == [1, 2]

    alone, unused = asyncio.run(stream({}))
    assert unused.messages == []
    assert b"".join(m.get("body", b"") for m in alone.messages) == frames


def test_the_middleware_sees_an_event_stream_begin_and_end(gateway_url: str, sid: str) -> None:
    """The request metrics count an event stream under its route with its status: the
    response's start and end went through the middleware, though its frames did not."""
    _start_count(gateway_url, sid, "seen", 3, 0.0)
    path = f"/v1/sessions/{sid}/calls/seen/events"
    with httpx.Client(base_url=gateway_url, timeout=30) as c:
        events = sse_events(c.get(path).text)
        metrics = c.get("/metrics").text
    assert [e["id"] for e in events] == [1, 2, 3, 4]
    assert events[-1]["event"] == "result"
    route = 'route="/v1/sessions/{session_id}/calls/{call_id}/events",status="200"'
    assert f'toolhub_http_request_duration_seconds_count{{method="GET",{route}}} 1.0' in metrics


def test_every_gateway_middleware_lets_an_event_streams_frames_pass_it(tmp_path: Path) -> None:
    """An event stream sends its middle frames past the middleware (``sse.SERVER_SEND``): that
    is only right while each middleware is pure ASGI and leaves bodies alone. Starlette's
    ``BaseHTTPMiddleware`` (which re-sends the response's start from a task of its own, so a
    frame could reach the server before it) or a body-rewriting one (compression) would break
    event streams: this fails if one is added."""
    from starlette.middleware.base import BaseHTTPMiddleware
    from starlette.middleware.gzip import GZipMiddleware

    app = create_app(GatewaySettings(workspace=tmp_path), factory=session_factory(tmp_path))
    classes = [m.cls for m in app.user_middleware]
    assert classes, "the gateway has its middleware"
    for cls in classes:
        assert isinstance(cls, type) and not issubclass(cls, BaseHTTPMiddleware | GZipMiddleware)
