"""Asking the cluster autoscaler for the nodes a plan's scale-out wants, and taking them in.

The portable way, which Cluster Autoscaler and Karpenter both answer: per new node one
placeholder pod that reserves all its whole GPUs (`nvidia.com/gpu: N`), selecting the
offer's node labels and tolerating its taints, at a negative priority so real work preempts
it, owned by the GPUPartitionPlan so it goes with the plan. A pending placeholder makes the
autoscaler add a node; when the scheduler binds it there and the node's agent has reported,
the node has arrived: the placeholder is deleted, the node is kept from consolidation
(`karpenter.sh/do-not-disrupt`) and the plan is planned again, which lays the node out for
the pods waiting (creating instances on empty GPUs needs no drain). Once its rollout is
done the annotation goes, so scale-in stays the autoscaler's. Placeholders unbound past
`spec.scaleOut.timeout` are withdrawn and the offer is not asked again for as long.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

import structlog
from kubernetes.client.exceptions import ApiException

from migplan.operator.controller.scale_out_settings import ScaleOutSettings
from migplan.operator.kube.bodies import PlanBody
from migplan.operator.kube.quantities import extended_requests
from migplan.operator.kube.seam import Kube
from migplan.planner.api.group import API_VERSION
from migplan.planner.api.spec import (
    GPUPartitionPlan,
    ScaleOutOffer,
    ScaleOutSpec,
    duration_seconds,
)
from migplan.planner.hardware.resources import is_mig_resource
from migplan.planner.plan import Plan
from migplan.planner.rollout.records import NodeRollout
from migplan.planner.rollout.schedule import parse_timestamp, timestamp
from migplan.planner.status import ScaleOutRequest, ScaleOutStatus

log = structlog.get_logger("migplan.operator")

PLAN_LABEL = "migplan.io/plan"
OFFER_LABEL = "migplan.io/scale-out-offer"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
"""Karpenter leaves a node with this annotation alone (no consolidation, no drift)."""
ARRIVED_FOR = "migplan.io/scale-out-for"
"""Set beside DO_NOT_DISRUPT on a node that arrived for a plan: the plan's name."""
WHOLE_GPU = "nvidia.com/gpu"
DEFAULT_TIMEOUT: str = ScaleOutSpec.model_fields["timeout"].default
"""spec.scaleOut.timeout's default: how long a plan whose scaleOut was removed still watches."""
_T = TypeVar("_T")


@dataclass
class Outcome:
    """The status to write, the events to post (Normal|Warning, reason, message), and the
    nodes that arrived (plan again)."""

    status: ScaleOutStatus
    events: list[tuple[str, str, str]] = field(default_factory=list)
    arrived: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    """Nodes that arrived but the last plan left out: worth planning again soon."""

    def body(self, previous: Mapping[str, Any] | None) -> dict[str, Any]:
        """status.scaleOut as a merge patch over `previous`: keys gone from its maps are
        written as null, or the merge would keep them."""
        new = self.status.model_dump(mode="json", by_alias=True)
        for key, value in new.items():
            old = (previous or {}).get(key)
            if isinstance(value, dict) and isinstance(old, dict):
                value.update(dict.fromkeys(old.keys() - value.keys()))
        return new


