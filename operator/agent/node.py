"""The node agent's loop body: read the NodePartition named after the node, bring each GPU
to its target through NVML, restart the device plugin after a change, check the node's
allocatable resources, and report status.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from migplan.operator.agent.metrics import record_pass
from migplan.operator.agent.podresources import dra_instances
from migplan.operator.agent.reconcile import GpuOutcome, GpuPhase, reconcile_gpu
from migplan.operator.conditions import keep_transition_times, new_condition
from migplan.operator.kube.quantities import mig_counts
from migplan.operator.kube.seam import Kube
from migplan.operator.nvml.adapter import NvmlAdapter
from migplan.operator.nvml.compare import compare
from migplan.operator.nvml.errors import (
    DRIVER_NOT_LOADED,
    LIBRARY_NOT_FOUND,
    NAMES,
    NO_PERMISSION,
    NvmlError,
)
from migplan.planner.api.nodepartition import (
    EVICTED_PODS_STOPPING,
    Condition,
    ConditionType,
    GpuObserved,
    NodePartitionSpec,
    NodePartitionStatus,
    NodePhase,
)
from migplan.planner.hardware.catalog import Catalog
from migplan.planner.hardware.layout import Instance, Layout
from migplan.planner.hardware.resources import is_mig_resource, resource_name

log = structlog.get_logger("migplan.agent")
Binding = tuple[int, Instance]


class Bindings(Protocol):
    """Which pod holds which instance (kubelet PodResources, or the simulated plugin)."""

    def bindings(self, node: str) -> dict[Binding, str]: ...


class DevicePlugin(Protocol):
    """Makes the device plugin (and the other components that read the instances) re-read
    the GPUs: deleting their pods, on a real node."""

    feature_discovery_seen: bool
    """Whether GPU feature discovery runs on the node (its labels are then checked)."""

    def restart(self, node: str) -> None: ...


def still_evicted(
    evicted: Iterable[str],
    *,
    uids: Mapping[str, str],
    uid_of: Callable[[str, str], str | None],
) -> list[str]:
    """`evicted` less the pods made again since: a pod whose UID the operator recorded and
    that now exists under another UID (`uid_of(namespace, name)`; None when gone)."""
    found = []
    for pod in evicted:
        recorded = uids.get(pod)
        if recorded is not None:
            namespace, _, name = pod.partition("/")
            now = uid_of(namespace, name)
            if now is not None and now != recorded:
                continue
        found.append(pod)
    return found


def _uid(pod: Any) -> str | None:
    return None if pod is None else str(pod.metadata.uid)


@dataclass
class NodeAgent:
    """One node's agent."""

    api: Kube
    node: str
    nvml: Callable[[], Any]
    """Returns the NVML binding to use: pynvml, or an emulator's copy (`FakeNvml.pynvml`)."""
    catalog: Catalog
    bindings: Bindings
    device_plugin: DevicePlugin
    allocatable_timeout: float = 60.0
    dra_plugin: DevicePlugin | None = None
    """Restarts NVIDIA's DRA kubelet plugin on the node (for NodePartitions with `dra`)."""
    profile_differences: list[str] | None = field(default=None, init=False)
    """How NVML's profiles differ from profiles/, checked on the first pass."""
    restart_pending: bool = field(default=False, init=False)
    """The GPUs changed and the components have not been restarted since."""
    seen_version: str | None = field(default=None, init=False)
    """The resourceVersion of the NodePartition the last pass read (the loop waits for a
    change after it)."""

    def run_once(self) -> NodePartitionStatus | None:
        """One reconcile of the node's NodePartition; None if it has none."""
        found = self.api.plans.get_node_partition(name=self.node)
        self.seen_version = None if found is None else found["metadata"].get("resourceVersion")
        if found is None:
            return None
        spec = NodePartitionSpec.model_validate(found["spec"])
        generation = int(found["metadata"].get("generation", 0))
        previous = found.get("status") or {}
        held = self.bindings.bindings(self.node)
        try:
            outcomes, observed = self._reconcile(spec, held)
        except NvmlError as exc:
            if exc.call != "nvmlInit":
                raise
            return self._nvml_unavailable(exc, generation, previous)
        changed = any(o.steps for o in outcomes)
        phases = {o.phase for o in outcomes} or {GpuPhase.CONVERGED}
        conditions = []
        restart_error = self._restart_components(changed, dra=spec.dra)
        if restart_error is not None:
            phase = NodePhase.FAILED
            conditions.append(
                new_condition(
                    ConditionType.READY, False, "ComponentsNotRestarted", restart_error, generation
                )
            )
        elif phases == {GpuPhase.CONVERGED}:
            check = self._slices_match if spec.dra else self._allocatable_matches
            ready, message = check(observed)
            phase = NodePhase.APPLIED if ready else NodePhase.WAITING_FOR_DEVICE_PLUGIN
            conditions.append(
                new_condition(
                    ConditionType.READY,
                    ready,
                    "Applied" if ready else "Allocatable",
                    message,
                    generation,
                )
            )
        else:
            phase, reason = not_ready(outcomes)
            reasons = "; ".join(f"GPU {o.index}: {r}" for o in outcomes for r in o.reasons)
            conditions.append(
                new_condition(ConditionType.READY, False, reason, reasons, generation)
            )
        conditions.append(self._profiles_condition(generation))
        conditions.append(
            new_condition(
                ConditionType.NVML_READY, True, "Loaded", "NVML answers on this node", generation
            )
        )
        applied = generation if phase is NodePhase.APPLIED else previous.get("appliedGeneration")
        status = NodePartitionStatus(
            phase=phase,
            applied_generation=applied,
            gpu_count=len(observed),
            gpus=tuple(observed),
            conditions=tuple(conditions),
        )
        written = self._write_status(status, previous)
        record_pass(
            phase=phase,
            observed=observed,
            newly_applied=applied != previous.get("appliedGeneration"),
        )
        steps = [s for o in outcomes for s in o.steps]
        (log.info if steps or written else log.debug)(
            "reconciled",
            node=self.node,
            phase=phase,
            generation=generation,
            steps=steps,
        )
        return status

    def _restart_components(self, changed: bool, *, dra: bool = False) -> str | None:
        """Restart the components after a change (again on a later pass if that failed):
        the device plugin and its companions, or NVIDIA's DRA kubelet plugin; why it
        failed, if it did."""
        self.restart_pending = self.restart_pending or changed
        if not self.restart_pending:
            return None
        if dra and self.dra_plugin is None:
            return "the agent was started without a DRA kubelet plugin to restart (--dra-plugin)"
        try:
            (self.dra_plugin if dra and self.dra_plugin else self.device_plugin).restart(self.node)
        except Exception as exc:  # reported in status; retried on the next pass
            log.error("restarting components failed", node=self.node, error=str(exc))
            what = (
                "the DRA kubelet plugin"
                if dra
                else "the device plugin and the other GPU components"
            )
            return f"restarting {what} failed: {exc}"
        self.restart_pending = False
        return None

    def _nvml_unavailable(
        self, exc: NvmlError, generation: int, previous: Mapping[str, Any]
    ) -> NodePartitionStatus:
        """Report that NVML cannot be used here (no GPUs: plans leave the node out)."""
        name = NAMES.get(exc.code, str(exc.code))
        message = f"{exc}: {NVML_HINTS.get(exc.code, 'see the agent log')}"
        status = NodePartitionStatus(
            phase=NodePhase.NVML_UNAVAILABLE,
            applied_generation=previous.get("appliedGeneration"),
            gpu_count=0,
            gpus=(),
            conditions=(
                new_condition(ConditionType.NVML_READY, False, _camel(name), message, generation),
            ),
        )
        if self._write_status(status, previous):
            log.error("NVML unavailable", node=self.node, error=str(exc))
        return status

    def _write_status(self, status: NodePartitionStatus, previous: Mapping[str, Any]) -> bool:
        """Write `status` (conditions keeping their transition times) if it differs from
        `previous`; whether it did."""
        document = status.model_dump(mode="json", by_alias=True, exclude_none=True)
        document["conditions"] = keep_transition_times(
            document["conditions"], previous.get("conditions") or []
        )
        if document == previous:
            return False
        self.api.plans.patch_node_partition_status(name=self.node, status=document)
        return True

    def _check_profiles(self, nvml: NvmlAdapter) -> None:
        """Compare NVML's profiles and placements with profiles/ once; warn on a mismatch."""
        if self.profile_differences is not None:
            return
        self.profile_differences = []
        for device in nvml.devices():
            model = self.catalog.model(device.name)
            for difference in compare(model, nvml.profiles(device.index)):
                self.profile_differences.append(f"GPU {device.index}: {difference}")
        if self.profile_differences:
            log.warning(
                "profiles differ from the hardware",
                node=self.node,
                differences=self.profile_differences,
            )

    def _profiles_condition(self, generation: int) -> Condition:
        differences = self.profile_differences or []
        message = (
            "; ".join(differences)
            if differences
            else ("NVML's profiles and placements match profiles/")
        )
        return new_condition(
            ConditionType.PROFILES_MATCH,
            not differences,
            "Mismatch" if differences else "Match",
            message,
            generation,
        )

    def _evicted(self, spec: NodePartitionSpec) -> list[str]:
        """The evicted pods that are still the pods the operator evicted: one made again
        under an evicted pod's name (another UID) holds its instance as any pod does."""
        return still_evicted(
            spec.evicted_pods,
            uids=spec.evicted_pod_uids,
            uid_of=lambda namespace, name: _uid(
                self.api.core.get_pod(namespace=namespace, name=name)
            ),
        )

    def _reconcile(
        self, spec: NodePartitionSpec, held: Mapping[Binding, str]
    ) -> tuple[list[GpuOutcome], list[GpuObserved]]:
        targets = {t.index: Layout.parse(t.layout) for t in spec.gpus}
        outcomes, observed = [], []
        with NvmlAdapter(self.nvml()) as nvml:
            self._check_profiles(nvml)
            for device in nvml.devices():
                model = self.catalog.model(device.name)
                assigned = {i: pod for (gpu, i), pod in held.items() if gpu == device.index}
                if device.index in targets:
                    outcome = reconcile_gpu(
                        nvml,
                        index=device.index,
                        model=model,
                        desired=targets[device.index],
                        assigned=assigned,
                        evicted=self._evicted(spec),
                    )
                    outcomes.append(outcome)
                after_device = next(d for d in nvml.devices() if d.index == device.index)
                layout = (
                    nvml.layout(device.index, model)[0] if after_device.mig_enabled else (Layout())
                )
                observed.append(
                    GpuObserved(
                        index=device.index,
                        uuid=device.uuid,
                        model=model.model,
                        mig_enabled=after_device.mig_enabled,
                        layout=str(layout),
                        in_use={
                            str(i): pod
                            for i, pod in sorted(assigned.items())
                            if i in layout.instances
                        },
                    )
                )
        return outcomes, observed

    def _allocatable_matches(self, observed: list[GpuObserved]) -> tuple[bool, str]:
        """Wait until the node advertises exactly the MIG instances NVML shows."""
        want: Counter[str] = Counter()
        for gpu in observed:
            want.update(resource_name(i.profile) for i in Layout.parse(gpu.layout).instances)
        labelled = self.device_plugin.feature_discovery_seen
        deadline = time.monotonic() + self.allocatable_timeout
        while True:
            node = self.api.core.get_node(name=self.node)
            allocatable = node.status.allocatable or {}
            have = mig_counts(allocatable)
            labels = _mig_count_labels(node.metadata.labels or {}) if labelled else want
            if have == want and labels == want:
                return True, (
                    "NVML, the node's allocatable resources"
                    + (" and GFD's labels agree" if labelled else " agree")
                )
            if time.monotonic() > deadline:
                if have != want:
                    return False, f"node allocatable {dict(have)} != NVML {dict(want)}"
                return (
                    False,
                    f"GFD labels nvidia.com/mig-*.count {dict(labels)} != NVML {dict(want)}",
                )
            time.sleep(0.5)

    def _slices_match(self, observed: list[GpuObserved]) -> tuple[bool, str]:
        """Wait until NVIDIA's DRA driver publishes exactly the MIG instances NVML shows."""
        want = {(g.uuid, str(i)) for g in observed for i in Layout.parse(g.layout).instances}
        deadline = time.monotonic() + self.allocatable_timeout
        while True:
            have = {(uuid, str(i)) for uuid, i in dra_instances(self.api, node=self.node).values()}
            if have == want:
                return True, "NVML and the DRA driver's ResourceSlices agree"
            if time.monotonic() > deadline:
                return False, (
                    f"ResourceSlices publish {sorted(i for _, i in have)}, NVML has "
                    f"{sorted(i for _, i in want)}"
                )
            time.sleep(0.5)


