"""Layout tables: a subset of profiles gets exactly the layouts, in the order, that
enumerating that subset gives; a layout is in its model's table exactly when the validator
accepts it."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migplan.planner.errors import UnknownProfileError
from migplan.planner.hardware.catalog import GpuModel, default_catalog
from migplan.planner.hardware.enumeration import enumerate_layouts
from migplan.planner.hardware.layout import Instance, Layout, check_layout
from migplan.planner.hardware.tables import layout_table, mask_of, valid_layout

MODELS = list(default_catalog())


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.model)
def test_a_subsets_table_is_its_enumeration_in_order(model) -> None:
    names = [p.name for p in model.profiles]
    rnd = random.Random(model.model)
    subsets = {frozenset(), frozenset(names)} | {frozenset([n]) for n in names}
    while len(subsets) < min(2 ** len(names), 40):
        subsets.add(frozenset(rnd.sample(names, rnd.randint(1, len(names)))))
    for subset in subsets:
        table = layout_table(model, subset)
        expected = enumerate_layouts(model, profiles=sorted(subset))
        assert table.layouts == expected, sorted(subset)
        assert [int(m) for m in table.masks] == [mask_of(model, lay.instances) for lay in expected]
        assert table.sizes.tolist() == [len(lay) for lay in expected]


def test_a_profile_the_model_lacks_is_refused() -> None:
    model = next(m for m in MODELS if m.model == "A100-40GB")
    with pytest.raises(UnknownProfileError):
        layout_table(model, frozenset({"1g.10gb", "9g.99gb"}))


@st.composite
def _layouts(draw: st.DrawFn) -> tuple[GpuModel, Layout]:
    """A model and an arbitrary, often invalid, list of placements (repeats and starts the
    profile does not have included)."""
    model = draw(st.sampled_from(MODELS))
    names = [p.name for p in model.profiles]
    instances = draw(
        st.lists(
            st.builds(Instance, start=st.integers(0, 8), profile=st.sampled_from(names)),
            max_size=8,
        )
    )
    return model, Layout(tuple(instances))


@settings(max_examples=500, deadline=None, derandomize=True)
@given(case=_layouts())
def test_valid_layout_agrees_with_the_validator(case: tuple[GpuModel, Layout]) -> None:
    model, layout = case
    assert valid_layout(model, layout) == (not check_layout(model, layout))


def test_an_instance_given_twice_is_not_valid() -> None:
    model = next(m for m in MODELS if m.model == "A100-40GB")
    once = Layout((Instance(0, "3g.20gb"),))
    assert valid_layout(model, once)
    assert not valid_layout(model, Layout((Instance(0, "3g.20gb"), Instance(0, "3g.20gb"))))
