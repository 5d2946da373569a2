"""One Redis address, any topology: a plain server or the primary a set of Sentinels name.

``TOOLHUB_REDIS_URL`` (and ``--redis``) takes ``redis://``, ``rediss://``, ``unix://``, or a
Sentinel URL::

    redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/service[/db][?options]

(``sentinel://`` is the same; kombu's own ``sentinel://h1:26379;sentinel://h2:26379/...`` form is
read too). The user and password are the primary's; the options are ``sentinel_password`` (and
``sentinel_username``) for the Sentinels themselves, ``ssl=true`` with redis-py's ``ssl_*``
options for TLS to the primary, and ``sentinel_ssl=true`` for TLS to the Sentinels.

Every connection toolhub makes is derived here, so each follows the current primary: the store's
client is redis-py's Sentinel-managed client (it asks the Sentinels again after a connection
error or a ``READONLY`` reply from a demoted primary); the pub/sub reader connects to
``primary_url()``, asked afresh at every reconnect; the Celery broker is kombu's Sentinel
transport. A malformed URL is a ``RedisUrlError`` whose text says what form was expected, never
redis-py's ``ValueError`` about schemes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from redis import Redis
from redis.sentinel import MasterNotFoundError, Sentinel

from toolhub.errors import ErrorCode, ToolhubError

__all__ = ["RedisAddress", "RedisUrlError", "parse_redis_url"]

DIRECT_SCHEMES = ("redis", "rediss", "unix")
SENTINEL_SCHEMES = ("redis+sentinel", "sentinel")
DEFAULT_SENTINEL_PORT = 26379
_TRUE = {"1", "true", "yes", "on"}
EXPECTED = (
    "expected redis://[:password@]host:port/db, rediss://…, unix:///path/redis.sock, or "
    "redis+sentinel://[:password@]host:26379[,host:26379…]/service[/db]"
)


class RedisUrlError(ToolhubError, ValueError):
    """A Redis URL toolhub cannot use; the text names the form it expected."""

    code = ErrorCode.REDIS_URL_INVALID


@dataclass(frozen=True, slots=True)
class RedisAddress:
    """A parsed Redis URL. ``sentinels`` is empty for a direct address."""

    url: str
    sentinels: tuple[tuple[str, int], ...] = ()
    service: str = ""
    db: int = 0
    username: str | None = None
    password: str | None = None
    #: ``ssl`` and redis-py's ``ssl_*`` options for connections to the primary.
    tls: Mapping[str, Any] = field(default_factory=dict)
    #: Keyword arguments for connections to the Sentinels (password, TLS).
    sentinel_kwargs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_sentinel(self) -> bool:
        return bool(self.sentinels)

    def client(self, **kwargs: Any) -> Redis:
        """A redis-py client with ``kwargs`` (timeouts, retry): for Sentinel, one that asks the
        Sentinels for the primary and asks again after it fails or is demoted."""
        if not self.is_sentinel:
            return Redis.from_url(self.url, **kwargs)
        client: Redis = self._sentinel(kwargs).master_for(self.service, redis_class=Redis)
        return client

    def primary_url(self, timeout: float = 2.0) -> str:
        """A direct URL of the current primary (the URL itself when direct). Raises
        ``ConnectionError`` when no Sentinel names one."""
        if not self.is_sentinel:
            return self.url
        sentinel = self._sentinel({"socket_connect_timeout": timeout, "socket_timeout": timeout})
        try:
            host, port = sentinel.discover_master(self.service)
        except MasterNotFoundError as exc:
            raise ConnectionError(f"no Sentinel names a primary for {self.service!r}") from exc
        finally:
            for node in sentinel.sentinels:
                node.close()
        scheme = "rediss" if self.tls.get("ssl") else "redis"
        auth = ""
        if self.password is not None or self.username:
            auth = f"{quote(self.username or '', safe='')}:{quote(self.password or '', safe='')}@"
        query = {k: str(v) for k, v in self.tls.items() if k != "ssl"}
        tail = f"?{urlencode(query)}" if query else ""
        return f"{scheme}://{auth}{_netloc(host, port)}/{self.db}{tail}"

    def broker(self) -> tuple[str, dict[str, Any]]:
        """Celery's ``broker_url`` and the transport options it needs: kombu's Sentinel
        transport (``sentinel://h1;sentinel://h2`` with ``master_name``) for Sentinel."""
        if not self.is_sentinel:
            return self.url, {}
        auth = ""
        if self.password is not None or self.username:
            auth = f"{quote(self.username or '', safe='')}:{quote(self.password or '', safe='')}@"
        url = ";".join(
            f"sentinel://{auth}{_netloc(host, port)}/{self.db}" for host, port in self.sentinels
        )
        options: dict[str, Any] = {"master_name": self.service}
        if self.sentinel_kwargs:
            options["sentinel_kwargs"] = dict(self.sentinel_kwargs)
        return url, options

    def _sentinel(self, kwargs: Mapping[str, Any]) -> Sentinel:
        connection = {"db": self.db, **self.tls, **kwargs}
        if self.username:
            connection["username"] = self.username
        if self.password is not None:
            connection["password"] = self.password
        timeouts = {
            k: v for k, v in kwargs.items() if k in ("socket_timeout", "socket_connect_timeout")
        }
        return Sentinel(
            list(self.sentinels),
            sentinel_kwargs={**timeouts, **self.sentinel_kwargs},
            **connection,
        )


def parse_redis_url(url: str) -> RedisAddress:
    """The address ``url`` names; ``RedisUrlError`` when it names none toolhub can use."""
    text = (url or "").strip()
    scheme, sep, _ = text.partition("://")
    scheme = scheme.lower()
    if not sep:
        raise RedisUrlError(f"{_shown(text)!r} is not a Redis URL ({EXPECTED})")
    if scheme in DIRECT_SCHEMES:
        return RedisAddress(url=text)
    if scheme not in SENTINEL_SCHEMES:
        raise RedisUrlError(f"unknown Redis URL scheme {scheme + '://'!r} ({EXPECTED})")
    return _parse_sentinel(text)


def _parse_sentinel(url: str) -> RedisAddress:
    # kombu's spelling repeats the scheme per Sentinel: one comma-separated netloc instead.
    parts = [p for p in url.split(";") if p.strip()]
    first = urlsplit(parts[0].replace("redis+sentinel://", "sentinel://", 1))
    netlocs = [first.netloc] + [urlsplit(p.strip()).netloc for p in parts[1:]]
    path, query = first.path, first.query
    if len(parts) > 1 and not path:
        last = urlsplit(parts[-1].strip())
        path, query = last.path, last.query or query
    username = unquote(first.username) if first.username else None
    password = unquote(first.password) if first.password is not None else None
    sentinels = tuple(
        _host_port(hostport)
        for netloc in netlocs
        for hostport in netloc.rpartition("@")[2].split(",")
        if hostport
    )
    options = dict(parse_qsl(query))
    segments = [s for s in path.split("/") if s]
    service = options.pop("service_name", "") or (segments[0] if segments else "")
    if not sentinels:
        raise RedisUrlError(f"a Sentinel URL names at least one Sentinel host ({EXPECTED})")
    if not service:
        raise RedisUrlError(f"a Sentinel URL names its service after the hosts ({EXPECTED})")
    db_text = segments[1] if len(segments) > 1 else options.pop("db", "0")
    if not db_text.isdigit():
        raise RedisUrlError(f"the database of a Sentinel URL is a number, not {db_text!r}")
    sentinel_kwargs: dict[str, Any] = {}
    if "sentinel_password" in options:
        sentinel_kwargs["password"] = options.pop("sentinel_password")
    if "sentinel_username" in options:
        sentinel_kwargs["username"] = options.pop("sentinel_username")
    if options.pop("sentinel_ssl", "").lower() in _TRUE:
        sentinel_kwargs["ssl"] = True
    tls: dict[str, Any] = {}
    if options.pop("ssl", "").lower() in _TRUE:
        tls["ssl"] = True
    tls.update({k: v for k, v in options.items() if k.startswith("ssl_")})
    unknown = sorted(k for k in options if not k.startswith("ssl_"))
    if unknown:
        raise RedisUrlError(f"unknown Sentinel URL option(s): {', '.join(unknown)}")
    return RedisAddress(
        url=url,
        sentinels=sentinels,
        service=service,
        db=int(db_text),
        username=username,
        password=password,
        tls=tls,
        sentinel_kwargs=sentinel_kwargs,
    )


def _host_port(text: str) -> tuple[str, int]:
    if text.startswith("["):  # [::1]:26379
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = text.partition(":")
    if not host or (port and not port.isdigit()):
        raise RedisUrlError(f"a Sentinel is host:port, not {text!r} ({EXPECTED})")
    return host, int(port) if port else DEFAULT_SENTINEL_PORT


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _shown(text: str) -> str:
    """``text`` as an error may show it: a password-looking part masked."""
    _, at, tail = text.rpartition("@")
    return f"***@{tail}" if at else text[:200]
