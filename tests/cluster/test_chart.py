"""The Helm chart (charts/migplan): it lints, renders exactly the objects deploy/ applies (no
drift), passes the API server's dry run with every option on, and installs on a control plane
of its own, where the operator, running as the chart's ServiceAccount, plans a plan."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from harness import ControlPlane, build_binaries
from nodes import gpu_node, report_partition
from operator_proc import running_operator
from waiting import wait_for

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "migplan"
RELEASE, NAMESPACE = "migplan", "migplan-system"
MIGPLAN = str(Path(sys.executable).parent / "migplan")
HELM_LABELS = ("app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "helm.sh/chart")
EVERYTHING = (
    "gpuOperator.enabled=true",
    "migManager.enabled=true",
    "operator.metricsAuth=kubernetes",
    "draDriver.enabled=true",
)
# deploy/ variants and the chart values that must render the same objects.
VARIANTS = {
    "deploy": (ROOT / "deploy", ()),
    "deploy/gpu-operator": (ROOT / "deploy" / "gpu-operator", ("gpuOperator.enabled=true",)),
    "everything": (ROOT / "tests" / "cluster" / "overlays" / "everything", EVERYTHING),
    "metrics-open": (
        ROOT / "tests" / "cluster" / "overlays" / "metrics-open",
        ("operator.metricsAuth=none",),
    ),
}


@pytest.fixture(scope="module")
def bin_dir() -> Path:
    return build_binaries()


def helm(bin_dir: Path, *args: str, kubeconfig: Path | None = None) -> str:
    config = [f"--kubeconfig={kubeconfig}"] if kubeconfig else []
    ran = subprocess.run(
        [str(bin_dir / "helm"), *config, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert ran.returncode == 0, f"helm {' '.join(args)}: {ran.stderr}"
    return ran.stdout


def template(bin_dir: Path, *values: str) -> list[dict]:
    sets = [arg for v in values for arg in ("--set", v)]
    out = helm(bin_dir, "template", RELEASE, str(CHART), "-n", NAMESPACE, "--include-crds", *sets)
    return [d for d in yaml.safe_load_all(out) if d]


def key(obj: dict) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]


def without_install_labels(obj: dict) -> dict:
    """`obj` without the labels only one of the two installs sets."""
    labels = obj["metadata"].get("labels", {})
    for name in (*HELM_LABELS, "app.kubernetes.io/part-of"):
        labels.pop(name, None)
    if not labels:
        obj["metadata"].pop("labels", None)
    annotations = obj["metadata"].get("annotations", {})
    annotations.pop("helm.sh/resource-policy", None)  # the chart keeps its CRDs on uninstall
    if not annotations:
        obj["metadata"].pop("annotations", None)
    return obj


def test_chart_lints(bin_dir: Path) -> None:
    helm(bin_dir, "lint", "--strict", str(CHART))
    helm(bin_dir, "lint", "--strict", str(CHART), *(a for v in EVERYTHING for a in ("--set", v)))
    for values in (TEAM_B_VALUES, ("fullnameOverride=gpu", "nameOverride=planner")):
        helm(bin_dir, "lint", "--strict", str(CHART), *(a for v in values for a in ("--set", v)))


@pytest.mark.parametrize("variant", VARIANTS)
def test_chart_renders_what_deploy_applies(bin_dir: Path, variant: str) -> None:
    where, values = VARIANTS[variant]
    kustomized = subprocess.run(
        [str(bin_dir / "kubectl"), "kustomize", str(where)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    deployed = {key(o): without_install_labels(o) for o in yaml.safe_load_all(kustomized) if o}
    charted = {key(o): without_install_labels(o) for o in template(bin_dir, *values)}
    # The release's namespace is made by whoever installs the chart (helm needs it first).
    assert set(deployed) - set(charted) == {("Namespace", "", NAMESPACE)}
    assert set(charted) - set(deployed) == set()
    for k, obj in charted.items():
        assert obj == deployed[k], f"{k} differs between the chart and {variant}"


def test_chart_labels_every_object_it_owns(bin_dir: Path) -> None:
    for obj in template(bin_dir, *EVERYTHING):
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/part-of"] == "migplan", key(obj)
        assert labels["app.kubernetes.io/managed-by"] == "Helm", key(obj)
    crds = [o for o in template(bin_dir) if o["kind"] == "CustomResourceDefinition"]
    assert len(crds) == 2
    assert all(c["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep" for c in crds)
    assert not [o for o in template(bin_dir, "crds.install=false") if "CustomResource" in o["kind"]]


def test_chart_rebalance_cronjob_is_the_example(bin_dir: Path) -> None:
    example = ROOT / "deploy" / "examples" / "rebalance-cronjob.yaml"
    wanted = {key(o): o for o in yaml.safe_load_all(example.read_text()) if o}
    charted = {
        key(o): without_install_labels(o)
        for o in template(bin_dir, "rebalance.enabled=true")
        if key(o) in wanted
    }
    assert charted == wanted


@pytest.fixture(scope="module")
def chart_plane(bin_dir: Path) -> Iterator[ControlPlane]:
    """A control plane of the chart's own: it installs cluster-wide objects (ClusterRoles,
    the admission policy) under the names deploy/ uses on the session's control plane."""
    with ControlPlane.up(bin_dir) as cp:
        cp.kubectl("apply", "-f", str(bin_dir / "servicemonitor-crd.yaml"), "--server-side")
        for namespace, labels in (
            (NAMESPACE, {"pod-security.kubernetes.io/enforce": "restricted"}),
            ("gpu-operator", {}),
        ):
            manifest = {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": namespace, "labels": labels},
            }
            cp.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
        runtime = {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": "nvidia"},
            "handler": "nvidia",
        }
        cp.kubectl("apply", "-f", "-", stdin=json.dumps(runtime))
        yield cp


