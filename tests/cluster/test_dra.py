"""DRA on the real control plane: the API server takes NVIDIA-shaped ResourceSlices (the
driver's current format: per-GPU slices with counter sets, MIG names with the profile; and
the format before v25.12.0), the real scheduler allocates claims from them, and migplan reads
held instances and pending claims from both."""

from __future__ import annotations

import json

import pytest
import yaml
from dra_objects import MIG_CLASS, claim_and_pod, pod_phase, unschedulable
from nodes import gpu_node, report_partition
from pools import apply
from waiting import wait_for

from migplan.operator.cli.app import run
from migplan.operator.cluster_inventory import read_inventory
from migplan.operator.kube.connect import connect
from migplan.operator.sim.dra_slices import Format, PublishedGpu, resource_slices
from migplan.planner.hardware.catalog import default_catalog
from migplan.planner.hardware.layout import Layout

pytestmark = pytest.mark.cluster

CATALOG = default_catalog()
H100 = CATALOG.model("H100-80GB")
A100 = CATALOG.model("A100-40GB")
NS = "dra"


def claimed_pod(name: str, profile: str, *, node: str) -> list[dict]:
    return claim_and_pod(
        name, profile, namespace=NS, node_selector={"kubernetes.io/hostname": node}
    )


@pytest.fixture(scope="module")
def dra_nodes(crds):
    cp = crds
    apply(
        cp,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        MIG_CLASS,
        gpu_node("dra-static", product="NVIDIA-H100-80GB-HBM3", labels={"migplan.io/pool": NS}),
        gpu_node(
            "dra-dynamic", product="NVIDIA-H100-80GB-HBM3", gpus=2, labels={"migplan.io/pool": NS}
        ),
        gpu_node("dra-legacy", product="NVIDIA-H100-80GB-HBM3", labels={"migplan.io/pool": NS}),
        gpu_node("dra-ampere", product="NVIDIA-A100-SXM4-40GB", labels={"migplan.io/pool": NS}),
    )
    layouts = {"dra-static": "1g.10gb@0+3g.40gb@4", "dra-legacy": "4g.40gb@0+2g.20gb@4"}
    static = {}
    for node, layout in layouts.items():
        report_partition(cp, node, layout=layout)
        instances = Layout.parse(layout).instances
        static[node] = PublishedGpu(
            minor=0,
            uuid=f"GPU-{node}-0",
            model=H100,
            instances=[(i, f"MIG-{node}-{n}") for n, i in enumerate(instances)],
        )
    dynamic = [PublishedGpu(minor=m, uuid=f"GPU-dynamic-{m}", model=H100) for m in (0, 1)]
    ampere = PublishedGpu(minor=0, uuid="GPU-ampere-0", model=A100, mig_enabled=True)
    apply(
        cp,
        *resource_slices("dra-static", [static["dra-static"]], mode="static"),
        *resource_slices("dra-dynamic", dynamic, mode="dynamic"),
        *resource_slices("dra-legacy", [static["dra-legacy"]], mode="static", form=Format.LEGACY),
        *resource_slices("dra-ampere", [ampere], mode="dynamic"),
    )
    return cp


def test_the_api_server_takes_per_gpu_slices_with_counter_sets(dra_nodes) -> None:
    found = json.loads(
        dra_nodes.kubectl(
            "get", "resourceslices", "--field-selector", "spec.nodeName=dra-dynamic", "-o", "json"
        ).stdout
    )["items"]
    assert len(found) == 3  # the counter sets, then one slice per GPU
    counters = [s for s in found if s["spec"].get("sharedCounters")]
    assert [c["name"] for c in counters[0]["spec"]["sharedCounters"]] == [
        "gpu-0-counter-set",
        "gpu-1-counter-set",
    ]
    assert all(s["spec"]["pool"]["resourceSliceCount"] == 3 for s in found)
    slot = next(
        d
        for s in found
        for d in s["spec"].get("devices") or []
        if d["name"] == "gpu-1-mig-3g40gb-9-4"
    )
    assert slot["capacity"]["multiprocessors"]["value"] == "60"
    assert "uuid" not in slot["attributes"]


