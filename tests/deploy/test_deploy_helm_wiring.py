"""The Helm chart's wiring: security contexts, pinned images, selectors, NetworkPolicies,
Secrets, Redis (bundled and external), Ingress, ConfigMap and the shared workspace."""

from __future__ import annotations

import base64
import json

import pytest
import yaml

from tests.deploy.deploy_helpers import (
    CHART,
    VARIANTS,
    by_name,
    containers,
    env_of,
    labels_match,
    of_kind,
    pod_specs,
    render_docs,
    worker_deployments,
    workloads,
)

variant_params = pytest.mark.parametrize("variant", sorted(VARIANTS))


@variant_params
def test_restricted_security_context_on_every_pod_and_container(variant: str) -> None:
    docs = render_docs(VARIANTS[variant])
    for where, spec in pod_specs(docs):
        psc = spec["securityContext"]
        assert psc["runAsNonRoot"] is True and psc["runAsUser"] == 10001, where
        assert psc["seccompProfile"]["type"] == "RuntimeDefault", where
        assert spec["automountServiceAccountToken"] is False, where
        tmp_volumes = {v["name"] for v in spec["volumes"] if "emptyDir" in v}
        for c in containers(spec):
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, where
            assert sc["capabilities"]["drop"] == ["ALL"] and "add" not in sc["capabilities"]
            assert sc["readOnlyRootFilesystem"] is True, where
            assert sc["runAsNonRoot"] is True and sc["runAsUser"] == 10001, where
            assert sc["seccompProfile"]["type"] == "RuntimeDefault", where
            assert sc.get("privileged", False) is False, where
            tmp = [m for m in c["volumeMounts"] if m["mountPath"] == "/tmp"]
            assert tmp and tmp[0]["name"] in tmp_volumes, f"{where}: /tmp must be an emptyDir"
            assert c["resources"].get("requests"), f"{where}: resources.requests missing"


@variant_params
def test_images_are_pinned(variant: str) -> None:
    docs = render_docs(VARIANTS[variant])
    assert "latest" not in json.dumps(docs).lower()
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    for _, spec in pod_specs(docs):
        for c in containers(spec):
            name, _, tag = c["image"].rpartition(":")
            assert name and tag, c["image"]
            if c["name"] not in ("redis", "otel-collector"):
                assert tag == app_version
    pinned = render_docs({"image": {"digest": "sha256:" + "a" * 64}})
    assert all(
        "@sha256:" in c["image"]
        for w in worker_deployments(pinned)
        for c in w["spec"]["template"]["spec"]["containers"]
    )


@variant_params
def test_selectors_match_pod_labels(variant: str) -> None:
    docs = render_docs(VARIANTS[variant])
    pod_labels = [w["spec"]["template"]["metadata"]["labels"] for w in workloads(docs)]
    for w in workloads(docs):
        sel = w["spec"]["selector"]["matchLabels"]
        assert labels_match(sel, w["spec"]["template"]["metadata"]["labels"])
        others = [d for d in workloads(docs) if d is not w]
        assert not any(
            labels_match(sel, o["spec"]["template"]["metadata"]["labels"]) for o in others
        ), f"{w['metadata']['name']} selector overlaps another"
    for svc in of_kind(docs, "Service"):
        assert any(labels_match(svc["spec"]["selector"], lab) for lab in pod_labels), svc
    for pdb in of_kind(docs, "PodDisruptionBudget"):
        assert any(labels_match(pdb["spec"]["selector"]["matchLabels"], lab) for lab in pod_labels)
    for np in of_kind(docs, "NetworkPolicy"):
        assert any(
            labels_match(np["spec"]["podSelector"]["matchLabels"], lab) for lab in pod_labels
        ), np["metadata"]["name"]
    for ss in of_kind(docs, "StatefulSet"):
        headless = by_name(docs, "Service", ss["spec"]["serviceName"])
        assert headless["spec"]["clusterIP"] == "None"


@variant_params
def test_service_ports_exist_on_pods(variant: str) -> None:
    docs = render_docs(VARIANTS[variant])
    for svc in of_kind(docs, "Service"):
        pods = [
            w
            for w in workloads(docs)
            if labels_match(svc["spec"]["selector"], w["spec"]["template"]["metadata"]["labels"])
        ]
        names = {
            p["name"]
            for w in pods
            for c in w["spec"]["template"]["spec"]["containers"]
            for p in c.get("ports", [])
        }
        for port in svc["spec"]["ports"]:
            assert port["targetPort"] in names


