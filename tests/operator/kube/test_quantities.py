"""Device counts from quantities, as the Kubernetes client parses them."""

from __future__ import annotations

import pytest

from migplan.operator.kube.quantities import device_count, mig_counts


@pytest.mark.parametrize(
    ("written", "count"),
    [("2", 2), ("2e0", 2), ("1k", 1000), ("0", 0), (3, 3), ("1Ki", 1024)],
)
def test_a_whole_quantity_is_a_count(written: object, count: int) -> None:
    assert device_count(written) == count


@pytest.mark.parametrize("written", ["500m", "0.5", "-1", "two", None, ""])
def test_what_is_not_a_whole_number_of_devices_counts_nothing(written: object) -> None:
    assert device_count(written) is None


def test_mig_counts_keep_the_mig_resources_offered() -> None:
    allocatable = {"cpu": "64", "nvidia.com/mig-1g.10gb": "2e0", "nvidia.com/mig-7g.80gb": "0"}
    assert mig_counts(allocatable) == {"nvidia.com/mig-1g.10gb": 2}
