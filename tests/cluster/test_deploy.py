"""deploy/ on the real API server: it applies, and each ServiceAccount may do what it needs
and is denied what it must not do: by RBAC, by Pod Security admission, and by the admission
policy that keeps each node's agent to its own node."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from waiting import wait_for

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]
OPERATOR = "system:serviceaccount:migplan-system:migplan-operator"
AGENT = "system:serviceaccount:migplan-agent:migplan-agent"
EVERYTHING = ROOT / "tests" / "cluster" / "overlays" / "everything"


DRA = "nvidia-dra-driver-gpu"
"""Where NVIDIA's DRA driver runs (its kubelet plugin: dra.mode static)."""


def ensure_namespace(cp, name: str) -> None:
    cp.kubectl(
        "apply",
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
    )


@pytest.fixture(scope="module")
def deployed(control_plane):
    """deploy/ with every optional component applied, on a cluster that has what the GPU
    Operator would bring: its namespace and the `nvidia` RuntimeClass."""
    cp = control_plane
    ensure_namespace(cp, "gpu-operator")
    ensure_namespace(cp, "nvidia-dra-driver-gpu")
    cp.kubectl(
        "apply",
        "-f",
        "-",
        stdin=json.dumps(
            {
                "apiVersion": "node.k8s.io/v1",
                "kind": "RuntimeClass",
                "metadata": {"name": "nvidia"},
                "handler": "nvidia",
            }
        ),
    )
    # A server-side dry run cannot see namespaces it would create itself.
    cp.kubectl("apply", "-f", str(ROOT / "deploy" / "base" / "namespace.yaml"))
    dry = cp.kubectl("apply", "--dry-run=server", "-k", str(EVERYTHING), check=False)
    assert dry.returncode == 0, dry.stderr
    cp.kubectl("apply", "-k", str(EVERYTHING))
    return cp


def rendered(cp, where: Path = EVERYTHING) -> list[dict]:
    return list(yaml.safe_load_all(cp.kubectl("kustomize", str(where)).stdout))


def workload(cp, name: str) -> dict:
    [found] = [
        d
        for d in rendered(cp)
        if d["kind"] in ("Deployment", "DaemonSet") and d["metadata"]["name"] == name
    ]
    return found


def can(cp, who: str, verb: str, resource: str, namespace: str | None = None) -> bool:
    resource, _, sub = resource.partition("/")
    args = ["auth", "can-i", verb, resource, f"--as={who}"]
    args += [f"--subresource={sub}"] if sub else []
    args += ["-n", namespace] if namespace else ["--all-namespaces"]
    result = cp.kubectl(*args, check=False)
    assert result.stdout.strip() in ("yes", "no"), result.stderr
    return result.stdout.strip() == "yes"


