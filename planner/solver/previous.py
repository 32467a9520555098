"""The previous plan of the same GPUPartitionPlan as a starting point (a warm start).

Under cron the operator plans the same fleet again every pass, and a plan waiting for its
maintenance window is planned anew each time: the last plan's layouts are most of the answer.
They join the starting points (`facade._Starts`), so the solver starts from them where they
rank best on the objective, and the plan returned is never worse than them: a re-plan moves
away from a waiting plan only where that is better.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from migplan.planner.api.inventory import GpuState
from migplan.planner.api.spec import Disruption, PolicySpec
from migplan.planner.assemble import GpuKey, gpu_key
from migplan.planner.errors import LayoutSyntaxError
from migplan.planner.hardware.layout import Layout, is_valid

PREVIOUS = "previous plan"
"""The starting point's name in the solver's report (`startedFrom`, `chosen`)."""


def previous_targets(
    gpus: Sequence[GpuState], previous: Mapping[GpuKey, str], policy: PolicySpec
) -> dict[GpuKey, Layout]:
    """Each of `gpus` at its layout in `previous` (canonical text by node and GPU index)
    where that still applies, else at its current layout. A previous layout no longer
    applies where its text does not parse or the GPU's model cannot hold it (the node now
    has other GPUs), and, under policy `none`, where it would destroy an instance a pod now
    uses (pods started since the previous plan). GPUs `previous` does not name keep theirs."""
    targets: dict[GpuKey, Layout] = {}
    for gpu in gpus:
        key = gpu_key(gpu)
        text = previous.get(key)
        layout = None if text is None else _parsed(text)
        if layout is None or not _applies(gpu, layout, policy):
            layout = gpu.layout
        targets[key] = layout
    return targets


def _parsed(text: str) -> Layout | None:
    try:
        return Layout.parse(text)
    except LayoutSyntaxError:
        return None


def _applies(gpu: GpuState, layout: Layout, policy: PolicySpec) -> bool:
    if layout == gpu.layout:
        return True
    if layout and not is_valid(gpu.model, layout):
        return False
    if policy.disruption is Disruption.EVICT:
        return True
    kept = set(layout.instances)
    return gpu.whole_gpu_pod is None and all(i in kept for i in gpu.pins)
