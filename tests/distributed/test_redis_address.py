"""``parse_redis_url``: every spelling of a Redis address toolhub takes, and a typed error that
names the expected forms for anything else (a hostile or mistyped URL never reaches redis-py's
"must specify one of the following schemes" ``ValueError``)."""

from __future__ import annotations

import pytest

from toolhub.distributed.celery_app import celery_config
from toolhub.distributed.redis_address import RedisUrlError, parse_redis_url
from toolhub.distributed.settings import Settings
from toolhub.errors import ErrorCode, redact_url


@pytest.mark.parametrize(
    "url", ["redis://:pw@h:6379/2", "rediss://h:6380/0?ssl_cert_reqs=required", "unix:///r.sock"]
)
def test_a_direct_url_is_used_as_written(url: str) -> None:
    address = parse_redis_url(url)
    assert not address.is_sentinel
    assert address.primary_url() == url
    assert address.broker() == (url, {})


def test_a_sentinel_url_names_hosts_service_database_and_both_passwords() -> None:
    address = parse_redis_url(
        "redis+sentinel://:pw@10.0.0.1:26379,10.0.0.2,[::1]:26380/mymaster/3"
        "?sentinel_password=sp&ssl=true&ssl_ca_certs=/ca.pem"
    )
    assert address.sentinels == (("10.0.0.1", 26379), ("10.0.0.2", 26379), ("::1", 26380))
    assert (address.service, address.db, address.password) == ("mymaster", 3, "pw")
    assert dict(address.sentinel_kwargs) == {"password": "sp"}
    assert dict(address.tls) == {"ssl": True, "ssl_ca_certs": "/ca.pem"}
    url, options = address.broker()
    assert url == (
        "sentinel://:pw@10.0.0.1:26379/3;sentinel://:pw@10.0.0.2:26379/3;"
        "sentinel://:pw@[::1]:26380/3"
    )
    assert options == {"master_name": "mymaster", "sentinel_kwargs": {"password": "sp"}}


def test_kombus_spelling_is_read_too() -> None:
    address = parse_redis_url("sentinel://a:26379;sentinel://b:26380/mm")
    assert address.sentinels == (("a", 26379), ("b", 26380))
    assert address.service == "mm"


def test_the_celery_broker_of_a_sentinel_fleet_is_kombus_sentinel_transport() -> None:
    config = celery_config(Settings(redis_url="redis+sentinel://:pw@s1,s2/toolhub?ssl=true"))
    assert config["broker_url"].startswith("sentinel://:pw@s1:26379/0;")
    assert config["broker_transport_options"]["master_name"] == "toolhub"
    assert config["broker_use_ssl"]["ssl_cert_reqs"] is not None


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("localhost:6379", "not a Redis URL"),
        ("http://h:6379", "unknown Redis URL scheme"),
        ("redis+sentinel://h:26379", "names its service"),
        ("redis+sentinel:///svc", "at least one Sentinel"),
        ("sentinel://h:port/svc", "host:port"),
        ("sentinel://h/svc/zero", "is a number"),
        ("sentinel://h/svc?sentinel_pasword=x", "unknown Sentinel URL option"),
    ],
)
def test_a_url_toolhub_cannot_use_is_a_typed_error_naming_the_forms(url: str, says: str) -> None:
    with pytest.raises(RedisUrlError) as raised:
        parse_redis_url(url)
    assert raised.value.code == ErrorCode.REDIS_URL_INVALID
    assert says in str(raised.value)


def test_no_password_of_a_sentinel_url_reaches_a_message() -> None:
    shown = redact_url("redis+sentinel://:pw-secret@h:26379/svc?sentinel_password=sp-secret")
    assert "pw-secret" not in shown and "sp-secret" not in shown
    with pytest.raises(RedisUrlError) as raised:
        parse_redis_url("sentinel://:pw-secret@h:x/svc")
    assert "pw-secret" not in str(raised.value)


def test_a_sentinel_fleet_waits_for_a_replica_to_hold_each_claim_by_default() -> None:
    assert Settings.from_env("redis+sentinel://h/svc").claim_replicas == 1
    assert Settings.from_env("redis://h:6379/0").claim_replicas == 0
