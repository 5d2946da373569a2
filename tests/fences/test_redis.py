"""The pub/sub reader's connection (``toolhub/fences/redis.py``), both paths, on a real
redis-server: the hand-written one reads in a process whose descriptors run past 1,024 (a
worker with hundreds of commands; a reconnect then gets a high-numbered socket), where
``select`` refuses to wait; both authenticate to a Redis with a password, and say so when they
cannot. Every ``rediss://`` connection toolhub makes (pub/sub reader, store client, Celery
broker) runs TLS with the URL's options: the CA it names, the client certificate it names, and
a refusal when the certificate cannot be verified."""

from __future__ import annotations

import os
import resource
import ssl
import time

import pytest
from redis import Redis, SSLConnection
from redis.exceptions import ConnectionError as RedisConnectionError

from tests.fences.conftest import TlsRedis
from toolhub.distributed.celery_app import broker_tls, make_celery
from toolhub.distributed.settings import Settings
from toolhub.distributed.store import connect as store_connect
from toolhub.fences.redis import (
    PubSubConnection,
    RedisPyConnection,
    RespConnection,
    RespError,
    connect,
)
from toolhub.stack import RedisServer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["fenced", "plain"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "plain":
        monkeypatch.setenv("TOOLHUB_PLAIN_LIBRARIES", "redis")
    else:
        monkeypatch.delenv("TOOLHUB_PLAIN_LIBRARIES", raising=False)
    return str(request.param)


def test_each_path_takes_its_connection(redis_server: RedisServer, path: str) -> None:
    conn = connect(redis_server.url)
    try:
        assert isinstance(conn, RespConnection if path == "fenced" else RedisPyConnection)
        assert _receives(conn, Redis.from_url(redis_server.url), f"path-{path}")
    finally:
        conn.close()


def test_a_high_numbered_socket_still_reads(redis_server: RedisServer) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1300:
        pytest.skip("cannot open 1,100 descriptors here")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1300), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    conn = RespConnection(redis_server.url)
    try:
        assert conn._sock.fileno() > 1024
        assert _receives(conn, Redis.from_url(redis_server.url), "resp-test")
    finally:
        conn.close()
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_it_authenticates_and_a_wrong_password_is_a_clear_error(tmp_path, path: str) -> None:
    server = RedisServer(data_dir=tmp_path / "redis", password="s3cret pass")
    server.start()
    try:
        conn = connect(server.url)
        try:
            assert _receives(conn, Redis.from_url(server.url), "auth-test")
        finally:
            conn.close()
        with pytest.raises(RespError, match=r"AUTH failed|invalid username-password"):
            connect(server.url.replace("s3cret%20pass", "wrong"))
    finally:
        server.stop()


def test_rediss_takes_redis_py_with_every_tls_option(
    tls_redis: TlsRedis, redis_server: RedisServer, path: str
) -> None:
    conn = connect(tls_redis.full_url())
    try:
        assert isinstance(conn, RedisPyConnection)
        assert _receives(conn, Redis.from_url(redis_server.url), f"tls-{path}")
    finally:
        conn.close()


@pytest.mark.parametrize("missing", ["ssl_ca_certs", "ssl_certfile"])
def test_rediss_refuses_what_the_url_options_do_not_allow(
    tls_redis: TlsRedis, path: str, missing: str
) -> None:
    """Without the URL's CA the server's certificate is not trusted; without the URL's client
    certificate the server refuses the handshake: both options reach the connection."""
    options = {
        "ssl_cert_reqs": "required",
        "ssl_ca_certs": str(tls_redis.ca),
        "ssl_certfile": str(tls_redis.cert),
        "ssl_keyfile": str(tls_redis.key),
    }
    del options[missing]
    if missing == "ssl_certfile":
        del options["ssl_keyfile"]
    with pytest.raises(RespError):
        conn = connect(tls_redis.url(**options))
        conn.send("PING")
        conn.read(2.0)


def test_the_store_client_runs_tls_with_the_url_options(tls_redis: TlsRedis) -> None:
    client = store_connect(tls_redis.full_url())
    assert client.ping()
    connection = client.connection_pool.get_connection()
    try:
        assert isinstance(connection._sock, ssl.SSLSocket)
    finally:
        client.connection_pool.release(connection)
    with pytest.raises(RedisConnectionError):
        store_connect(tls_redis.url(ssl_cert_reqs="required")).ping()


def test_the_celery_broker_runs_tls_with_the_url_options(
    tls_redis: TlsRedis, redis_server: RedisServer
) -> None:
    url = tls_redis.full_url()
    options = broker_tls(url)
    assert options is not None and options["ssl_ca_certs"] == str(tls_redis.ca)
    assert broker_tls(redis_server.url) is None
    # Without ``ssl_cert_reqs`` the broker still verifies (kombu alone would not).
    assert broker_tls(tls_redis.url())["ssl_cert_reqs"] == ssl.CERT_REQUIRED  # type: ignore[index]
    app = make_celery(Settings.from_env(url))
    plain = Redis.from_url(redis_server.url)
    plain.delete("tls.broker.test")
    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1)
        client = conn.default_channel.client
        assert client.ping()
        assert issubclass(client.connection_pool.connection_class, SSLConnection)
        assert client.connection_pool.connection_kwargs["ssl_certfile"] == str(tls_redis.cert)
    app.send_task("toolhub.noop", queue="tls.broker.test", ignore_result=True)
    assert plain.llen("tls.broker.test") == 1
    plain.delete("tls.broker.test")
    refused = make_celery(Settings.from_env(tls_redis.url(ssl_cert_reqs="required")))
    with (
        pytest.raises(Exception, match=r"certificate verify failed|SSL"),
        refused.connection_for_write() as conn,
    ):
        conn.ensure_connection(max_retries=1)


def _receives(conn: PubSubConnection, publisher: Redis, channel: str) -> bool:
    """Subscribe ``conn`` to ``channel``, publish "hello" there; whether ``conn`` read it
    within 30 s (it takes milliseconds; the rest is a busy machine's margin)."""
    conn.send("SUBSCRIBE", channel)
    assert conn.read(30.0)[0][0] in (b"subscribe", "subscribe")
    publisher.publish(channel, "hello")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        got = conn.read(0.2)
        if got:
            return got[0][2] in (b"hello", "hello")
    return False
