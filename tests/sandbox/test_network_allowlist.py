"""Network through an allowlist (issue 12): a sandboxed command reaches the hosts the config
names through the egress proxy, and nothing else — not another host through the proxy, not
the host's loopback directly — under bwrap and under Landlock alike. Real sandbox, real
proxy, real curl."""

from __future__ import annotations

import http.server
import shutil
import threading
from collections.abc import Iterator

import pytest

from toolhub.sandbox import Mechanism, SandboxMode, SandboxSettings, probe
from toolhub.sandbox.landlock_syscalls import abi_version
from toolhub.sandbox.proxy import Allowlist

from .conftest import Layout, text

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")

MECHANISMS = [
    pytest.param(
        Mechanism.BWRAP,
        marks=pytest.mark.skipif(not probe().available, reason="bwrap cannot sandbox here"),
    ),
    pytest.param(
        Mechanism.LANDLOCK,
        marks=pytest.mark.skipif(abi_version() < 4, reason="Landlock without TCP rules"),
    ),
]


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"hello through the proxy\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_an_allowed_host_is_reached_and_nothing_else(
    layout: Layout, web: int, mechanism: Mechanism
) -> None:
    policy = layout.policy(
        SandboxMode.WORKSPACE_WRITE, mechanism=mechanism, allowed_hosts=("127.0.0.1",)
    )
    res = layout.runner(policy).run(
        f"curl -sS --max-time 10 http://127.0.0.1:{web}/; "
        f"curl -sS --max-time 5 --noproxy '*' http://127.0.0.1:{web}/ || echo DIRECT-REFUSED; "
        "echo done",
        log_name="allow",
        timeout_s=60,
    )
    out = text(res)
    assert "hello through the proxy" in out, out
    assert "DIRECT-REFUSED" in out, out  # around the proxy: no network at all
    assert out.endswith("done\n")


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_host_not_in_the_allowlist_is_refused_by_the_proxy(
    layout: Layout, web: int, mechanism: Mechanism
) -> None:
    policy = layout.policy(
        SandboxMode.WORKSPACE_WRITE, mechanism=mechanism, allowed_hosts=("pypi.org",)
    )
    res = layout.runner(policy).run(
        f"curl -sS --max-time 10 http://127.0.0.1:{web}/; echo; "
        f"curl -sS --max-time 10 https://127.0.0.1:{web}/ || echo TUNNEL-REFUSED",
        log_name="deny",
        timeout_s=60,
    )
    out = text(res)
    assert "not in the sandbox's network allowlist" in out, out
    assert "hello through the proxy" not in out
    assert "TUNNEL-REFUSED" in out and "403" in out, out


def test_settings_turn_a_list_into_an_allowlist(layout: Layout) -> None:
    policy = SandboxSettings(network=["pypi.org", "*.pythonhosted.org"]).policy(
        layout.ws, tmp_dir=layout.tmp
    )
    assert not policy.network and policy.egress
    assert policy.allowed_hosts == ("pypi.org", "*.pythonhosted.org")
    assert SandboxSettings(network=True).policy(layout.ws, tmp_dir=None).network
    assert not SandboxSettings().policy(layout.ws, tmp_dir=None).egress


def test_allowlist_matching() -> None:
    allow = Allowlist.of(["PyPI.org", "*.pythonhosted.org", "10.0.0.7"])
    assert allow.allows("pypi.org") and allow.allows("files.pythonhosted.org")
    assert not allow.allows("pythonhosted.org")  # the wildcard means subdomains
    assert not allow.allows("evilpypi.org") and not allow.allows("pypi.org.evil.com")
    assert allow.explicit("10.0.0.7") and not allow.explicit("pypi.org")
