"""The plan: per GPU the target layout, the operations and evictions; demand met; solver figures.

A plan is data. `assemble.py` builds one from target layouts, `validate.py` checks one
independently of how it was found.
"""

from __future__ import annotations

from collections import Counter
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from migplan.planner.hardware.resources import part_text
from migplan.planner.schema import CamelModel


class OperationKind(StrEnum):
    """NVML-level steps, in the order the agent may take them."""

    ENABLE_MIG = "enable-mig"
    DESTROY_CI = "destroy-ci"
    DESTROY_GI = "destroy-gi"
    CREATE_GI = "create-gi"
    CREATE_CI = "create-ci"


class Operation(CamelModel):
    """One step on one GPU; `instance` is `profile@start` (none for enable-mig)."""

    kind: OperationKind
    instance: str | None = None

    def __str__(self) -> str:
        return f"{self.kind.value} {self.instance}" if self.instance else self.kind.value


class GpuPlan(CamelModel):
    """What happens to one GPU."""

    node: str
    gpu: Annotated[int, Field(description="GPU index on the node")]
    uuid: str | None = None
    model: str
    before: str
    after: str
    in_use: dict[str, str] = Field(
        default_factory=dict, description="instances in use before the change -> pod"
    )
    operations: tuple[Operation, ...] = ()
    evict: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        """Whether any operation touches this GPU."""
        return bool(self.operations)


class PodPart(CamelModel):
    """Part of what each pod of a bundle needs: `count` instances, each of any of `profiles`."""

    profiles: tuple[str, ...]
    count: int


class DemandResult(CamelModel):
    """How one demand item fared."""

    resource: str
    profile: str
    alternatives: tuple[str, ...] = Field(
        default=(), description="other profiles that serve this item (either/or demand)"
    )
    kind: str
    priority: int
    requested: int
    met: int
    served: dict[str, int] | None = Field(
        default=None, description="instances met per profile, for either/or items and bundles"
    )
    per_pod: tuple[PodPart, ...] = Field(
        default=(),
        description="for a bundle (pods needing several instances on one node): what each "
        "pod needs; requested and met then count pods",
    )
    reason: str | None = Field(default=None, description="why the rest is unmet")
    pods: tuple[str, ...] = ()
    gang: str | None = Field(
        default=None,
        description="the gang the item's pods belong to (met all together or not at all)",
    )
    min_count: int | None = Field(
        default=None,
        description="in a gang: the fewest units this item is met with when its gang is "
        "(a Kueue pod set's minCount); none where only the gang's total counts",
    )

    @property
    def unmet(self) -> int:
        """Requested but not provided."""
        return self.requested - self.met

    @property
    def per_unit(self) -> int:
        """Instances one unit of requested/met stands for (a bundle's per pod, else 1)."""
        return sum(p.count for p in self.per_pod) or 1

    @property
    def label(self) -> str:
        """What was asked for, as a person reads it: the resource, `A or B` profiles, or a
        bundle's parts per pod."""
        if self.per_pod:
            each = " + ".join(part_text(p.profiles, p.count) for p in self.per_pod)
            return f"pods of {each} on one node"
        if not self.alternatives:
            return self.resource
        return f"{self.resource} or {' or '.join(self.alternatives)}"

    @property
    def met_text(self) -> str:
        """Instances met, with the profiles that served an either/or item: `3 (2 x 1g.10gb,
        1 x 2g.20gb)`."""
        if self.per_pod:
            pods = f"{self.met} pod" + ("" if self.met == 1 else "s")
            if not self.served:
                return pods
            return pods + " (" + ", ".join(f"{n} x {p}" for p, n in self.served.items()) + ")"
        if not self.served:
            return str(self.met)
        parts = ", ".join(f"{n} x {p}" for p, n in self.served.items())
        return f"{self.met} ({parts})"


class GangResult(CamelModel):
    """How one gang fared: met all together, or not at all."""

    name: str = Field(description="kind, namespace/name: `PodGroup ml/train`")
    shape: str = Field(description="what its pods need: `3 x 3g.40gb`")
    min_count: int = Field(description="pods that must be met together")
    requested: int = Field(description="pods of the gang the plan was asked for")
    met: int = Field(description="pods of the gang the plan meets")
    admitted: bool = Field(description="whether the gang is met (at least minCount pods)")
    reason: str | None = Field(default=None, description="why it is not met")


class Hosted(CamelModel):
    """Units of one demand item a new node hosts."""

    demand: Annotated[int, Field(ge=0, description="index of the item in the plan's demand")]
    units: Annotated[int, Field(ge=1, description="pods (instances, for a single-instance item)")]
    parts: tuple[dict[str, int], ...] = Field(
        description="per part of what one unit needs (one part but for a bundle), the "
        "instances of each profile the units take"
    )

    def served(self) -> Counter[str]:
        """Instances per profile the units take."""
        total: Counter[str] = Counter()
        for part in self.parts:
            total.update(part)
        return total


class NewNode(CamelModel):
    """A node the plan asks the autoscaler for, with the layouts it gets when it joins."""

    offer: str
    name: str = Field(description="the plan's name for it (`h100-8x-1`) until it joins")
    model: str
    gpus: tuple[str, ...] = Field(description="per GPU the layout it is given (`-`: left whole)")
    hosts: tuple[Hosted, ...] = Field(description="the demand it is laid out for")


class ScaleOutItem(CamelModel):
    """How one demand item fares on the new nodes."""

    demand: Annotated[int, Field(ge=0, description="index of the item in the plan's demand")]
    label: str
    gang: str | None = None
    left: int = Field(description="units the covered GPUs leave unmet (a whole gang not met)")
    met: int = Field(description="units the new nodes meet")


