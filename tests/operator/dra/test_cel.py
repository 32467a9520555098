"""CEL device selectors, with Kubernetes' quantity and semver functions."""

from __future__ import annotations

import pytest

from migplan.operator.dra.cel import Device, Quantity, SemVer, selector, selects_all
from migplan.planner.errors import MigplanInputError

MIG = Device(
    driver="gpu.nvidia.com",
    attributes={
        "gpu.nvidia.com": {
            "type": "mig",
            "profile": "2g.20gb",
            "driverVersion": SemVer.parse("570.86.15"),
            "index": 0,
        }
    },
    capacity={"gpu.nvidia.com": {"memory": Quantity.parse("20Gi")}},
)


@pytest.mark.parametrize(
    ("expression", "selected"),
    [
        ("device.driver == 'gpu.nvidia.com'", True),
        ("device.attributes['gpu.nvidia.com'].type == 'mig'", True),
        ("device.attributes['gpu.nvidia.com'].profile in ['1g.10gb', '2g.20gb']", True),
        ("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('10Gi')) >= 0", True),
        ("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('20Gi'))", False),
        ("device.capacity['gpu.nvidia.com'].memory.isLessThan(quantity('21474836481'))", True),
        (
            "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))",
            True,
        ),
        ("device.attributes['gpu.nvidia.com'].driverVersion.major() == 570", True),
        ("device.attributes['gpu.nvidia.com'].index + 1 == 1", True),
        ("!device.allowMultipleAllocations", True),
        ("'gpu.nvidia.com' in device.attributes", True),
    ],
)
def test_selectors(expression, selected) -> None:
    assert selector(expression).evaluate(MIG).selected is selected


def test_a_missing_attribute_selects_nothing_and_says_why() -> None:
    outcome = selector("device.attributes['gpu.nvidia.com'].pcieRoot == 'x'").evaluate(MIG)
    assert not outcome.selected
    assert "pcieRoot" in outcome.error


def test_a_non_boolean_result_selects_nothing() -> None:
    outcome = selector("device.driver").evaluate(MIG)
    assert (outcome.selected, outcome.error) == (False, "returned StringType, not a bool")


def test_every_selector_must_select() -> None:
    both = (
        "device.driver == 'gpu.nvidia.com'",
        "device.attributes['gpu.nvidia.com'].type == 'gpu'",
    )
    assert not selects_all(both, MIG).selected
    assert selects_all(both[:1], MIG).selected


def test_an_expression_that_does_not_compile_is_bad_input() -> None:
    with pytest.raises(MigplanInputError, match="does not compile"):
        selector("device.driver ==")


def test_versions_order_pre_releases_first() -> None:
    assert SemVer.parse("1.2.3-rc.1") < SemVer.parse("1.2.3") < SemVer.parse("1.10.0")
    with pytest.raises(ValueError, match="not a semantic version"):
        SemVer.parse("1.2")
