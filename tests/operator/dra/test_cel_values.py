"""The values selectors see (quantities, versions, devices as a ResourceSlice publishes
them), without the helper: fast enough for scripts/mutation to run per mutant."""

from __future__ import annotations

from decimal import Decimal

import pytest

from migplan.operator.dra.cel import Device, Outcome, Quantity, SemVer


def test_quantities_parse_to_their_value_and_print_plainly() -> None:
    assert Quantity.parse("10Gi").value == Decimal(10 * 2**30)
    assert Quantity.parse("1500m").text() == "1.5"
    assert Quantity.parse("2k").text() == "2000"
    assert Quantity.parse("0").text() == "0"
    with pytest.raises(ValueError, match="'ten' is not a quantity such as 10Gi"):
        Quantity.parse("ten")


def test_quantities_compare_by_value() -> None:
    assert Quantity.parse("1Gi") < Quantity.parse("1025Mi")
    assert not Quantity.parse("1024Mi") < Quantity.parse("1Gi")
    assert Quantity.parse("1024Mi") == Quantity.parse("1Gi")
    assert Quantity.parse("2") > Quantity.parse("1999m")
    assert Quantity.parse("1").__lt__(1) is NotImplemented


def test_versions_parse_and_print_but_leave_ordering_to_kubernetes_semver() -> None:
    assert SemVer.parse("550.54.15") == SemVer(550, 54, 15)
    assert SemVer.parse("1.2.3+build.7").text() == "1.2.3"
    assert SemVer.parse("1.0.0-rc.10") == SemVer(1, 0, 0, "rc.10")
    assert SemVer.parse("1.0.0-rc.10").text() == "1.0.0-rc.10"
    with pytest.raises(TypeError):
        assert SemVer.parse("1.0.0-rc.9") < SemVer.parse("1.0.0-rc.10")
    for bad in ("1.2", "01.2.3", "v1.2.3", "1.2.3-"):
        with pytest.raises(ValueError, match=f"'{bad}' is not a semantic version"):
            SemVer.parse(bad)


def test_a_device_publishes_every_kind_of_attribute_in_name_order() -> None:
    device = Device(
        driver="gpu.nvidia.com",
        attributes={
            "z.example": {"b": True, "a": 3},
            "gpu.nvidia.com": {"v": SemVer(1, 2, 3, "rc.1"), "s": "mig", "gone": None},
        },
        capacity={
            "gpu.nvidia.com": {"memory": Quantity.parse("1Gi"), "cores": Quantity.parse("500m")}
        },
        allow_multiple_allocations=True,
    )
    published = device.published()
    assert published == {
        "driver": "gpu.nvidia.com",
        "allowMultipleAllocations": True,
        "attributes": {
            "gpu.nvidia.com/s": {"string": "mig"},
            "gpu.nvidia.com/v": {"version": "1.2.3-rc.1"},
            "z.example/a": {"int": 3},
            "z.example/b": {"bool": True},
        },
        "capacity": {
            "gpu.nvidia.com/cores": {"value": "0.5"},
            "gpu.nvidia.com/memory": {"value": "1073741824"},
        },
    }
    assert list(published["attributes"]) == sorted(published["attributes"])
    assert list(published["capacity"]) == sorted(published["capacity"])


def test_a_device_digest_is_its_published_form() -> None:
    one = Device(driver="d", attributes={"x": {"a": 1}})
    same = Device(driver="d", attributes={"x": {"a": 1}})
    other = Device(driver="d", attributes={"x": {"a": 2}})
    assert one.digest == same.digest != other.digest
    assert len(one.digest) == 32
    # A bool is not an int to a selector, though Python says True == 1.
    assert Device(driver="d", attributes={"x": {"a": True}}).digest != one.digest


def test_an_outcome_without_an_error_says_none() -> None:
    assert Outcome(selected=True) == Outcome(True, None)


def test_a_device_and_its_values_cannot_change_under_their_digest() -> None:
    """The digest is cached and keys the results cache: a device, and the quantities and
    versions in it, are immutable."""
    from dataclasses import FrozenInstanceError

    device = Device(driver="d")
    for value, name in (
        (device, "driver"),
        (Quantity.parse("1"), "value"),
        (SemVer(1, 2, 3), "major"),
        (Outcome(True), "selected"),
    ):
        with pytest.raises(FrozenInstanceError):
            setattr(value, name, None)


def test_a_device_allows_one_allocation_unless_it_says_otherwise() -> None:
    assert Device(driver="d").published()["allowMultipleAllocations"] is False


def test_quantities_take_every_comparison() -> None:
    small, large = Quantity.parse("1"), Quantity.parse("2")
    assert small <= large
    assert large >= small
    assert small <= Quantity.parse("1000m")