def can_named(cp, who: str, verb: str, kind_and_name: str) -> bool:
    """`kubectl auth can-i VERB KIND/NAME` for a cluster-scoped object."""
    result = cp.kubectl("auth", "can-i", verb, kind_and_name, f"--as={who}", check=False)
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
    ("create", "configmaps", "gpu-operator"),
    ("list", "resourceclaims.resource.k8s.io", None),
    ("create", "devicetaintrules.resource.k8s.io", None),
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
    ("delete", "pods", "gpu-operator"),  # components/gpu-operator; the policy narrows it
    ("delete", "pods", "nvidia-dra-driver-gpu"),  # components/nvidia-dra-driver; likewise
    ("list", "resourceslices.resource.k8s.io", None),
    ("get", "pods", None),  # an evicted pod's UID
]
AGENT_MUST_NOT = [
    ("patch", "nodes", None),
    ("create", "pods/eviction", None),
    ("delete", "pods", "default"),
    ("get", "secrets", "gpu-operator"),
    ("update", "nodepartitions.migplan.io", None),
    ("patch", "gpupartitionplans.migplan.io", None),
    ("create", "pods", "gpu-operator"),
    ("create", "resourceslices.resource.k8s.io", None),
    ("list", "resourceclaims.resource.k8s.io", None),
    # #29 from reading: it listed every pod and could post events in any namespace.
    ("list", "pods", None),
    ("watch", "pods", None),
    ("list", "pods", "default"),
    ("create", "events", "default"),
    ("create", "events", "kube-system"),
    ("list", "nodes", None),
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
    assert can_named(cp, who, "patch", "gpupartitionplans.migplan.io/shared-pool")
    assert not can_named(cp, who, "patch", "gpupartitionplans.migplan.io/other-pool")
    assert not can_named(cp, who, "delete", "gpupartitionplans.migplan.io/shared-pool")
    assert not can(cp, who, "patch", "gpupartitionplans.migplan.io/status")
    assert not can(cp, who, "list", "secrets")


def test_the_rebalance_account_may_only_ask_for_a_rebalance(deployed) -> None:
    # RBAC let it patch any plan's spec; it may now only set migplan.io/rebalance on its own.
    cp = deployed
    cp.kubectl("apply", "-f", str(ROOT / "deploy" / "examples" / "rebalance-cronjob.yaml"))
    plan = {
        "apiVersion": "migplan.io/v1alpha1",
        "kind": "GPUPartitionPlan",
        "metadata": {"name": "shared-pool"},
        "spec": {
            "nodeSelector": {"matchLabels": {"migplan.io/pool": "rebalance-none"}},
            "demand": {"profiles": [{"resource": "nvidia.com/mig-1g.10gb", "count": 1}]},
            "dryRun": True,
        },
    }
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(plan))
    as_rebalance = "--as=system:serviceaccount:migplan-system:migplan-rebalance"
    try:
        # The policy takes effect a moment after it is applied, and RBAC alone admits the
        # edit: wait until a server-side dry run of it is refused, then ask for real.
        def suspend(*extra: str):
            return cp.kubectl(
                "patch",
                "gpp",
                "shared-pool",
                "--type=merge",
                "-p",
                '{"spec":{"suspend":true}}',
                as_rebalance,
                *extra,
                check=False,
            )

        wait_for(
            lambda: suspend("--dry-run=server").returncode != 0,
            "the policy to refuse a spec edit",
            timeout=30,
        )
        edit = suspend()
        assert edit.returncode != 0
        assert "may only set the migplan.io/rebalance annotation" in edit.stderr
        asked = cp.kubectl(
            "annotate",
            "gpp",
            "shared-pool",
            "migplan.io/rebalance=2026-11-25T20:00:00Z",
            "--overwrite",
            as_rebalance,
            check=False,
        )
        assert asked.returncode == 0, asked
        assert "annotated" in asked.stdout
        spec = json.loads(cp.kubectl("get", "gpp", "shared-pool", "-o", "json").stdout)["spec"]
        assert not spec.get("suspend")
        label = cp.kubectl("label", "gpp", "shared-pool", "team=x", as_rebalance, check=False)
        assert label.returncode != 0
        other = cp.kubectl("annotate", "gpp", "shared-pool", "note=hi", as_rebalance, check=False)
        assert other.returncode != 0
    finally:
        cp.kubectl("delete", "gpp", "shared-pool", "--wait=false", check=False)


def test_the_base_reaches_into_no_other_products_namespace(deployed) -> None:
    namespaces = {d["metadata"].get("namespace") for d in rendered(deployed, ROOT / "deploy")} - {
        None
    }
    assert namespaces == {"migplan-system", "migplan-agent"}
    gpu_operator = rendered(deployed, ROOT / "deploy" / "gpu-operator")
    assert {
        (d["kind"], d["metadata"]["name"])
        for d in gpu_operator
        if d["metadata"].get("namespace") == "gpu-operator"
    } == {("Role", "migplan-agent-device-plugin"), ("RoleBinding", "migplan-agent-device-plugin")}
    for where in (ROOT / "deploy", ROOT / "deploy" / "gpu-operator"):
        dry = deployed.kubectl("apply", "--dry-run=server", "-k", str(where), check=False)
        assert dry.returncode == 0, dry.stderr


