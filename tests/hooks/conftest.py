"""The hook tests' operator: a policy file (``TOOLHUB_POLICY``) and the sample entry points on
the path."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from toolhub.hooks import registry

ENTRY_POINTS = Path(__file__).resolve().parent / "entry_points"


@pytest.fixture
def sample_hooks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The sample hooks installed in this process."""
    monkeypatch.syspath_prepend(str(ENTRY_POINTS))
    registry._installed.cache_clear()
    registry._entry_point_hook.cache_clear()
    yield
    registry._installed.cache_clear()
    registry._entry_point_hook.cache_clear()


@pytest.fixture
def operator_policy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Callable[[dict[str, Any]], Path]:
    """Write a policy file and make it this process's (``TOOLHUB_POLICY``)."""

    def write(policy: dict[str, Any]) -> Path:
        path = tmp_path / "policy.yaml"
        path.write_text(yaml.safe_dump(policy))
        monkeypatch.setenv("TOOLHUB_POLICY", str(path))
        return path

    return write
