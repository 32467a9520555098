"""The new nodes of a plan (spec.scaleOut) as a person reads them: the preview's text and
HTML, and the operator's events, say the same words."""

from __future__ import annotations

from collections.abc import Sequence

from migplan.planner.plan import NewNode, Plan, ScaleOutPlan


def gpu_runs(layouts: Sequence[str]) -> list[tuple[str, str]]:
    """Consecutive GPUs with the same layout: `[("0-6", "3g.40gb@0+3g.40gb@4"), ("7", "-")]`."""
    runs: list[tuple[int, int, str]] = []
    for k, layout in enumerate(layouts):
        if runs and runs[-1][2] == layout:
            runs[-1] = (runs[-1][0], k, layout)
        else:
            runs.append((k, k, layout))
    return [(f"{a}" if a == b else f"{a}-{b}", layout) for a, b, layout in runs]


def _unit(plan: Plan, demand: int, units: int) -> str:
    """`16 pods (nvidia.com/mig-3g.40gb) of PodGroup ml/train`, `1 pod (2 x 1g.10gb on one
    node)`: units of pending demand are pods."""
    result = plan.demand[demand]
    what = result.label.removeprefix("pods of ")
    pods = f"{units} pod{'' if units == 1 else 's'} ({what})"
    return f"{pods} of {result.gang}" if result.gang else pods


def hosts_text(plan: Plan, node: NewNode) -> str:
    """What `node` is laid out for: `15 pods (nvidia.com/mig-3g.40gb) of PodGroup ml/train`."""
    return "; ".join(_unit(plan, h.demand, h.units) for h in node.hosts) or "nothing"


def headline(scale: ScaleOutPlan) -> str:
    """`add 2 x h100-8x (cost 2): meets 17 of the 17 pending pods ...`, or why no node."""
    left = sum(i.left for i in scale.items)
    met = sum(i.met for i in scale.items)
    if not scale.nodes:
        return f"no new node asked for: {scale.reason or 'nothing is left unmet'}"
    offers = ", ".join(f"{n} x {offer}" for offer, n in scale.offer_counts().items())
    proven = "" if scale.status == "OPTIMAL" else f" ({scale.status}: not proven cheapest)"
    return (
        f"add {offers} (cost {scale.cost}){proven}: meets {met} of the {left} pending pods "
        "the covered GPUs leave unmet"
    )