def test_without_the_components_the_operator_cannot_touch_the_gpu_operator(
    deployed,
) -> None:
    kinds = {(d["kind"], d["metadata"]["name"]) for d in rendered(deployed, ROOT / "deploy")}
    assert ("Role", "migplan-operator-mig-config") not in kinds


def operator_args(cp, where: Path) -> list[str]:
    deployment = next(d for d in rendered(cp, where) if d["kind"] == "Deployment")
    return deployment["spec"]["template"]["spec"]["containers"][0]["args"]


def test_metrics_answer_only_callers_rbac_allows_unless_opened(deployed) -> None:
    # #29 from reading: the chart's default let anyone the NetworkPolicy admits scrape.
    kinds = {(d["kind"], d["metadata"]["name"]) for d in rendered(deployed, ROOT / "deploy")}
    assert ("ClusterRoleBinding", "migplan-operator-auth-delegator") in kinds
    assert "--metrics-auth=kubernetes" in operator_args(deployed, ROOT / "deploy")
    opened = ROOT / "tests" / "cluster" / "overlays" / "metrics-open"
    assert not any(a.startswith("--metrics-auth") for a in operator_args(deployed, opened))
    assert not any(
        d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"].endswith("auth-delegator")
        for d in rendered(deployed, opened)
    )
    assert can(deployed, OPERATOR, "create", "tokenreviews.authentication.k8s.io", None)


def pod_from(
    template: dict, *, name: str, namespace: str, node: str | None = None, account: bool = True
) -> dict:
    """A bare pod with `template`'s spec (not its labels: a DaemonSet would adopt it)."""
    spec = dict(template["spec"])
    if node:
        spec["nodeName"] = node
    if not account:
        spec.pop("serviceAccountName", None)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"test": name}},
        "spec": spec,
    }


def dry_create(cp, manifest: dict):
    return cp.kubectl(
        "create", "--dry-run=server", "-f", "-", stdin=json.dumps(manifest), check=False
    )


def test_pod_security_keeps_the_operator_namespace_restricted(deployed) -> None:
    labels = json.loads(deployed.kubectl("get", "ns", "migplan-system", "-o", "json").stdout)[
        "metadata"
    ]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    operator = workload(deployed, "migplan-operator")["spec"]["template"]
    agent = workload(deployed, "migplan-agent")["spec"]["template"]
    ok = dry_create(deployed, pod_from(operator, name="op", namespace="migplan-system"))
    assert ok.returncode == 0, ok.stderr
    assert "violate" not in ok.stderr
    refused = dry_create(
        deployed, pod_from(agent, name="ag", namespace="migplan-system", account=False)
    )
    assert refused.returncode != 0
    assert 'violates PodSecurity "restricted' in refused.stderr
    assert "privileged" in refused.stderr
    admitted = dry_create(deployed, pod_from(agent, name="ag", namespace="migplan-agent"))
    assert admitted.returncode == 0, admitted.stderr
    job = next(
        d
        for d in yaml.safe_load_all(
            (ROOT / "deploy" / "examples" / "rebalance-cronjob.yaml").read_text()
        )
        if d["kind"] == "CronJob"
    )["spec"]["jobTemplate"]["spec"]["template"]
    cron = dry_create(
        deployed, pod_from(job, name="rebalance", namespace="migplan-system", account=False)
    )
    assert cron.returncode == 0, cron.stderr
    assert "violate" not in cron.stderr


