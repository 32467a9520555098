"""`constructed`: the instance pydantic's model_construct makes, made faster."""

from __future__ import annotations

import pytest

from migplan.planner.plan import GpuPlan, Operation, OperationKind
from migplan.planner.schema import constructed


def _values() -> dict[str, object]:
    return {
        "node": "gpu-node-7",
        "gpu": 3,
        "uuid": "GPU-5c1d",
        "model": "H100-80GB",
        "before": "1g.10gb@0+3g.40gb@4",
        "after": "7g.80gb@0",
        "in_use": {"1g.10gb@0": "ml/train-0"},
        "operations": (
            Operation(kind=OperationKind.DESTROY_CI, instance="1g.10gb@0"),
            Operation(kind=OperationKind.DESTROY_GI, instance="1g.10gb@0"),
        ),
        "evict": ("ml/train-0",),
    }


def test_the_same_instance_as_model_construct() -> None:
    made, reference = constructed(GpuPlan, **_values()), GpuPlan.model_construct(**_values())
    assert made == reference
    assert made.model_fields_set == reference.model_fields_set
    assert made.__pydantic_extra__ == reference.__pydantic_extra__
    assert made.__pydantic_private__ == reference.__pydantic_private__
    assert made.model_dump_json(by_alias=True) == reference.model_dump_json(by_alias=True)
    assert GpuPlan.model_validate(made.model_dump(by_alias=True)) == reference


def test_a_hashable_model_hashes_the_same() -> None:
    values = {"kind": OperationKind.CREATE_GI, "instance": "3g.40gb@4"}
    made, reference = constructed(Operation, **values), Operation.model_construct(**values)
    assert made == reference
    assert hash(made) == hash(reference)
    assert {made: 1}[reference] == 1


def test_copies_and_updates_as_a_constructed_model_does() -> None:
    made = constructed(GpuPlan, **_values())
    copied = made.model_copy(update={"node": "gpu-node-8"})
    assert copied.node == "gpu-node-8"
    assert made.node == "gpu-node-7"
    assert copied.model_fields_set == made.model_fields_set
    with pytest.raises(ValueError, match="frozen"):
        made.node = "elsewhere"


def test_refuses_values_that_model_construct_would_complete_or_reorder() -> None:
    values = _values()
    del values["uuid"]
    with pytest.raises(TypeError, match="model_construct"):
        constructed(GpuPlan, **values)
    reordered = dict(reversed(list(_values().items())))
    with pytest.raises(TypeError, match="model_construct"):
        constructed(GpuPlan, **reordered)
