"""The mig-manager hand-over on the real API server: entry names are label values the API
server accepts for any node name, and handing over one node never drops another's entry."""

from __future__ import annotations

import json

import yaml
from nodes import gpu_node

from migplan.operator.controller.mig_manager import CONFIG_LABEL, hand_over
from migplan.operator.kube.connect import connect

CONFIG_MAP = ("gpu-operator", "migplan-names-test")
CLOUD = "ip-172-31-100-200.ap-southeast-2.compute.internal"


def _entries(cp) -> dict:
    out = cp.kubectl("get", "configmap", "-n", CONFIG_MAP[0], CONFIG_MAP[1], "-o", "json")
    return yaml.safe_load(json.loads(out.stdout)["data"]["config.yaml"])["mig-configs"]


def _label(cp, node: str) -> str:
    doc = json.loads(cp.kubectl("get", "node", node, "-o", "json").stdout)
    return doc["metadata"]["labels"][CONFIG_LABEL]


def test_hand_over_keeps_other_nodes_entries_and_fits_long_node_names(crds) -> None:
    cp = crds
    nodes = ("mmn-gpu", "mmn-gpu-2", CLOUD)
    items = [gpu_node(n, product="NVIDIA-H100-80GB-HBM3") for n in nodes]
    items.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}})
    cp.kubectl(
        "apply", "-f", "-", stdin=json.dumps({"kind": "List", "apiVersion": "v1", "items": items})
    )
    api = connect(kubeconfig=str(cp.kubeconfig))
    names = {}
    for node, layout in (("mmn-gpu-2", "1g.10gb@0"), ("mmn-gpu", "7g.80gb@0"), (CLOUD, "-")):
        names[node] = hand_over(
            api, node=node, targets={0: layout}, namespace=CONFIG_MAP[0], config_map=CONFIG_MAP[1]
        )
    # 66 characters before the fix: the API server refused the label.
    assert len(names[CLOUD]) <= 63
    entries = _entries(cp)
    for node in nodes:
        assert _label(cp, node) == names[node]
        assert names[node] in entries  # before the fix, handing over mmn-gpu dropped mmn-gpu-2's
    # A new target for one node replaces only that node's entry.
    newer = hand_over(
        api,
        node="mmn-gpu",
        targets={0: "3g.40gb@0"},
        namespace=CONFIG_MAP[0],
        config_map=CONFIG_MAP[1],
    )
    entries = _entries(cp)
    assert newer in entries
    assert names["mmn-gpu"] not in entries
    assert names["mmn-gpu-2"] in entries
    assert names[CLOUD] in entries