def test_the_agent_gets_what_the_nvidia_runtime_needs_to_reach_nvml(deployed) -> None:
    spec = workload(deployed, "migplan-agent")["spec"]["template"]["spec"]
    assert spec["runtimeClassName"] == "nvidia"
    [agent] = spec["containers"]
    env = {e["name"]: e.get("value") for e in agent["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert "utility" in env["NVIDIA_DRIVER_CAPABILITIES"].split(",")  # libnvidia-ml
    assert env["NVIDIA_MIG_CONFIG_DEVICES"] == "all"
    assert env["NVIDIA_MIG_MONITOR_DEVICES"] == "all"
    assert agent["securityContext"]["privileged"] is True  # CAP_SYS_ADMIN for MIG config


def test_network_policies_admit_only_scrapers_to_the_metrics_ports(deployed) -> None:
    policies = {
        d["metadata"]["name"]: d for d in rendered(deployed) if d["kind"] == "NetworkPolicy"
    }
    for name in ("migplan-operator", "migplan-agent"):
        policy = policies[name]["spec"]
        pod = workload(deployed, name)["spec"]["template"]
        assert policy["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
        assert policy["policyTypes"] == ["Ingress"]
        # one rule: scrapers' namespaces, to the metrics port only (not health, nothing else)
        [rule] = policy["ingress"]
        assert rule["from"] == [
            {"namespaceSelector": {"matchLabels": {"migplan.io/metrics-scraper": "true"}}}
        ]
        assert [p["port"] for p in rule["ports"]] == ["metrics"]
        ports = {p["name"] for p in pod["spec"]["containers"][0]["ports"]}
        assert ports == {"metrics", "health"}
    stored = json.loads(deployed.kubectl("get", "networkpolicy", "-A", "-o", "json").stdout)[
        "items"
    ]
    assert {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in stored} >= {
        ("migplan-system", "migplan-operator"),
        ("migplan-agent", "migplan-agent"),
    }


def apply(cp, manifest: dict) -> None:
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))


@pytest.fixture(scope="module")
def agent_on_node_a(deployed):
    """Nodes vap-a and vap-b with a NodePartition and a device-plugin pod each, an agent pod
    on vap-a (the DaemonSet's template), and a kubeconfig holding that pod's token."""
    from nodes import gpu_node, report_partition

    cp = deployed
    for node in ("vap-a", "vap-b"):
        apply(cp, gpu_node(node, product="H100", pool="vap"))
        report_partition(cp, node)
        for name, namespace, labels in (
            (f"plugin-{node}", "gpu-operator", {"app": "nvidia-device-plugin-daemonset"}),
            (f"gfd-{node}", "gpu-operator", {"app": "gpu-feature-discovery"}),
            (f"other-{node}", "gpu-operator", {"app": "nvidia-driver-daemonset"}),
            (f"dra-{node}", DRA, {"nvidia-dra-driver-gpu-component": "kubelet-plugin"}),
            (f"dra-ctl-{node}", DRA, {"nvidia-dra-driver-gpu-component": "controller"}),
        ):
            apply(
                cp,
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, "namespace": namespace, "labels": labels},
                    "spec": {
                        "nodeName": node,
                        "containers": [{"name": "c", "image": "registry.invalid/p"}],
                    },
                },
            )
    template = workload(cp, "migplan-agent")["spec"]["template"]
    apply(cp, pod_from(template, name="agent-vap-a", namespace="migplan-agent", node="vap-a"))
    yield cp.service_account_kubeconfig(
        namespace="migplan-agent", name="migplan-agent", bound_pod="agent-vap-a"
    )
    for kind, name, namespace in (
        ("pod", "agent-vap-a", "migplan-agent"),
        *(
            ("pod", f"{p}-{n}", "gpu-operator")
            for p in ("plugin", "gfd", "other")
            for n in ("vap-a", "vap-b")
        ),
        *(("pod", f"{p}-{n}", DRA) for p in ("dra", "dra-ctl") for n in ("vap-a", "vap-b")),
    ):
        cp.kubectl(
            "delete", kind, name, "-n", namespace, "--force", "--grace-period=0", check=False
        )
    for node in ("vap-a", "vap-b"):
        cp.kubectl("delete", "np", node, "--wait=false", check=False)
        cp.kubectl("delete", "node", node, "--wait=false", check=False)


