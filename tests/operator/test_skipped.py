"""Objects out of the planner's bounds are skipped one by one, saying which bound broke."""

from __future__ import annotations

from migplan.operator.skipped import guarded
from migplan.planner.api.inventory import PendingPod


def build(**requests: int):
    skipped: list = []
    found = guarded(
        lambda: PendingPod(namespace="ml", name="p", requests=requests),
        skipped=skipped,
        api_version="v1",
        kind="Pod",
        namespace="ml",
        name="p",
        uid="u-1",
    )
    return found, skipped


def test_an_object_within_bounds_is_built() -> None:
    found, skipped = build(**{"nvidia.com/mig-1g.10gb": 1024})
    assert found is not None
    assert skipped == []


def test_one_out_of_bounds_is_skipped_naming_the_field_not_the_value() -> None:
    found, (s,) = build(**{"nvidia.com/mig-1g.10gb": 99999, "nvidia.com/mig-2g.20gb": -1})
    assert found is None
    assert s.why == (
        "requests.nvidia.com/mig-1g.10gb: Input should be less than or equal to 1024 (and 1 more)"
    )
    assert "99999" not in s.note()
    assert s.body() == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "uid": "u-1", "namespace": "ml"},
    }
