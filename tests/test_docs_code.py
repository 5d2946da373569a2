"""The code in docs/ is real (issue 16): every Python block parses (no top-level ``async for``,
no pseudo-code), every YAML block that is a tool-set config validates against the real
registry with every violation reported, every ``sandbox:`` fragment is valid sandbox
settings, and every operator policy parses. README's blocks are run outright
(tests/test_readme.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from toolhub.sandbox import SandboxSettings
from toolhub.session_parts import default_builder
from toolhub.tenancy import OperatorPolicy
from toolhub.toolset import ToolSetConfig

DOCS = Path(__file__).resolve().parent.parent / "docs"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def _blocks(lang: str) -> list[tuple[str, str]]:
    found = []
    for doc in sorted(DOCS.glob("*.md")):
        text = doc.read_text()
        for match in BLOCK.finditer(text):
            if match.group(1) == lang:
                line = text[: match.start()].count("\n") + 1
                found.append((f"{doc.name}:{line}", match.group(2)))
    return found


@pytest.mark.parametrize(("where", "code"), _blocks("python"), ids=lambda v: str(v)[:40])
def test_python_blocks_parse(where: str, code: str) -> None:
    ast.parse(code, filename=where)


@pytest.mark.parametrize(("where", "code"), _blocks("yaml"), ids=lambda v: str(v)[:40])
def test_yaml_blocks_are_valid_configs(where: str, code: str) -> None:
    data = yaml.safe_load(code)
    assert isinstance(data, dict), where
    # ``hooks:`` is a list in a config and a mapping in a policy; a policy's ``permissions``
    # carry keys a config's cannot (its bounds on tenants' rules).
    policy_only = {"tenant_rules", "max_approval_seconds"}
    permissions = data.get("permissions")
    policy_permissions = isinstance(permissions, dict) and bool(policy_only & set(permissions))
    if (
        set(data) <= set(ToolSetConfig.model_fields)
        and not isinstance(data.get("hooks"), dict)
        and not policy_permissions
    ):
        report = default_builder().validate(data)
        assert report.ok, (where, [v.summary() for v in report.violations])
    elif set(data) == {"sandbox"}:
        SandboxSettings.model_validate(data["sandbox"])
    elif set(data) <= set(OperatorPolicy.model_fields):
        OperatorPolicy.model_validate(data)
    else:
        raise AssertionError(f"{where}: a YAML block that is not a config, policy or fragment")
