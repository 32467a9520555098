"""The baselines on their own: each does what the peer it stands for does (#35: only
"planner >= baselines" was asserted, so a baseline could get worse unnoticed)."""

from __future__ import annotations

import pytest

from migplan.planner.assemble import gpu_key
from migplan.planner.baselines.first_fit import first_fit_targets
from migplan.planner.baselines.greedy import greedy_targets
from migplan.planner.baselines.static import static_targets


def layouts(targets) -> dict[tuple[str, int], str]:
    return {key: str(layout) for key, layout in targets.items()}


# ---- first-fit ------------------------------------------------------------------------------


def test_first_fit_serves_the_higher_priority_first(gpu, want) -> None:
    # A30: four 1g.6gb at priority 1 or one 4g.24gb at priority 5 (weighted 4 against 20).
    gpus = [gpu("A30")]
    targets = first_fit_targets(gpus, [want("1g.6gb", 4), want("4g.24gb", 1, priority=5)])
    assert layouts(targets) == {("node-1", 0): "4g.24gb@0"}


def test_first_fit_takes_the_smaller_profile_first_at_one_priority(gpu, want) -> None:
    gpus = [gpu("H100-80GB")]
    targets = first_fit_targets(gpus, [want("7g.80gb", 1), want("1g.10gb", 1)])
    assert layouts(targets) == {("node-1", 0): "1g.10gb@0"}


def test_first_fit_fills_gpus_in_node_and_index_order_at_the_lowest_start(gpu, want) -> None:
    gpus = [
        gpu("H100-80GB", node="b"),
        gpu("H100-80GB", "1g.10gb@0", node="a", index=1, pins={"1g.10gb@0": "ns/p"}),
        gpu("H100-80GB", "7g.80gb@0", node="a", index=0, pins={"7g.80gb@0": "ns/q"}),
    ]
    targets = first_fit_targets(gpus, [want("2g.20gb", 2)])
    assert layouts(targets) == {("a", 1): "1g.10gb@0+2g.20gb@2+2g.20gb@4"}


def test_first_fit_uses_free_instances_and_never_destroys(gpu, want) -> None:
    gpus = [gpu("H100-80GB", "1g.10gb@0+1g.10gb@1", pins={"1g.10gb@0": "ns/p"})]
    assert first_fit_targets(gpus, [want("1g.10gb", 1)]) == {}
    grown = first_fit_targets(gpus, [want("1g.10gb", 2)])
    assert layouts(grown) == {("node-1", 0): "1g.10gb@0+1g.10gb@1+1g.10gb@2"}
    assert first_fit_targets(gpus, [want("7g.80gb", 1)]) == {}


def test_first_fit_leaves_a_whole_gpu_pods_gpu_alone(gpu, want) -> None:
    gpus = [
        gpu("H100-80GB", node="a", mig_enabled=False, whole_gpu_pod="ns/whole"),
        gpu("H100-80GB", node="b"),
    ]
    assert layouts(first_fit_targets(gpus, [want("3g.40gb", 1)])) == {("b", 0): "3g.40gb@0"}


def test_first_fit_goes_on_to_later_gpus_for_a_profile_that_no_longer_fits(gpu, want) -> None:
    gpus = [gpu("A30", node="a"), gpu("A30", node="b")]
    targets = first_fit_targets(gpus, [want("2g.12gb", 3), want("1g.6gb", 2)])
    assert layouts(targets) == {
        ("a", 0): "1g.6gb@0+1g.6gb@1+2g.12gb@2",
        ("b", 0): "2g.12gb@0+2g.12gb@2",
    }


# ---- greedy (nos) ---------------------------------------------------------------------------


def test_greedy_picks_the_geometry_that_supplies_the_most_missing_demand(gpu, want) -> None:
    gpus = [gpu("H100-80GB")]
    targets = greedy_targets(gpus, [want("3g.40gb", 2), want("7g.80gb", 1)])
    assert layouts(targets) == {("node-1", 0): "3g.40gb@0+3g.40gb@4"}


def test_greedy_weighs_by_priority(gpu, want) -> None:
    gpus = [gpu("H100-80GB")]
    targets = greedy_targets(gpus, [want("3g.40gb", 2), want("7g.80gb", 1, priority=3)])
    assert layouts(targets) == {("node-1", 0): "7g.80gb@0"}


