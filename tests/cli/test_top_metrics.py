"""The workers' metrics as ``toolhub top`` reads them: histogram quantiles, and scrapes of real
HTTP endpoints that answer Prometheus text, garbage, an error status or nothing at all."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from toolhub.cli.top_metrics import quantile, scrape, tool_figures

INF = float("inf")

METRICS = """\
# TYPE toolhub_worker_calls counter
toolhub_worker_calls_total{outcome="ok",tool="Main:bash"} 8.0
toolhub_worker_calls_total{outcome="timeout",tool="Main:bash"} 1.0
toolhub_worker_calls_total{outcome="held",tool="toolhub:background"} 2.0
# TYPE toolhub_worker_run_seconds histogram
toolhub_worker_run_seconds_bucket{le="0.1",tool="Main:bash"} 4.0
toolhub_worker_run_seconds_bucket{le="1.0",tool="Main:bash"} 8.0
toolhub_worker_run_seconds_bucket{le="+Inf",tool="Main:bash"} 9.0
toolhub_worker_run_seconds_count{tool="Main:bash"} 9.0
toolhub_worker_run_seconds_sum{tool="Main:bash"} 3.0
# TYPE toolhub_worker_identity gauge
toolhub_worker_identity{worker="host-a:4242"} 1.0
# TYPE toolhub_worker_calls_in_flight gauge
toolhub_worker_calls_in_flight 2.0
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 1.048576e+08
"""


def test_quantiles_interpolate_inside_a_bucket_and_stop_at_the_last_bound() -> None:
    buckets = [(0.1, 4.0), (1.0, 8.0), (INF, 9.0)]
    assert quantile(0.25, buckets) == pytest.approx(0.1 * 2.25 / 4)
    assert quantile(0.5, buckets) == pytest.approx(0.1 + 0.9 * 0.5 / 4)
    assert quantile(0.75, buckets) == pytest.approx(0.1 + 0.9 * 2.75 / 4)
    assert quantile(0.99, buckets) == 1.0  # past the last finite bound: that bound
    assert quantile(0.5, [(0.1, 0.0), (INF, 0.0)]) is None
    assert quantile(0.5, []) is None


@pytest.fixture
def endpoint() -> Iterator[dict[str, tuple[int, bytes]]]:
    """A real HTTP server answering each path with the (status, body) the test sets."""
    answers: dict[str, tuple[int, bytes]] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = answers.get(self.path, (404, b"no"))
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    answers["_base"] = (0, f"http://127.0.0.1:{server.server_port}".encode())
    try:
        yield answers
    finally:
        server.shutdown()
        server.server_close()


def test_a_scrape_reads_the_worker_figures_and_rates_come_from_two(
    endpoint: dict[str, tuple[int, bytes]],
) -> None:
    base = endpoint["_base"][1].decode()
    endpoint["/metrics"] = (200, METRICS.encode())
    with httpx.Client() as client:
        before = scrape(client, f"{base}/metrics", at=100.0)
        endpoint["/metrics"] = (200, METRICS.replace(" 8.0\n", " 18.0\n", 1).encode())
        now = scrape(client, f"{base}/metrics", at=110.0)
    assert now.up and now.in_flight == 2 and now.rss_bytes == 100 * 2**20
    assert now.name == "host-a:4242"
    assert now.total_calls() == 21
    bash, background = tool_figures([now], [before])
    assert (bash.tool, bash.calls, bash.errors) == ("Main:bash", 19, 1)  # a timeout is an error
    assert bash.per_second == pytest.approx(1.0)
    assert bash.p50_s == pytest.approx(0.1 + 0.9 * 0.5 / 4) and bash.p99_s == 1.0
    assert background.errors == 0, "a hand-over to the holder is no error"
    assert tool_figures([now])[0].per_second is None, "no rate from one scrape"


@pytest.mark.parametrize(
    "answer",
    [(200, b"\x00\xff not prometheus {{{"), (500, b"boom"), (200, b"metric{le=")],
)
def test_a_hostile_or_broken_endpoint_is_a_down_worker_not_a_crash(
    endpoint: dict[str, tuple[int, bytes]], answer: tuple[int, bytes]
) -> None:
    base = endpoint["_base"][1].decode()
    endpoint["/metrics"] = answer
    with httpx.Client() as client:
        sample = scrape(client, f"{base}/metrics", at=1.0)
        gone = scrape(client, "http://127.0.0.1:9/metrics", at=1.0)
    assert not sample.up and sample.error
    assert not gone.up and gone.error == "ConnectError"
    assert tool_figures([sample, gone]) == []
