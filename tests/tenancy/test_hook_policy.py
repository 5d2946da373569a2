"""Hooks are the operator's: a tenant's config may add only hooks the policy lists for
tenants, by name or by a listed webhook's URL; an unknown name, an installed hook the policy
keeps to itself, or a URL of the tenant's choosing is a typed config error (``policy``), and a
policy with a webhook that is not an HTTP URL does not load."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolhub.core import ConfigError
from toolhub.tenancy import OperatorPolicy, admit, effective

BASH = {"id": "Main:bash"}
HOOK_URL = "https://hooks.operator.example/audit"
POLICY = OperatorPolicy.parse(
    {
        "hooks": {
            "tenant_hooks": ["audit", "dogs"],
            "webhooks": {
                "audit": {"url": HOOK_URL, "stages": ["before", "after"]},
                "private": {"url": "https://hooks.operator.example/private"},
            },
        }
    }
)


def test_the_default_policy_runs_the_secrets_hook_and_lets_tenants_add_none(tmp_path: Path) -> None:
    assert OperatorPolicy().hooks.always == ["secrets"]
    with pytest.raises(ConfigError) as caught:
        admit(
            {"tools": [BASH], "hooks": ["secrets"]},
            OperatorPolicy(),
            tenant="acme",
            tenant_root=tmp_path,
        )
    (violation,) = caught.value.violations
    assert violation.category == "policy" and violation.field_path == "hooks[0]"


def test_a_tenant_adds_listed_hooks_by_name_or_by_a_listed_webhooks_url(tmp_path: Path) -> None:
    admitted = admit(
        {"tools": [BASH], "hooks": ["dogs", HOOK_URL]}, POLICY, tenant="acme", tenant_root=tmp_path
    )
    assert admitted.hooks == ["dogs", HOOK_URL]
    assert [POLICY.hooks.tenant_name(h) for h in admitted.hooks] == ["dogs", "audit"]


@pytest.mark.parametrize(
    "asked",
    [
        "no-such-hook",  # nothing is called that
        "private",  # a webhook the operator keeps to itself
        "https://hooks.operator.example/private",  # ... named by its URL
        "https://attacker.example/collect",  # a URL of the tenant's choosing
        "http://169.254.169.254/latest/meta-data",
    ],
)
def test_a_hook_the_policy_does_not_list_for_tenants_is_refused(asked: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        admit(
            {"tools": [BASH], "hooks": ["dogs", asked]}, POLICY, tenant="acme", tenant_root=tmp_path
        )
    (violation,) = caught.value.violations
    assert violation.category == "policy" and violation.field_path == "hooks[1]"
    assert violation.actual == asked and violation.expected == "audit, dogs"


def test_a_webhook_must_be_an_http_url(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        OperatorPolicy.parse({"hooks": {"webhooks": {"x": {"url": "file:///etc/passwd"}}}})
    assert caught.value.violations[0].category == "policy_file"


def test_a_tenant_is_shown_what_it_may_add_never_a_webhooks_headers() -> None:
    policy = OperatorPolicy.parse(
        {
            "hooks": {
                "tenant_hooks": ["audit", "dogs"],
                "webhooks": {"audit": {"url": HOOK_URL, "headers": {"Authorization": "Bearer s3"}}},
            }
        }
    )
    shown = effective(policy, "acme")["hooks"]
    assert shown == {
        "always": ["secrets"],
        "tenant_hooks": {"audit": HOOK_URL, "dogs": "(installed)"},
    }
    assert "s3" not in repr(effective(policy, "acme"))