def as_agent(cp, kubeconfig: Path, *args: str):
    return cp.kubectl(*args, kubeconfig=kubeconfig, check=False)


def report_status(cp, kubeconfig: Path, node: str):
    return as_agent(
        cp,
        kubeconfig,
        "patch",
        "np",
        node,
        "--subresource=status",
        "--type=merge",
        "--dry-run=server",
        "-p",
        json.dumps({"status": {"phase": "Applied"}}),
    )


def test_the_agent_may_report_only_its_own_nodes_partition(deployed, agent_on_node_a) -> None:
    own = report_status(deployed, agent_on_node_a, "vap-a")
    assert own.returncode == 0, own.stderr
    other = report_status(deployed, agent_on_node_a, "vap-b")
    assert other.returncode != 0
    assert "may write only NodePartition vap-a, not vap-b" in other.stderr


@pytest.mark.parametrize(
    ("pod", "namespace", "allowed"),
    [
        ("plugin-vap-a", "gpu-operator", True),
        ("gfd-vap-a", "gpu-operator", True),
        ("plugin-vap-b", "gpu-operator", False),
        ("other-vap-a", "gpu-operator", False),
        ("dra-vap-a", DRA, True),
        ("dra-vap-b", DRA, False),
        ("dra-ctl-vap-a", DRA, False),
    ],
)
def test_the_agent_may_delete_only_the_gpu_components_on_its_node(
    deployed, agent_on_node_a, pod, namespace, allowed
) -> None:
    result = as_agent(
        deployed, agent_on_node_a, "delete", "pod", pod, "-n", namespace, "--dry-run=server"
    )
    assert (result.returncode == 0) is allowed, result.stderr
    if not allowed:
        assert "may delete only the GPU Operator's device-plugin" in result.stderr


def test_an_agent_token_that_names_no_node_may_write_nothing(deployed, agent_on_node_a) -> None:
    unbound = deployed.service_account_kubeconfig(namespace="migplan-agent", name="migplan-agent")
    result = report_status(deployed, unbound, "vap-a")
    assert result.returncode != 0
    assert "names no node" in result.stderr
    # Reading is RBAC's business alone, and RBAC allows it.
    assert as_agent(deployed, unbound, "get", "np", "vap-a").returncode == 0


def test_metrics_behind_kubernetes_authn_answer_only_allowed_callers(deployed) -> None:
    from operator_proc import free_port, running_operator

    cp = deployed
    for name in ("scraper", "nosy"):
        cp.kubectl("create", "serviceaccount", name, "-n", "default", check=False)
    cp.kubectl(
        "create",
        "clusterrolebinding",
        "scraper-reads-migplan-metrics",
        "--clusterrole=migplan-metrics-reader",
        "--serviceaccount=default:scraper",
        check=False,
    )
    tokens = {
        name: cp.kubectl("create", "token", name, "-n", "default").stdout.strip()
        for name in ("scraper", "nosy")
    }
    operator = cp.service_account_kubeconfig(namespace="migplan-system", name="migplan-operator")
    port = free_port()
    with running_operator(
        cp, kubeconfig=operator, metrics_port=port, extra_args=("--metrics-auth", "kubernetes")
    ):

        def scrape(token: str | None) -> tuple[int, str]:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics")
            if token is not None:
                request.add_header("Authorization", f"Bearer {token}")
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    return response.status, response.read().decode()
            except urllib.error.HTTPError as exc:
                return exc.code, exc.read().decode()
            except urllib.error.URLError:
                return 0, "not listening yet"

        wait_for(lambda: scrape(None)[0] == 401, "the operator's metrics endpoint")
        assert scrape("not-a-token")[0] == 401
        assert scrape(tokens["nosy"])[0] == 403
        status, body = scrape(tokens["scraper"])
        assert status == 200, body
        assert "migplan_evictions_total" in body
