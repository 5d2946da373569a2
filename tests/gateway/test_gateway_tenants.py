"""Two tenants on one real gateway (uvicorn, embedded sessions, named API keys): each reaches
only its own sessions, calls, events, answers and external tools, whatever id it names; both
may choose the same session id and get separate sessions in separate workspaces; a session
with no workspace lands in its tenant's root; duplicate ``Authorization``/``Host`` headers and
revoked keys are refused; ``/v1/whoami`` says who the caller is."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.sample_tools import Count, Echo
from toolhub import Session
from toolhub.gateway import GatewaySettings, ThreadedServer, create_app
from toolhub.gateway.client import GatewayClient
from toolhub.tenancy.keys import KeyFile
from toolhub.tools import CATALOG
from toolhub.toolset import ConfigSource, ToolSetBuilder

pytestmark = pytest.mark.timeout(120)

CONFIG = {
    "tools": [
        {"id": "Main:echo"},
        {"id": "Main:count"},
        {"id": "Main:write_file"},
        {"id": "Main:read_file"},
    ]
}
DEFAULT_TOKEN = "tok-default"


@dataclass
class Fleet:
    url: str
    root: Path
    keys: KeyFile
    key: dict[str, str]

    def client(self, who: str) -> httpx.Client:
        token = DEFAULT_TOKEN if who == "default" else self.key[who]
        return httpx.Client(
            base_url=self.url, timeout=30, headers={"Authorization": f"Bearer {token}"}
        )


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    """A gateway with the shared token and keys for tenants acme (two keys) and globex."""
    root = tmp_path / "root"
    root.mkdir()
    keys = KeyFile(tmp_path / "keys.json")
    made = {
        "acme": keys.create("acme", "agent-1")[1],
        "acme-2": keys.create("acme", "agent-2")[1],
        "globex": keys.create("globex")[1],
    }
    builder = ToolSetBuilder(CATALOG, plugins=False)
    builder.register(Echo, Count)

    def factory(config: ConfigSource, workspace: Path, session_id: str) -> Session:
        state = tmp_path / "state" / session_id
        return Session.embedded(
            config, workspace, session_id=session_id, state_dir=state, builder=builder
        )

    settings = GatewaySettings(
        workspace=root,
        config=None,
        api_token=DEFAULT_TOKEN,
        keepalive_s=0.5,
        keys_file=keys.path,
        forward_private=True,
    )
    with ThreadedServer(create_app(settings, factory=factory)) as server:
        yield Fleet(server.url, root, keys, made)


def create(client: httpx.Client, **body: object) -> httpx.Response:
    return client.post("/v1/sessions", json={"config": CONFIG, **body})


def test_another_tenant_reaches_nothing_of_a_session_even_by_its_exact_id(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    with fleet.client("acme") as a, fleet.client("globex") as b, fleet.client("default") as d:
        made = create(a, session_id="shared-id")
        assert made.status_code == 201 and made.json()["session_id"] == "shared-id"
        done = a.post(
            "/v1/sessions/shared-id/calls",
            json={"name": "echo", "arguments": {"text": "hi"}, "call_id": "a-call"},
        )
        assert done.status_code == 200 and done.json()["output"]["value"]["echoed"] == "hi"
        forward = {"forward": {"url": "http://127.0.0.1:9/x"}}
        assert a.put("/v1/sessions/shared-id/external-tools/ext__t", json=forward).is_success

        caplog.set_level(logging.WARNING, logger="toolhub")
        # The client's id, and the id toolhub stores it under: neither is the caller's.
        for other in (b, d):
            for sid in ("shared-id", "acme~shared-id"):
                base = f"/v1/sessions/{sid}"
                call = {"name": "echo", "arguments": {"text": "x"}}
                sse = {"Accept": "text/event-stream"}
                answers = {"answers": ["yes"]}
                refused = [
                    other.get(f"{base}/tools"),
                    other.post(f"{base}/calls", json=call),  # the plain-call shortcut
                    other.post(f"{base}/calls", json=call, headers=sse),
                    other.get(f"{base}/calls/a-call"),
                    other.get(f"{base}/calls/a-call/events"),
                    other.delete(f"{base}/calls/a-call"),
                    other.post(f"{base}/answers/a-call", json=answers),
                    other.put(f"{base}/external-tools/ext__u", json=forward),
                    other.delete(f"{base}/external-tools/ext__t"),
                    other.delete(base),
                ]
                for answer in refused:
                    assert answer.status_code == 404, (answer.request.url, answer.text)
                    assert answer.json() == {"detail": f"unknown session {sid!r}"}
        assert "principal globex/" in caplog.text and "no session 'shared-id'" in caplog.text

        # Untouched, and the tenant's other key sees the same session.
        with fleet.client("acme-2") as a2:
            record = a2.get("/v1/sessions/shared-id/calls/a-call")
            assert record.status_code == 200
            assert record.json()["session_id"] == "shared-id", "the client's id, not the stored"
            assert a2.post("/v1/sessions/shared-id/answers/a-call", json=answers).status_code == 409
        names = {t["name"] for t in a.get("/v1/sessions/shared-id/tools?format=mcp").json()}
        assert "ext__t" in names and "ext__u" not in names
        assert a.delete("/v1/sessions/shared-id").status_code == 204


def test_the_same_client_id_is_a_separate_session_per_tenant(fleet: Fleet) -> None:
    """No fixation: globex creating ``work`` first does not touch acme's ``work``."""
    with fleet.client("acme") as a, fleet.client("globex") as b:
        first = create(b, session_id="work", workspace="proj")
        second = create(a, session_id="work", workspace="proj")
        assert first.status_code == second.status_code == 201, (first.text, second.text)
        assert first.json()["created"] and second.json()["created"]
        for client, text in ((a, "from acme"), (b, "from globex")):
            wrote = client.post(
                "/v1/sessions/work/calls",
                json={"name": "write_file", "arguments": {"path": "note.txt", "content": text}},
            )
            assert wrote.json()["error"] is None, wrote.text
        for client, text in ((a, "from acme"), (b, "from globex")):
            read = client.post(
                "/v1/sessions/work/calls",
                json={"name": "read_file", "arguments": {"path": "note.txt"}},
            )
            assert text in read.json()["prompt_text"], read.text
        tenants = fleet.root / "tenants"
        assert (tenants / "acme" / "proj" / "note.txt").read_text() == "from acme"
        assert (tenants / "globex" / "proj" / "note.txt").read_text() == "from globex"
        again = create(b, session_id="work")
        assert again.status_code == 200 and not again.json()["created"], "its own, again"