def test_greedy_keeps_used_instances_and_stops_when_nothing_is_missing(gpu, want) -> None:
    gpus = [
        gpu("H100-80GB", "1g.10gb@0", node="a", pins={"1g.10gb@0": "ns/p"}),
        gpu("H100-80GB", node="b"),
    ]
    targets = greedy_targets(gpus, [want("3g.40gb", 1)])
    assert list(targets) == [("a", 0)]
    assert "1g.10gb@0" in str(targets["a", 0])
    assert "3g.40gb@4" in str(targets["a", 0])


def test_greedy_keeps_a_geometry_that_already_serves(gpu, want) -> None:
    gpus = [gpu("H100-80GB", "3g.40gb@0+3g.40gb@4")]
    assert greedy_targets(gpus, [want("3g.40gb", 2)]) == {}


def test_greedy_leaves_a_whole_gpu_pods_gpu_alone(gpu, want) -> None:
    gpus = [gpu("H100-80GB", node="a", mig_enabled=False, whole_gpu_pod="ns/whole")]
    assert greedy_targets(gpus, [want("3g.40gb", 1)]) == {}
    gpus.append(gpu("H100-80GB", node="b"))
    assert list(greedy_targets(gpus, [want("3g.40gb", 1)])) == [("b", 0)]


def test_greedy_counts_only_the_instances_a_gpu_gains(gpu, want) -> None:
    """A used 3g.40gb kept on GPU a is not new supply: GPU b makes the second one wanted."""
    gpus = [
        gpu("H100-80GB", "3g.40gb@0", node="a", pins={"3g.40gb@0": "ns/p"}),
        gpu("H100-80GB", node="b"),
    ]
    targets = greedy_targets(gpus, [want("3g.40gb", 2)])
    assert layouts(targets) == {("a", 0): "3g.40gb@0+3g.40gb@4", ("b", 0): "3g.40gb@0+3g.40gb@4"}


def test_greedy_grows_a_profile_the_gpu_already_has(gpu, want) -> None:
    gpus = [gpu("H100-80GB", "1g.10gb@0", pins={"1g.10gb@0": "ns/p"})]
    targets = greedy_targets(gpus, [want("1g.10gb", 3)])
    # The first layout (in enumeration order) that keeps the used one and gains three.
    assert layouts(targets) == {("node-1", 0): "+".join(f"1g.10gb@{i}" for i in range(7))}


def test_greedy_skips_a_profile_the_model_lacks_and_a_gpu_it_cannot_help(gpu, want) -> None:
    # 1g.5gb is an A100-40GB profile; the busy 7g.80gb leaves no room for a 3g.40gb.
    gpus = [gpu("H100-80GB", "7g.80gb@0", node="a", pins={"7g.80gb@0": "ns/p"})]
    assert greedy_targets(gpus, [want("1g.5gb", 1), want("3g.40gb", 1)]) == {}


def test_greedy_scores_what_a_layout_adds_not_what_it_drops(gpu, want) -> None:
    """As nos does: a free 1g.10gb (already counted as supply) may go for two 3g.40gb; the
    layouts are not also charged for the free instances they lose."""
    gpus = [gpu("H100-80GB", "1g.10gb@0")]
    targets = greedy_targets(gpus, [want("1g.10gb", 2), want("3g.40gb", 2, priority=2)])
    assert layouts(targets) == {("node-1", 0): "3g.40gb@0+3g.40gb@4"}


def test_greedy_walks_on_past_a_gpu_it_cannot_help(gpu, want) -> None:
    gpus = [
        gpu("H100-80GB", "7g.80gb@0", node="a", pins={"7g.80gb@0": "ns/p"}),
        gpu("H100-80GB", node="b"),
    ]
    assert list(greedy_targets(gpus, [want("3g.40gb", 1)])) == [("b", 0)]


def test_greedy_reports_the_time_it_took(gpu, want) -> None:
    import time

    from migplan.planner.baselines.greedy import greedy_plan

    started = time.monotonic()
    found = greedy_plan([gpu("H100-80GB")], [want("3g.40gb", 2)])
    assert 0 <= found.solver.wall_seconds <= time.monotonic() - started


