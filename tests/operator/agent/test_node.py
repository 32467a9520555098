"""The node's phase and Ready reason from its GPUs' outcomes."""

from __future__ import annotations

import pytest

from migplan.operator.agent.node import not_ready
from migplan.operator.agent.reconcile import GpuOutcome, GpuPhase
from migplan.planner.api.nodepartition import EVICTED_PODS_STOPPING, NodePhase
from migplan.planner.hardware.layout import Layout


def _gpu(index: int, phase: GpuPhase, *, stopping: bool = False) -> GpuOutcome:
    return GpuOutcome(index=index, desired=Layout(), phase=phase, stopping=stopping)


STOPPING = _gpu(0, GpuPhase.BLOCKED, stopping=True)


@pytest.mark.parametrize(
    ("others", "expected"),
    [
        ([], (NodePhase.BLOCKED, EVICTED_PODS_STOPPING)),
        ([_gpu(1, GpuPhase.CONVERGED)], (NodePhase.BLOCKED, EVICTED_PODS_STOPPING)),
        ([_gpu(1, GpuPhase.RESET_REQUIRED)], (NodePhase.BLOCKED, EVICTED_PODS_STOPPING)),
        ([_gpu(1, GpuPhase.BLOCKED)], (NodePhase.BLOCKED, "Blocked")),
        ([_gpu(1, GpuPhase.FAILED)], (NodePhase.FAILED, "Failed")),
        ([_gpu(1, GpuPhase.INVALID)], (NodePhase.INVALID, "Invalid")),
    ],
)
def test_only_evicted_pods_stopping_make_a_node_wait_rather_than_fail(others, expected) -> None:
    """A node blocked only by evicted pods' processes says so (the operator waits for it);
    one GPU blocked otherwise, or worse off, makes it the usual failure."""
    assert not_ready([STOPPING, *others]) == expected


def test_a_gpu_blocked_otherwise_alone_is_blocked() -> None:
    assert not_ready([_gpu(0, GpuPhase.BLOCKED)]) == (NodePhase.BLOCKED, "Blocked")
    assert not_ready([_gpu(0, GpuPhase.RESET_REQUIRED)]) == (
        NodePhase.RESET_REQUIRED,
        "ResetRequired",
    )
