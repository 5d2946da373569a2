"""values.schema.json: defaults pass, bad values fail (jsonschema and Helm agree), and every
value is commented in values.yaml and documented in the chart README."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import jsonschema
import pytest
import yaml

from tests.deploy.deploy_helpers import CHART, helm

SCHEMA = json.loads((CHART / "values.schema.json").read_text())
DEFAULTS = yaml.safe_load((CHART / "values.yaml").read_text())


def merged(overrides: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge like Helm does (maps merge, everything else replaces)."""

    def merge(base: Any, over: Any) -> Any:
        if isinstance(base, dict) and isinstance(over, dict):
            out = dict(base)
            for k, v in over.items():
                out[k] = merge(base.get(k), v)
            return out
        return copy.deepcopy(over)

    return merge(DEFAULTS, overrides)


def errors(values: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(SCHEMA)
    return [e.message for e in validator.iter_errors(values)]


def test_schema_is_a_valid_draft7_schema() -> None:
    jsonschema.Draft7Validator.check_schema(SCHEMA)


def test_default_values_are_valid() -> None:
    assert errors(DEFAULTS) == []
    assert DEFAULTS["image"]["tag"] == ""  # -> Chart appVersion
    assert DEFAULTS["autoscaling"]["mode"] == "none"
    assert DEFAULTS["config"]["maxForegroundSeconds"] == 600
    assert DEFAULTS["worker"]["softShutdownSeconds"] == 60


GOOD = [
    {"autoscaling": {"mode": "keda"}},
    {"autoscaling": {"mode": "hpa"}},
    {"redis": {"enabled": False}, "externalRedis": {"host": "r.example.com"}},
    {"image": {"tag": "0.2.0", "digest": "sha256:" + "0" * 64}},
    {"config": {"policy": {"tools": ["Main:*"]}}, "auth": {"keys": {"existingSecret": "k"}}},
    {"config": {"policyExistingConfigMap": "ops-policy", "policyExistingConfigMapKey": "p.yaml"}},
]

BAD = {
    "image tag latest": {"image": {"tag": "latest"}},
    "redis tag latest": {"redis": {"image": {"tag": "Latest"}}},
    "redis tag empty": {"redis": {"image": {"tag": ""}}},
    "both autoscalers as a mode": {"autoscaling": {"mode": "keda,hpa"}},
    "both autoscalers as flags": {
        "autoscaling": {"keda": {"enabled": True}, "hpa": {"enabled": True}}
    },
    "external redis without host": {"redis": {"enabled": False}},
    "zero concurrency": {"worker": {"queues": [{"name": "a", "queue": "q", "concurrency": 0}]}},
    "queue without name": {"worker": {"queues": [{"queue": "q", "concurrency": 1}]}},
    "no queues": {"worker": {"queues": []}},
    "typo at top level": {"autoscalling": {"mode": "keda"}},
    "negative soft shutdown": {"worker": {"softShutdownSeconds": -1}},
    "flower auth without password": {"flower": {"basicAuth": "admin"}},
    "password not url safe": {"redis": {"auth": {"password": "p@ss/word"}}},
    "keys file given inline": {"auth": {"keys": {"file": "{}"}}},
    "policy not a map": {"config": {"policy": "tools: ['*']"}},
}


@pytest.mark.parametrize("values", GOOD)
def test_good_values_pass_both_validators(values: dict[str, Any]) -> None:
    assert errors(merged(values)) == []
    with helm().Chart.load(str(CHART)) as chart:
        chart.validate_schema(values)


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_values_are_rejected_by_both_validators(case: str) -> None:
    values = BAD[case]
    assert errors(merged(values)), f"jsonschema accepted {case}"
    h = helm()
    with h.Chart.load(str(CHART)) as chart, pytest.raises(h.HelmValuesError):
        chart.validate_schema(values)


def _leaf_paths(node: Any, prefix: str = "") -> list[str]:
    """Dotted paths of every documented value (lists and free-form maps count as leaves)."""
    if isinstance(node, dict) and node and prefix not in FREE_FORM:
        out = []
        for k, v in node.items():
            out.extend(_leaf_paths(v, f"{prefix}.{k}" if prefix else k))
        return out
    return [prefix]


#: Maps whose keys are data, not settings (documented as a whole).
FREE_FORM = {
    "worker.resources",
    "gateway.resources",
    "flower.resources",
    "redis.resources",
    "otel.collector.resources",
    "networkPolicy.kedaOperator",
    "config.toolset",
}


def test_every_value_is_commented_in_values_yaml() -> None:
    lines = (CHART / "values.yaml").read_text().splitlines()
    leaves = set(_leaf_paths(DEFAULTS))
    stack: list[tuple[int, str]] = []
    seen, missing = set(), []
    for i, line in enumerate(lines):
        m = re.match(r"^( *)([A-Za-z][\w.-]*):", line)
        if not m:
            continue
        indent = len(m.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, m.group(2)))
        path = ".".join(key for _, key in stack)
        if path in leaves and path not in seen:
            seen.add(path)
            if not lines[i - 1].strip().startswith("#"):
                missing.append(path)
    assert seen == leaves
    assert missing == [], f"values without a comment line above: {missing}"


def test_every_value_is_documented_in_readme() -> None:
    readme = (CHART / "README.md").read_text()
    documented = set(re.findall(r"^\|\s*`([^`]+)`\s*\|", readme, re.M))
    paths = set(_leaf_paths(DEFAULTS))
    assert paths - documented == set(), "values missing from helm/toolhub/README.md"
    assert documented - paths == set(), "README documents values that do not exist"