# Small fleets found by scripts/mutation where a changed rule of the greedy baseline (what
# a layout gains over the current one, the weighted score, which GPUs it skips) changes its
# choice: (model, layout, used instances, MIG on, whole-GPU pod) per GPU; its answers today.
GREEDY_CASES = [
    (
        [
            (
                "A100-80GB",
                "1g.10gb@0+1g.10gb@2+1g.10gb@4+1g.10gb+me@5+1g.10gb@6",
                ["1g.10gb@6"],
                True,
                None,
            ),
            (
                "A100-80GB",
                "1g.10gb@0+1g.10gb+me@3+1g.20gb@4+1g.20gb@6",
                ["1g.10gb+me@3", "1g.20gb@6"],
                True,
                None,
            ),
            ("A30", "-", [], True, None),
        ],
        [("1g.6gb+me", 5, 2), ("1g.20gb", 3, 1), ("3g.40gb", 5, 3)],
        {
            "n0": "3g.40gb@0+1g.20gb@4+1g.10gb@6",
            "n1": "1g.20gb@0+1g.10gb@2+1g.10gb+me@3+1g.20gb@4+1g.20gb@6",
            "n2": "1g.6gb+me@0",
        },
    ),
    (
        [("A30", "-", [], True, None)],
        [("2g.12gb", 4, 1), ("4g.24gb", 5, 3), ("2g.12gb+me", 6, 2)],
        {"n0": "2g.12gb@0+2g.12gb+me@2"},
    ),
    (
        [
            ("A30", "-", [], False, None),
            ("A30", "-", [], True, None),
            ("A30", "1g.6gb+me@0+1g.6gb@2+1g.6gb@3", ["1g.6gb+me@0"], True, None),
        ],
        [("4g.24gb", 1, 3)],
        {"n0": "4g.24gb@0"},
    ),
]


@pytest.mark.parametrize(("fleet", "demand", "expected"), GREEDY_CASES)
def test_greedy_reference_cases(gpu, want, fleet, demand, expected) -> None:
    gpus = [
        gpu(
            model,
            layout,
            node=f"n{i}",
            pins={p: f"ns/p{i}{k}" for k, p in enumerate(used)},
            mig_enabled=mig,
            whole_gpu_pod=whole,
        )
        for i, (model, layout, used, mig, whole) in enumerate(fleet)
    ]
    items = [want(profile, count, priority=priority) for profile, count, priority in demand]
    found = {node: layout for (node, _), layout in layouts(greedy_targets(gpus, items)).items()}
    assert found == expected


# ---- static geometry (mig-parted all-balanced) ----------------------------------------------


def test_static_gives_every_free_gpu_of_a_model_one_geometry(gpu, want) -> None:
    gpus = [
        gpu("A30", node="a"),
        gpu("A30", "1g.6gb@3", node="b"),
        gpu("A30", "1g.6gb@0", node="c", pins={"1g.6gb@0": "ns/p"}),
    ]
    targets = static_targets(gpus, [want("2g.12gb", 4)])
    assert layouts(targets) == {
        ("a", 0): "2g.12gb@0+2g.12gb@2",
        ("b", 0): "2g.12gb@0+2g.12gb@2",
    }
    assert ("c", 0) not in targets


def test_static_scores_by_weight_and_size(gpu, want) -> None:
    # One A30: 4 x 1g.6gb (score 4) or one 4g.24gb at priority 2 (score 2 x 4 = 8).
    gpus = [gpu("A30")]
    targets = static_targets(gpus, [want("1g.6gb", 4), want("4g.24gb", 1, priority=2)])
    assert layouts(targets) == {("node-1", 0): "4g.24gb@0"}


def test_static_changes_nothing_without_demand_its_model_serves(gpu, want) -> None:
    assert static_targets([gpu("A30")], [want("7g.80gb", 1)]) == {}


def test_static_weighs_supply_over_every_free_gpu_of_the_model(gpu, want) -> None:
    # Two A30s: 1g+1g+2g on each supplies 4 x 1g.6gb and 2 x 2g.12gb (score 4 + 2 x 2),
    # tying with 2g+2g (4 x 2g.12gb, score 8): the first layout with the best score stays.
    gpus = [gpu("A30", node="a"), gpu("A30", node="b")]
    targets = static_targets(gpus, [want("1g.6gb", 4), want("2g.12gb", 4)])
    assert layouts(targets) == {
        ("a", 0): "1g.6gb@0+1g.6gb@1+2g.12gb@2",
        ("b", 0): "1g.6gb@0+1g.6gb@1+2g.12gb@2",
    }


def test_static_counts_what_one_model_supplies_before_the_next(gpu, want) -> None:
    # Models go in name order: the A100's 3g.40gb pair meets the demand; the H100 stays.
    gpus = [gpu("H100-80GB", node="h"), gpu("A100-80GB", node="a")]
    assert layouts(static_targets(gpus, [want("3g.40gb", 2)])) == {("a", 0): "3g.40gb@0+3g.40gb@4"}


def test_static_goes_on_past_a_model_with_nothing_demanded(gpu, want) -> None:
    gpus = [gpu("A30", node="a"), gpu("H100-80GB", node="h")]
    assert layouts(static_targets(gpus, [want("3g.40gb", 1)])) == {("h", 0): "3g.40gb@0+3g.40gb@4"}


