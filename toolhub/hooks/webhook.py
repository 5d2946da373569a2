"""A hook served over HTTP: each stage POSTs a JSON payload to an operator-listed URL.

Only URLs in the operator policy's ``hooks.webhooks`` are ever called (a tenant may name one
of them, never its own), redirects are not followed (a redirect would reach a host nobody
listed), and each request is bounded by the hook's ``timeout_seconds``. Payloads and answers
(docs/hooks.md, "Webhooks"):

* ``before``: ``{"stage": "before", "hook", "call": {...}, "arguments": {...}}`` → ``{"action":
  "allow" | "deny" | "rewrite", "reason"?, "arguments"?, "note"?}``;
* ``after``: ``{"stage": "after", "hook", "call", "kind", "text", "output", "error",
  "content"}`` → an object whose keys among ``text``, ``output``, ``error``, ``content``
  replace the item's (``{}``: unchanged).

A status other than 2xx, a body that is not such an object, or no answer in time is a failed
hook (``HookFailed``), handled as the hook's ``on_error`` says.
"""

from __future__ import annotations

from typing import Any

import httpx

from toolhub.tenancy.hook_policy import WebhookGrant

from .api import AfterItem, BeforeCall, Decision
from .bounded import HookFailed

_ACTIONS = ("allow", "deny", "rewrite")
_AFTER_KEYS = ("text", "output", "error", "content")


class Webhook:
    """The webhook ``name`` of the policy, as a hook object of the stages it serves."""

    def __init__(self, name: str, grant: WebhookGrant) -> None:
        self.name = name
        self.grant = grant
        self._client = httpx.Client(
            timeout=grant.timeout_seconds, follow_redirects=False, headers=grant.headers
        )

    def before(self, call: BeforeCall) -> Decision:
        answer = self._post(
            {
                "stage": "before",
                "hook": self.name,
                "call": call.call.to_dict(),
                "arguments": call.arguments,
            }
        )
        action = answer.get("action", "allow")
        arguments = answer.get("arguments")
        if action not in _ACTIONS or (action == "rewrite" and not isinstance(arguments, dict)):
            raise HookFailed(self.name, f"answered an unknown action {str(action)[:40]!r}")
        reason, note = answer.get("reason"), answer.get("note")
        return Decision(
            action,
            reason=str(reason) if reason is not None else None,
            arguments=arguments if action == "rewrite" else None,
            note=str(note) if note is not None else None,
        )

    def after(self, item: AfterItem) -> AfterItem:
        answer = self._post(
            {
                "stage": "after",
                "hook": self.name,
                "call": item.call.to_dict(),
                "kind": item.kind,
                "text": item.text,
                "output": item.output,
                "error": item.error,
                "content": item.content,
            }
        )
        for key in _AFTER_KEYS:
            if key in answer:
                setattr(item, key, answer[key])
        return item

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self._client.post(self.grant.url, json=payload)
        except httpx.TimeoutException:
            # Said as the hook's own bound says it: whichever of the two fires first.
            timeout = self.grant.timeout_seconds
            raise HookFailed(self.name, f"no answer within {timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise HookFailed(self.name, f"{type(exc).__name__} calling the webhook") from None
        if not response.is_success:
            raise HookFailed(self.name, f"the webhook answered HTTP {response.status_code}")
        try:
            answer = response.json()
        except ValueError:
            raise HookFailed(self.name, "the webhook's answer is not JSON") from None
        if not isinstance(answer, dict):
            raise HookFailed(self.name, "the webhook's answer is not a JSON object")
        return answer