def placeholder_body(
    *, plan: PlanBody, offer: ScaleOutOffer, settings: ScaleOutSettings
) -> dict[str, Any]:
    """The pod that reserves one new node of `offer` for `plan`."""
    name = plan["metadata"]["name"]
    gpus = str(offer.gpus_per_node)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"migplan-scale-out-{offer.name}-",
            "labels": {
                PLAN_LABEL: _label_value(name),
                OFFER_LABEL: offer.name,
                "app.kubernetes.io/managed-by": "migplan",
            },
            "annotations": {
                "migplan.io/plan-name": name,
                "migplan.io/purpose": "reserves a new node for pods migplan lays out on it",
            },
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": "GPUPartitionPlan",
                    "name": name,
                    "uid": plan["metadata"]["uid"],
                }
            ],
        },
        "spec": {
            "nodeSelector": dict(offer.node_selector),
            "tolerations": [
                t.model_dump(mode="json", by_alias=True, exclude_none=True)
                for t in offer.tolerations
            ],
            "priorityClassName": settings.priority_class,
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65535},
            "containers": [
                {
                    "name": "reserve",
                    "image": settings.image,
                    "resources": {"requests": {WHOLE_GPU: gpus}, "limits": {WHOLE_GPU: gpus}},
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }


def _label_value(name: str) -> str:
    """A plan name as a label value (63 characters at most; longer names are cut, the
    annotation keeps the whole name)."""
    return name[:63].rstrip("-.")


@dataclass(frozen=True)
class _Placeholder:
    name: str
    offer: str
    since: str
    node: str | None


class ScaleOut:
    """The placeholders of every plan, in the namespace of `settings`."""

    def __init__(self, api: Kube, settings: ScaleOutSettings) -> None:
        self.api = api
        self.settings = settings

    def _placeholders(self, plan: str, before: ScaleOutStatus) -> list[_Placeholder]:
        """The plan's placeholders not being deleted, each asked for when the status says
        (the operator's clock) or else when it was created."""
        asked = {r.placeholder: r.since for r in before.requests}
        pods = self.api.core.list_pods(
            namespace=self.settings.namespace,
            label_selector=f"{PLAN_LABEL}={_label_value(plan)}",
        )
        found = []
        for pod in pods:
            meta = pod.metadata
            if (meta.annotations or {}).get("migplan.io/plan-name") != plan:
                continue
            if meta.deletion_timestamp is not None:
                continue
            found.append(
                _Placeholder(
                    name=meta.name,
                    offer=(meta.labels or {}).get(OFFER_LABEL, ""),
                    since=asked.get(meta.name) or timestamp(meta.creation_timestamp),
                    node=pod.spec.node_name,
                )
            )
        return sorted(found, key=lambda p: (p.since, p.name))

    def request(
        self,
        *,
        body: PlanBody,
        manifest: GPUPartitionPlan,
        plan: Plan | None,
        previous: Mapping[str, Any] | None,
        now: datetime,
    ) -> Outcome:
        """After a planning pass: as many unbound placeholders per offer as `plan`'s
        scale-out asks for (none for a dry run, a plan without spec.scaleOut or an offer that
        timed out within the timeout), creating and deleting the difference."""
        name = body["metadata"]["name"]
        before = ScaleOutStatus.model_validate(previous or {})
        spec = manifest.spec.scale_out
        offers = {o.name: o for o in spec.offers} if spec else {}
        wanted = dict(plan.scale_out.offer_counts()) if plan and plan.scale_out else {}
        if manifest.spec.dry_run or spec is None:
            wanted = {}
        timeout = timedelta(seconds=duration_seconds(spec.timeout)) if spec else timedelta()
        timed_out = {
            offer: when
            for offer, when in _present(before.timed_out).items()
            if parse_timestamp(when) + timeout > now
        }
        held = {offer: n for offer, n in wanted.items() if offer in timed_out}
        events: list[tuple[str, str, str]] = []
        unbound: dict[str, list[_Placeholder]] = {}
        bound: list[_Placeholder] = []  # their nodes joined; the next tick takes them in
        for p in self._placeholders(name, before):
            if p.node is None:
                unbound.setdefault(p.offer, []).append(p)
            else:
                bound.append(p)
        asked = []
        for offer in sorted(set(wanted) | set(unbound)):
            want = 0 if offer in held or offer not in offers else wanted.get(offer, 0)
            have = unbound.get(offer, [])
            for p in reversed(have[want:]):
                self.api.core.delete_pod(namespace=self.settings.namespace, name=p.name)
            for _ in range(want - len(have)):
                pod = self.api.core.create_pod(
                    namespace=self.settings.namespace,
                    body=placeholder_body(plan=body, offer=offers[offer], settings=self.settings),
                )
                asked.append(offer)
                have.append(_Placeholder(pod.metadata.name, offer, timestamp(now), None))
            unbound[offer] = have[:want]
        if asked:
            counts = ", ".join(f"{asked.count(o)} x {o}" for o in sorted(set(asked)))
            events.append(
                (
                    "Normal",
                    "ScaleOutRequested",
                    f"asked the autoscaler for {counts} "
                    f"(placeholders in {self.settings.namespace})",
                )
            )
        message = _message(wanted, held, [p.offer for ps in unbound.values() for p in ps])
        status = ScaleOutStatus(
            wanted=wanted,
            requests=tuple(
                ScaleOutRequest(offer=p.offer, placeholder=p.name, since=p.since, node=p.node)
                for p in [*(p for offer in sorted(unbound) for p in unbound[offer]), *bound]
            ),
            arrived=before.arrived,
            released=_present(before.released),
            timed_out=timed_out,
            message=message,
        )
        return Outcome(status=status, events=events)

    def watch(
        self,
        *,
        body: PlanBody,
        manifest: GPUPartitionPlan,
        previous: Mapping[str, Any] | None,
        records: Mapping[str, NodeRollout],
        left_out: Collection[str] = (),
        now: datetime,
    ) -> Outcome:
        """Each tick: placeholders bound to a node whose agent has reported are done (the
        node arrived: deleted, node kept from consolidation, plan again); unbound ones past
        the timeout are withdrawn; arrived nodes whose rollout is done are released, those
        the last plan left out (`left_out`: preflight refused them, say) wait for the next."""
        name = body["metadata"]["name"]
        before = ScaleOutStatus.model_validate(previous or {})
        spec = manifest.spec.scale_out
        within = spec.timeout if spec else DEFAULT_TIMEOUT
        timeout = timedelta(seconds=duration_seconds(within))
        events: list[tuple[str, str, str]] = []
        arrived: list[str] = []
        timed_out = _present(before.timed_out)
        left: list[ScaleOutRequest] = []
        for p in self._placeholders(name, before):
            if p.node is not None and self._reported(p.node):
                # Kept from consolidation before the placeholder goes: empty, it would be.
                self.api.core.patch_node(
                    name=p.node,
                    body={"metadata": {"annotations": {DO_NOT_DISRUPT: "true", ARRIVED_FOR: name}}},
                )
                self.api.core.delete_pod(namespace=self.settings.namespace, name=p.name)
                arrived.append(p.node)
                events.append(
                    (
                        "Normal",
                        "ScaleOutArrived",
                        f"node {p.node} ({p.offer}) joined: laying it out",
                    )
                )
            elif parse_timestamp(p.since) + timeout <= now:
                self.api.core.delete_pod(namespace=self.settings.namespace, name=p.name)
                timed_out[p.offer] = timestamp(now)
                where = (
                    f"bound to {p.node}, whose agent has not reported" if p.node else "no node came"
                )
                events.append(
                    (
                        "Warning",
                        "ScaleOutTimedOut",
                        f"withdrew the request for a {p.offer} node: {where} within {within}",
                    )
                )
            else:
                left.append(
                    ScaleOutRequest(offer=p.offer, placeholder=p.name, since=p.since, node=p.node)
                )
        keep = []
        waiting = []
        released = _present(before.released)
        for node in before.arrived:
            record = records.get(node)
            if record is not None and record.in_progress:
                keep.append(node)
                continue
            if record is None and node in left_out:
                keep.append(node)  # the last plan left it out (preflight): plan it again
                waiting.append(node)
                continue
            self.release(node, plan=name)
            if record is None:
                events.append(
                    (
                        "Warning",
                        "ScaleOutUnused",
                        f"node {node} joined but the plan no longer needs it: left to the "
                        "autoscaler",
                    )
                )
                continue
            released[node] = timestamp(now)
            events.append(
                (
                    "Normal",
                    "ScaleOutLaidOut",
                    f"node {node} laid out; the autoscaler may consolidate it when idle",
                )
            )
        for node, since in list(released.items()):
            if self._serves_mig_pods(node):
                del released[node]
            elif parse_timestamp(since) + timeout <= now:
                del released[node]
                events.append(
                    (
                        "Warning",
                        "ScaleOutUnused",
                        f"node {node} was laid out for this plan but no pod has used its "
                        f"instances within {within}: left to the autoscaler",
                    )
                )
        wanted = _present(before.wanted)
        held = {o: n for o, n in wanted.items() if o in timed_out}
        status = before.model_copy(
            update={
                "requests": tuple(left),
                "arrived": tuple(keep + arrived),
                "released": released,
                "timed_out": timed_out,
                "message": _message(wanted, held, [r.offer for r in left if not r.node]),
            }
        )
        return Outcome(status=status, events=events, arrived=arrived, waiting=waiting)

    def _serves_mig_pods(self, node: str) -> bool:
        """Whether a pod on `node` asks for MIG instances (the node is in use)."""
        return any(
            is_mig_resource(key)
            for pod in self.api.core.pods_on_node(node=node)
            for key in extended_requests(pod)
        )

    def _reported(self, node: str) -> bool:
        """Whether `node`'s agent has reported its GPUs (the planner can lay it out)."""
        partition = self.api.plans.get_node_partition(name=node)
        return bool(partition and ((partition.get("status") or {}).get("gpus")))

    def let_go_if_orphaned(self, *, node: str, annotations: Mapping[str, str]) -> bool:
        """Release `node` if the plan it arrived for is gone (deleted while the operator was
        away, say): True when it did. Called for every MIG-capable node the operator sees."""
        plan = annotations.get(ARRIVED_FOR)
        if not plan or self.api.plans.get_plan(name=plan) is not None:
            return False
        self.release(node, plan=plan)
        log.info("scale-out node let go: its plan is gone", node=node, plan=plan)
        return True

    def release(self, node: str, *, plan: str) -> None:
        """Let the autoscaler have `node` again (where this plan kept it)."""
        try:
            current = self.api.core.get_node(name=node)
        except ApiException as exc:
            if exc.status == 404:  # the node is gone: nothing to release
                return
            raise
        annotations = (current.metadata.annotations or {}) if current is not None else {}
        if annotations.get(ARRIVED_FOR) != plan:
            return
        self.api.core.patch_node(
            name=node, body={"metadata": {"annotations": {DO_NOT_DISRUPT: None, ARRIVED_FOR: None}}}
        )


def _present(values: Mapping[str, _T | None]) -> dict[str, _T]:
    """A status map without the keys a merge patch removed (null)."""
    return {key: value for key, value in values.items() if value is not None}


def _message(wanted: Mapping[str, int], held: Mapping[str, int], waiting: Sequence[str]) -> str:
    """`waiting for 2 x h100-8x` / `h100-8x: 1 wanted, but its last request timed out`, or
    `no new node needed`; `waiting` names the offer of each placeholder still unbound."""
    parts = [f"waiting for {waiting.count(o)} x {o}" for o in sorted(set(waiting))]
    parts += [f"{o}: {n} wanted, but its last request timed out" for o, n in sorted(held.items())]
    return "; ".join(parts) or ("no new node needed" if not wanted else "")
