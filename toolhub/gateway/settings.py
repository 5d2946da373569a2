"""Gateway settings, from the environment (secrets only ever come from there)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from toolhub.http_guard import DEFAULT_MAX_BODY


@dataclass(frozen=True)
class GatewaySettings:
    """What a gateway instance serves and how it guards itself.

    ``workspace`` is the root every session's workspace must stay inside; ``config`` is the
    tool-set config a session gets when it does not send one; ``redis_url`` switches sessions
    from embedded to distributed."""

    workspace: Path
    config: str | None = None
    redis_url: str | None = None
    api_token: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY
    max_sessions: int = 1000
    keepalive_s: float = 15.0

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
        )

    @property
    def distributed(self) -> bool:
        return self.redis_url is not None


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