def test_service_account_never_mounts_a_token() -> None:
    (sa,) = of_kind(render_docs(), "ServiceAccount")
    assert sa["automountServiceAccountToken"] is False
    for _, spec in pod_specs(render_docs()):
        assert spec["automountServiceAccountToken"] is False


def test_network_policies_lock_down_redis() -> None:
    docs = render_docs()
    names = {np["metadata"]["name"] for np in of_kind(docs, "NetworkPolicy")}
    assert names == {f"rel-toolhub-{c}" for c in ("redis", "gateway", "flower", "worker")}
    redis_np = by_name(docs, "NetworkPolicy", "rel-toolhub-redis")
    assert redis_np["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = redis_np["spec"]["ingress"]
    (peer,) = rule["from"]
    selector = peer["podSelector"]["matchLabels"]
    assert selector["toolhub.io/redis-client"] == "true"
    for w in workloads(docs):
        spec = w["spec"]["template"]["spec"]
        uses_redis = any("TOOLHUB_REDIS_URL" in env_of(c) for c in spec["containers"])
        labels = w["spec"]["template"]["metadata"]["labels"]
        assert uses_redis == labels_match(selector, labels), w["metadata"]["name"]
    flower_np = by_name(docs, "NetworkPolicy", "rel-toolhub-flower")
    assert flower_np["spec"]["ingress"][0]["from"], "Flower must not be open to every source"


def _bytes(size: str) -> int:
    units = {
        "ki": 1 << 10,
        "mi": 1 << 20,
        "gi": 1 << 30,
        "kb": 1 << 10,
        "mb": 1 << 20,
        "gb": 1 << 30,
    }
    low = size.lower()
    for unit, factor in units.items():
        if low.endswith(unit):
            return int(float(low[: -len(unit)]) * factor)
    return int(low)


def test_bundled_redis_maxmemory_leaves_room_below_its_memory_limit() -> None:
    """A full Redis refuses writes (workers ride it out: docs/distributed.md); a Redis past its
    container limit is OOM-killed. The AOF rewrite forks, so the default keeps a third free."""
    docs = render_docs()
    redis = by_name(docs, "StatefulSet", "rel-toolhub-redis")
    (c,) = redis["spec"]["template"]["spec"]["containers"]
    args = c["args"]
    maxmemory = _bytes(str(args[args.index("--maxmemory") + 1]))
    limit = _bytes(str(c["resources"]["limits"]["memory"]))
    assert 0 < maxmemory <= limit * 2 // 3, (maxmemory, limit)


def test_bundled_redis_matches_compose_settings() -> None:
    docs = render_docs()
    redis = by_name(docs, "StatefulSet", "rel-toolhub-redis")
    (c,) = redis["spec"]["template"]["spec"]["containers"]
    args = " ".join(c["args"])
    assert "--appendonly yes" in args and "--maxmemory-policy noeviction" in args
    assert "--hash-max-listpack-value 1024" in args
    assert "--requirepass $(REDIS_PASSWORD)" in args
    assert redis["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    for probe in ("livenessProbe", "readinessProbe"):
        assert "redis-cli" in " ".join(c[probe]["exec"]["command"])
    url = env_of(worker_deployments(docs)[0]["spec"]["template"]["spec"]["containers"][0])
    assert (
        url["TOOLHUB_REDIS_URL"]["value"] == "redis://:$(REDIS_PASSWORD)@rel-toolhub-redis:6379/0"
    )


def test_external_redis_uses_tls_and_a_secret_password() -> None:
    docs = render_docs(VARIANTS["external-redis"])
    assert of_kind(docs, "StatefulSet") == []
    assert "rel-toolhub-redis" not in {
        np["metadata"]["name"] for np in of_kind(docs, "NetworkPolicy")
    }
    for w in workloads(docs):
        for c in w["spec"]["template"]["spec"]["containers"]:
            env = c["env"]
            names = [e["name"] for e in env]
            assert names.index("REDIS_PASSWORD") < names.index("TOOLHUB_REDIS_URL"), (
                "REDIS_PASSWORD must precede the URL for $(VAR) expansion"
            )
            assert env_of(c)["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "ext-redis"
            assert env_of(c)["REDIS_USERNAME"]["value"] == "toolhub"
            assert env_of(c)["TOOLHUB_REDIS_URL"]["value"] == (
                "rediss://toolhub:$(REDIS_PASSWORD)@redis.example.com:6380/2"
            )
    for so in of_kind(docs, "ScaledObject"):
        for trigger in so["spec"]["triggers"]:
            meta = trigger["metadata"]
            assert meta["address"] == "redis.example.com:6380" and meta["enableTLS"] == "true"
            assert meta["databaseIndex"] == "2" and meta["usernameFromEnv"] == "REDIS_USERNAME"


def test_a_sentinel_redis_reaches_every_container_as_one_url_without_a_password() -> None:
    docs = render_docs(VARIANTS["sentinel"])
    assert of_kind(docs, "StatefulSet") == []
    for w in workloads(docs):
        for c in w["spec"]["template"]["spec"]["containers"]:
            env = env_of(c)
            names = [e["name"] for e in c["env"]]
            assert names.index("REDIS_SENTINEL_PASSWORD") < names.index("TOOLHUB_REDIS_URL")
            assert env["REDIS_SENTINEL_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
                "name": "ext-redis",
                "key": "sentinel-password",
            }
            assert env["TOOLHUB_REDIS_URL"]["value"] == (
                "redis+sentinel://:$(REDIS_PASSWORD)@s1.example.com:26379,s2.example.com:26379,"
                "s3.example.com/toolhub/0?sentinel_password=$(REDIS_SENTINEL_PASSWORD)"
            )
    for so in of_kind(docs, "ScaledObject"):
        for trigger in so["spec"]["triggers"]:
            assert trigger["type"] == "redis-sentinel"
            meta = trigger["metadata"]
            assert meta["sentinelMaster"] == "toolhub"
            assert meta["addresses"].startswith("s1.example.com:26379,")
            assert meta["sentinelPasswordFromEnv"] == "REDIS_SENTINEL_PASSWORD"
            assert meta["passwordFromEnv"] == "REDIS_PASSWORD"


def test_generated_secret_holds_tokens_and_nothing_leaks() -> None:
    docs = render_docs()
    (secret,) = of_kind(docs, "Secret")
    assert set(secret["data"]) == {"api-token", "fleet-key", "flower-basic-auth", "redis-password"}
    values = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert values["flower-basic-auth"].startswith("admin:") and len(values["api-token"]) >= 32
    assert len(values["fleet-key"]) >= 32
    others = json.dumps([d for d in docs if d["kind"] != "Secret"])
    for value in values.values():
        assert value.split(":")[-1] not in others


def test_existing_secrets_and_configmap_are_used() -> None:
    docs = render_docs(VARIANTS["existing-secrets"])
    assert of_kind(docs, "Secret") == [] and of_kind(docs, "ConfigMap") == []
    assert of_kind(docs, "PersistentVolumeClaim") == []
    refs = {}
    for w in workloads(docs):
        spec = w["spec"]["template"]["spec"]
        for c in spec["containers"]:
            for name, e in env_of(c).items():
                if "valueFrom" in e:
                    refs[name] = e["valueFrom"]["secretKeyRef"]["name"]
        for v in spec["volumes"]:
            if v["name"] == "config":
                assert v["configMap"]["name"] == "my-toolset"
            if v["name"] == "workspace":
                assert v["persistentVolumeClaim"]["claimName"] == "shared-ws"
    assert refs == {
        "TOOLHUB_API_TOKEN": "my-api",
        "TOOLHUB_FLEET_KEY": "my-fleet",
        "FLOWER_BASIC_AUTH": "my-flower",
        "REDIS_PASSWORD": "my-redis",
        "REDISCLI_AUTH": "my-redis",
    }


def test_gateway_and_workers_share_the_fleet_key_and_workers_require_it() -> None:
    docs = render_docs()
    gateway = by_name(docs, "Deployment", "rel-toolhub-gateway")
    for w in [gateway, *worker_deployments(docs)]:
        (c,) = w["spec"]["template"]["spec"]["containers"]
        ref = env_of(c)["TOOLHUB_FLEET_KEY"]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": "rel-toolhub", "key": "fleet-key"}
        required = env_of(c).get("TOOLHUB_REQUIRE_SIGNED", {}).get("value")
        assert required == (None if w is gateway else "1")


@pytest.mark.parametrize("enabled", [False, True])
def test_gateway_ingress_toggle(enabled: bool) -> None:
    docs = render_docs(VARIANTS["ingress"] if enabled else {})
    ingresses = of_kind(docs, "Ingress")
    assert len(ingresses) == int(enabled)
    gw = by_name(docs, "Deployment", "rel-toolhub-gateway")
    (c,) = gw["spec"]["template"]["spec"]["containers"]
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert env_of(c)["TOOLHUB_API_TOKEN"]["valueFrom"]["secretKeyRef"]["key"] == "api-token"
    for ing in ingresses:
        assert ing["spec"]["ingressClassName"] == "nginx"
        backend = ing["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
        assert backend == {"name": "rel-toolhub-gateway", "port": {"name": "http"}}


def test_toolset_configmap_is_mounted_where_toolhub_config_points() -> None:
    toolset = {"mode": "read_only", "tools": [{"id": "Main:read_file"}]}
    docs = render_docs({"config": {"toolset": toolset}})
    cm = by_name(docs, "ConfigMap", "rel-toolhub-toolset")
    assert yaml.safe_load(cm["data"]["toolset.yaml"]) == toolset
    for w in workloads(docs):
        spec = w["spec"]["template"]["spec"]
        for c in spec["containers"]:
            env = env_of(c)
            if "TOOLHUB_CONFIG" not in env:
                continue
            assert env["TOOLHUB_CONFIG"]["value"] == "/etc/toolhub/toolset.yaml"
            mount = next(m for m in c["volumeMounts"] if m["mountPath"] == "/etc/toolhub")
            vol = next(v for v in spec["volumes"] if v["name"] == mount["name"])
            assert vol["configMap"]["name"] == "rel-toolhub-toolset"
            assert vol["configMap"]["items"] == [{"key": "toolset.yaml", "path": "toolset.yaml"}]


def test_flower_requires_basic_auth() -> None:
    docs = render_docs({"flower": {"basicAuth": "ops:s3cret"}})
    flower = by_name(docs, "Deployment", "rel-toolhub-flower")
    (c,) = flower["spec"]["template"]["spec"]["containers"]
    assert c["args"][:4] == ["celery", "--app", "workers.app:app", "flower"]
    assert "--basic-auth=$(FLOWER_BASIC_AUTH)" in c["args"]
    env = env_of(c)
    assert env["FLOWER_BASIC_AUTH"]["valueFrom"]["secretKeyRef"]["key"] == "flower-basic-auth"
    assert "FLOWER_UNAUTHENTICATED_API" not in json.dumps(docs)
    assert "s3cret" not in json.dumps([d for d in docs if d["kind"] != "Secret"])


def test_workspace_is_shared_read_write_many() -> None:
    docs = render_docs()
    (pvc,) = of_kind(docs, "PersistentVolumeClaim")
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    for w in workloads(docs):
        spec = w["spec"]["template"]["spec"]
        if any("TOOLHUB_WORKSPACE" in env_of(c) for c in spec["containers"]):
            vol = next(v for v in spec["volumes"] if v["name"] == "workspace")
            assert vol["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]


POLICY = {
    "tools": ["Main:*"],
    "sandbox": {"modes": ["read_only", "workspace_write"], "network_hosts": ["pypi.org"]},
    "limits": {"Main:bash": {"max_timeout_ms": 600000}},
}


def _policy_files(docs: list[dict], configmaps: dict[str, dict[str, str]]) -> dict[str, str]:
    """Each toolhub workload's TOOLHUB_POLICY, with the file found at that path in its pod."""
    seen = {}
    for w in workloads(docs):
        spec = w["spec"]["template"]["spec"]
        for c in spec["containers"]:
            env = env_of(c)
            if "TOOLHUB_CONFIG" not in env:
                continue
            path = env["TOOLHUB_POLICY"]["value"]
            directory, _, file = path.rpartition("/")
            mount = next(m for m in c["volumeMounts"] if m["mountPath"] == directory)
            assert mount["readOnly"] is True
            vol = next(v for v in spec["volumes"] if v["name"] == mount["name"])
            (item,) = [i for i in vol["configMap"]["items"] if i["path"] == file]
            seen[w["metadata"]["name"]] = configmaps[vol["configMap"]["name"]][item["key"]]
    return seen


def test_the_policy_reaches_the_gateway_and_every_worker_at_the_same_path() -> None:
    from toolhub.tenancy import OperatorPolicy

    docs = render_docs({"config": {"policy": POLICY}})
    configmaps = {d["metadata"]["name"]: d["data"] for d in of_kind(docs, "ConfigMap")}
    files = _policy_files(docs, configmaps)
    names = {w["metadata"]["name"] for w in worker_deployments(docs)}
    assert set(files) == names | {"rel-toolhub-gateway"} and len(names) == 3
    (text,) = set(files.values())
    assert yaml.safe_load(text) == POLICY
    assert OperatorPolicy.parse(yaml.safe_load(text)).sandbox.network_hosts == ["pypi.org"]
    paths = {
        env_of(c)["TOOLHUB_POLICY"]["value"]
        for w in workloads(docs)
        for c in w["spec"]["template"]["spec"]["containers"]
        if "TOOLHUB_POLICY" in env_of(c)
    }
    assert paths == {"/etc/toolhub-policy/policy.yaml"}
    # A policy change rolls every pod that loads it.
    other = render_docs({"config": {"policy": {**POLICY, "tools": ["Main:read_file"]}}})
    for before, after in zip(workloads(docs), workloads(other), strict=True):
        if before["metadata"]["name"] in files:
            old, new = (d["spec"]["template"]["metadata"]["annotations"] for d in (before, after))
            assert old["checksum/policy"] != new["checksum/policy"]


def test_an_existing_policy_configmap_is_mounted_on_gateway_and_workers() -> None:
    config = {"policyExistingConfigMap": "ops-policy", "policyExistingConfigMapKey": "p"}
    docs = render_docs({"config": config})
    assert "rel-toolhub-policy" not in {d["metadata"]["name"] for d in of_kind(docs, "ConfigMap")}
    files = _policy_files(docs, {"ops-policy": {"p": "from the operator"}})
    assert set(files.values()) == {"from the operator"} and len(files) == 4


def test_no_policy_means_no_file_and_the_strict_defaults() -> None:
    docs = render_docs()
    assert "TOOLHUB_POLICY" not in json.dumps(docs) and "toolhub-policy" not in json.dumps(docs)


def test_the_keys_secret_reaches_the_gateway_only_read_only() -> None:
    docs = render_docs({"auth": {"keys": {"existingSecret": "toolhub-keys"}}})
    gateway = by_name(docs, "Deployment", "rel-toolhub-gateway")
    spec = gateway["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    assert env_of(c)["TOOLHUB_KEYS_FILE"]["value"] == "/etc/toolhub-keys/keys.json"
    # The single token stays a key of the default tenant.
    assert env_of(c)["TOOLHUB_API_TOKEN"]["valueFrom"]["secretKeyRef"]["key"] == "api-token"
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == "/etc/toolhub-keys")
    assert mount["readOnly"] is True and "subPath" not in mount, "a subPath never updates"
    vol = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    assert vol["secret"]["secretName"] == "toolhub-keys"
    assert vol["secret"]["items"] == [{"key": "keys.json", "path": "keys.json"}]
    assert vol["secret"]["defaultMode"] == 0o440
    others = [w for w in workloads(docs) if w is not gateway]
    assert {w["metadata"]["name"] for w in others} >= {"rel-toolhub-redis", "rel-toolhub-flower"}
    for w in others:
        text = json.dumps(w)
        assert "toolhub-keys" not in text and "TOOLHUB_KEYS_FILE" not in text, w["metadata"]
    assert "toolhub-keys" not in json.dumps(of_kind(docs, "Secret"))


def test_no_keys_secret_means_the_single_token_as_before() -> None:
    docs = render_docs()
    assert "TOOLHUB_KEYS_FILE" not in json.dumps(docs) and "toolhub-keys" not in json.dumps(docs)