def test_chart_with_every_option_passes_the_api_servers_dry_run(
    bin_dir: Path, chart_plane: ControlPlane
) -> None:
    cp = chart_plane
    # In an agent namespace of its own: the install test below makes the default one.
    objects = template(
        bin_dir,
        *EVERYTHING,
        "rebalance.enabled=true",
        "metrics.serviceMonitor.enabled=true",
        "agent.namespace=migplan-agent-dry-run",
        "gpuOperator.namespace=nvidia-gpu",
        "gpuOperator.selectors.devicePlugin=app.kubernetes.io/name=device-plugin",
        "agent.cdiCommand=/host/nvidia-ctk cdi generate",
        "agent.extraVolumes[0].name=toolkit",
        "agent.extraVolumes[0].hostPath.path=/usr/local/nvidia/toolkit",
        "agent.extraVolumeMounts[0].name=toolkit",
        "agent.extraVolumeMounts[0].mountPath=/host",
    )
    assert "ServiceMonitor" in {o["kind"] for o in objects}
    agent = next(o for o in objects if o["kind"] == "DaemonSet")["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in agent["containers"][0]["env"]}
    assert env["MIGPLAN_GPU_OPERATOR_NAMESPACE"] == "nvidia-gpu"
    assert env["MIGPLAN_DEVICE_PLUGIN_SELECTOR"] == "app.kubernetes.io/name=device-plugin"
    assert env["MIGPLAN_CDI_COMMAND"] == "/host/nvidia-ctk cdi generate"
    assert env["MIGPLAN_DRA_PLUGIN_NAMESPACE"] == "nvidia-dra-driver-gpu"
    assert "MIGPLAN_GFD_SELECTOR" not in env  # unset: the agent's default
    assert {"name": "toolkit", "mountPath": "/host"} in agent["containers"][0]["volumeMounts"]
    crds = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    cp.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(crds))
    # A dry run cannot see the namespace it would create itself.
    agent_ns = [o for o in objects if o["kind"] == "Namespace"]
    # ... nor the GPU Operator's, which its own install makes.
    agent_ns.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "nvidia-gpu"}})
    dra = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "nvidia-dra-driver-gpu"}}
    agent_ns.append(dra)
    cp.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(agent_ns))
    rest = [o for o in objects if o["kind"] not in ("CustomResourceDefinition", "Namespace")]
    try:
        dry = cp.kubectl(
            "apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump_all(rest), check=False
        )
    finally:  # the install below makes them as the release's own
        for crd in crds:
            cp.kubectl("delete", "crd", crd["metadata"]["name"], "--wait=true")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count("(server dry run)") == len(rest)


