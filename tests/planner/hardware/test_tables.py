"""Layout tables: a subset of profiles gets exactly the layouts, in the order, that
enumerating that subset gives."""

from __future__ import annotations

import random

import pytest

from migplan.planner.errors import UnknownProfileError
from migplan.planner.hardware.catalog import default_catalog
from migplan.planner.hardware.enumeration import enumerate_layouts
from migplan.planner.hardware.tables import layout_table, mask_of

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
