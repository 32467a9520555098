"""The `GPUPartitionPlan` manifest (migplan.io/v1alpha1): what a user `kubectl apply`s.

These models are the single source of the CRD's spec schema (crds/ is checked against them)
and are what the offline preview reads.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Literal, Self
from zoneinfo import available_timezones

from croniter import CroniterBadDateError, croniter
from pydantic import AfterValidator, ConfigDict, Field, field_validator, model_validator

from migplan.planner.api.group import ApiVersion
from migplan.planner.api.labels import LABEL_KEY, LABEL_VALUE
from migplan.planner.cores import usable_cores
from migplan.planner.hardware.catalog import PROFILE_NAME
from migplan.planner.hardware.resources import RESOURCE_NAME
from migplan.planner.schema import CamelModel

DURATION = re.compile(r"^([0-9]{1,4}h)?([0-9]{1,6}m)?([0-9]{1,8}s)?$")
"""A Go-style duration of hours, minutes and seconds: `2h`, `90m`, `1h30m`, `45s`. The digit
counts bound it (under 14 years), so the API server itself rejects `999999999h`."""
MAX_DURATION_SECONDS = 366 * 24 * 3600
"""No window or timeout is longer than a year (a year-long window is an always-open one)."""
CRON_HORIZON_YEARS = 10
CRON_FIELDS = 5
MAX_COUNT = 1_000_000
"""More MIG instances than any fleet holds (a million GPUs' worth of 1g): larger counts are
refused as input instead of overflowing the solver."""
PORTFOLIO_CORES = 8
"""Cores from which the solver uses them all by default: CP-SAT's parallel portfolio needs
several workers to pay off; on 2 cores one worker proved the fragmented benchmark faster."""


def duration_seconds(text: str) -> int:
    """`1h30m` -> 5400."""
    match = DURATION.match(text)
    if match is None or not text:
        raise ValueError(f"{text!r} is not a duration such as 2h, 90m or 1h30m")
    hours, minutes, seconds = (int(g[:-1]) if g else 0 for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def positive_duration(text: str) -> str:
    """Raise ValueError unless `text` is a duration longer than zero and at most a year."""
    seconds = duration_seconds(text)
    if seconds <= 0:
        raise ValueError("duration must be positive")
    if seconds > MAX_DURATION_SECONDS:
        raise ValueError(f"duration {text!r} is longer than a year (8784h)")
    return text


PositiveDuration = Annotated[
    str, Field(pattern=DURATION.pattern, max_length=32), AfterValidator(positive_duration)
]
"""A duration field: longer than zero, at most a year."""


def check_cron(text: str) -> str:
    """Raise ValueError unless `text` is a 5-field cron expression croniter accepts."""
    if len(text.split()) != CRON_FIELDS or not croniter.is_valid(text):
        raise ValueError(f"{text!r} is not a 5-field cron expression such as '0 2 * * 6'")
    # A valid expression can still name a date that never comes (30 February); the operator
    # would then find no next window on every tick.
    try:
        croniter(
            text, datetime(2026, 1, 1, tzinfo=UTC), max_years_between_matches=CRON_HORIZON_YEARS
        ).get_next(datetime)
    except (CroniterBadDateError, OverflowError):
        raise ValueError(
            f"{text!r} never fires (no matching date within {CRON_HORIZON_YEARS} years)"
        ) from None
    return text


class SelectorOperator(StrEnum):
    """Operators of a label-selector requirement (as in Kubernetes)."""

    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


class SelectorRequirement(CamelModel):
    """One `matchExpressions` entry."""

    key: Annotated[str, Field(min_length=1, max_length=317)]
    operator: SelectorOperator
    values: Annotated[tuple[Annotated[str, Field(max_length=63)], ...], Field(max_length=64)] = ()

    @model_validator(mode="after")
    def _values_fit_operator(self) -> Self:
        needs_values = self.operator in (SelectorOperator.IN, SelectorOperator.NOT_IN)
        if needs_values and not self.values:
            raise ValueError(f"operator {self.operator.value} needs at least one value")
        if not needs_values and self.values:
            raise ValueError(f"operator {self.operator.value} takes no values")
        return self

    def matches(self, labels: dict[str, str]) -> bool:
        """Whether `labels` satisfy this requirement."""
        match self.operator:
            case SelectorOperator.IN:
                return labels.get(self.key) in self.values
            case SelectorOperator.NOT_IN:
                return labels.get(self.key) not in self.values
            case SelectorOperator.EXISTS:
                return self.key in labels
            case SelectorOperator.DOES_NOT_EXIST:
                return self.key not in labels


class LabelSelector(CamelModel):
    """A Kubernetes label selector; empty selects everything."""

    match_labels: dict[str, Annotated[str, Field(max_length=63)]] = Field(
        default_factory=dict, max_length=64, description="labels that must all be present"
    )
    match_expressions: Annotated[
        tuple[SelectorRequirement, ...],
        Field(max_length=32, description="requirements that must all hold"),
    ] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        """Whether `labels` satisfy every label and expression of the selector."""
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.match_expressions
        )


Priority = Annotated[
    int, Field(ge=1, le=1000, strict=True, description="weight of this demand (1-1000)")
]


class ProfileDemand(CamelModel):
    """An explicit count: the selected GPUs should hold `count` instances of this profile."""

    resource: Annotated[
        str,
        Field(
            pattern=RESOURCE_NAME.pattern,
            max_length=64,
            description="MIG resource name, e.g. nvidia.com/mig-1g.10gb",
        ),
    ]
    count: Annotated[
        int,
        Field(
            ge=0,
            le=MAX_COUNT,
            strict=True,
            description="instances wanted, in use or free",
        ),
    ]
    priority: Priority = 1
    alternatives: Annotated[
        tuple[Annotated[str, Field(pattern=RESOURCE_NAME.pattern, max_length=64)], ...],
        Field(
            max_length=8,
            description="other MIG resources that serve this demand as well (either/or): "
            "the count is met by any mix of them, each worth as much as the smallest",
        ),
    ] = ()

    @model_validator(mode="after")
    def _alternatives_differ(self) -> Self:
        named = [self.resource, *self.alternatives]
        if len(set(named)) != len(named):
            raise ValueError("alternatives: name each resource once, and not the resource itself")
        return self


class PendingPodDemand(CamelModel):
    """Demand from pods Pending for want of `nvidia.com/mig-*` resources."""

    namespace_selector: LabelSelector = LabelSelector()
    priority: Priority = 1


class KueueDemand(CamelModel):
    """Demand from Kueue Workloads waiting for admission (their pods do not exist yet)."""

    cluster_queues: Annotated[
        tuple[Annotated[str, Field(max_length=253)], ...], Field(max_length=64)
    ] = Field(
        default=(),
        description="pending Workloads of these ClusterQueues count ahead of admission (empty: "
        "only Workloads waiting on a migplan AdmissionCheck that names this plan count)",
    )
    namespace_selector: LabelSelector = LabelSelector()
    priority: Priority = 1


class DemandSpec(CamelModel):
    """What the plan should provide."""

    profiles: Annotated[tuple[ProfileDemand, ...], Field(max_length=64)] = ()
    from_pending_pods: PendingPodDemand | None = None
    from_kueue: KueueDemand | None = Field(
        default=None,
        description="Kueue Workloads as demand: those waiting on a migplan AdmissionCheck "
        "(controllerName migplan.io/partition) that names this plan, and the pending ones "
        "of `clusterQueues`",
    )

    @model_validator(mode="after")
    def _something_is_wanted(self) -> Self:
        if not self.profiles and self.from_pending_pods is None and self.from_kueue is None:
            raise ValueError("demand: give profiles, fromPendingPods, fromKueue, or several")
        resources = [p.resource for p in self.profiles]
        if len(set(resources)) != len(resources):
            raise ValueError("demand.profiles: each resource may appear only once")
        return self


class Disruption(StrEnum):
    """What a plan may disturb."""

    NONE = "none"
    """Only instances no pod uses may be destroyed."""
    EVICT = "evict"
    """Instances in use may be destroyed; their pods are evicted (honouring PDBs) first."""


class PolicySpec(CamelModel):
    """What the planner may change."""

    disruption: Disruption = Disruption.NONE
    max_gpus_changed: Annotated[
        int | None, Field(ge=0, strict=True, description="at most this many GPUs change")
    ] = None
    max_nodes_changed: Annotated[
        int | None, Field(ge=0, strict=True, description="at most this many nodes change")
    ] = None
    allowed_profiles: dict[
        Annotated[str, Field(max_length=64)],
        Annotated[
            tuple[Annotated[str, Field(max_length=32, pattern=PROFILE_NAME.pattern)], ...],
            Field(max_length=32),
        ],
    ] = Field(
        default_factory=dict,
        max_length=32,
        description="per GPU model (catalog key): the profiles new instances may use",
    )
    create_outside_window: bool = Field(
        default=True,
        strict=True,
        description="nodes that only add instances in free slices may change outside the window",
    )
    whole_gpu_rebuild: bool = Field(
        default=False,
        strict=True,
        description="every changed GPU is rebuilt from empty (mig-manager actuator)",
    )


class WindowSpec(CamelModel):
    """A recurring maintenance window: disruptive steps happen only inside it."""

    start: Annotated[
        str, Field(max_length=128, description="5-field cron expression of the window's start")
    ]
    duration: Annotated[PositiveDuration, Field(description="e.g. 2h or 90m")]
    time_zone: Annotated[
        str, Field(max_length=64, description="IANA time zone of start, e.g. Europe/Berlin")
    ] = "UTC"

    @field_validator("start")
    @classmethod
    def _cron(cls, value: str) -> str:
        return check_cron(value)

    @field_validator("time_zone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        if value != "UTC" and value not in available_timezones():
            raise ValueError(
                f"unknown time zone {value!r} (use an IANA name such as Europe/Berlin)"
            )
        return value


class RolloutSpec(CamelModel):
    """How fast the rollout may go."""

    max_unavailable: Annotated[
        int, Field(ge=1, strict=True, description="nodes reconfigured at once")
    ] = 1
    drain_timeout: Annotated[
        PositiveDuration,
        Field(
            description="give a node up (uncordon, geometry unchanged) if its pods are not "
            "gone by then",
        ),
    ] = "10m"


class SolverSpec(CamelModel):
    """Solver limits."""

    time_limit_seconds: Annotated[
        float,
        Field(
            gt=0,
            le=600,
            description="limit of the whole planning pass, model building included; the plan "
            "is never worse than the baselines however short it is",
        ),
    ] = 10.0
    workers: Annotated[
        int | None,
        Field(
            ge=1,
            le=64,
            strict=True,
            description="CP-SAT search workers; unset: every core the operator may use (at "
            f"most its container's CPU limit) where that is at least {PORTFOLIO_CORES}, else 1 "
            "(measured faster on 2 cores)",
        ),
    ] = None
    deterministic: bool = Field(
        default=True,
        strict=True,
        description="with several workers, interleave them so the same input gives the same "
        "plan (a free parallel portfolio finds better plans sooner but not repeatably)",
    )

    def resolved_workers(self) -> int:
        """`workers`, or the default for the cores this process may use (`cores.py`: its
        affinity, at most its container's CPU limit)."""
        if self.workers is not None:
            return self.workers
        cores = usable_cores()
        return cores if cores >= PORTFOLIO_CORES else 1


class Actuator(StrEnum):
    """Who changes the MIG instances on a node."""

    AGENT = "agent"
    MIG_MANAGER = "mig-manager"


class DraMode(StrEnum):
    """How a plan acts on nodes whose MIG devices NVIDIA's DRA driver publishes."""

    STATIC = "static"
    """The agent lays out the GPUs (static MIG devices); the DRA kubelet plugin republishes."""
    STEER = "steer"
    """DynamicMIG creates instances per claim; migplan taints the slots outside its plan
    (DeviceTaintRules, NoSchedule) so the scheduler's first fit lands on the plan."""


class DraSpec(CamelModel):
    """Dynamic Resource Allocation: how the plan's layouts reach DRA nodes."""

    mode: DraMode = Field(description="static (lay out MIG devices) or steer (DynamicMIG)")


MAX_OFFER_NODES = 64
"""New nodes one offer may bring: the scale-out model holds each as its own node (bundles
need the node), so its size grows with this."""


class TolerationEffect(StrEnum):
    """What a taint does to pods that do not tolerate it."""

    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class Toleration(CamelModel):
    """A pod toleration (as in Kubernetes), for the taints an offered node arrives with."""

    key: Annotated[str, Field(max_length=317, pattern=LABEL_KEY)]
    operator: Literal["Equal", "Exists"] = "Equal"
    value: Annotated[str, Field(max_length=63, pattern=LABEL_VALUE)] = ""
    effect: TolerationEffect | None = None

    @model_validator(mode="after")
    def _value_fits_operator(self) -> Self:
        if self.operator == "Exists" and self.value:
            raise ValueError("operator Exists takes no value")
        return self


class ScaleOutOffer(CamelModel):
    """A kind of node the autoscaler can add: a Karpenter NodePool's instance type or a Cluster
    Autoscaler node group, as the labels its nodes carry."""

    name: Annotated[
        str,
        Field(
            pattern=r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$",
            description="what the plan and its events call these nodes (a DNS label)",
        ),
    ]
    gpu_model: Annotated[
        str,
        Field(
            min_length=1,
            max_length=64,
            description="the GPUs' model: a catalog key (`migplan profiles`) such as H100-80GB",
        ),
    ]
    gpus_per_node: Annotated[int, Field(ge=1, le=16, strict=True, description="GPUs per node")]
    node_selector: Annotated[
        dict[
            Annotated[str, Field(max_length=317)],
            Annotated[str, Field(max_length=63, pattern=LABEL_VALUE)],
        ],
        Field(
            min_length=1,
            max_length=16,
            description="labels a new node of this kind carries and no other node does (for "
            "Karpenter: karpenter.sh/nodepool and node.kubernetes.io/instance-type); the "
            "placeholder pods select them, and spec.nodeSelector must select them too",
        ),
    ]
    tolerations: Annotated[
        tuple[Toleration, ...],
        Field(max_length=16, description="the placeholders tolerate the new nodes' taints"),
    ] = ()
    cost: Annotated[
        int,
        Field(ge=1, le=1000, strict=True, description="weight of one node: cheapest first"),
    ] = 1
    max_nodes: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_OFFER_NODES,
            strict=True,
            description="new nodes of this kind one plan may ask for",
        ),
    ]

    @field_validator("node_selector")
    @classmethod
    def _label_keys(cls, value: dict[str, str]) -> dict[str, str]:
        # Checked here, not as a schema pattern: CRD schemas allow no patternProperties.
        for key in value:
            if not re.match(LABEL_KEY, key):
                raise ValueError(f"{key!r} is not a label key")
        return value


