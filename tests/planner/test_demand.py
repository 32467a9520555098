"""Demand from explicit counts and from pending pods."""

from __future__ import annotations

import pytest

from migplan.planner.api.inventory import Inventory
from migplan.planner.api.spec import DemandSpec
from migplan.planner.demand import (
    DemandItem,
    DemandKind,
    build_demand,
    demand_weight,
    left_unmet,
)
from migplan.planner.errors import MigplanInputError
from migplan.planner.hardware.resources import profile_of, resource_name


@pytest.mark.parametrize(
    ("resource", "profile"),
    [
        ("nvidia.com/mig-1g.10gb", "1g.10gb"),
        ("nvidia.com/mig-1g.5gb.me", "1g.5gb+me"),
        ("nvidia.com/mig-1g.24gb.me.all", "1g.24gb+me.all"),
        ("nvidia.com/mig-2g.48gb-me", "2g.48gb-me"),
        ("nvidia.com/mig-4g.96gb.gfx", "4g.96gb+gfx"),
    ],
)
def test_resource_names_round_trip(resource, profile) -> None:
    assert profile_of(resource) == profile
    assert resource_name(profile) == resource


@pytest.mark.parametrize("bad", ["nvidia.com/gpu", "nvidia.com/mig-1g", "nvidia.com/mig-1g.5gb+me"])
def test_bad_resource_names(bad) -> None:
    with pytest.raises(MigplanInputError, match="is not a MIG resource name"):
        profile_of(bad)


def test_pending_pods_filtered_by_namespace_and_counted_in_full() -> None:
    inventory = Inventory.model_validate(
        {
            "namespaces": {"ml": {"team": "ml"}, "web": {"team": "web"}},
            "nodes": [],
            "pendingPods": [
                {
                    "namespace": "ml",
                    "name": "a",
                    "requests": {"nvidia.com/mig-1g.10gb": 2, "cpu": 4},
                },
                {
                    "namespace": "ml",
                    "name": "b",
                    "requests": {"nvidia.com/mig-1g.10gb": 1, "nvidia.com/mig-3g.40gb": 1},
                },
                {"namespace": "web", "name": "c", "requests": {"nvidia.com/mig-1g.10gb": 1}},
            ],
        }
    )
    spec = DemandSpec.model_validate(
        {
            "profiles": [{"resource": "nvidia.com/mig-7g.80gb", "count": 1, "priority": 3}],
            "fromPendingPods": {
                "namespaceSelector": {"matchLabels": {"team": "ml"}},
                "priority": 7,
            },
        }
    )
    items = build_demand(spec, inventory)
    # Pods needing several instances need them on one node: each shape is a bundle of pods.
    assert [(i.profile, i.count, i.priority, i.kind, i.shape) for i in items] == [
        ("7g.80gb", 1, 3, DemandKind.TOTAL, "1 x 7g.80gb"),
        ("1g.10gb", 1, 7, DemandKind.FREE, "1 x 1g.10gb + 1 x 3g.40gb"),
        ("1g.10gb", 1, 7, DemandKind.FREE, "2 x 1g.10gb"),
    ]
    assert [i.pods for i in items[1:]] == [("ml/b",), ("ml/a",)]
    assert [i.per_unit for i in items] == [1, 2, 2]


def test_namespace_name_label_is_implied() -> None:
    inventory = Inventory.model_validate(
        {
            "nodes": [],
            "pendingPods": [
                {"namespace": "ml", "name": "a", "requests": {"nvidia.com/mig-1g.10gb": 1}}
            ],
        }
    )
    spec = DemandSpec.model_validate(
        {
            "fromPendingPods": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ml"}}
            }
        }
    )
    assert [i.count for i in build_demand(spec, inventory)] == [1]


def test_claims_become_either_or_items_or_bundles_by_their_shape() -> None:
    inventory = Inventory.model_validate(
        {
            "nodes": [],
            "pendingPods": [
                {
                    "namespace": "ml",
                    "name": "a",
                    "claims": [
                        {"claim": "a-gpu", "count": 2, "profiles": ["2g.20gb", "1g.10gb"]},
                        {"claim": "a-none", "profiles": []},
                    ],
                },
                {
                    "namespace": "ml",
                    "name": "b",
                    "requests": {"nvidia.com/mig-1g.10gb": 1},
                    "claims": [{"claim": "b-gpu", "profiles": ["1g.10gb", "2g.20gb"]}],
                },
                {
                    "namespace": "ml",
                    "name": "c",
                    "claims": [{"claim": "c-gpu", "profiles": ["2g.20gb", "1g.10gb"]}],
                },
            ],
        }
    )
    spec = DemandSpec.model_validate({"fromPendingPods": {}})
    items = build_demand(spec, inventory)
    assert [(i.profiles, i.count, i.pods, i.shape) for i in items] == [
        (("1g.10gb", "2g.20gb"), 1, ("ml/c",), "1 x (1g.10gb or 2g.20gb)"),
        (("1g.10gb", "2g.20gb"), 1, ("ml/b",), "1 x 1g.10gb + 1 x (1g.10gb or 2g.20gb)"),
        (("1g.10gb", "2g.20gb"), 1, ("ml/a",), "2 x (1g.10gb or 2g.20gb)"),
    ]
    # One instance: either/or; several: a bundle, worth its parts at their smallest profile.
    assert [(i.alternatives, len(i.per_pod)) for i in items] == [
        (("2g.20gb",), 0),
        ((), 2),
        ((), 1),
    ]
    assert [demand_weight(i) for i in items] == [1, 2, 2]