def test_a_session_without_a_workspace_lands_in_its_tenants_root(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    acme_root = fleet.root / "tenants" / "acme"
    with fleet.client("acme") as a, fleet.client("default") as d:
        for i, workspace in enumerate([None, ".", "x/..", str(acme_root)]):
            made = create(a, session_id=f"w{i}", workspace=workspace)
            assert made.status_code == 201, made.text
            wrote = a.post(
                f"/v1/sessions/w{i}/calls",
                json={"name": "write_file", "arguments": {"path": f"w{i}.txt", "content": "x"}},
            )
            assert wrote.json()["error"] is None, wrote.text
            assert (acme_root / f"w{i}.txt").is_file(), workspace
        caplog.set_level(logging.WARNING, logger="toolhub")
        for workspace in (str(fleet.root), "..", "../globex", str(fleet.root / "tenants")):
            refused = create(a, workspace=workspace)
            assert refused.status_code == 400, workspace
            detail = refused.json()["detail"]
            assert "outside the tenant's workspace root" in detail and "\n" not in detail
        assert "principal acme/" in caplog.text and "session refused" in caplog.text
        assert create(d).status_code == 201  # the default tenant has a root of its own too
    assert (fleet.root / "tenants" / "default").is_dir()
    assert sorted(p.name for p in fleet.root.iterdir()) == ["tenants"], "nothing in the root"


def test_a_tenant_root_planted_as_a_link_is_refused(fleet: Fleet, tmp_path: Path) -> None:
    """A link left at ``tenants/<name>`` (by a session that had the whole root while the
    gateway was one-tenant) is no tenant root."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (fleet.root / "tenants").mkdir(exist_ok=True)
    (fleet.root / "tenants" / "initech").symlink_to(elsewhere)
    _, key = fleet.keys.create("initech")
    with httpx.Client(base_url=fleet.url, headers={"Authorization": f"Bearer {key}"}) as c:
        deadline = time.monotonic() + 15
        while (refused := create(c)).status_code == 401:  # the new key, within a second
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert refused.status_code == 400
        assert refused.json() == {"detail": "tenant initech's root is not a directory of its own"}
    assert list(elsewhere.iterdir()) == []


def raw_get(url: str, path: str, headers: list[tuple[str, str]]) -> tuple[int, bytes]:
    """A GET sent as written: HTTP clients refuse to send two ``Host`` headers."""
    parsed = httpx.URL(url)
    lines = [f"GET {path} HTTP/1.1", *(f"{k}: {v}" for k, v in headers), "Connection: close"]
    with socket.create_connection((parsed.host, parsed.port), timeout=30) as conn:
        conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_duplicate_authorization_or_host_headers_are_refused(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="toolhub")
    key = f"Bearer {fleet.key['acme']}"
    host = httpx.URL(fleet.url).netloc.decode()
    for name, headers in (
        ("Authorization", [("Host", host), ("Authorization", key), ("Authorization", key)]),
        ("Authorization", [("Host", host), ("Authorization", key), ("authorization", "Bearer x")]),
        ("Host", [("Host", host), ("Host", "elsewhere.example"), ("Authorization", key)]),
    ):
        status, body = raw_get(fleet.url, "/v1/whoami", headers)
        assert status == 400, body
        assert json.loads(body) == {"detail": f"duplicate {name} header"}
    status, body = raw_get(fleet.url, "/v1/whoami", [("Host", host), ("Authorization", key)])
    assert status == 200 and json.loads(body)["tenant"] == "acme"
    assert caplog.text.count("400 duplicate Authorization header") == 2
    assert caplog.text.count("400 duplicate Host header") == 1
    assert fleet.key["acme"] not in caplog.text, "no credential in the log"


def test_a_revoked_key_is_refused_and_the_tenants_other_key_goes_on(fleet: Fleet) -> None:
    with fleet.client("acme") as a, fleet.client("acme-2") as a2:
        assert create(a, session_id="keep").status_code == 201
        leaked = a.get("/v1/whoami").json()["key_id"]
        fleet.keys.revoke(leaked)
        deadline = time.monotonic() + 15
        while (refused := a.get("/v1/sessions/keep/tools")).status_code != 401:
            assert time.monotonic() < deadline, "the revoked key is still accepted"
            time.sleep(0.2)
        assert refused.json() == {"detail": "revoked API key"}
        assert refused.headers["www-authenticate"] == "Bearer"
        assert a2.get("/v1/sessions/keep/tools").status_code == 200


def test_whoami_names_the_tenant_and_key(fleet: Fleet) -> None:
    ids = {e.tenant + "/" + e.name: e.key_id for e in fleet.keys.read().values()}
    with fleet.client("acme") as a, fleet.client("globex") as b, fleet.client("default") as d:
        assert a.get("/v1/whoami").json() == {"tenant": "acme", "key_id": ids["acme/agent-1"]}
        assert b.get("/v1/whoami").json() == {"tenant": "globex", "key_id": ids["globex/"]}
        assert d.get("/v1/whoami").json() == {"tenant": "default", "key_id": "token-1"}
    assert httpx.get(f"{fleet.url}/v1/whoami").status_code == 401
    with GatewayClient(fleet.url, token=fleet.key["acme-2"]) as client:
        assert client.whoami() == {"tenant": "acme", "key_id": ids["acme/agent-2"]}


def test_without_keys_the_gateway_is_one_tenant_as_before(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    builder = ToolSetBuilder(CATALOG, plugins=False)

    def factory(config: ConfigSource, workspace: Path, session_id: str) -> Session:
        state = tmp_path / "state" / session_id
        return Session.embedded(
            config, workspace, session_id=session_id, state_dir=state, builder=builder
        )

    settings = GatewaySettings(workspace=root, keys_file=tmp_path / "none.json")
    with (
        ThreadedServer(create_app(settings, factory=factory)) as server,
        httpx.Client(base_url=server.url, timeout=30) as c,
    ):
        assert c.get("/v1/whoami").json() == {"tenant": "default", "key_id": "anonymous"}
        config = {"tools": [{"id": "Main:write_file"}]}
        made = c.post("/v1/sessions", json={"config": config, "session_id": "plain"})
        assert made.json()["session_id"] == "plain"
        wrote = c.post(
            "/v1/sessions/plain/calls",
            json={"name": "write_file", "arguments": {"path": "a.txt", "content": "x"}},
        )
        assert wrote.json()["error"] is None, wrote.text
    assert (root / "a.txt").is_file() and not (root / "tenants").exists()


def test_a_config_beyond_the_operator_policy_is_refused_with_every_violation(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    """Escapes 1, 2 and 6 through the gateway: a tenant's config that turns the sandbox off,
    reads the gateway's own files and starts a command on the gateway is refused whole (422,
    one violation each, logged with the principal); nothing is created, and the tenant's
    legitimate sessions go on. ``GET /v1/policy`` says what it may ask for."""
    hostile = {
        "tools": [
            {"id": "Main:bash", "params": {"sandbox": {"mode": "full", "read": [str(fleet.root)]}}}
        ],
        "mcp_servers": {"exfil": {"command": ["sh", "-c", "env"]}},
    }
    with caplog.at_level(logging.WARNING), fleet.client("acme") as a:
        refused = a.post("/v1/sessions", json={"config": hostile, "session_id": "evil"})
        assert refused.status_code == 422, refused.text
        violations = refused.json()["detail"]
        said = " | ".join(f"{v.get('field_path')}: {v['message']}" for v in violations)
        assert "sandbox.mode" in said and "sandbox.read" in said and "mcp_servers" in said, said
        assert a.get("/v1/sessions/evil/tools").status_code == 404
        assert create(a, session_id="fine").status_code == 201
        params = {"enabled_background": False, "sandbox": {"mode": "read_only"}}
        narrowed = {"tools": [{"id": "Main:bash", "params": params}]}
        made = a.post("/v1/sessions", json={"config": narrowed})
        assert made.status_code == 201, made.text
        limits = a.get("/v1/policy")
        assert limits.status_code == 200 and "Main:bash" in json.dumps(limits.json())
    assert any("acme/" in r.getMessage() and "refused" in r.getMessage() for r in caplog.records)
