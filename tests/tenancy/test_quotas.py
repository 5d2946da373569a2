import pytest

from toolhub.core import ConfigError
from toolhub.tenancy import OperatorPolicy, Quotas


def test_a_policy_with_no_quotas_bounds_every_tenant_by_the_defaults() -> None:
    quotas = OperatorPolicy().quotas.for_tenant("acme")
    assert quotas == Quotas()
    assert quotas.concurrent_calls is not None and quotas.pids_per_command < 4096


def test_a_tenant_override_changes_only_its_fields() -> None:
    policy = OperatorPolicy.parse(
        {"quotas": {"default": {"burst": 10}, "tenants": {"big": {"concurrent_calls": 500}}}}
    )
    big, other = policy.quotas.for_tenant("big"), policy.quotas.for_tenant("small")
    assert (big.burst, big.concurrent_calls) == (10, 500)
    assert (other.burst, other.concurrent_calls) == (10, 64)


@pytest.mark.parametrize(
    "quotas",
    [
        {"default": {"burst": 0}},
        {"default": {"memory_per_command": 1}},
        {"tenants": {"x": {"no_such_quota": 1}}},
        {"tenants": {"x": {"pids_per_command": -5}}},
    ],
)
def test_a_malformed_quota_is_a_policy_file_error(quotas: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as caught:
        OperatorPolicy.parse({"quotas": quotas})
    assert caught.value.violations[0].category == "policy_file"
