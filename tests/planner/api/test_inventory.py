"""Inventory files resolved against the catalog, and their errors."""

from __future__ import annotations

import pytest

from migplan.planner.api.inventory import Inventory, ResolvedNodes, resolve_inventory
from migplan.planner.errors import MigplanInputError


def resolve(catalog, gpus, pending=()):
    inventory = Inventory.model_validate(
        {"nodes": [{"name": "n1", "gpus": gpus}], "pendingPods": list(pending)}
    )
    return resolve_inventory(inventory, catalog)


def test_product_names_and_layouts_resolve(catalog) -> None:
    [state] = resolve(
        catalog,
        [
            {
                "index": 0,
                "model": "NVIDIA-H100-80GB-HBM3",
                "layout": "1g.10gb@6+3g.40gb@0",
                "inUse": {"3g.40gb@0": "ns/a"},
            }
        ],
    )
    assert state.model.model == "H100-80GB"
    assert str(state.layout) == "3g.40gb@0+1g.10gb@6"
    assert [str(i) for i in state.pins] == ["3g.40gb@0"]


@pytest.mark.parametrize(
    ("gpu", "message"),
    [
        ({"index": 0, "model": "V100"}, "node n1 gpu 0: unknown GPU model 'V100'"),
        ({"index": 0, "model": "A30", "layout": "4g.24gb"}, "node n1 gpu 0: bad layout"),
        (
            {"index": 0, "model": "A30", "layout": "2g.12gb@0+1g.6gb@1"},
            "current layout 2g.12gb@0+1g.6gb@1 is not valid on A30: 2g.12gb@0 (slices 0-1) "
            "overlaps 1g.6gb@1 (slice 1)",
        ),
        (
            {"index": 0, "model": "A30", "layout": "4g.24gb@0", "inUse": {"2g.12gb@0": "ns/a"}},
            "in-use instance 2g.12gb@0 is not in the current layout 4g.24gb@0",
        ),
        (
            {"index": 0, "model": "A30", "migEnabled": False, "layout": "4g.24gb@0"},
            "MIG is disabled, so layout and inUse must be empty",
        ),
    ],
)
def test_bad_gpus_are_named(catalog, gpu, message) -> None:
    with pytest.raises(MigplanInputError, match=r"^inventory: ") as caught:
        resolve(catalog, [gpu])
    assert message in str(caught.value)


def test_duplicate_index_and_bad_pending_resource(catalog) -> None:
    with pytest.raises(MigplanInputError, match="lists a GPU index twice"):
        resolve(catalog, [{"index": 0, "model": "A30"}, {"index": 0, "model": "A30"}])
    with pytest.raises(MigplanInputError, match=r"'nvidia\.com/mig-1g' is not a MIG resource"):
        resolve(
            catalog, [], [{"namespace": "a", "name": "p", "requests": {"nvidia.com/mig-1g": 1}}]
        )


def _fleet(a_layout: str) -> dict:
    return {
        "nodes": [
            {"name": "a", "gpus": [{"index": 0, "model": "H100-80GB", "layout": a_layout}]},
            {"name": "b", "gpus": [{"index": 0, "model": "H100-80GB", "layout": "7g.80gb@0"}]},
        ]
    }


def test_a_pass_reuses_only_the_nodes_whose_reports_are_the_same_objects(catalog) -> None:
    memo = ResolvedNodes()
    inventory = Inventory.model_validate(_fleet("3g.40gb@0+3g.40gb@4"))
    first = resolve_inventory(inventory, catalog, memo=memo)
    again = resolve_inventory(inventory, catalog, memo=memo)
    assert all(x is y for x, y in zip(first, again, strict=True))
    # Node a reported anew (another layout), node b's report kept as it was.
    changed = inventory.model_copy(
        update={
            "nodes": (Inventory.model_validate(_fleet("7g.80gb@0")).nodes[0], inventory.nodes[1])
        }
    )
    later = resolve_inventory(changed, catalog, memo=memo)
    assert [str(s.layout) for s in later] == ["7g.80gb@0", "7g.80gb@0"]
    assert later[1] is first[1]
    assert later[0] is not first[0]
    # Equal but read afresh: resolved again, to the same states.
    read_again = Inventory.model_validate(_fleet("7g.80gb@0"))
    fresh = resolve_inventory(read_again, catalog, memo=memo)
    assert fresh == later
    assert fresh[1] is not first[1]
    # A node gone is forgotten; a bad report is refused even after a good one was kept.
    assert memo.lookup(read_again.nodes[1], catalog) is not None
    resolve_inventory(read_again.model_copy(update={"nodes": ()}), catalog, memo=memo)
    assert memo.lookup(read_again.nodes[1], catalog) is None
    with pytest.raises(MigplanInputError, match="node a gpu 0"):
        resolve_inventory(Inventory.model_validate(_fleet("9g.80gb@0")), catalog, memo=memo)


