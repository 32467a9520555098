"""Placing the solver's counts on GPUs: the layouts chosen per (class, option)."""

from __future__ import annotations

import pytest

from migplan.planner.api.spec import Disruption, PolicySpec
from migplan.planner.solver.assign import _choices, best_layouts
from migplan.planner.solver.classes import group_gpus
from migplan.planner.solver.pools import build_pools

PROFILES = ["1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]
EVICT = PolicySpec(disruption=Disruption.EVICT)
BUSY = "1g.10gb@0+1g.10gb@1+2g.20gb@2+3g.40gb@4"
# Found by a random search as cases where the kept instances, or the option's headroom, alone
# change the layout chosen for the same current layout and supply.
FOUR_SMALL = "1g.10gb@0+1g.20gb@2+1g.10gb@4+1g.10gb@6"
WITH_ME = "1g.10gb+me@0+2g.20gb@2+2g.20gb@4+1g.20gb@6"


def _fleet(gpu) -> list:
    return [
        gpu("H100-80GB", BUSY, node="a", pins={"1g.10gb@0": "ns/p"}),
        gpu(
            "H100-80GB",
            BUSY,
            node="b",
            pins={"1g.10gb@0": "ns/q"},
            sharers={"1g.10gb@0": ("ns/q", "ns/r")},
        ),
        gpu("H100-80GB", BUSY, node="c", pins={"3g.40gb@4": "ns/s"}),
        gpu("H100-80GB", "3g.40gb@0+3g.40gb@4", node="d", pins={"3g.40gb@4": "ns/t"}),
        gpu("H100-80GB", FOUR_SMALL, node="e", pins={"1g.10gb@4": "ns/u", "1g.10gb@6": "ns/v"}),
        gpu("H100-80GB", WITH_ME, node="f", pins={"1g.20gb@6": "ns/w"}),
        gpu("H100-80GB", WITH_ME, node="g", pins={"1g.10gb+me@0": "ns/x", "2g.20gb@4": "ns/y"}),
        gpu("H100-80GB", node="h"),
        gpu("H100-80GB", node="i", mig_enabled=False),
        gpu("A100-40GB", "1g.5gb@0", node="j"),
    ]


@pytest.mark.parametrize(
    "policy",
    [
        EVICT,
        EVICT.model_copy(update={"whole_gpu_rebuild": True}),
        EVICT.model_copy(
            update={"allowed_profiles": {"H100-80GB": ["1g.10gb", "3g.40gb", "7g.80gb"]}}
        ),
    ],
    ids=["evict", "rebuild", "allowed-profiles"],
)
def test_layouts_shared_between_cases_are_each_class_own(gpu, policy) -> None:
    """`map_to_gpus` works a layout out once for the (class, option) cases that only differ
    in their pods; every class, whatever was worked out before it, gets what `best_layouts`
    gives it alone: classes with other layouts, MIG off, other kept instances, or options of
    other headroom get their own."""
    classes = group_gpus(_fleet(gpu))
    pools = build_pools(classes, profiles=PROFILES, policy=policy)
    known: dict = {}
    asked = 0
    for cls, routes in zip(classes, pools.routes, strict=True):
        for route in routes:
            pool = pools.pools[route.pool]
            options = list(range(len(pool)))
            alone = best_layouts(cls, pool, options, policy=policy, profiles=PROFILES)
            shared = _choices(cls, pool, options, known, policy=policy, profiles=PROFILES)
            assert shared == alone, (cls.key, pool.key)
            asked += len(options)
    assert len(known) < asked  # some cases were shared
