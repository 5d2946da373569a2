"""toolhub's own secrets never reach a command: every name in ``TOOLHUB_SECRETS`` (the fleet
key and its previous one included) is missing from a command's environment in every mode, even
``full`` with ``scrub_env`` off; and ``$TOOLHUB_HOME`` wherever it is (the fleet key files, the
holder's socket and capability, every session's state) is hidden from every confined command,
under bwrap and under Landlock, while the command's own work runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolhub.sandbox import Mechanism, SandboxMode, SandboxPolicy, default_hidden, probe
from toolhub.sandbox.environment import TOOLHUB_SECRETS
from toolhub.sandbox.landlock_syscalls import abi_version

from .conftest import Layout, requires_bwrap, text

MECHANISMS = [
    pytest.param(Mechanism.BWRAP, marks=requires_bwrap),
    pytest.param(
        Mechanism.LANDLOCK,
        marks=pytest.mark.skipif(abi_version() < 1, reason="the kernel has no Landlock"),
    ),
]


def test_the_previous_fleet_key_is_a_toolhub_secret() -> None:
    assert {"TOOLHUB_FLEET_KEY", "TOOLHUB_FLEET_KEY_PREVIOUS"} <= set(TOOLHUB_SECRETS)


@pytest.mark.parametrize(
    "policy",
    ["none", "full-unscrubbed", "workspace_write"],
)
def test_no_toolhub_secret_reaches_a_command(
    layout: Layout, monkeypatch: pytest.MonkeyPatch, policy: str
) -> None:
    values = {name: f"secret-value-{i}-0f3a" for i, name in enumerate(TOOLHUB_SECRETS)}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    chosen = {
        "none": None,
        "full-unscrubbed": SandboxPolicy(layout.ws, SandboxMode.FULL, scrub_env=False),
        "workspace_write": layout.policy(SandboxMode.WORKSPACE_WRITE),
    }[policy]
    if policy == "workspace_write" and not probe().available:
        pytest.skip("bwrap cannot sandbox here")
    out = text(layout.runner(chosen).run("env; echo done", log_name=f"env-{policy}"))
    assert out.rstrip().endswith("done")
    for value in values.values():
        assert value not in out


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_toolhub_home_is_hidden_wherever_it_is(
    layout: Layout, monkeypatch: pytest.MonkeyPatch, mechanism: Mechanism
) -> None:
    home = layout.base / "custom-home"  # not ~/.toolhub
    (home / "holders").mkdir(parents=True)
    (home / "holders" / "x.secret").write_text("holder-capability\n")
    (home / "fleet.key").write_text("fleet-key-material\n")
    monkeypatch.setenv("TOOLHUB_HOME", str(home))
    assert home in default_hidden()
    policy = SandboxPolicy(
        layout.ws,
        SandboxMode.WORKSPACE_WRITE,
        tmp_dir=layout.tmp,
        hidden=default_hidden(),
        mechanism=mechanism,
        readable=(layout.base,),  # even a config that reads the home's parent
    )
    out = text(
        layout.runner(policy).run(
            f"cat {home}/fleet.key {home}/holders/x.secret 2>/dev/null; "
            f"ls {home} 2>/dev/null | grep -q . && echo HOME-LISTED; echo ok > mine.txt; "
            "cat mine.txt",
            log_name=f"home-{mechanism.value}",
        )
    )
    assert "fleet-key-material" not in out and "holder-capability" not in out, out
    assert "HOME-LISTED" not in out and out.split()[-1] == "ok", out


def test_an_unset_toolhub_home_hides_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLHUB_HOME", raising=False)
    assert Path("~/.toolhub").expanduser() in default_hidden()