def test_gpus_of_one_case_keep_their_own_pods_and_uuids(catalog) -> None:
    """GPUs alike in model, layout and which instances are in use are checked once; each
    still gets its own pods, sharers and UUID, and a GPU that differs is checked anew."""

    def gpu(index: int, pod: str, model: str = "H100-80GB") -> dict[str, object]:
        return {
            "index": index,
            "model": model,
            "uuid": f"GPU-{pod}",
            "layout": "3g.40gb@0+3g.40gb@4",
            "inUse": {"3g.40gb@0": f"ns/{pod}", "3g.40gb@4": f"ns/{pod}-b"},
            "sharedWith": {"3g.40gb@4": [f"ns/{pod}-c"]},
        }

    inventory = Inventory.model_validate(
        {
            "nodes": [
                {"name": "n1", "gpus": [gpu(0, "a"), gpu(1, "b")]},
                {"name": "n2", "gpus": [gpu(0, "c"), gpu(1, "d", "NVIDIA-H100-80GB-HBM3")]},
            ]
        }
    )
    states = resolve_inventory(inventory, catalog)
    assert [(s.node, s.index, s.uuid) for s in states] == [
        ("n1", 0, "GPU-a"),
        ("n1", 1, "GPU-b"),
        ("n2", 0, "GPU-c"),
        ("n2", 1, "GPU-d"),
    ]
    for state, pod in zip(states, "abcd", strict=True):
        assert {str(i): p for i, p in state.pins.items()} == {
            "3g.40gb@0": f"ns/{pod}",
            "3g.40gb@4": f"ns/{pod}-b",
        }
        assert {str(i): p for i, p in state.sharers.items()} == {"3g.40gb@4": (f"ns/{pod}-c",)}
    assert {s.model.model for s in states} == {"H100-80GB"}
    broken = inventory.model_copy(deep=True)
    broken.nodes[1].gpus[0].in_use["4g.40gb@0"] = "ns/e"  # as n1's GPUs but for this: checked
    with pytest.raises(MigplanInputError, match=r"node n2 gpu 0: in-use instance 4g\.40gb@0"):
        resolve_inventory(broken, catalog)


@pytest.mark.parametrize(
    "held",
    [
        {"layout": "7g.80gb@0", "inUse": {"7g.80gb@0": "ns/p"}},
        {
            "layout": "7g.80gb@0",
            "inUse": {"7g.80gb@0": "ns/q"},
            "sharedWith": {"7g.80gb@0": ["ns/p"]},
        },
        {"migEnabled": False, "wholeGpuPod": "ns/p"},
    ],
    ids=["in use", "shared", "whole GPU"],
)
def test_a_pod_holding_gpus_on_two_nodes_is_refused_pass_after_pass(catalog, held) -> None:
    """However node b holds ns/p, a snapshot with ns/p on node a too is broken; also where
    the memo keeps node a's report from a pass before (its pods are not listed again)."""
    a = {
        "name": "a",
        "gpus": [
            {
                "index": 0,
                "model": "H100-80GB",
                "layout": "7g.80gb@0",
                "inUse": {"7g.80gb@0": "ns/p"},
            }
        ],
    }
    b_free = {"name": "b", "gpus": [{"index": 0, "model": "H100-80GB", "layout": "7g.80gb@0"}]}
    b_held = {"name": "b", "gpus": [{"index": 0, "model": "H100-80GB", **held}]}
    memo = ResolvedNodes()
    fine = Inventory.model_validate({"nodes": [a, b_free]})
    resolve_inventory(fine, catalog, memo=memo)
    broken = fine.model_copy(
        update={"nodes": (fine.nodes[0], Inventory.model_validate({"nodes": [b_held]}).nodes[0])}
    )
    for kept in (memo, None):
        with pytest.raises(MigplanInputError, match="pod ns/p holds GPUs on two nodes, a and b"):
            resolve_inventory(broken, catalog, memo=kept)
    # Refused, the pass kept nothing: the good report of node a is still the memo's.
    assert memo.lookup(fine.nodes[0], catalog) is not None
