"""deploy/ on the real API server: it applies, and each ServiceAccount may do what it needs
and is denied what it must not do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]
OPERATOR = "system:serviceaccount:migplan-system:migplan-operator"
AGENT = "system:serviceaccount:migplan-system:migplan-agent"


def ensure_namespace(cp, name: str) -> None:
    cp.kubectl(
        "apply",
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
    )


@pytest.fixture(scope="module")
def deployed(control_plane):
    cp = control_plane
    for namespace in ("migplan-system", "gpu-operator"):
        ensure_namespace(cp, namespace)
    dry = cp.kubectl("apply", "--dry-run=server", "-k", str(ROOT / "deploy"), check=False)
    assert dry.returncode == 0, dry.stderr
    cp.kubectl("apply", "-k", str(ROOT / "deploy"))
    return cp


def rendered(cp) -> list[dict]:
    return list(yaml.safe_load_all(cp.kubectl("kustomize", str(ROOT / "deploy")).stdout))


def can(cp, who: str, verb: str, resource: str, namespace: str | None = None) -> bool:
    resource, _, sub = resource.partition("/")
    args = ["auth", "can-i", verb, resource, f"--as={who}"]
    args += [f"--subresource={sub}"] if sub else []
    args += ["-n", namespace] if namespace else ["--all-namespaces"]
    result = cp.kubectl(*args, check=False)
    assert result.stdout.strip() in ("yes", "no"), result.stderr
    return result.stdout.strip() == "yes"


OPERATOR_MAY = [
    ("create", "pods/eviction", None),
    ("patch", "nodes", None),
    ("list", "pods", None),
    ("list", "poddisruptionbudgets.policy", None),
    ("patch", "gpupartitionplans.migplan.io/status", None),
    ("create", "nodepartitions.migplan.io", None),
    ("get", "nodepartitions.migplan.io/status", None),
    ("create", "events", "default"),
    ("patch", "clusterkopfpeerings.kopf.dev", None),
    ("create", "configmaps", "gpu-operator"),
]
OPERATOR_MUST_NOT = [
    ("get", "secrets", "default"),
    ("list", "secrets", None),
    ("delete", "pods", "default"),
    ("update", "configmaps", "default"),
    ("delete", "nodes", None),
    ("create", "gpupartitionplans.migplan.io", None),
    ("patch", "nodepartitions.migplan.io/status", None),
    ("create", "pods", "default"),
    ("update", "clusterroles.rbac.authorization.k8s.io", None),
]
AGENT_MAY = [
    ("watch", "nodepartitions.migplan.io", None),
    ("patch", "nodepartitions.migplan.io/status", None),
    ("get", "nodes", None),
    ("delete", "pods", "gpu-operator"),
    ("create", "events", "default"),
]
AGENT_MUST_NOT = [
    ("patch", "nodes", None),
    ("create", "pods/eviction", None),
    ("delete", "pods", "default"),
    ("get", "secrets", "gpu-operator"),
    ("update", "nodepartitions.migplan.io", None),
    ("patch", "gpupartitionplans.migplan.io", None),
    ("create", "pods", "gpu-operator"),
]


@pytest.mark.parametrize(("verb", "resource", "namespace"), OPERATOR_MAY)
def test_operator_may(deployed, verb, resource, namespace) -> None:
    assert can(deployed, OPERATOR, verb, resource, namespace)


@pytest.mark.parametrize(("verb", "resource", "namespace"), OPERATOR_MUST_NOT)
def test_operator_must_not(deployed, verb, resource, namespace) -> None:
    assert not can(deployed, OPERATOR, verb, resource, namespace)


@pytest.mark.parametrize(
    ("verb", "config_map", "allowed"),
    [
        ("get", "migplan-mig-parted-config", True),
        ("update", "migplan-mig-parted-config", True),
        ("get", "default-mig-parted-config", False),  # the GPU Operator's own config
        ("update", "default-mig-parted-config", False),
        ("update", "kube-root-ca.crt", False),
    ],
)
def test_operator_touches_only_its_own_config_map(deployed, verb, config_map, allowed) -> None:
    result = deployed.kubectl(
        "auth",
        "can-i",
        verb,
        f"configmaps/{config_map}",
        "-n",
        "gpu-operator",
        f"--as={OPERATOR}",
        check=False,
    )
    assert result.stdout.strip() == ("yes" if allowed else "no"), result.stderr


@pytest.mark.parametrize(("verb", "resource", "namespace"), AGENT_MAY)
def test_agent_may(deployed, verb, resource, namespace) -> None:
    assert can(deployed, AGENT, verb, resource, namespace)


@pytest.mark.parametrize(("verb", "resource", "namespace"), AGENT_MUST_NOT)
def test_agent_must_not(deployed, verb, resource, namespace) -> None:
    assert not can(deployed, AGENT, verb, resource, namespace)


def test_rbac_has_no_wildcards_and_no_secrets(deployed) -> None:
    for doc in rendered(deployed):
        for rule in doc.get("rules", []):
            for key in ("verbs", "resources", "apiGroups"):
                assert "*" not in rule.get(key, []), (doc["metadata"]["name"], rule)
            assert "secrets" not in rule.get("resources", [])


def test_only_the_agent_is_privileged_and_everything_is_bounded(deployed) -> None:
    workloads = {
        d["metadata"]["name"]: d
        for d in rendered(deployed)
        if d["kind"] in ("Deployment", "DaemonSet")
    }
    operator = workloads["migplan-operator"]["spec"]["template"]["spec"]
    agent = workloads["migplan-agent"]["spec"]["template"]["spec"]
    assert operator["securityContext"]["runAsNonRoot"] is True
    [op] = operator["containers"]
    assert op["securityContext"]["readOnlyRootFilesystem"] is True
    assert op["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert not op["securityContext"].get("privileged", False)
    [ag] = agent["containers"]
    assert ag["securityContext"]["privileged"] is True
    assert agent["nodeSelector"] == {"nvidia.com/mig.capable": "true"}
    for container in (op, ag):
        assert container["resources"]["requests"]
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert container["image"] == "migplan/migplan:0.1.0"


def test_the_example_rebalance_cronjob_applies_with_least_privilege(deployed) -> None:
    cp = deployed
    cp.kubectl("apply", "-f", str(ROOT / "deploy" / "examples" / "rebalance-cronjob.yaml"))
    job = json.loads(
        cp.kubectl(
            "get", "cronjob", "-n", "migplan-system", "migplan-rebalance-shared-pool", "-o", "json"
        ).stdout
    )
    assert job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "rebalance",
        "shared-pool",
    ]
    who = "system:serviceaccount:migplan-system:migplan-rebalance"
    assert can(cp, who, "patch", "gpupartitionplans.migplan.io")
    assert not can(cp, who, "delete", "gpupartitionplans.migplan.io")
    assert not can(cp, who, "patch", "gpupartitionplans.migplan.io/status")
    assert not can(cp, who, "list", "secrets")