def test_static_goes_on_past_a_model_left_with_nothing_to_gain(gpu, want) -> None:
    # The A100 meets all the 1g.10gb; the H100 (which has 1g.10gb too) gains nothing and is
    # left; the H200 after it still gets its 1g.18gb.
    gpus = [gpu("A100-80GB", node="a"), gpu("H100-80GB", node="h"), gpu("H200-141GB", node="z")]
    targets = static_targets(gpus, [want("1g.10gb", 7), want("1g.18gb", 1)])
    assert sorted(targets) == [("a", 0), ("z", 0)]


def test_static_rebuilds_a_free_gpu_and_counts_its_instances_back(gpu, want) -> None:
    # The free 2g.12gb it has would be destroyed by a rebuild: it counts as missing again,
    # and the undemanded 1g.6gb instances do not.
    gpus = [gpu("A30", "1g.6gb@0+1g.6gb@1+2g.12gb@2")]
    assert layouts(static_targets(gpus, [want("2g.12gb", 1)])) == {
        ("node-1", 0): "2g.12gb@0+2g.12gb@2"
    }


def test_static_serves_a_single_instance_with_a_maximal_layout(gpu, want) -> None:
    assert layouts(static_targets([gpu("A30")], [want("1g.6gb", 1)])) == {
        ("node-1", 0): "1g.6gb@0+1g.6gb@1+1g.6gb@2+1g.6gb@3"
    }


def test_static_per_model_over_a_mixed_fleet(gpu, want) -> None:
    gpus = [gpu("A30", node="a"), gpu("A30", node="b"), gpu("H100-80GB", node="h")]
    targets = static_targets(gpus, [want("1g.6gb", 8), want("3g.40gb", 2)])
    four = "1g.6gb@0+1g.6gb@1+1g.6gb@2+1g.6gb@3"
    assert layouts(targets) == {("a", 0): four, ("b", 0): four, ("h", 0): "3g.40gb@0+3g.40gb@4"}