def test_helm_install_then_the_operator_plans_as_the_charts_service_account(
    bin_dir: Path, chart_plane: ControlPlane
) -> None:
    cp = chart_plane
    helm(
        bin_dir,
        "install",
        RELEASE,
        str(CHART),
        "-n",
        NAMESPACE,
        "--set",
        "gpuOperator.enabled=true",
        kubeconfig=cp.kubeconfig,
    )
    listed = json.loads(
        helm(bin_dir, "list", "-n", NAMESPACE, "-o", "json", kubeconfig=cp.kubeconfig)
    )
    assert [(r["name"], r["status"]) for r in listed] == [(RELEASE, "deployed")]
    for name in ("chart-1", "chart-2"):
        node = gpu_node(name, product="NVIDIA-H100-80GB-HBM3", labels={"migplan.io/pool": "chart"})
        cp.kubectl("apply", "-f", "-", stdin=json.dumps(node))
        report_partition(cp, name)
    as_operator = cp.service_account_kubeconfig(namespace=NAMESPACE, name="migplan-operator")
    plan = {
        "apiVersion": "migplan.io/v1alpha1",
        "kind": "GPUPartitionPlan",
        "metadata": {"name": "chart-pool"},
        "spec": {
            "nodeSelector": {"matchLabels": {"migplan.io/pool": "chart"}},
            "demand": {"profiles": [{"resource": "nvidia.com/mig-3g.40gb", "count": 3}]},
            "dryRun": True,
        },
    }

    def planned() -> dict | None:
        got = json.loads(cp.kubectl("get", "gpp", "chart-pool", "-o", "json").stdout)
        status = got.get("status", {})
        return status if status.get("phase") == "Planned" else None

    with running_operator(cp, kubeconfig=as_operator):
        cp.kubectl("apply", "-f", "-", stdin=json.dumps(plan))
        status = wait_for(planned, "the operator to plan as the chart's ServiceAccount", 90)
        assert status["demandMet"] == "3/3"
    helm(bin_dir, "uninstall", RELEASE, "-n", NAMESPACE, "--wait", kubeconfig=cp.kubeconfig)
    left = cp.kubectl("get", "clusterrole", "migplan-operator", check=False)
    assert left.returncode != 0
    assert "NotFound" in left.stderr


TEAM_B = "team-b"
TEAM_B_VALUES = (
    "crds.install=false",  # installed once, by the first release
    f"agent.namespace={TEAM_B}-agent",
    f"agent.nodeSelector.migplan\\.io/pool={TEAM_B}",
    f"operator.planSelector.migplan\\.io/operator={TEAM_B}",
    "operator.replicas=1",
)


