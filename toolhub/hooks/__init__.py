"""Hooks around each call: ``before`` (deny, rewrite the arguments, add a note) at the
dispatcher, ``after`` (redact or rewrite the output) before anything is stored or streamed.

Hooks are the operator's: Python entry points of the ``toolhub.hooks`` group installed on the
fleet's hosts, the shipped ``secrets`` redaction, or webhooks the operator policy lists; the
policy's ``hooks.always`` run around every call, and a tenant's config may only add ones the
policy lists for tenants (``toolhub.tenancy.hook_policy``). The API and a worked example:
docs/hooks.md.
"""

from .after import CallAfter
from .api import AfterItem, BeforeCall, CallInfo, Decision, Hook
from .bounded import HookFailed
from .chain import SessionHooks, after_for_message
from .registry import HOOK_GROUP, installed_hooks
from .secrets import SecretsRedaction

__all__ = [
    "HOOK_GROUP",
    "AfterItem",
    "BeforeCall",
    "CallAfter",
    "CallInfo",
    "Decision",
    "Hook",
    "HookFailed",
    "SecretsRedaction",
    "SessionHooks",
    "after_for_message",
    "installed_hooks",
]
