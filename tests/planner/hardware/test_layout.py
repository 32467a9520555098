"""Layout text form, parsing errors, and each validity rule with a passing and a failing case."""

from __future__ import annotations

import pickle

import pytest

from migplan.planner.errors import LayoutSyntaxError
from migplan.planner.hardware.layout import Instance, Layout, Rule, check_layout, is_valid


def rules(catalog, model: str, text: str) -> list[Rule]:
    return [v.rule for v in check_layout(catalog.model(model), Layout.parse(text))]


def test_canonical_form_sorts_by_start() -> None:
    layout = Layout.parse("1g.10gb@6+3g.40gb@0+2g.20gb@4")
    assert str(layout) == "3g.40gb@0+2g.20gb@4+1g.10gb@6"
    assert layout == Layout.parse("3g.40gb@0 + 2g.20gb@4 + 1g.10gb@6")


def test_empty_layout_is_a_dash() -> None:
    assert str(Layout()) == "-"
    assert Layout.parse("-") == Layout() == Layout.parse("  ")
    assert not Layout.parse("-")


def test_media_suffixes_survive_parsing() -> None:
    layout = Layout.parse("1g.5gb+me@3+2g.10gb@4+1g.24gb+me.all@0+2g.48gb-me@6")
    assert [i.profile for i in layout.instances] == [
        "1g.24gb+me.all",
        "1g.5gb+me",
        "2g.10gb",
        "2g.48gb-me",
    ]
    assert str(Layout.parse(str(layout))) == str(layout)


@pytest.mark.parametrize("text", ["3g.40gb", "3g.40gb@", "@0", "3g.40gb@x", "3g.40gb@-1"])
def test_malformed_layouts_are_rejected_with_the_bad_part(text: str) -> None:
    with pytest.raises(LayoutSyntaxError, match="is not of the form PROFILE@START"):
        Layout.parse(text)


@pytest.mark.parametrize("text", ["3g.40gb@0++1g.10gb@4", "3g.40GB@0", "1g.5gb+xx@0"])
def test_malformed_profile_names_are_syntax_errors(text: str) -> None:
    with pytest.raises(LayoutSyntaxError, match="is not a MIG profile name"):
        Layout.parse(text)


def test_with_instance_keeps_canonical_order() -> None:
    layout = Layout.parse("3g.40gb@4").with_instance(Instance(0, "4g.40gb"))
    assert str(layout) == "4g.40gb@0+3g.40gb@4"


@pytest.mark.parametrize(
    ("model", "valid", "invalid", "rule"),
    [
        # allowed starts
        ("H100-80GB", "4g.40gb@0+3g.40gb@4", "3g.40gb@0+4g.40gb@4", Rule.START),
        ("A100-40GB", "2g.10gb@4+1g.5gb@6", "2g.10gb@6", Rule.START),
        ("RTX-PRO-6000", "1g.24gb@9", "1g.24gb@8", Rule.START),
        # memory-slice overlap
        ("A100-40GB", "3g.20gb@0+2g.10gb@4", "3g.20gb@0+2g.10gb@2", Rule.OVERLAP),
        ("A100-40GB", "1g.10gb@4+1g.5gb@6", "1g.10gb@4+1g.5gb@5", Rule.OVERLAP),
        # per-profile max count (A100-80GB 2g.20gb: 3)
        ("A30", "1g.6gb+me@0+1g.6gb@1", "1g.6gb+me@0+1g.6gb+me@1", Rule.MAX_COUNT),
        # one instance claims the shared media engines (+me)
        ("A30", "1g.6gb+me@0+2g.12gb@2", "1g.6gb+me@0+2g.12gb+me@2", Rule.MEDIA),
        # +me.all allows only -me neighbours
        (
            "RTX-PRO-6000",
            "1g.24gb+me.all@0+1g.24gb-me@3+2g.48gb-me@6",
            "1g.24gb+me.all@0+1g.24gb@3",
            Rule.MEDIA,
        ),
        ("RTX-PRO-6000", "2g.48gb+me.all@0", "2g.48gb+me.all@0+1g.24gb+gfx@6", Rule.MEDIA),
        # unknown profile on this model
        ("H100-80GB", "3g.40gb@0", "3g.20gb@0", Rule.UNKNOWN_PROFILE),
    ],
)
def test_rule_pass_and_fail(catalog, model, valid, invalid, rule) -> None:
    assert rules(catalog, model, valid) == []
    assert rule in rules(catalog, model, invalid)


def test_messages_say_exactly_what_is_wrong(catalog) -> None:
    h100 = catalog.model("H100-80GB")
    [start] = check_layout(h100, Layout.parse("3g.40gb@0+4g.40gb@4"))
    assert start.message == "4g.40gb@4: 4g.40gb cannot start at slice 4 (allowed starts: 0)"
    [overlap] = check_layout(h100, Layout.parse("3g.40gb@0+2g.20gb@2"))
    assert overlap.message == "3g.40gb@0 (slices 0-3) overlaps 2g.20gb@2 (slices 2-3)"


def test_max_count_rule_counts_per_profile(catalog) -> None:
    # Three 3g.20gb cannot be placed without overlap either, so build the count case on a
    # catalog copy's facts: four 2g.10gb exceed the max of 3 even before overlap.
    a100 = catalog.model("A100-40GB")
    violations = check_layout(a100, Layout.parse("2g.10gb@0+2g.10gb@2+2g.10gb@4+2g.10gb@4"))
    assert any(v.rule is Rule.MAX_COUNT and "4 x 2g.10gb" in v.message for v in violations)


def test_compute_and_instance_totals(catalog) -> None:
    # Seven 1g.5gb use all seven compute slices: valid. An eighth cannot be placed (no start 7)
    # so the totals are checked on an overlapping duplicate.
    a100 = catalog.model("A100-40GB")
    full = "+".join(f"1g.5gb@{s}" for s in range(7))
    assert is_valid(a100, Layout.parse(full))
    violations = check_layout(a100, Layout.parse(full + "+1g.5gb@6"))
    found = {v.rule for v in violations}
    assert {Rule.COMPUTE, Rule.INSTANCES, Rule.MAX_COUNT, Rule.OVERLAP} <= found


def test_equal_layouts_hash_alike_also_after_pickling() -> None:
    parsed = Layout.parse("3g.40gb@0+2g.20gb@4")
    built = Layout.of([Instance(4, "2g.20gb"), Instance(0, "3g.40gb")])
    copied = pickle.loads(pickle.dumps(parsed))
    assert parsed == built == copied
    assert len({parsed, built, copied}) == 1
    assert hash(copied) == hash(copied.instances)
    assert Layout.parse("3g.40gb@0") not in {parsed}