class ScaleOutSpec(CamelModel):
    """Nodes to ask the cluster autoscaler for when reshaping the covered GPUs cannot meet
    the pending demand."""

    offers: Annotated[tuple[ScaleOutOffer, ...], Field(min_length=1, max_length=8)]
    max_nodes: Annotated[
        int | None,
        Field(ge=1, le=512, strict=True, description="new nodes in all, over every offer"),
    ] = None
    timeout: Annotated[
        PositiveDuration,
        Field(
            description="withdraw the request (delete the placeholders) for nodes that have "
            "not joined by then",
        ),
    ] = "15m"

    @model_validator(mode="after")
    def _names_differ(self) -> Self:
        names = [o.name for o in self.offers]
        if len(set(names)) != len(names):
            raise ValueError("offers: each name may appear only once")
        return self


class PlanSpec(CamelModel):
    """spec of a GPUPartitionPlan."""

    node_selector: LabelSelector = LabelSelector()
    demand: DemandSpec
    policy: PolicySpec = PolicySpec()
    window: WindowSpec | None = None
    rebalance_schedule: str | None = Field(
        default=None, max_length=128, description="5-field cron expression"
    )
    rollout: RolloutSpec = RolloutSpec()
    actuator: Actuator | None = Field(
        default=None,
        description="who changes the GPUs: the node agent, or NVIDIA's mig-manager; unset: the "
        "operator's --default-actuator (agent unless the install says otherwise)",
    )
    dra: DraSpec | None = Field(
        default=None,
        description="for GPUs NVIDIA's DRA driver publishes: lay them out (static) or steer "
        "DynamicMIG's allocations with device taints (steer)",
    )
    dry_run: Annotated[
        bool, Field(strict=True, description="plan and report only; change nothing")
    ] = False
    suspend: Annotated[
        bool, Field(strict=True, description="neither plan nor roll out until unset")
    ] = False
    solver: SolverSpec = SolverSpec()
    scale_out: ScaleOutSpec | None = Field(
        default=None,
        description="where reshaping the covered GPUs leaves pending pods or Workloads unmet: "
        "the nodes the autoscaler may add, laid out for them when they join",
    )

    @field_validator("rebalance_schedule")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        return None if value is None else check_cron(value)

    @model_validator(mode="after")
    def _window_unless_dry_run(self) -> Self:
        if not self.dry_run and self.window is None:
            raise ValueError(
                "window: a plan that changes GPUs needs a maintenance window (or set dryRun: true)"
            )
        if self.dra is not None and self.actuator is Actuator.MIG_MANAGER:
            raise ValueError(
                "dra: mig-manager does not drive NVIDIA's DRA driver; leave actuator unset "
                "(or agent) with dra.mode"
            )
        if self.scale_out is not None:
            for n, offer in enumerate(self.scale_out.offers):
                if not self.node_selector.matches(offer.node_selector):
                    raise ValueError(
                        f"scaleOut.offers[{n}] ({offer.name}): spec.nodeSelector does not "
                        "select a node with its nodeSelector's labels, so a new node would "
                        "not be covered by this plan"
                    )
        return self


