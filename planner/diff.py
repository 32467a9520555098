"""Operations that turn a GPU's current layout into its target, in a safe order.

Compute instances go before their GPU instance, every destroy before any create, and a
GPU-instance create is followed by its default compute instance. Instances in both layouts
are left alone, unless the GPU is rebuilt whole (the mig-manager path recreates everything).
"""

from __future__ import annotations

from migplan.planner.hardware.layout import Instance, Layout
from migplan.planner.plan import Operation, OperationKind


def removed_instances(before: Layout, after: Layout, *, rebuild: bool = False) -> list[Instance]:
    """Instances of `before` that will be destroyed."""
    if rebuild and before != after:
        return list(before.instances)
    kept = set(after.instances)
    return [i for i in before.instances if i not in kept]


def added_instances(before: Layout, after: Layout, *, rebuild: bool = False) -> list[Instance]:
    """Instances of `after` that will be created."""
    if rebuild and before != after:
        return list(after.instances)
    existing = set(before.instances)
    return [i for i in after.instances if i not in existing]


def operations(
    before: Layout, after: Layout, *, mig_enabled: bool = True, rebuild: bool = False
) -> list[Operation]:
    """The ordered steps from `before` to `after` (empty when nothing changes)."""
    if mig_enabled and before == after:
        return []
    steps: list[Operation] = []
    if not mig_enabled and after:
        steps.append(Operation(kind=OperationKind.ENABLE_MIG))
    for instance in removed_instances(before, after, rebuild=rebuild):
        steps.append(Operation(kind=OperationKind.DESTROY_CI, instance=str(instance)))
        steps.append(Operation(kind=OperationKind.DESTROY_GI, instance=str(instance)))
    for instance in added_instances(before, after, rebuild=rebuild):
        steps.append(Operation(kind=OperationKind.CREATE_GI, instance=str(instance)))
        steps.append(Operation(kind=OperationKind.CREATE_CI, instance=str(instance)))
    return steps
