"""What one planning pass of a GPUPartitionPlan keeps for the next: the operator plans the
same fleet pass after pass (a cron re-plan every minute, the ticker's re-plans), and at
5,000 nodes most passes see the same inputs as the one before.

Two things are kept: the nodes the pass resolved (`ResolvedNodes`: a node whose report is
unchanged is not resolved again), and the plan it made with the digest of its inputs. A pass
whose inputs have the same digest, on the same catalog, takes that plan instead of solving
again where the plan is proven best on every criterion (and its scale-out, if any, proven
too): a new solve could only find a plan exactly as good, and on such a tie the planner keeps
the waiting plan anyway (a previous plan leads the starting plans, `solver/previous.py`). A
plan cut short by the time limit is solved again, from itself, as before: more time may
improve it; so is a plan that is not the one waiting (`PassMemo.kept`). The caller still
validates the plan against this pass's inputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from migplan.planner.api.inventory import ResolvedNodes
from migplan.planner.assemble import GpuKey
from migplan.planner.hardware.catalog import Catalog
from migplan.planner.plan import Plan, SolveStatus


@dataclass(frozen=True)
class _Made:
    digest: str
    catalog: Catalog
    plan: Plan


class PassMemo:
    """One GPUPartitionPlan's memory of its last planning pass (see the module)."""

    def __init__(self) -> None:
        self.nodes = ResolvedNodes()
        self._made: _Made | None = None

    def kept(
        self, *, digest: str, catalog: Catalog, previous: Mapping[GpuKey, str] | None
    ) -> Plan | None:
        """The last pass's plan, where it was made from inputs of this `digest` on this
        `catalog` (the same object), is proven best (`proven`) and is the plan waiting:
        every layout of `previous` (the waiting plan's, as the caller read it back) is that
        plan's. A waiting plan written by another (an operator replica before this one, a
        hand) may be another plan as good, which a solve keeps (`solver/previous.py`):
        taking this one instead would flip the plan between equals. None otherwise."""
        made = self._made
        if made is None or made.digest != digest or made.catalog is not catalog:
            return None
        if previous:
            targets = {(gpu.node, gpu.gpu): gpu.after for gpu in made.plan.gpus}
            if any(targets.get(key) != layout for key, layout in previous.items()):
                return None
        return made.plan

    def remember(self, *, digest: str, catalog: Catalog, plan: Plan) -> None:
        """`plan`, made from inputs of `digest` on `catalog`, for the next pass: kept only
        where it is proven best (a plan the next pass solves again need not take memory)."""
        self._made = _Made(digest=digest, catalog=catalog, plan=plan) if proven(plan) else None


def proven(plan: Plan) -> bool:
    """Whether no plan for the same inputs is better: every solver stage proven optimal, and
    the new nodes asked for (if any) proven too."""
    scale_out = plan.scale_out
    return plan.solver.status == SolveStatus.OPTIMAL and (
        scale_out is None or scale_out.status == SolveStatus.OPTIMAL
    )