def not_ready(outcomes: Sequence[GpuOutcome]) -> tuple[NodePhase, str]:
    """The node's phase and its Ready condition's reason after a pass that left GPUs
    unconverged: the worst GPU's phase, with the reason `EVICTED_PODS_STOPPING` where every
    blocked GPU waits only for evicted pods' processes to stop and none is worse (the
    operator waits for those, and fails the node for the rest)."""
    phases = {o.phase for o in outcomes}
    worst = next(
        p
        for p in (GpuPhase.INVALID, GpuPhase.FAILED, GpuPhase.BLOCKED, GpuPhase.RESET_REQUIRED)
        if p in phases
    )
    stopping = worst is GpuPhase.BLOCKED and all(
        o.stopping for o in outcomes if o.phase is GpuPhase.BLOCKED
    )
    return NodePhase(worst.value), EVICTED_PODS_STOPPING if stopping else worst.value


def _mig_count_labels(labels: Mapping[str, str]) -> Counter[str]:
    """Resource name -> count from GFD's `nvidia.com/mig-<profile>.count` labels."""
    return Counter(
        {
            key.removesuffix(".count"): int(value)
            for key, value in labels.items()
            if key.endswith(".count")
            and is_mig_resource(key.removesuffix(".count"))
            and value.isdigit()
            and int(value)
        }
    )


NVML_HINTS = {
    LIBRARY_NOT_FOUND: "libnvidia-ml.so.1 is not in the container: run the agent with the "
    "NVIDIA container runtime (runtimeClassName: nvidia) and NVIDIA_DRIVER_CAPABILITIES "
    "including utility",
    DRIVER_NOT_LOADED: "the NVIDIA kernel driver is not loaded on this node (the GPU "
    "Operator's driver pod, or the host's driver)",
    NO_PERMISSION: "the agent may not open the GPU devices: it needs privileged: true and "
    "NVIDIA_MIG_CONFIG_DEVICES=all",
}
"""Why nvmlInit fails, in words a cluster admin can act on."""


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))