class ScaleOutPlan(CamelModel):
    """What to add when reshaping the covered GPUs leaves pending demand unmet."""

    status: str = Field(description="the scale-out model's solver status")
    nodes: tuple[NewNode, ...] = ()
    items: tuple[ScaleOutItem, ...] = ()
    cost: int = Field(default=0, description="the new nodes' cost weights added up")
    weighted_met: int = Field(default=0, description="priority-weighted demand they meet")
    bound: int = Field(default=0, description="proven best weighted demand new nodes could meet")
    reason: str | None = Field(default=None, description="why no node (or not more) is asked for")

    def offer_counts(self) -> dict[str, int]:
        """New nodes per offer."""
        counts: dict[str, int] = {}
        for node in self.nodes:
            counts[node.offer] = counts.get(node.offer, 0) + 1
        return counts


class SolveStatus(StrEnum):
    """How far a plan or a stage of it was proven (CP-SAT's names; HEURISTIC, NOT REACHED)."""

    OPTIMAL = "OPTIMAL"
    FEASIBLE = "FEASIBLE"
    INFEASIBLE = "INFEASIBLE"
    MODEL_INVALID = "MODEL_INVALID"
    UNKNOWN = "UNKNOWN"
    HEURISTIC = "HEURISTIC"
    NOT_REACHED = "NOT REACHED"


class SolverStage(CamelModel):
    """One criterion of the lexicographic objective, as its stage left it."""

    name: str
    sense: str
    status: SolveStatus
    value: float
    bound: float | None = Field(default=None, description="proven best value, if known")
    seconds: float


SOLVER_METHOD = "cp-sat"
"""`SolverReport.method` of the exact planner's plans."""
DEMAND_STAGE = "demand met"
"""The solver's first stage: how much demand the plan meets."""


class SolverReport(CamelModel):
    """Honest figures from the solver (or the name of the heuristic that made the plan)."""

    method: str
    status: SolveStatus
    objective: float = Field(
        default=0.0, description="the returned plan's first-stage (demand, disruption) objective"
    )
    bound: float = Field(default=0.0, description="proven bound of that objective")
    gap: float = Field(default=0.0, description="relative gap between the two")
    wall_seconds: float = Field(default=0.0, description="the whole planning pass")
    build_seconds: float = Field(
        default=0.0, description="classes, pools, starting points and model, before solving"
    )
    stages: tuple[SolverStage, ...] = ()
    classes: int = 0
    pools: int = Field(default=0, description="pools of what changed GPUs can become")
    variables: int = 0
    workers: int = 1
    seed: int = 0
    started_from: str | None = Field(
        default=None, description="the plan the solver started from (its hint)"
    )
    chosen: str | None = Field(
        default=None, description="the plan returned: the solver's, or a better starting point"
    )

    def no_time_note(self) -> str | None:
        """What a reader must know where the solver's time ran out before its first stage
        (the plan is where it started, its unmet-demand reasons are not proven, the bound is
        all the demand); None where that stage ran, and for a heuristic's plan."""
        if self.method != SOLVER_METHOD or any(st.name == DEMAND_STAGE for st in self.stages):
            return None
        return (
            "the solver had no time for its first stage (demand met): this plan is where it "
            f"started ({self.started_from}), the reasons given for unmet demand are not "
            "proven, and the bound is all the demand. Raise spec.solver.timeLimitSeconds (it "
            "counts from the command's start, reading the inventory included), or cover fewer "
            "nodes per plan."
        )


class PlanSummary(CamelModel):
    """Counts a person looks at first."""

    gpus: int
    gpus_changed: int
    nodes_touched: int
    evictions: int
    requested: int = Field(description="instances requested (a bundle's pods times theirs)")
    met: int = Field(description="instances met")


class Plan(CamelModel):
    """The computed plan for one set of inputs."""

    name: str | None = Field(default=None, description="the GPUPartitionPlan this plan is of")
    input_hash: str
    gpus: tuple[GpuPlan, ...]
    demand: tuple[DemandResult, ...]
    gangs: tuple[GangResult, ...] = Field(
        default=(), description="gangs in the demand (their items are in `demand` too)"
    )
    summary: PlanSummary
    solver: SolverReport
    scale_out: ScaleOutPlan | None = Field(
        default=None,
        description="nodes to add for the pending demand the covered GPUs leave unmet "
        "(spec.scaleOut)",
    )


class _Lenient(BaseModel):
    """Read with camelCase names; fields it does not name are ignored (an earlier plan may
    come from another migplan version)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )


class PreviousGpu(_Lenient):
    """One GPU of an earlier plan: where it is and the layout the plan gave it."""

    node: Annotated[str, Field(min_length=1)]
    gpu: Annotated[int, Field(ge=0)]
    after: str


class PreviousPlan(_Lenient):
    """What a warm start reads of an earlier plan (a preview's `-o json` or `-o yaml`
    document): whose it is and each GPU's layout after it."""

    name: str | None = None
    gpus: tuple[PreviousGpu, ...]

    def layouts(self) -> dict[tuple[str, int], str]:
        """Each GPU's layout after the plan, by (node, GPU index)."""
        return {(g.node, g.gpu): g.after for g in self.gpus}

    def repeated(self) -> str | None:
        """A GPU the plan lists twice (`node/gpu-N`), if any: such a plan was not written
        by migplan."""
        seen: set[tuple[str, int]] = set()
        for g in self.gpus:
            if (g.node, g.gpu) in seen:
                return f"{g.node}/gpu-{g.gpu}"
            seen.add((g.node, g.gpu))
        return None
