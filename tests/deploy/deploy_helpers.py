"""Shared helpers for the deployment tests (Helm chart, compose file, Dockerfile).

Everything runs offline: the chart is rendered by the real Helm engine bundled in the
``helm-python-sdk`` wheel, manifests are checked with ``kubernetes-validate``'s bundled
schemas, and the Compose Specification schema is vendored next to this file.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
import tomllib
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "toolhub"
COMPOSE = REPO / "compose" / "docker-compose.yml"
DOCKERFILE = REPO / "Dockerfile"

#: `toolhub` subcommands the CLI provides (docs/CONTRACT).
TOOLHUB_SUBCOMMANDS = {"worker", "serve", "mcp", "up", "call", "tools", "validate", "tasks", "demo"}
QUEUES = {"toolhub.fast", "toolhub.command", "toolhub.background"}
HEALTHCHECK_MODULE = "workers.lifecycle.healthcheck"

#: Chart switches every structural test runs over.
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "keda": {"autoscaling": {"mode": "keda"}},
    "hpa": {"autoscaling": {"mode": "hpa"}},
    "external-redis": {
        "redis": {"enabled": False},
        "externalRedis": {
            "host": "redis.example.com",
            "port": 6380,
            "database": 2,
            "username": "toolhub",
            "existingSecret": "ext-redis",
            "tls": True,
        },
        "autoscaling": {"mode": "keda"},
    },
    "sentinel": {
        "redis": {"enabled": False},
        "externalRedis": {
            "existingSecret": "ext-redis",
            "tls": False,
            "sentinel": {
                "enabled": True,
                "hosts": ["s1.example.com:26379", "s2.example.com:26379", "s3.example.com"],
                "service": "toolhub",
                "passwordKey": "sentinel-password",
            },
        },
        "autoscaling": {"mode": "keda"},
    },
    "ingress": {
        "gateway": {
            "ingress": {
                "enabled": True,
                "className": "nginx",
                "tls": [{"secretName": "toolhub-tls", "hosts": ["toolhub.example.com"]}],
            }
        }
    },
    "existing-secrets": {
        "auth": {"existingSecret": "my-api"},
        "fleetKey": {"existingSecret": "my-fleet"},
        "flower": {"existingSecret": "my-flower"},
        "redis": {"auth": {"existingSecret": "my-redis"}},
        "config": {"existingConfigMap": "my-toolset"},
        "workspace": {"persistence": {"existingClaim": "shared-ws"}},
    },
    "otel": {"otel": {"enabled": True, "collector": {"enabled": True}}},
    "minimal": {
        "gateway": {"enabled": False},
        "flower": {"enabled": False},
        "redis": {"auth": {"enabled": False}, "persistence": {"enabled": False}},
        "networkPolicy": {"enabled": False},
        "workspace": {"persistence": {"enabled": False}},
        "serviceAccount": {"create": False},
    },
}


def helm() -> Any:
    """Import the Helm engine, skipping (loudly) only if the wheel is truly unavailable."""
    return pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")


@cache
def _render_cached(values_json: str) -> tuple[tuple[str, str], ...]:
    h = helm()
    with h.Chart.load(str(CHART)) as chart:
        out = chart.render(json.loads(values_json), name="rel", namespace="tools", is_install=True)
    return tuple(sorted(out.items()))


def render_docs(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Render the chart with ``values`` and return every Kubernetes object (NOTES excluded)."""
    docs: list[dict[str, Any]] = []
    for name, text in _render_cached(json.dumps(values or {}, sort_keys=True)):
        if name.endswith("NOTES.txt"):
            continue
        docs.extend(d for d in yaml.safe_load_all(text) if d)
    return copy.deepcopy(docs)


def render_notes(values: dict[str, Any] | None = None) -> str:
    rendered = dict(_render_cached(json.dumps(values or {}, sort_keys=True)))
    return next(text for name, text in rendered.items() if name.endswith("NOTES.txt"))


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def by_name(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [d for d in of_kind(docs, kind) if d["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind}/{name}, found {len(matches)}"
    return matches[0]


def workloads(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] in {"Deployment", "StatefulSet"}]


def worker_deployments(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        d
        for d in of_kind(docs, "Deployment")
        if d["metadata"]["labels"]["app.kubernetes.io/component"] == "worker"
    ]


def pod_specs(docs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for w in workloads(docs):
        yield f"{w['kind']}/{w['metadata']['name']}", w["spec"]["template"]["spec"]


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return list(spec.get("initContainers", [])) + list(spec["containers"])


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def labels_match(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


# --- what the image provides ------------------------------------------------------------------


@cache
def image_programs() -> frozenset[str]:
    """Programs the toolhub image puts on PATH, derived from pyproject.toml and the Dockerfile.

    Console scripts of the project itself come from ``[project.scripts]``; ``celery`` comes
    from the ``celery`` dependency (whose wheel installs the ``celery`` script); ``tini`` and
    ``python`` come from the Dockerfile's runtime stage.
    """
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    programs = set(project.get("scripts", {}))
    deps = " ".join(project.get("dependencies", []))
    if re.search(r"(^|\s|\")celery\b", deps):
        programs.add("celery")
    dockerfile = DOCKERFILE.read_text()
    if re.search(r"apt-get install[^\n]*\btini\b", dockerfile):
        programs.add("tini")
    if re.search(r"^FROM\s+\S*python", dockerfile, re.M) or "PYTHON_IMAGE=python:" in dockerfile:
        programs.add("python")
    return frozenset(programs)


def check_toolhub_command(argv: list[str] | str) -> list[str]:
    """Return problems with a command run in the toolhub image (empty list when fine)."""
    args = shlex.split(argv) if isinstance(argv, str) else [str(a) for a in argv]
    if not args:
        return ["empty command"]
    if args[:2] == ["tini", "--"]:
        args = args[2:]
    program = args[0]
    problems = []
    if program not in image_programs():
        problems.append(f"program {program!r} is not provided by the image")
    if program == "toolhub" and (len(args) < 2 or args[1] not in TOOLHUB_SUBCOMMANDS):
        problems.append(f"unknown toolhub subcommand in {args!r}")
    if program == "python" and args[1:2] == ["-m"]:
        module_path = REPO.joinpath(*args[2].split(".")).with_suffix(".py")
        if not module_path.is_file():
            problems.append(f"module {args[2]} does not exist in the repository")
    if program == "celery" and "workers.app:app" not in args:
        problems.append("celery must be pointed at the toolhub app (--app workers.app:app)")
    return problems