def test_two_releases_install_side_by_side_and_each_operator_plans_its_own_plans(
    bin_dir: Path, chart_plane: ControlPlane
) -> None:
    """Release migplan (deploy/'s names) and release team-b in a namespace of its own: no
    name collides (Helm refuses to adopt another release's object), team-b's objects are
    named after it, and its operator, as its own ServiceAccount, plans the plans labelled
    for it and leaves the others."""
    cp = chart_plane
    cp.kubectl("create", "namespace", TEAM_B)
    sets_b = [arg for v in TEAM_B_VALUES for arg in ("--set", v)]
    helm(bin_dir, "install", RELEASE, str(CHART), "-n", NAMESPACE, kubeconfig=cp.kubeconfig)
    try:
        helm(
            bin_dir, "install", TEAM_B, str(CHART), "-n", TEAM_B, *sets_b,
            kubeconfig=cp.kubeconfig,
        )  # fmt: skip
        roles = cp.kubectl("get", "clusterrole", "-o", "name").stdout.split()
        kind = "clusterrole.rbac.authorization.k8s.io"
        assert {f"{kind}/migplan-operator", f"{kind}/{TEAM_B}-migplan-operator"} <= set(roles)
        node = gpu_node(
            "team-b-1", product="NVIDIA-H100-80GB-HBM3", labels={"migplan.io/pool": TEAM_B}
        )
        cp.kubectl("apply", "-f", "-", stdin=json.dumps(node))
        report_partition(cp, "team-b-1")
        plans = [
            {
                "apiVersion": "migplan.io/v1alpha1",
                "kind": "GPUPartitionPlan",
                "metadata": {"name": name, "labels": labels},
                "spec": {
                    "nodeSelector": {"matchLabels": {"migplan.io/pool": TEAM_B}},
                    "demand": {"profiles": [{"resource": "nvidia.com/mig-3g.40gb", "count": 2}]},
                    "dryRun": True,
                },
            }
            for name, labels in (("b-plan", {"migplan.io/operator": TEAM_B}), ("other", {}))
        ]
        as_team_b = cp.service_account_kubeconfig(
            namespace=TEAM_B, name=f"{TEAM_B}-migplan-operator"
        )
        with running_operator(
            cp,
            kubeconfig=as_team_b,
            extra_args=("--plan-selector", f"migplan.io/operator={TEAM_B}"),
        ):
            cp.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(plans))
            wait_for(
                lambda: (
                    json.loads(cp.kubectl("get", "gpp", "b-plan", "-o", "json").stdout)
                    .get("status", {})
                    .get("phase")
                    == "Planned"
                ),
                "team b's operator to plan its plan",
                90,
            )
            other = json.loads(cp.kubectl("get", "gpp", "other", "-o", "json").stdout)
            assert "status" not in other
            # `migplan status -n`: the release's operator and only the plans it acts on.
            env = {**os.environ, "KUBECONFIG": str(cp.kubeconfig)}
            shown = subprocess.run(
                [MIGPLAN, "status", "-n", TEAM_B],
                capture_output=True,
                text=True,
                env=env,
                check=False,
            )
            assert shown.returncode == 0, shown.stderr
            assert (
                f"operator {TEAM_B}/{TEAM_B}-migplan-operator: 0/1 ready, acts on "
                f"migplan.io/operator={TEAM_B}" in shown.stdout
            )
            assert "b-plan" in shown.stdout
            assert "other" not in shown.stdout
            listed = subprocess.run(
                [MIGPLAN, "status", "-n", TEAM_B, "-o", "json"],
                capture_output=True, text=True, env=env, check=False,
            )  # fmt: skip
            assert [p["name"] for p in json.loads(listed.stdout)] == ["b-plan"]
            every = subprocess.run(
                [MIGPLAN, "status", "-o", "json"],
                capture_output=True,
                text=True,
                env=env,
                check=False,
            )
            assert [p["name"] for p in json.loads(every.stdout)] == ["b-plan", "other"]
            nowhere = subprocess.run(
                [MIGPLAN, "status", "-n", "kube-system"],
                capture_output=True, text=True, env=env, check=False,
            )  # fmt: skip
            assert nowhere.returncode == 2
            assert "no migplan operator in namespace 'kube-system'" in nowhere.stderr
    finally:
        for release, namespace in ((TEAM_B, TEAM_B), (RELEASE, NAMESPACE)):
            helm(bin_dir, "uninstall", release, "-n", namespace, "--wait", kubeconfig=cp.kubeconfig)
        cp.kubectl("delete", "node", "team-b-1", "--wait=false", check=False)


def test_name_overrides_rename_every_object(bin_dir: Path) -> None:
    default = {key(o) for o in template(bin_dir)}
    for values, prefix in (
        (("fullnameOverride=gpu",), "gpu-"),
        (("nameOverride=planner",), f"{RELEASE}-planner-"),
    ):
        renamed = template(bin_dir, *values)
        named = [o for o in renamed if o["kind"] not in ("CustomResourceDefinition", "Namespace")]
        assert named
        assert all(o["metadata"]["name"].startswith(prefix) for o in named), [
            o["metadata"]["name"] for o in named if not o["metadata"]["name"].startswith(prefix)
        ]
        assert not {key(o) for o in named} & default
    assert helm_fails(bin_dir, "fullnameOverride=Not_A_Name")


def helm_fails(bin_dir: Path, *values: str) -> str:
    sets = [arg for v in values for arg in ("--set", v)]
    ran = subprocess.run(
        [str(bin_dir / "helm"), "template", RELEASE, str(CHART), "-n", NAMESPACE, *sets],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert ran.returncode != 0, ran.stdout[:500]
    return ran.stderr


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("logFormat=xml", "at '/logFormat': value must be one of"),
        ("operator.replicas=two", "at '/operator/replicas': got string, want integer"),
        ("operator.metricsPort=0", "at '/operator/metricsPort'"),
        ("operater.replicas=2", "additional properties 'operater' not allowed"),
    ],
)
def test_the_values_schema_refuses_what_would_fail_at_pod_start(
    bin_dir: Path, value: str, said: str
) -> None:
    assert said in helm_fails(bin_dir, value)