class ObjectMeta(CamelModel):
    """The part of Kubernetes metadata a plan file needs; other fields are kept as given."""

    model_config = ConfigDict(extra="allow")
    name: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")]


class GPUPartitionPlan(CamelModel):
    """A GPUPartitionPlan manifest as a user applies it."""

    model_config = ConfigDict(extra="ignore")  # status and other server fields may be present
    api_version: ApiVersion
    kind: Literal["GPUPartitionPlan"]
    metadata: ObjectMeta
    spec: PlanSpec

    def with_default_actuator(self, default: Actuator) -> GPUPartitionPlan:
        """This plan, with `default` as its actuator where the spec names none (the
        operator's --default-actuator)."""
        if self.spec.actuator is not None:
            return self
        return self.model_copy(update={"spec": self.spec.model_copy(update={"actuator": default})})


class PlanPhase(StrEnum):
    """Where a GPUPartitionPlan stands (status.phase, the Phase column)."""

    PLANNED = "Planned"
    """A dry run, planned: nothing is rolled out."""
    PENDING = "Pending"
    """Planned; no node has started."""
    WAITING = "WaitingForWindow"
    """Nodes are left and none is in hand: the window is closed, or they may not start."""
    PROGRESSING = "Progressing"
    """A node is in hand."""
    READY = "Ready"
    """Every node is done (or the plan changes nothing)."""
    DEGRADED = "Degraded"
    """Every node finished, some rolled back or failed."""
    SUSPENDED = "Suspended"
    CONFLICT = "Conflict"
    """Another plan selects some of the same nodes and came first."""
    INVALID = "Invalid"
    """The spec cannot be planned; events say why."""