def test_the_scheduler_allocates_nvidia_shaped_devices_and_migplan_sees_the_holders(
    dra_nodes,
) -> None:
    cp = dra_nodes
    apply(
        cp,
        *claimed_pod("static-user", "3g.40gb", node="dra-static"),
        *claimed_pod("slot-user", "3g.40gb", node="dra-dynamic"),
        *claimed_pod("legacy-user", "4g.40gb", node="dra-legacy"),
        *claimed_pod("ampere-user", "3g.20gb", node="dra-ampere"),
        *claimed_pod("waiting", "2g.20gb", node="dra-static"),
    )
    for name in ("static-user", "slot-user", "legacy-user", "ampere-user"):
        wait_for(lambda n=name: pod_phase(cp, n, namespace=NS) == "Running", f"{name} to run")
    wait_for(lambda: unschedulable(cp, "waiting", namespace=NS), "the 2g claim to find nothing")

    snapshot = read_inventory(connect(kubeconfig=str(cp.kubeconfig)), catalog=CATALOG)
    nodes = {n.name: n for n in snapshot.inventory.nodes}
    assert nodes["dra-static"].gpus[0].in_use == {"3g.40gb@4": f"{NS}/static-user"}
    assert nodes["dra-legacy"].gpus[0].in_use == {"4g.40gb@0": f"{NS}/legacy-user"}
    dynamic = nodes["dra-dynamic"].gpus
    assert [g.uuid for g in dynamic] == ["GPU-dynamic-0", "GPU-dynamic-1"]
    (slot_gpu,) = [g for g in dynamic if g.in_use]
    ((instance, holder),) = slot_gpu.in_use.items()
    assert instance.startswith("3g.40gb@")
    assert holder == f"{NS}/slot-user"
    assert slot_gpu.layout == instance
    (ampere,) = nodes["dra-ampere"].gpus  # no full-GPU device: read from its slots
    assert ampere.uuid == "GPU-ampere-0"
    ((instance, holder),) = ampere.in_use.items()
    assert (instance.split("@")[0], holder) == ("3g.20gb", f"{NS}/ampere-user")
    pending = {p.name: p for p in snapshot.inventory.pending_pods if p.namespace == NS}
    assert [(c.claim, c.count, c.profiles) for c in pending["waiting"].claims] == [
        ("waiting", 1, ("2g.20gb",))
    ]
    assert not {"static-user", "slot-user", "legacy-user", "ampere-user"} & set(pending)


def test_live_inventory_and_preview_on_a_dra_cluster(dra_nodes, tmp_path, capsys) -> None:
    # Runs after the test above (same module): the 2g.20gb claim is still pending.
    cp = dra_nodes
    kubeconfig = str(cp.kubeconfig)
    assert run(["inventory", "--kubeconfig", kubeconfig]) == 0
    dumped = capsys.readouterr().out
    inventory = yaml.safe_load(dumped)
    waiting = next(p for p in inventory["pendingPods"] if p["name"] == "waiting")
    assert waiting["claims"][0]["profiles"] == ["2g.20gb"]
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "migplan.io/v1alpha1",
                "kind": "GPUPartitionPlan",
                "metadata": {"name": "dra-preview"},
                "spec": {
                    "nodeSelector": {"matchLabels": {"migplan.io/pool": NS}},
                    "demand": {
                        "fromPendingPods": {
                            "namespaceSelector": {
                                "matchLabels": {"kubernetes.io/metadata.name": NS}
                            }
                        }
                    },
                    "dryRun": True,
                },
            }
        )
    )
    assert run(["preview", str(plan), "--kubeconfig", kubeconfig, "-o", "json"]) == 0
    live = json.loads(capsys.readouterr().out)
    (row,) = [d for d in live["demand"] if d["profile"] == "2g.20gb"]
    assert (row["requested"], row["met"]) == (1, 1)
    saved = tmp_path / "inventory.yaml"
    saved.write_text(dumped)
    assert run(["preview", str(plan), "--cluster", str(saved), "-o", "json"]) == 0
    offline = json.loads(capsys.readouterr().out)
    assert offline["gpus"] == live["gpus"]


LIST = "[" + ",".join(f"'{i:02d}'" for i in range(40)) + "]"
COSTLY = f"{LIST}.all(a, {LIST}.all(b, {LIST}.all(c, a + b + c != '')))"
"""Estimated cost 598,971, under the API server's 1,000,000: admitted, and once took
cel-python 9-15 s per device."""


def optional_claim(name: str, *selectors: str) -> list[dict]:
    """A claim whose selectors the API server admits but cel-python could not evaluate."""
    made = claimed_pod(name, "unused", node="dra-static")
    made[0]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": s}} for s in selectors
    ]
    return made


def test_selectors_read_as_the_scheduler_reads_them(dra_nodes) -> None:
    # Optional syntax (#29 row 1) and a costly selector (row 3): the scheduler allocates the
    # 1g.10gb one, and migplan reads the pending ones as demand without a note (the costly
    # one within the pass's CEL budget, or a note would say it was spent). Runs last.
    cp = dra_nodes
    profile = "device.attributes['gpu.nvidia.com'].?profile.orValue('')"
    apply(
        cp,
        *optional_claim("optional-1g", f"{profile} == '1g.10gb'"),
        *optional_claim("optional-2g", f"{profile} == '2g.20gb'"),
        *optional_claim("costly-7g", COSTLY, f"{profile} == '7g.80gb'"),
    )
    wait_for(lambda: pod_phase(cp, "optional-1g", namespace=NS) == "Running", "optional-1g")
    for name in ("optional-2g", "costly-7g"):
        wait_for(lambda n=name: unschedulable(cp, n, namespace=NS), f"{name} to wait")
    snapshot = read_inventory(connect(kubeconfig=str(cp.kubeconfig)), catalog=CATALOG)
    pending = {p.name: p for p in snapshot.inventory.pending_pods if p.namespace == NS}
    assert [c.profiles for c in pending["optional-2g"].claims] == [("2g.20gb",)]
    assert [c.profiles for c in pending["costly-7g"].claims] == [("7g.80gb",)]
    assert "optional-1g" not in pending
    assert not [n for n in snapshot.notes if "optional" in n or "costly" in n]
    cp.kubectl(
        "delete",
        "pod,resourceclaim",
        "-n",
        NS,
        "optional-1g",
        "optional-2g",
        "costly-7g",
        "--wait=false",
    )
