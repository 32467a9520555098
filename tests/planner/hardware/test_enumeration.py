"""Enumeration of valid layouts: hand-derived counts, a brute-force cross-check, properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from migplan.planner.errors import UnknownProfileError
from migplan.planner.hardware.catalog import GpuModel, default_catalog
from migplan.planner.hardware.enumeration import enumerate_layouts
from migplan.planner.hardware.layout import Instance, Layout, check_layout, is_valid

A100_CLASSIC = ["1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"]


def placements(model: GpuModel, profiles: list[str] | None = None) -> list[Instance]:
    names = profiles or [p.name for p in model.profiles]
    return [Instance(s, n) for n in names for s in model.profile(n).starts]


def brute_force(model: GpuModel, profiles: list[str] | None = None) -> set[str]:
    """Every subset of non-overlapping placements that the validator accepts."""
    spans = {
        i: set(range(i.start, i.start + model.profile(i.profile).size))
        for i in placements(model, profiles)
    }
    found: set[str] = set()

    def walk(chosen: list[Instance], used: set[int], rest: list[Instance]) -> None:
        layout = Layout.of(chosen)
        if is_valid(model, layout):
            found.add(str(layout))
        for n, inst in enumerate(rest):
            if not spans[inst] & used:
                walk([*chosen, inst], used | spans[inst], rest[n + 1 :])

    walk([], set(), list(spans))
    return found


def maximal_by_definition(model: GpuModel, layouts: set[str], profiles=None) -> set[str]:
    options = placements(model, profiles)
    return {
        text
        for text in layouts
        if not any(is_valid(model, Layout.parse(text).with_instance(p)) for p in options)
    }


def as_strings(layouts) -> list[str]:
    return [str(layout) for layout in layouts]


def test_a30_counts_derived_by_hand(catalog) -> None:
    # Plain profiles: each half (slices 0-1, 2-3) is empty, 1g@a, 1g@a+1, 1g+1g or 2g: 5 x 5,
    # plus 4g alone = 26. One +me instance: 1g+me at 4 slots x (its neighbour empty or 1g) x
    # 5 for the other half = 40; 2g+me at 2 halves x 5 = 10. Total 76 with the empty layout.
    # Maximal = fully covered: 2 x 2 + 4g = 5; with 1g+me 4 x 2 = 8; with 2g+me 2 x 2 = 4: 17.
    a30 = catalog.model("A30")
    assert len(enumerate_layouts(a30)) == 76
    assert len(enumerate_layouts(a30, maximal=True)) == 17
    assert len(enumerate_layouts(a30, profiles=["1g.6gb", "2g.12gb", "4g.24gb"])) == 26


def test_a100_classic_profiles_have_19_maximal_layouts(catalog) -> None:
    # Left half (0-3): 4g, 3g, or a tiling by 2g@0/2g@2/1g = 2 + 4; right half (4-7): 3g@4,
    # 2g@4+1g@6, 1g@4+1g@5+1g@6 (nothing but 3g reaches slice 7) = 3; 6 x 3 + 7g = 19.
    found = enumerate_layouts(catalog.model("A100-40GB"), profiles=A100_CLASSIC, maximal=True)
    assert len(found) == 19
    assert "4g.20gb@0+3g.20gb@4" in as_strings(found)
    assert "7g.40gb@0" in as_strings(found)


@pytest.mark.parametrize(
    ("model", "profiles"),
    [
        ("A30", None),
        ("A100-40GB", A100_CLASSIC),
        ("A100-40GB", None),
        ("H100-80GB", ["1g.10gb", "1g.10gb+me", "1g.20gb", "3g.40gb"]),
        ("RTX-PRO-6000", None),
    ],
)
def test_enumeration_matches_brute_force(catalog, model, profiles) -> None:
    gpu = catalog.model(model)
    expected = brute_force(gpu, profiles)
    found = as_strings(enumerate_layouts(gpu, profiles=profiles))
    assert len(found) == len(set(found))
    assert set(found) == expected
    maximal = as_strings(enumerate_layouts(gpu, profiles=profiles, maximal=True))
    assert set(maximal) == maximal_by_definition(gpu, expected, profiles)


def test_every_model_enumerates_and_eight_slice_models_agree(catalog) -> None:
    counts = {m.model: len(enumerate_layouts(m)) for m in catalog}
    # Every 8-slice Hopper/Blackwell/A100 model has the same placement shape.
    eight = {k: v for k, v in counts.items() if catalog.model(k).memory_slices == 8}
    assert set(eight.values()) == {2319}
    assert all(v > 1 for v in counts.values())


def test_unknown_profile_in_restriction(catalog) -> None:
    with pytest.raises(UnknownProfileError):
        enumerate_layouts(catalog.model("A30"), profiles=["1g.5gb"])


def test_results_are_cached_and_immutable(catalog) -> None:
    a30 = catalog.model("A30")
    assert enumerate_layouts(a30) is enumerate_layouts(a30)
    assert isinstance(enumerate_layouts(a30), tuple)


# ---- properties -------------------------------------------------------------------------

MODELS = list(default_catalog())
model_strategy = st.sampled_from(MODELS)


@st.composite
def random_layouts(draw) -> tuple[GpuModel, Layout]:
    """A model and an arbitrary (often invalid) set of its placements."""
    model = draw(model_strategy)
    chosen = draw(st.lists(st.sampled_from(placements(model)), max_size=8, unique=True))
    return model, Layout.of(chosen)


@given(random_layouts())
def test_validity_agrees_with_enumeration(case) -> None:
    model, layout = case
    assert is_valid(model, layout) == (layout in set(enumerate_layouts(model)))


@given(
    model_strategy.flatmap(lambda m: st.tuples(st.just(m), st.sampled_from(enumerate_layouts(m))))
)
def test_every_enumerated_layout_is_valid(case) -> None:
    model, layout = case
    assert check_layout(model, layout) == []


@given(
    model_strategy.flatmap(
        lambda m: st.tuples(
            st.just(m),
            st.sampled_from(enumerate_layouts(m, maximal=True)),
            st.sampled_from(placements(m)),
        )
    )
)
def test_adding_any_placement_to_a_maximal_layout_breaks_it(case) -> None:
    model, layout, extra = case
    assert not is_valid(model, layout.with_instance(extra))


@given(random_layouts())
def test_parse_format_round_trip(case) -> None:
    _, layout = case
    assert Layout.parse(str(layout)) == layout
    assert str(Layout.parse(str(layout))) == str(layout)


@given(random_layouts(), st.randoms(use_true_random=False))
def test_parse_accepts_any_instance_order(case, rnd) -> None:
    _, layout = case
    shuffled = list(layout.instances)
    rnd.shuffle(shuffled)
    text = "+".join(map(str, shuffled)) or "-"
    assert Layout.parse(text) == layout
