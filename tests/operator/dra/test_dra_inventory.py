"""Reading DRA objects as NVIDIA's driver and Kubernetes write them: devices, held
instances, DynamicMIG nodes, and pending claims as either/or demand."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from migplan.operator.dra.devices import DeviceKind, slice_devices
from migplan.operator.dra.helper import Budget, Evaluator
from migplan.operator.dra.inventory import (
    DraState,
    claim_reader,
    claim_requests,
    nodes_from_slices,
    with_held,
)
from migplan.operator.sim.dra_slices import Format, PublishedGpu, resource_slices
from migplan.planner.api.inventory import GpuInfo, NodeInfo, resolve_node
from migplan.planner.hardware.catalog import default_catalog
from migplan.planner.hardware.layout import Instance

CATALOG = default_catalog()
PROFILE = "device.attributes['gpu.nvidia.com'].profile"
H100 = CATALOG.model("H100-80GB")
EXAMPLE = list(
    yaml.safe_load_all(
        (Path(__file__).resolve().parents[3] / "examples" / "dra" / "claim.yaml").read_text()
    )
)
"""The DRA example's documents: NVIDIA's MIG DeviceClass, a claim template, a pod."""
MIG_CLASS = next(doc for doc in EXAMPLE if doc["kind"] == "DeviceClass")
GPU_CLASS = {
    "metadata": {"name": "gpu.nvidia.com"},
    "spec": {
        "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}],
        "extendedResourceName": "example.com/gpu",
    },
}
SMALL_MIG = {
    "metadata": {"name": "small-mig"},
    "spec": {
        "selectors": MIG_CLASS["spec"]["selectors"]
        + [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}],
        "extendedResourceName": "example.com/small-mig",
    },
}


def static_node(form: Format = Format.CURRENT) -> list[dict]:
    gpu = PublishedGpu(
        minor=0,
        uuid="GPU-0",
        model=H100,
        instances=[(Instance.parse("3g.40gb@4"), "MIG-a"), (Instance.parse("1g.10gb@0"), "MIG-b")],
    )
    return resource_slices("node-a", [gpu], mode="static", form=form)


def dynamic_node(form: Format = Format.CURRENT) -> list[dict]:
    return resource_slices(
        "node-d", [PublishedGpu(minor=0, uuid="GPU-d0", model=H100)], mode="dynamic", form=form
    )


def claim(name, requests, *, namespace="ml", allocated=None, pods=()):
    body = {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": requests}},
    }
    if allocated:
        body["status"] = {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": pool, "device": d}
                        for pool, d in allocated
                    ]
                }
            },
            "reservedFor": [{"resource": "pods", "name": p, "uid": "u"} for p in pods],
        }
    return body


def exactly(*selectors, count=1, cls="mig.nvidia.com", name="gpu"):
    request = {"deviceClassName": cls, "count": count}
    if selectors:
        request["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": name, "exactly": request}


def pod(name, *, claims=(), statuses=(), namespace="ml"):
    return SimpleNamespace(
        metadata=SimpleNamespace(name=name, namespace=namespace),
        spec=SimpleNamespace(
            resource_claims=[
                SimpleNamespace(
                    name=ref,
                    resource_claim_name=claim_name,
                    resource_claim_template_name=template,
                )
                for ref, claim_name, template in claims
            ]
        ),
        status=SimpleNamespace(
            resource_claim_statuses=[
                SimpleNamespace(name=ref, resource_claim_name=made) for ref, made in statuses
            ]
        ),
    )


def state(*, claims=(), templates=(), slices=None) -> DraState:
    return DraState.of(
        slices=slices if slices is not None else static_node() + dynamic_node(),
        claims=claims,
        templates=templates,
        classes=[MIG_CLASS, GPU_CLASS, SMALL_MIG],
    )


H100_NODE = NodeInfo(
    name="node-a",
    gpus=(GpuInfo(index=0, model="H100-80GB", uuid="GPU-0", layout="1g.10gb@0+3g.40gb@4"),),
)


@pytest.mark.parametrize("form", list(Format))
def test_devices_are_told_apart_by_attributes_in_both_formats(form: Format) -> None:
    found = slice_devices(static_node(form) + dynamic_node(form))
    static = [d for d in found if d.node == "node-a"]
    assert sorted((d.kind, str(d.instance), d.uuid) for d in static) == [
        (DeviceKind.MIG, "1g.10gb@0", "MIG-b"),
        (DeviceKind.MIG, "3g.40gb@4", "MIG-a"),
    ]
    assert {d.parent_uuid for d in static} == {"GPU-0"}
    dynamic = [d for d in found if d.node == "node-d"]
    assert [d.kind for d in dynamic].count(DeviceKind.GPU) == 1
    slots = {str(d.instance) for d in dynamic if d.kind is DeviceKind.SLOT}
    assert {"7g.80gb@0", "1g.10gb@6", "3g.40gb@4", "1g.10gb+me@0"} <= slots
    assert len(slots) == sum(len(p.starts) for p in H100.profiles)


def test_an_older_pool_generation_is_ignored() -> None:
    old = resource_slices("node-a", [PublishedGpu(0, "GPU-0", H100)], mode="dynamic", generation=1)
    new = static_node()
    new[0]["spec"]["pool"]["generation"] = 2
    assert {d.kind for d in slice_devices(old + new)} == {DeviceKind.MIG}


@pytest.mark.parametrize(
    ("form", "big", "small"),
    [
        (Format.CURRENT, "gpu-0-mig-3g40gb-9-4", "gpu-0-mig-1g10gb-19-0"),
        (Format.LEGACY, "gpu-0-mig-9-4-4", "gpu-0-mig-19-0-1"),
    ],
)
def test_instances_claims_hold_are_in_use_by_their_pods(form, big: str, small: str) -> None:
    held = claim("train", [exactly()], allocated=[("node-a", big)], pods=["trainer"])
    unreserved = claim("later", [exactly()], allocated=[("node-a", small)])
    slices = static_node(form) + dynamic_node(form)
    (node,) = with_held([H100_NODE], state(claims=[held, unreserved], slices=slices).held())
    assert node.gpus[0].in_use == {"3g.40gb@4": "ml/trainer", "1g.10gb@0": "ml/later"}


def test_a_claim_several_pods_share_names_them_all() -> None:
    # Only the first reservedFor pod was named: destroying the instance evicted one of three.
    shared = claim(
        "shared", [exactly()], allocated=[("node-a", "gpu-0-mig-3g40gb-9-4")], pods=["a", "b", "c"]
    )
    s = state(claims=[shared], slices=static_node() + dynamic_node())
    (node,) = with_held([H100_NODE], s.held())
    assert node.gpus[0].in_use == {"3g.40gb@4": "ml/a"}
    assert node.gpus[0].shared_with == {"3g.40gb@4": ("ml/b", "ml/c")}
    (gpu,) = resolve_node(node, CATALOG)
    assert gpu.holders(gpu.layout.instances) == ["ml/a", "ml/b", "ml/c"]


def test_the_current_static_name_is_the_slot_name_and_only_uuid_tells_them_apart() -> None:
    static = next(d for d in slice_devices(static_node()) if str(d.instance) == "3g.40gb@4")
    slot = next(
        d
        for d in slice_devices(dynamic_node())
        if d.kind is DeviceKind.SLOT and d.name == static.name
    )
    assert (static.kind, slot.kind, str(slot.instance)) == (
        DeviceKind.MIG,
        DeviceKind.SLOT,
        "3g.40gb@4",
    )


def test_placement_comes_from_the_memory_slices_not_a_misleading_name() -> None:
    slices = static_node()
    device = next(d for d in slices[0]["spec"]["devices"] if d["name"].endswith("-9-4"))
    device["name"] = "gpu-0-mig-3g40gb-9-0"  # a name that disagrees with its slices 4-7
    found = {d.name: str(d.instance) for d in slice_devices(slices)}
    assert found["gpu-0-mig-3g40gb-9-0"] == "3g.40gb@4"


def test_an_ampere_gpu_with_dynamic_mig_publishes_slots_or_the_gpu_by_mig_mode() -> None:
    a100 = CATALOG.model("A100-40GB")
    on = resource_slices("n", [PublishedGpu(0, "GPU-on", a100, mig_enabled=True)], mode="dynamic")
    kinds = {d.kind for d in slice_devices(on)}
    assert kinds == {DeviceKind.SLOT}
    off = resource_slices(
        "n", [PublishedGpu(0, "GPU-off", a100, mig_enabled=False)], mode="dynamic"
    )
    assert {d.kind for d in slice_devices(off)} == {DeviceKind.GPU}
    assert all("sharedCounters" not in s["spec"] or not s["spec"]["sharedCounters"] for s in off)


def test_a_dynamic_mig_ampere_node_without_a_full_gpu_device_is_still_read() -> None:
    a100 = CATALOG.model("A100-40GB")
    slices = resource_slices("node-d", [PublishedGpu(0, "GPU-a0", a100)], mode="dynamic")
    held = claim("train", [exactly()], allocated=[("node-d", "gpu-0-mig-3g20gb-9-4")], pods=["t"])
    (node,) = nodes_from_slices(state(claims=[held], slices=slices), labels={}, skip=[])
    (gpu,) = node.gpus
    assert (gpu.model, gpu.uuid, gpu.layout) == ("NVIDIA A100-SXM4-40GB", "GPU-a0", "3g.20gb@4")


def test_a_dynamic_mig_node_is_read_from_its_slices() -> None:
    slot = "gpu-0-mig-3g40gb-9-4"
    held = claim("train", [exactly()], allocated=[("node-d", slot)], pods=["trainer"])
    (node,) = nodes_from_slices(
        state(claims=[held]), labels={"node-d": {"zone": "a"}}, skip=["node-a"]
    )
    assert (node.name, node.labels) == ("node-d", {"zone": "a"})
    (gpu,) = node.gpus
    assert (gpu.model, gpu.uuid, gpu.layout) == ("NVIDIA H100 80GB HBM3", "GPU-d0", "3g.40gb@4")
    assert gpu.in_use == {"3g.40gb@4": "ml/trainer"}
    assert CATALOG.model(gpu.model).model == "H100-80GB"


def requests_of(p, s, *, extended=None):
    reader = claim_reader(s, nodes=[H100_NODE], catalog=CATALOG)
    return claim_requests(p, state=s, reader=reader, extended=extended or {})


@pytest.mark.parametrize(
    ("request_", "profiles"),
    [
        (
            exactly("device.attributes['gpu.nvidia.com'].profile in ['2g.20gb', '1g.10gb']"),
            ("1g.10gb", "2g.20gb"),
        ),
        (
            exactly("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('30Gi')) >= 0"),
            ("3g.40gb", "4g.40gb", "7g.80gb"),
        ),
        (  # SMs and engines as the current driver publishes them (profiles/ has them)
            exactly(
                "device.capacity['gpu.nvidia.com'].multiprocessors.compareTo(quantity('30')) > 0"
                " && device.capacity['gpu.nvidia.com'].ofaEngines.compareTo(quantity('0')) == 0"
            ),
            ("2g.20gb", "3g.40gb", "4g.40gb"),  # 1g.20gb has 26 SMs, 7g.80gb an OFA
        ),
        (
            {
                "name": "gpu",
                "firstAvailable": [
                    {
                        "name": "big",
                        "deviceClassName": "mig.nvidia.com",
                        "selectors": [{"cel": {"expression": f"{PROFILE} == '4g.40gb'"}}],
                    },
                    {"name": "small", "deviceClassName": "small-mig"},
                ],
            },
            ("1g.10gb", "4g.40gb"),
        ),
    ],
)
def test_a_pending_claim_asks_for_the_profiles_its_selectors_accept(request_, profiles) -> None:
    pending = claim("infer", [request_])
    (found,) = requests_of(pod("p", claims=[("gpu", "infer", None)]), state(claims=[pending]))
    assert (found.claim, found.count, found.profiles) == ("infer", 1, profiles)


def test_claims_not_for_mig_allocated_or_all_are_no_demand() -> None:
    claims = [
        claim("whole", [exactly(cls="gpu.nvidia.com")]),
        claim("done", [exactly()], allocated=[("node-a", "gpu-0-mig-3g40gb-9-4")], pods=["p"]),
        claim(
            "all",
            [
                {
                    "name": "g",
                    "exactly": {"deviceClassName": "mig.nvidia.com", "allocationMode": "All"},
                }
            ],
        ),
    ]
    refs = [("a", "whole", None), ("b", "done", None), ("c", "all", None)]
    assert requests_of(pod("p", claims=refs), state(claims=claims)) == []


def test_a_claim_from_a_template_is_read_before_it_is_made() -> None:
    template = {
        "metadata": {"name": "two-small", "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [exactly(cls="small-mig", count=2)]}}},
    }
    p = pod("worker", claims=[("gpu", None, "two-small")])
    s = state(templates=[template])
    (found,) = requests_of(p, s)
    assert (found.claim, found.count, found.profiles) == ("worker-gpu", 2, ("1g.10gb",))
    # Once the controller made the claim, the pod's status names it and it is read instead.
    made = claim("worker-gpu-x7", [exactly(cls="small-mig", count=3)])
    p = pod("worker", claims=[("gpu", None, "two-small")], statuses=[("gpu", "worker-gpu-x7")])
    (found,) = requests_of(p, state(claims=[made], templates=[template]))
    assert (found.claim, found.count) == ("worker-gpu-x7", 3)


def test_extended_resources_a_device_class_stands_for() -> None:
    found = requests_of(
        pod("p"),
        state(),
        extended={"example.com/small-mig": 2, "deviceclass.resource.kubernetes.io/small-mig": 1},
    )
    assert [(f.count, f.profiles) for f in found] == [(1, ("1g.10gb",)), (2, ("1g.10gb",))]


def test_unknown_classes_and_failing_selectors_are_noted() -> None:
    claims = [
        claim("lost", [exactly(cls="nope")]),
        claim("odd", [exactly("device.attributes['gpu.nvidia.com'].pcieRoot == 'x'")]),
    ]
    s = state(claims=claims)
    refs = [("a", "lost", None), ("b", "odd", None)]
    assert requests_of(pod("p", claims=refs), s) == []
    assert any("DeviceClass 'nope' not found" in n for n in s.notes)
    assert any("selectors failed" in n and "pcieRoot" in n for n in s.notes)


def test_a_selector_that_cannot_be_evaluated_leaves_only_its_request_out() -> None:
    # #29 row 1: one tenant's selector never fails the pass, and the note names the claim,
    # not the tenant's expression.
    secret = "device.attributes['gpu.nvidia.com'].profile == 'tenant-secret' &&"
    claims = [
        claim("broken", [exactly(secret)]),
        claim("fine", [exactly(f"{PROFILE}.startsWith('1g.10')")]),
    ]
    s = state(claims=claims)
    refs = [("a", "broken", None), ("b", "fine", None)]
    (found,) = requests_of(pod("p", claims=refs), s)
    assert (found.claim, found.profiles) == ("fine", ("1g.10gb", "1g.10gb+me"))
    (note,) = [n for n in s.notes if "broken" in n]
    assert "a selector does not compile" in note
    assert "tenant-secret" not in note


def test_a_spent_cel_budget_is_noted_and_the_pass_goes_on() -> None:
    s = state(claims=[claim("late", [exactly(f"{PROFILE} == '2g.20gb'")])])
    reader = claim_reader(s, nodes=[H100_NODE], catalog=CATALOG)
    reader.candidates.budget = Budget(seconds=0)
    reader.candidates.evaluator = Evaluator()  # nothing cached: a cached answer costs no time
    p = pod("p", claims=[("a", "late", None)])
    assert claim_requests(p, state=s, reader=reader, extended={}) == []
    assert any("late" in n and "spent" in n for n in s.notes)


def test_the_example_claim_is_either_or_demand_for_every_profile_with_20_gib() -> None:
    kinds = {d["kind"]: d for d in EXAMPLE}
    s = DraState.of(
        slices=dynamic_node(),
        claims=[],
        templates=[kinds["ResourceClaimTemplate"]],
        classes=[kinds["DeviceClass"]],
    )
    spec = kinds["Pod"]["spec"]
    p = pod(
        "infer-0",
        claims=[(r["name"], None, r["resourceClaimTemplateName"]) for r in spec["resourceClaims"]],
    )
    (found,) = requests_of(p, s)
    assert found.profiles == ("1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")