# Small fleets found by scripts/mutation where a changed rule of the static baseline (supply
# per member, what is still missing after each model, the score, the first best layout, the
# free GPUs' instances counted back) changes its choice; the layouts are its answers today.
STATIC_CASES = [
    (
        [("A30", "1g.6gb@0+1g.6gb@1"), ("H100-80GB", "-"), ("A100-80GB", "-")],
        [("2g.20gb", 5, 2), ("1g.10gb+me", 1, 2), ("2g.20gb", 6, 3)],
        {
            "n2": "2g.20gb@0+2g.20gb@2+2g.20gb@4+1g.10gb+me@6",
            "n1": "2g.20gb@0+2g.20gb@2+2g.20gb@4+1g.10gb+me@6",
        },
    ),
    (
        [("H100-80GB", "-"), ("A100-80GB", "1g.10gb@3+1g.20gb@4+1g.20gb@6")],
        [("1g.10gb", 1, 3)],
        {"n1": "1g.10gb@0+1g.10gb@1+1g.10gb@2+1g.10gb@3+1g.10gb@4+1g.10gb@5+1g.10gb@6"},
    ),
    ([("A30", "-")], [("4g.24gb", 1, 1), ("1g.6gb+me", 5, 2)], {"n0": "4g.24gb@0"}),
    (
        [("A30", "1g.6gb+me@0+1g.6gb@1+2g.12gb@2"), ("A30", "-")],
        [("2g.12gb+me", 4, 1), ("1g.6gb+me", 4, 2)],
        {"n0": "1g.6gb+me@0", "n1": "1g.6gb+me@0"},
    ),
    (
        [("H100-80GB", "-"), ("A100-80GB", "-")],
        [("2g.20gb", 2, 2), ("4g.40gb", 5, 3), ("1g.10gb+me", 1, 3)],
        {"n1": "4g.40gb@0+2g.20gb@4+1g.10gb+me@6", "n0": "4g.40gb@0+2g.20gb@4+1g.10gb+me@6"},
    ),
    (
        [
            ("H100-80GB", "-"),
            ("A100-80GB", "1g.10gb+me@1+1g.10gb@3+1g.10gb@4+1g.10gb@5+1g.20gb@6"),
            ("A30", "1g.6gb@0+2g.12gb+me@2"),
            ("A100-80GB", "1g.20gb@0+1g.10gb+me@3+2g.20gb@4+1g.20gb@6"),
        ],
        [("3g.40gb", 3, 1), ("2g.12gb", 5, 2)],
        {"n1": "3g.40gb@0+3g.40gb@4", "n3": "3g.40gb@0+3g.40gb@4", "n2": "2g.12gb@0+2g.12gb@2"},
    ),
    (
        [("A30", "-"), ("A30", "1g.6gb@0+1g.6gb@1+1g.6gb@3"), ("A30", "1g.6gb@1+1g.6gb+me@2")],
        [("1g.6gb", 2, 1), ("4g.24gb", 4, 1)],
        {"n0": "4g.24gb@0", "n1": "4g.24gb@0", "n2": "4g.24gb@0"},
    ),
    (
        [
            ("A100-80GB", "3g.40gb@0+1g.10gb@4+1g.10gb+me@5+1g.20gb@6"),
            ("H100-80GB", "1g.10gb@2+1g.10gb@3+1g.20gb@4+1g.20gb@6"),
            ("A100-80GB", "-"),
            ("A30", "-"),
        ],
        [("1g.10gb+me", 5, 2), ("2g.20gb", 3, 3), ("1g.20gb", 6, 3)],
        {
            "n0": "1g.20gb@0+1g.20gb@2+2g.20gb@4+1g.20gb@6",
            "n2": "1g.20gb@0+1g.20gb@2+2g.20gb@4+1g.20gb@6",
            "n1": "1g.10gb+me@0+1g.20gb@2+2g.20gb@4+1g.20gb@6",
        },
    ),
    (
        [("A30", "-")],
        [("2g.12gb+me", 3, 3), ("2g.12gb+me", 6, 2), ("1g.6gb", 4, 2)],
        {"n0": "1g.6gb@0+1g.6gb@1+2g.12gb+me@2"},
    ),
    (
        [("A100-80GB", "1g.10gb@0+1g.10gb@1+1g.10gb@4+1g.10gb+me@6"), ("H100-80GB", "-")],
        [("1g.10gb", 5, 2), ("1g.20gb", 3, 3), ("7g.80gb", 4, 1)],
        {"n0": "1g.10gb@0+1g.10gb@1+1g.10gb@2+1g.10gb@3+1g.20gb@4+1g.20gb@6", "n1": "7g.80gb@0"},
    ),
    (
        [
            ("A30", "-"),
            ("H100-80GB", "1g.10gb+me@0+1g.10gb@1+2g.20gb@2+1g.10gb@4+1g.10gb@5"),
            ("A30", "-"),
            ("A30", "-"),
        ],
        [("4g.40gb", 5, 2), ("2g.12gb", 4, 3)],
        {
            "n0": "2g.12gb@0+2g.12gb@2",
            "n2": "2g.12gb@0+2g.12gb@2",
            "n3": "2g.12gb@0+2g.12gb@2",
            "n1": "4g.40gb@0",
        },
    ),
    (
        [
            ("A100-80GB", "2g.20gb@0+2g.20gb@4+1g.10gb@6"),
            ("H100-80GB", "2g.20gb@0+2g.20gb@2+2g.20gb@4+1g.10gb@6"),
        ],
        [("1g.10gb+me", 5, 1), ("1g.10gb", 1, 2)],
        {
            "n0": "1g.10gb@0+1g.10gb@1+1g.10gb@2+1g.10gb@3+1g.10gb@4+1g.10gb@5+1g.10gb+me@6",
            "n1": "1g.10gb@0+1g.10gb@1+1g.10gb@2+1g.10gb@3+1g.10gb@4+1g.10gb@5+1g.10gb+me@6",
        },
    ),
]


@pytest.mark.parametrize(("fleet", "demand", "expected"), STATIC_CASES)
def test_static_reference_cases(gpu, want, fleet, demand, expected) -> None:
    gpus = [gpu(model, layout, node=f"n{i}") for i, (model, layout) in enumerate(fleet)]
    items = [want(profile, count, priority=priority) for profile, count, priority in demand]
    assert {node: layout for (node, _), layout in layouts(static_targets(gpus, items)).items()} == (
        expected
    )


@pytest.mark.parametrize("method", ["first_fit", "static"])
def test_a_baseline_reports_the_time_it_took(gpu, want, method) -> None:
    import time

    from migplan.planner.baselines.first_fit import first_fit_plan
    from migplan.planner.baselines.static import static_plan

    run = {"first_fit": first_fit_plan, "static": static_plan}[method]
    started = time.monotonic()
    found = run([gpu("H100-80GB")], [want("3g.40gb", 2)])
    assert 0 <= found.solver.wall_seconds <= time.monotonic() - started


def test_a_target_key_names_its_gpu(gpu) -> None:
    assert gpu_key(gpu("A30", node="x", index=3)) == ("x", 3)