def test_the_usual_overrides_reach_the_operators_pod(bin_dir: Path) -> None:
    rendered = template(
        bin_dir,
        "operator.podAnnotations.example\\.com/team=gpu",
        "operator.extraArgs[0]=--tick=30",
        "operator.extraEnv[0].name=HTTPS_PROXY",
        "operator.extraEnv[0].value=http://proxy:3128",
        "operator.resources.limits.memory=2Gi",
        "operator.securityContext.readOnlyRootFilesystem=false",
    )
    deployment = next(
        d
        for d in rendered
        if d["kind"] == "Deployment" and d["metadata"]["name"] == "migplan-operator"
    )
    pod = deployment["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert pod["metadata"]["annotations"]["example.com/team"] == "gpu"
    assert pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert "--tick=30" in container["args"]
    assert {"name": "HTTPS_PROXY", "value": "http://proxy:3128"} in container["env"]
    assert container["resources"]["limits"]["memory"] == "2Gi"
    assert container["securityContext"]["readOnlyRootFilesystem"] is False
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True


def test_the_agents_overrides_reach_its_pods(bin_dir: Path) -> None:
    rendered = template(
        bin_dir,
        "agent.podAnnotations.example\\.com/team=gpu",
        "agent.extraArgs[0]=--interval=60",
        "agent.extraEnv[0].name=NVIDIA_DRIVER_ROOT",
        "agent.extraEnv[0].value=/run/nvidia/driver",
    )
    daemonset = next(d for d in rendered if d["kind"] == "DaemonSet")
    pod = daemonset["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert pod["metadata"]["annotations"]["example.com/team"] == "gpu"
    assert "--interval=60" in container["args"]
    assert {"name": "NVIDIA_DRIVER_ROOT", "value": "/run/nvidia/driver"} in container["env"]


PREVIOUS = "d3bf8de"
"""A commit whose chart installed the CRDs from crds/ (which Helm never upgrades)."""
ADOPT = (
    ("label", "app.kubernetes.io/managed-by=Helm"),
    ("annotate", f"meta.helm.sh/release-name={RELEASE}"),
    ("annotate", f"meta.helm.sh/release-namespace={NAMESPACE}"),
)
"""README's one-time step for a release installed before the CRDs were templates."""
CRDS = ("crd/gpupartitionplans.migplan.io", "crd/nodepartitions.migplan.io")


def previous_chart(tmp_path: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", PREVIOUS, "charts/migplan"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive, check=True)
    return tmp_path / "charts" / "migplan"


def conditions_schema(cp, plural: str) -> dict:
    crd = json.loads(cp.kubectl("get", f"crd/{plural}.migplan.io", "-o", "json").stdout)
    status = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    return dict(status["properties"]["conditions"])


def test_helm_upgrade_brings_the_new_crds_and_uninstall_keeps_them(
    bin_dir: Path, chart_plane: ControlPlane, tmp_path: Path
) -> None:
    cp = chart_plane
    for crd in CRDS:
        cp.kubectl("delete", crd, "--ignore-not-found", "--wait=true")
    old = previous_chart(tmp_path)
    helm(bin_dir, "install", RELEASE, str(old), "-n", NAMESPACE, kubeconfig=cp.kubeconfig)
    assert "x-kubernetes-list-type" not in conditions_schema(cp, "gpupartitionplans")
    try:
        for verb, mark in ADOPT:
            cp.kubectl(verb, *CRDS, mark, "--overwrite")
        helm(bin_dir, "upgrade", RELEASE, str(CHART), "-n", NAMESPACE, kubeconfig=cp.kubeconfig)
        for plural in ("gpupartitionplans", "nodepartitions"):
            conditions = conditions_schema(cp, plural)
            assert conditions["x-kubernetes-list-type"] == "map", plural
            assert conditions["x-kubernetes-list-map-keys"] == ["type"], plural
        # From here on an upgrade needs nothing done by hand.
        helm(bin_dir, "upgrade", RELEASE, str(CHART), "-n", NAMESPACE, kubeconfig=cp.kubeconfig)
    finally:
        helm(bin_dir, "uninstall", RELEASE, "-n", NAMESPACE, "--wait", kubeconfig=cp.kubeconfig)
    for crd in CRDS:
        assert cp.kubectl("get", crd, check=False).returncode == 0, f"{crd} went with the release"
