"""Gateway settings, from the environment (secrets only ever come from there)."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from toolhub.http_guard import (
    DEFAULT_MAX_BODY,
    UnsafeBind,
    check_bind,
    flag_env,
    is_loopback,
    loopback_hosts,
)
from toolhub.tenancy.keys import KeyFile, default_keys_file

from .window import DEFAULT_CALL_WINDOW_BYTES

__all__ = ["GatewaySettings", "UnsafeBind"]


@dataclass(frozen=True)
class GatewaySettings:
    """What a gateway instance serves and how it guards itself.

    ``workspace`` is the root every session's workspace must stay inside; ``config`` is the
    tool-set config a session gets when it does not send one; ``redis_url`` switches sessions
    from embedded to distributed. ``allowed_hosts`` are the ``Host`` names answered (``None``:
    any; ``bound_to`` fills in the loopback names for a loopback bind). ``behind_auth_proxy``
    lets a gateway listen beyond loopback without a token, because a proxy in front of it
    authenticates every request. ``access_log``: one line per request from uvicorn, off by
    default (as gunicorn has it): it costs the gateway a formatted, flushed write per tool
    call, and ``/metrics`` counts requests by route and status without it. ``keys_file``
    holds the named API keys (``toolhub keys``; ``None``: only ``api_token``); once it holds a
    key the gateway is multi-tenant, each tenant's workspaces under
    ``<workspace>/tenants/<tenant>``."""

    workspace: Path
    config: str | None = None
    redis_url: str | None = None
    api_token: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY
    max_sessions: int = 1000
    keepalive_s: float = 15.0
    allowed_hosts: frozenset[str] | None = None
    behind_auth_proxy: bool = False
    #: Forwarded external tools may target loopback and private addresses (never the cloud
    #: metadata ones): ``bound_to`` allows it on a loopback bind, ``TOOLHUB_FORWARD_PRIVATE``
    #: anywhere.
    forward_private: bool = False
    access_log: bool = False
    keys_file: Path | None = None
    call_window_bytes: int = DEFAULT_CALL_WINDOW_BYTES

    @classmethod
    def from_env(
        cls,
        *,
        workspace: str | os.PathLike[str] | None = None,
        config: str | None = None,
        redis_url: str | None = None,
    ) -> GatewaySettings:
        root = workspace or os.environ.get("TOOLHUB_WORKSPACE") or "."
        return cls(
            workspace=Path(root).expanduser().resolve(),
            config=config or os.environ.get("TOOLHUB_CONFIG") or None,
            redis_url=redis_url or os.environ.get("TOOLHUB_REDIS_URL") or None,
            api_token=os.environ.get("TOOLHUB_API_TOKEN") or None,
            max_body_bytes=_int_env("TOOLHUB_MAX_BODY_BYTES", DEFAULT_MAX_BODY),
            max_sessions=_int_env("TOOLHUB_MAX_SESSIONS", 1000),
            allowed_hosts=_hosts_env("TOOLHUB_ALLOWED_HOSTS"),
            behind_auth_proxy=flag_env("TOOLHUB_BEHIND_AUTH_PROXY"),
            forward_private=flag_env("TOOLHUB_FORWARD_PRIVATE"),
            access_log=flag_env("TOOLHUB_ACCESS_LOG"),
            keys_file=default_keys_file(),
            call_window_bytes=_int_env("TOOLHUB_CALL_WINDOW_BYTES", DEFAULT_CALL_WINDOW_BYTES),
        )

    def bound_to(self, host: str) -> GatewaySettings:
        """These settings for a server listening on ``host``: the loopback ``Host`` names when
        none are configured and ``host`` is loopback (what defeats DNS rebinding), and
        forwarded tools may target local addresses there (its clients are local). Raises
        ``UnsafeBind`` for a non-loopback ``host`` with neither a token nor an API key, unless
        the gateway is declared to be behind an authenticating proxy: anyone who reaches an
        open gateway can run commands on it."""
        keys = self.keys_file is not None and bool(KeyFile(self.keys_file).read())
        check_bind(host, token=self.api_token, behind_auth_proxy=self.behind_auth_proxy, keys=keys)
        if not is_loopback(host):
            return self
        hosts = self.allowed_hosts if self.allowed_hosts is not None else loopback_hosts(host)
        return replace(self, allowed_hosts=hosts, forward_private=True)

    @property
    def distributed(self) -> bool:
        return self.redis_url is not None


def _hosts_env(name: str) -> frozenset[str] | None:
    """Comma-separated ``Host`` names; unset: the default for the bind address; ``*``: any."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    names = frozenset(h.strip().lower() for h in raw.split(",") if h.strip())
    return None if "*" in names else names


def _int_env(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return value
