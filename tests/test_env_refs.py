"""``${VAR}`` expansion's process-wide restriction: what ``restrict`` sets, ``restriction`` reads,
and a name outside it (or one of toolhub's own) is refused, whatever the restriction."""

from __future__ import annotations

import pytest

from toolhub import env_refs


def test_restriction_reads_back_what_restrict_set() -> None:
    assert env_refs.restriction() is None
    env_refs.restrict(["HOME_TOKEN", "REGION"])
    assert env_refs.restriction() == frozenset({"HOME_TOKEN", "REGION"})
    assert env_refs.expand_env("${REGION}", {"REGION": "eu"}) == "eu"
    with pytest.raises(env_refs.ExpansionRefused):
        env_refs.expand_env("${OTHER}", {"OTHER": "x"})
    env_refs.restrict(None)
    assert env_refs.restriction() is None


def test_toolhub_secrets_never_expand_even_unrestricted() -> None:
    with pytest.raises(env_refs.ExpansionRefused):
        env_refs.expand_env("${TOOLHUB_FLEET_KEY}", {"TOOLHUB_FLEET_KEY": "k"})
