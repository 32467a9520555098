"""Heuristic planners that peers use, reimplemented for comparison with the exact planner.

Each returns a Plan built by `assemble_plan`, so the validator checks them like any plan:
- `greedy_plan`: nos's documented algorithm (node by node, the geometry that supplies most
  missing demand without deleting used devices);
- `first_fit_plan`: per request, the first GPU with room (HAMi / Dynamic Accelerator Slicer);
- `static_plan`: one geometry per model on every free GPU (mig-parted "all-balanced" style).
"""

from migplan.planner.baselines.first_fit import first_fit_plan, first_fit_targets
from migplan.planner.baselines.greedy import greedy_plan, greedy_targets
from migplan.planner.baselines.static import static_plan, static_targets

__all__ = [
    "first_fit_plan",
    "first_fit_targets",
    "greedy_plan",
    "greedy_targets",
    "static_plan",
    "static_targets",
]
