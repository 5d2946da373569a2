"""The distributed settings read the environment once (``Settings.from_env``): what a dispatch
asks for on every call comes from the settings object, never from ``os.environ`` again."""

from __future__ import annotations

import pytest

from toolhub.distributed.settings import Settings


def test_the_visibility_timeout_is_above_the_longest_run_unless_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TOOLHUB_VISIBILITY_TIMEOUT", raising=False)
    settings = Settings.from_env("redis://localhost:1/0")
    longest = max(settings.max_foreground_seconds, settings.max_background_seconds)
    assert settings.visibility_timeout == int(longest + 300)
    assert settings.active_ttl_seconds == settings.visibility_timeout + settings.record_ttl_seconds


def test_the_override_is_read_when_the_settings_are_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLHUB_VISIBILITY_TIMEOUT", "777")
    settings = Settings.from_env("redis://localhost:1/0")
    monkeypatch.setenv("TOOLHUB_VISIBILITY_TIMEOUT", "1")
    assert settings.visibility_timeout == 777
    assert Settings.from_env("redis://localhost:1/0").visibility_timeout == 1


def test_a_message_may_run_as_long_as_its_call_may_live_unless_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TOOLHUB_MESSAGE_MAX_AGE_SECONDS", raising=False)
    settings = Settings.from_env("redis://localhost:1/0")
    for workload in ("command", "background"):
        age = settings.message_max_age_seconds(workload)
        assert age == settings.call_deadline_seconds(workload)
        assert settings.replay_marker_seconds(workload) == int(age) + 300
    assert Settings().message_max_age_seconds("command") == 2520.0  # 42 min by default
    monkeypatch.setenv("TOOLHUB_MESSAGE_MAX_AGE_SECONDS", "90")
    assert Settings.from_env("redis://localhost:1/0").message_max_age_seconds("background") == 90


def test_the_fair_dispatch_burst_line_and_hold_default_and_are_never_negative(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TOOLHUB_FAIR_BURST", raising=False)
    monkeypatch.delenv("TOOLHUB_FAIR_HOLD_MS", raising=False)
    settings = Settings.from_env("redis://localhost:1/0")
    assert (settings.fair_burst, settings.fair_hold_ms) == (32, 20)
    monkeypatch.setenv("TOOLHUB_FAIR_BURST", "-5")
    monkeypatch.setenv("TOOLHUB_FAIR_HOLD_MS", "-1")
    settings = Settings.from_env("redis://localhost:1/0")
    assert (settings.fair_burst, settings.fair_hold_ms) == (0, 0)  # no over level, no hold
