"""The operator's word on hooks: which run on every call, which a tenant may add, the webhooks
toolhub may call, and the environment variables whose values the secrets hook masks.

A hook sees every argument and every output of the calls it runs around, and a webhook sends
them to another host, so hooks are the operator's: installed as Python entry points on the
fleet's hosts, or listed here as webhooks. A tenant's config may only name extra hooks among
those this policy lets tenants enable (``tenant_hooks``); a name or URL it does not list is a
config error, never a hook toolhub loads or a host it calls. The threat: a tenant's config
that sends another tenant's outputs (or its own, past the operator's redaction) to a host of
its choosing, or that turns the operator's redaction off.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from toolhub.core import ConfigViolation

#: The shipped secrets-redaction hook's name: in ``always`` unless the operator removes it.
SECRETS_HOOK = "secrets"

OnError = Literal["fail_closed", "fail_open"]
Stage = Literal["before", "after"]


class HookGrant(BaseModel):
    """How one hook runs: its time bound and what a failure (an exception, a hang, a bad
    answer) does. ``fail_closed``: the call is refused (``before``) or its output withheld
    (``after``) with a typed ``hook_failed`` error; ``fail_open``: the hook is skipped, and
    the failure logged."""

    model_config = ConfigDict(extra="forbid")

    timeout_seconds: float = Field(5.0, gt=0, le=60, description="Longest one hook call may take.")
    on_error: OnError = Field("fail_closed", description="`fail_closed` or `fail_open`.")


class WebhookGrant(HookGrant):
    """A hook served over HTTP: toolhub POSTs each stage's JSON payload to ``url``."""

    url: str = Field(description="The `http(s)://` URL toolhub POSTs to; redirects not followed.")
    stages: list[Stage] = Field(
        default_factory=lambda: list[Stage](["before"]),
        description="Which stages the webhook serves.",
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="Sent with each request (an operator's bearer token)."
    )

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError("a webhook URL is http:// or https://")
        return url


class HookPolicy(BaseModel):
    """``hooks:`` in the operator policy."""

    model_config = ConfigDict(extra="forbid")

    always: list[str] = Field(
        default_factory=lambda: [SECRETS_HOOK],
        description="Hooks run around every call of every tenant, in order (entry-point or "
        "webhook names). Default: the secrets-redaction hook.",
    )
    tenant_hooks: list[str] = Field(
        default_factory=list,
        description="Hooks a tenant's config may add (`hooks:`), by name, or a webhook by its "
        "URL; none by default.",
    )
    webhooks: dict[str, WebhookGrant] = Field(
        default_factory=dict, description="Name → a webhook toolhub may call."
    )
    settings: dict[str, HookGrant] = Field(
        default_factory=dict,
        description="Entry-point hook name → its timeout and failure mode (default: 5 s, "
        "fail closed).",
    )
    secret_env: list[str] = Field(
        default_factory=list,
        description="Environment variables (names or globs) whose values the secrets hook "
        "masks as `${NAME}` in every output.",
    )

    def grant(self, name: str) -> HookGrant:
        """How the hook ``name`` runs."""
        return self.webhooks.get(name) or self.settings.get(name) or HookGrant()

    def tenant_name(self, asked: str) -> str | None:
        """The hook a tenant's ``hooks:`` entry names (a name, or a listed webhook's URL), when
        the policy lets tenants enable it; else None."""
        if asked in self.tenant_hooks:
            return asked
        for name, hook in self.webhooks.items():
            if hook.url == asked and name in self.tenant_hooks:
                return name
        return None


def tenant_view(policy: HookPolicy) -> dict[str, Any]:
    """What a tenant is shown of the hooks (``toolhub policy show``, ``GET /v1/policy``): the
    names that always run and what it may add (a webhook with its URL); never a webhook's
    headers, which may hold the operator's credentials."""
    return {
        "always": list(policy.always),
        "tenant_hooks": {
            name: policy.webhooks[name].url if name in policy.webhooks else "(installed)"
            for name in policy.tenant_hooks
        },
    }


def hook_violations(asked: list[str], policy: HookPolicy) -> list[ConfigViolation]:
    """A violation for each of a tenant's ``hooks:`` entries the policy does not let it add."""
    allowed = ", ".join(policy.tenant_hooks) or "none"
    return [
        ConfigViolation(
            "(global)",
            "refused by the operator policy: hooks are the operator's; a config may only add "
            "one the policy lists for tenants (by name, or a listed webhook's URL)",
            category="policy",
            field_path=f"hooks[{index}]",
            expected=allowed,
            actual=name,
        )
        for index, name in enumerate(asked)
        if policy.tenant_name(name) is None
    ]