def test_explicit_alternatives() -> None:
    spec = DemandSpec.model_validate(
        {
            "profiles": [
                {
                    "resource": "nvidia.com/mig-2g.20gb",
                    "count": 2,
                    "alternatives": ["nvidia.com/mig-3g.40gb"],
                }
            ]
        }
    )
    (item,) = build_demand(spec, Inventory(nodes=()))
    assert (item.profiles, item.kind) == (("2g.20gb", "3g.40gb"), DemandKind.TOTAL)


@pytest.mark.parametrize(
    "alternatives",
    [["nvidia.com/mig-2g.20gb"], ["nvidia.com/mig-3g.40gb", "nvidia.com/mig-3g.40gb"]],
)
def test_alternatives_name_other_resources_once(alternatives) -> None:
    with pytest.raises(ValueError, match="name each resource once"):
        DemandSpec.model_validate(
            {
                "profiles": [
                    {"resource": "nvidia.com/mig-2g.20gb", "count": 1, "alternatives": alternatives}
                ]
            }
        )


def _kueue_inventory() -> Inventory:
    def workload(name, *, queue="gpu", check="", namespace="ml", per_pod=1, pods=2):
        return {
            "namespace": namespace,
            "name": name,
            "clusterQueue": queue,
            "quotaReserved": bool(check),
            "checkPlan": check,
            "podSets": [
                {"name": "main", "count": pods, "requests": {"nvidia.com/mig-2g.20gb": per_pod}}
            ],
        }

    return Inventory.model_validate(
        {
            "namespaces": {"ml": {"team": "ml"}, "web": {"team": "web"}},
            "nodes": [],
            "workloads": [
                workload("checked", check="pool", queue="other"),
                workload("other-plan", check="elsewhere"),
                workload("queued"),
                workload("web-queued", namespace="web"),
                workload("pairs", per_pod=2, pods=3),
            ],
        }
    )


def test_workloads_waiting_on_this_plans_check_count_without_fromkueue() -> None:
    spec = DemandSpec.model_validate(
        {"profiles": [{"resource": "nvidia.com/mig-1g.10gb", "count": 1}]}
    )
    items = build_demand(spec, _kueue_inventory(), plan="pool")
    assert [(i.pods, i.count, i.priority) for i in items[1:]] == [(("ml/checked",), 2, 1)]


def test_workloads_of_the_named_queues_count_ahead_of_admission() -> None:
    spec = DemandSpec.model_validate(
        {
            "fromKueue": {
                "clusterQueues": ["gpu"],
                "namespaceSelector": {"matchLabels": {"team": "ml"}},
                "priority": 4,
            }
        }
    )
    items = build_demand(spec, _kueue_inventory(), plan="pool")
    # Another plan's check serves "other-plan"; the selector leaves "web-queued" out; a pod
    # set whose pods need two instances each is a bundle of its pods.
    assert [(i.pods, i.count, i.priority, i.shape) for i in items] == [
        (("ml/checked",), 2, 4, "1 x 2g.20gb"),
        (("ml/queued",), 2, 4, "1 x 2g.20gb"),
        (("ml/pairs",), 3, 4, "2 x 2g.20gb"),
    ]


def test_fromkueue_alone_is_enough_demand() -> None:
    assert DemandSpec.model_validate({"fromKueue": {}}).from_kueue is not None


def test_what_is_left_for_new_nodes_is_pending_demand_and_whole_gangs() -> None:
    """A gang not met is left whole; pods beyond a met gang's minimum and pods alone are left
    as ordinary demand; explicit counts are not left for new nodes."""
    items = [
        DemandItem("1g.10gb", 4, 1, DemandKind.TOTAL),
        DemandItem("3g.40gb", 3, 1, DemandKind.FREE, gang="PodGroup ml/a", gang_minimum=3),
        DemandItem("2g.20gb", 4, 1, DemandKind.FREE, gang="PodGroup ml/b", gang_minimum=2),
        DemandItem("1g.10gb", 5, 1, DemandKind.FREE),
    ]
    left = left_unmet(items, [1, 0, 2, 5])
    assert [(n, item.count, item.gang, item.gang_minimum) for n, item in left] == [
        (1, 3, "PodGroup ml/a", 3),
        (2, 2, "", 0),
    ]
