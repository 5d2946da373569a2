"""The hooks of a session, where each stage runs.

``SessionHooks`` is built once per session, at the dispatcher (``Session``) and for the
embedded executor: the operator policy's ``always`` hooks, then the config's ``hooks:``
(names, or a listed webhook's URL). ``before`` runs at the dispatcher; for a call that goes to
a worker, the dispatcher puts the session's extra hook names and the ``before`` notes in the
call's message (``message_fields``), and the worker builds the call's ``after`` stage from its
own policy (``after_for_message``): the operator's ``always`` hooks whatever the message
says, and of the extras only those its policy lets tenants enable. So neither a dispatcher
nor a forged message can turn the operator's redaction off.
"""

from __future__ import annotations

import logging
from typing import Any

from toolhub.core import CallResult, ConfigError
from toolhub.tenancy import tenant_of_session
from toolhub.tenancy.hook_policy import HookPolicy
from toolhub.tenancy.session_quotas import current_policy
from toolhub.toolset import Prepared, ToolSet

from .after import CallAfter, after_hooks
from .api import CallInfo
from .before import run_before
from .bounded import BoundHook, HookFailed
from .registry import resolve_all

logger = logging.getLogger("toolhub.hooks")

#: Message fields: the session's extra hooks, and the notes of its ``before`` hooks.
HOOKS_FIELD = "hooks"
NOTES_FIELD = "hook_notes"


class SessionHooks:
    def __init__(self, hooks: list[BoundHook], extras: list[str], session_id: str) -> None:
        self.hooks = hooks
        self.extras = extras
        self.session_id = session_id
        self.tenant = tenant_of_session(session_id)
        self.has_before = any(h.before is not None for h in hooks)
        self.after_hooks = after_hooks(hooks)

    @classmethod
    def of(
        cls, asked: list[str], session_id: str, policy: HookPolicy | None = None
    ) -> SessionHooks:
        """The hooks of a session whose config names ``asked``; ``ConfigError`` when one of
        them, or of the policy's ``always``, is nowhere to be found."""
        policy = policy if policy is not None else current_policy().hooks
        extras = [policy.tenant_name(name) or name for name in asked]
        return cls(resolve_all([*policy.always, *extras], policy), extras, session_id)

    def info(self, prepared: Prepared) -> CallInfo:
        return CallInfo(
            prepared.ctx.call_id,
            self.session_id,
            self.tenant,
            prepared.entry.fq_id,
            prepared.name,
        )

    def before(self, toolset: ToolSet, prepared: Prepared) -> Prepared | CallResult:
        """The call as the ``before`` hooks let it run, or its refusal."""
        if not self.has_before:
            return prepared
        return run_before(self.hooks, toolset, prepared, self.info(prepared))

    def after(self, prepared: Prepared) -> CallAfter:
        """The ``after`` stage of a call run in this process."""
        return CallAfter(self.after_hooks, self.info(prepared), prepared.notes)

    def message_fields(self, prepared: Prepared) -> dict[str, Any]:
        """What a call's message carries for the worker's ``after`` stage (nothing when there
        is nothing to carry)."""
        fields: dict[str, Any] = {}
        if self.extras:
            fields[HOOKS_FIELD] = list(self.extras)
        if prepared.notes:
            fields[NOTES_FIELD] = list(prepared.notes)
        return fields


def after_for_message(message: dict[str, Any]) -> CallAfter:
    """A worker's ``after`` stage for the call of ``message``, by this worker's policy. Never
    raises: a hook this worker cannot find withholds the call's output (``hook_failed``)."""
    sid = str(message.get("session_id", ""))
    info = CallInfo(
        str(message.get("call_id", "")),
        sid,
        tenant_of_session(sid),
        str(message.get("tool", "")),
        str(message.get("name", "")),
    )
    notes = [str(n) for n in message.get(NOTES_FIELD) or []]
    try:
        policy = current_policy().hooks
        asked = [str(n) for n in message.get(HOOKS_FIELD) or []]
        extras = [n for n in asked if n in policy.tenant_hooks]
        for name in set(asked) - set(extras):
            logger.warning(
                "call %s: hook %r is not one tenants may enable; not run", info.call_id, name
            )
        hooks = _resolved(policy, (*policy.always, *extras))
    except ConfigError as err:
        logger.error("call %s: cannot set up its hooks: %s", info.call_id, err)
        reason = "; ".join(v.message for v in err.violations)
        return CallAfter([], info, notes, failed=HookFailed("(setup)", reason))
    return CallAfter(after_hooks(hooks), info, notes)


#: The hooks a worker resolved, by policy and names: every call of a session asks for the same
#: ones, and resolving builds each hook's grant anew (a resolved hook holds no call's state).
#: Keyed by the policy object's identity, which ``current_policy`` keeps while its file is
#: unchanged; a few entries (policies seen, and the sessions' extras under each).
_RESOLVED: dict[tuple[int, tuple[str, ...]], tuple[HookPolicy, list[BoundHook]]] = {}
_RESOLVED_MAX = 64


def _resolved(policy: HookPolicy, names: tuple[str, ...]) -> list[BoundHook]:
    """``resolve_all(names, policy)``, once per policy and names (a ``ConfigError`` is not
    kept: the next call says it again)."""
    key = (id(policy), names)
    found = _RESOLVED.get(key)
    if found is not None and found[0] is policy:
        return found[1]
    hooks = resolve_all(list(names), policy)
    if len(_RESOLVED) >= _RESOLVED_MAX:
        _RESOLVED.clear()
    _RESOLVED[key] = (policy, hooks)
    return hooks
