"""The Helm chart, rendered by the real Helm engine for every switch, then checked for what
matters in production: probes, grace periods, autoscaling, security, selectors, secrets."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.deploy.deploy_helpers import (
    CHART,
    QUEUES,
    VARIANTS,
    by_name,
    check_toolhub_command,
    env_of,
    helm,
    of_kind,
    render_docs,
    render_notes,
    worker_deployments,
    workloads,
)
from toolhub.distributed.fair import over_queue, sunk_queue

K8S_VERSION = "1.34.0"
HEALTH = ["python", "-m", "workers.lifecycle.healthcheck", "--max-age", "60"]
CUSTOM_KINDS = {("keda.sh/v1alpha1", "ScaledObject")}

variant_params = pytest.mark.parametrize("variant", sorted(VARIANTS))


def grace(worker: dict[str, Any]) -> int:
    return worker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]


@variant_params
def test_helm_lint_is_clean(variant: str) -> None:
    report = helm().lint(str(CHART), VARIANTS[variant], strict=True, kube_version=f"v{K8S_VERSION}")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@variant_params
def test_every_manifest_validates_against_kubernetes(variant: str) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    docs = render_docs(VARIANTS[variant])
    assert docs
    for doc in docs:
        if (doc["apiVersion"], doc["kind"]) in CUSTOM_KINDS:
            continue  # no built-in schema: checked structurally in test_keda_*
        try:
            kv.validate(doc, K8S_VERSION, strict=True)
        except kv.ValidationError as exc:  # pragma: no cover - failure path
            path = ".".join(str(p) for p in exc.path)
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']}: {path}: {exc.message}")


def test_default_render_has_every_component() -> None:
    docs = render_docs()
    kinds = {d["kind"] for d in docs}
    assert {
        "Deployment",
        "StatefulSet",
        "Service",
        "ConfigMap",
        "Secret",
        "ServiceAccount",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "PersistentVolumeClaim",
    } <= kinds
    assert {w["metadata"]["labels"]["toolhub.io/queue"] for w in worker_deployments(docs)} == {
        "fast",
        "command",
        "background",
    }
    assert "Ingress" not in kinds and "HorizontalPodAutoscaler" not in kinds
    assert "rel-toolhub-gateway" in render_notes()


@variant_params
def test_workers_cover_each_queue_with_valid_commands(variant: str) -> None:
    docs = render_docs(VARIANTS[variant])
    queues = []
    for w in worker_deployments(docs):
        (c,) = w["spec"]["template"]["spec"]["containers"]
        assert "command" not in c, "command would replace the image's tini ENTRYPOINT"
        assert check_toolhub_command(c["args"]) == []
        assert c["args"][:3] == ["toolhub", "worker", "--queues"]
        queues.append(c["args"][3])
        assert c["args"][4] == "--concurrency" and int(c["args"][5]) >= 1
    assert sorted(queues) == sorted(QUEUES)
    for d in workloads(docs):
        for c in d["spec"]["template"]["spec"]["containers"]:
            if c["image"].startswith("toolhub:"):
                assert "command" not in c
                assert check_toolhub_command(c["args"]) == [], c["args"]


@variant_params
def test_worker_probes_read_the_heartbeat_file(variant: str) -> None:
    docs = render_docs(VARIANTS[variant])
    assert "inspect" not in json.dumps(docs)
    for w in worker_deployments(docs):
        (c,) = w["spec"]["template"]["spec"]["containers"]
        assert c["livenessProbe"]["exec"]["command"] == HEALTH
        assert c["startupProbe"]["exec"]["command"] == HEALTH
        assert c["readinessProbe"]["exec"]["command"] == [*HEALTH, "--ready"]
        env = env_of(c)
        assert env["TOOLHUB_HEARTBEAT_FILE"]["value"].startswith("/tmp/")
        assert any(m["mountPath"] == "/tmp" for m in c["volumeMounts"])


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({}, 600 + 60 + 30),
        ({"worker": {"terminationGracePeriodSeconds": 10}}, 690),
        ({"worker": {"terminationGracePeriodSeconds": 2000}}, 2000),
        ({"config": {"maxForegroundSeconds": 1800}, "worker": {"softShutdownSeconds": 120}}, 1950),
    ],
)
def test_worker_grace_period_outlasts_longest_call(values: dict[str, Any], expected: int) -> None:
    docs = render_docs(values)
    max_fg = values.get("config", {}).get("maxForegroundSeconds", 600)
    soft = values.get("worker", {}).get("softShutdownSeconds", 60)
    for w in worker_deployments(docs):
        assert grace(w) == expected
        assert grace(w) > max_fg + soft
        env = env_of(w["spec"]["template"]["spec"]["containers"][0])
        assert env["TOOLHUB_MAX_FOREGROUND_SECONDS"]["value"] == str(max_fg)
        assert env["TOOLHUB_SOFT_SHUTDOWN_SECONDS"]["value"] == str(soft)


@pytest.mark.parametrize("cooldown", [0, 30, 5000])
def test_keda_scaledobject_per_queue_with_cooldown_above_grace(cooldown: int) -> None:
    docs = render_docs({"autoscaling": {"mode": "keda", "keda": {"cooldownPeriod": cooldown}}})
    assert of_kind(docs, "HorizontalPodAutoscaler") == []
    scaled = of_kind(docs, "ScaledObject")
    assert len(scaled) == len(QUEUES)
    deployments = {w["metadata"]["name"]: w for w in worker_deployments(docs)}
    for so in scaled:
        assert so["apiVersion"] == "keda.sh/v1alpha1"
        spec = so["spec"]
        target = deployments[spec["scaleTargetRef"]["name"]]
        assert spec["scaleTargetRef"]["kind"] == "Deployment"
        assert "replicas" not in target["spec"], "Helm must not fight the autoscaler"
        assert spec["cooldownPeriod"] > grace(target)
        assert spec["cooldownPeriod"] >= cooldown
        assert 0 <= spec["minReplicaCount"] <= spec["maxReplicaCount"]
        level0, over, sunk = spec["triggers"]
        args = target["spec"]["template"]["spec"]["containers"][0]["args"]
        queue = args[args.index("--queues") + 1]
        # Fair dispatch queues calls past a tenant's share at kombu's over and sunk priorities:
        # their lists count too.
        assert level0["metadata"]["listName"] == queue
        assert over["metadata"]["listName"].encode() == over_queue(queue.encode())
        assert sunk["metadata"]["listName"].encode() == sunk_queue(queue.encode())
        for trigger in (level0, over, sunk):
            assert trigger["type"] == "redis"
            meta = trigger["metadata"]
            assert meta["address"] == "rel-toolhub-redis:6379"
            assert all(isinstance(v, str) for v in meta.values()), "KEDA metadata are strings"
            assert meta["passwordFromEnv"] == "REDIS_PASSWORD"
        assert "REDIS_PASSWORD" in env_of(target["spec"]["template"]["spec"]["containers"][0])
    redis_np = by_name(docs, "NetworkPolicy", "rel-toolhub-redis")
    assert any("namespaceSelector" in peer for peer in redis_np["spec"]["ingress"][0]["from"])


def test_hpa_mode_has_no_keda_and_none_mode_has_fixed_replicas() -> None:
    hpa_docs = render_docs({"autoscaling": {"mode": "hpa"}})
    assert of_kind(hpa_docs, "ScaledObject") == []
    hpas = of_kind(hpa_docs, "HorizontalPodAutoscaler")
    assert len(hpas) == len(QUEUES)
    names = {w["metadata"]["name"] for w in worker_deployments(hpa_docs)}
    assert {h["spec"]["scaleTargetRef"]["name"] for h in hpas} == names
    assert all("replicas" not in w["spec"] for w in worker_deployments(hpa_docs))
    none_docs = render_docs()
    assert of_kind(none_docs, "ScaledObject") == of_kind(none_docs, "HorizontalPodAutoscaler") == []
    assert all(w["spec"]["replicas"] >= 1 for w in worker_deployments(none_docs))


@pytest.mark.parametrize(
    "values",
    [
        {"image": {"tag": "latest"}},
        {"image": {"tag": "LATEST"}},
        {"redis": {"image": {"tag": "latest"}}},
        {"autoscaling": {"mode": "keda+hpa"}},
        {"autoscaling": {"mode": "keda", "hpa": {"enabled": True}}},
        {"redis": {"enabled": False}},
        {"worker": {"queues": [{"name": "Bad_Name", "queue": "q", "concurrency": 1}]}},
        {"flower": {"basicAuth": "no-password"}},
    ],
)
def test_helm_refuses_bad_values(values: dict[str, Any]) -> None:
    h = helm()
    with h.Chart.load(str(CHART)) as chart, pytest.raises(h.HelmError):
        chart.render(values, name="rel")
