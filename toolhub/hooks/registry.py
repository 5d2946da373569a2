"""Which hooks exist in this process, and which run for a session.

A hook is found by name: the shipped ones (``secrets``), the operator's Python hooks (entry
points of the ``toolhub.hooks`` group, installed on the fleet's hosts), or a webhook the
operator policy lists. For a session, the operator policy's ``always`` hooks run first, then
the extras the session's config names (``hooks:``), each of which admission has checked is
one the policy lets tenants enable; a worker checks them again against its own policy and runs
only those. A name nothing answers to is a ``ConfigError`` (category ``hooks``): a fleet must
not run without a hook its operator meant it to run.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from toolhub.core import ConfigError, ConfigViolation
from toolhub.tenancy.hook_policy import SECRETS_HOOK, HookPolicy

from .bounded import BoundHook
from .secrets import SecretsRedaction
from .webhook import Webhook

logger = logging.getLogger("toolhub.hooks")

#: The entry-point group of the operator's Python hooks.
HOOK_GROUP = "toolhub.hooks"


@functools.cache
def _secrets_hook(secret_env: tuple[str, ...]) -> SecretsRedaction:
    return SecretsRedaction(secret_env)


_BUILTINS: dict[str, Callable[[HookPolicy], object]] = {
    SECRETS_HOOK: lambda policy: _secrets_hook(tuple(policy.secret_env))
}


@functools.cache
def _installed() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=HOOK_GROUP)}


@functools.cache
def _entry_point_hook(name: str) -> object:
    loaded = _installed()[name].load()
    return loaded() if isinstance(loaded, type) else loaded


@functools.cache
def _webhook(name: str, grant_json: str) -> Webhook:
    from toolhub.tenancy.hook_policy import WebhookGrant

    return Webhook(name, WebhookGrant.model_validate_json(grant_json))


def installed_hooks() -> list[str]:
    """The names of the shipped and entry-point hooks of this process."""
    return sorted({*_BUILTINS, *_installed()})


def resolve(name: str, policy: HookPolicy) -> BoundHook:
    """The hook ``name`` as it runs under ``policy``; ``ConfigError`` when nothing is called
    that, or its entry point fails to load."""
    grant = policy.grant(name)
    inline = False
    hook: object
    if name in policy.webhooks:
        webhook = policy.webhooks[name]
        hook = _webhook(name, webhook.model_dump_json())
        stages = set(webhook.stages)
    elif name in _BUILTINS:
        hook, inline, stages = _BUILTINS[name](policy), True, {"before", "after"}
    elif name in _installed():
        try:
            hook = _entry_point_hook(name)
        except Exception as exc:
            raise _error(
                name, f"its entry point failed to load: {type(exc).__name__}: {exc}"
            ) from None
        stages = {"before", "after"}
    else:
        raise _error(name, "no hook of this name is installed or listed as a webhook")
    before = getattr(hook, "before", None) if "before" in stages else None
    after = getattr(hook, "after", None) if "after" in stages else None
    if before is None and after is None:
        raise _error(name, "it has neither a `before` nor an `after` method")
    return BoundHook(name, grant, before, after, inline)


def resolve_all(names: list[str], policy: HookPolicy) -> list[BoundHook]:
    """Each named hook once, in order; ``ConfigError`` listing every one that does not
    resolve."""
    hooks, problems = [], []
    for name in dict.fromkeys(names):
        try:
            hooks.append(resolve(name, policy))
        except ConfigError as err:
            problems.extend(err.violations)
    if problems:
        raise ConfigError(problems)
    return hooks


def _error(name: str, why: str) -> ConfigError:
    return ConfigError(
        [ConfigViolation(name, f"hook {name!r}: {why}", category="hooks", actual=name)]
    )
