"""Preflight: can migplan's changes take effect on these nodes, and can they be made safely?

Pure rules over `ClusterFacts` (read live by `facts.py`, or from an inventory file offline),
shared by the operator (per plan, before it rolls anything out) and `migplan doctor`. Each
finding says what is wrong in plain words and how to fix it; a `BLOCKING` one keeps the
operator off that node, because a change there would be invisible or unsafe.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from migplan.operator.gpu_operator import (
    AGENT_OWNED,
    DISABLED_BY_MIGPLAN,
    MIG_CONFIG_LABEL,
    MIG_MANAGER_DEPLOY_LABEL,
    GpuOperatorSettings,
)
from migplan.planner.api.spec import Actuator
from migplan.planner.export.migparted import CONFIG_PREFIX

HELM_MIXED = (
    "helm upgrade gpu-operator nvidia/gpu-operator -n {namespace} --reuse-values "
    "--set mig.strategy=mixed (or set spec.mig.strategy: mixed in the ClusterPolicy)"
)


class Severity(StrEnum):
    """How much a finding matters, least first."""

    OK = "ok"
    INFO = "info"
    WARNING = "warning"
    BLOCKING = "blocking"


RANK = {s: i for i, s in enumerate(Severity)}


@dataclass(frozen=True)
class Finding:
    """One check's result on one node ("" for the cluster as a whole)."""

    check: str
    severity: Severity
    message: str
    fix: str = ""
    node: str = ""


@dataclass(frozen=True)
class NodeFacts:
    """What preflight knows of one GPU node."""

    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str] = field(default_factory=dict)
    components: frozenset[str] | None = None
    """GPU Operator components with a pod on the node (None: not known, offline)."""
    partition: Mapping[str, Any] | None = None
    """The node's NodePartition status (None: none, or not known offline)."""


@dataclass(frozen=True)
class ClusterFacts:
    """What preflight knows of the cluster."""

    nodes: tuple[NodeFacts, ...]
    live: bool
    cluster_policy: Mapping[str, Any] | None = None
    """The GPU Operator's ClusterPolicy spec (None: none found, or offline)."""


def _strategy(node: NodeFacts, settings: GpuOperatorSettings) -> Finding:
    value = node.labels.get(settings.strategy_label)
    fix = "switch the GPU Operator to the mixed MIG strategy: " + HELM_MIXED.format(
        namespace=settings.namespace
    )
    if value == "mixed":
        return Finding(
            "MigStrategy",
            Severity.OK,
            "mixed: instances are advertised as nvidia.com/mig-<profile>",
            node=node.name,
        )
    if value in ("single", "none"):
        seen = (
            "as nvidia.com/gpu, so pods asking for nvidia.com/mig-* never see what migplan makes"
            if value == "single"
            else "not at all"
        )
        return Finding(
            "MigStrategy",
            Severity.BLOCKING,
            f"MIG strategy {value}: the device plugin advertises MIG instances {seen}; "
            "migplan changes nothing on this node",
            fix,
            node.name,
        )
    if value is not None:
        shown = value.encode("unicode_escape").decode("ascii")[:63]
        return Finding(
            "MigStrategy",
            Severity.WARNING,
            f"{settings.strategy_label}='{shown}' is no MIG strategy GPU feature discovery "
            "writes (mixed, single or none), so migplan cannot tell whether its instances "
            "will be advertised",
            f"label the node {settings.strategy_label}=mixed if its device plugin runs with "
            "MIG_STRATEGY=mixed; else " + fix,
            node.name,
        )
    return Finding(
        "MigStrategy",
        Severity.WARNING,
        f"no {settings.strategy_label} label: GPU feature discovery has not labelled the node, "
        "so migplan cannot tell whether its instances will be advertised",
        "run GPU feature discovery (the GPU Operator does) with the mixed strategy, or label "
        f"the node {settings.strategy_label}=mixed if its device plugin runs with "
        "MIG_STRATEGY=mixed",
        node.name,
    )


def _mig_manager(
    node: NodeFacts, actuator: Actuator, settings: GpuOperatorSettings
) -> Finding | None:
    if node.components is None:
        return None  # offline: which pods run where is not known
    running = node.components is not None and "mig-manager" in node.components
    fenced = node.labels.get(MIG_MANAGER_DEPLOY_LABEL) == "false"
    by_migplan = bool(node.annotations.get(DISABLED_BY_MIGPLAN))
    config = node.labels.get(MIG_CONFIG_LABEL)
    if actuator is Actuator.AGENT:
        if fenced and config == AGENT_OWNED and not running:
            return Finding(
                "MigManager",
                Severity.OK,
                f"kept off this node by migplan ({MIG_MANAGER_DEPLOY_LABEL}=false, "
                f"{MIG_CONFIG_LABEL}={AGENT_OWNED})",
                node=node.name,
            )
        if running:
            return Finding(
                "MigManager",
                Severity.INFO,
                f"mig-manager runs here and applies {MIG_CONFIG_LABEL}={config or '(unset)'} "
                "each time it starts; before its agent changes a GPU, migplan sets "
                f"{MIG_MANAGER_DEPLOY_LABEL}=false and waits for it to leave",
                "nothing to do; to keep it off every node: --set migManager.enabled=false",
                node.name,
            )
        return Finding("MigManager", Severity.OK, "mig-manager does not run here", node=node.name)
    if fenced and by_migplan:
        return Finding(
            "MigManager",
            Severity.INFO,
            "migplan turned mig-manager off here for its agent; it turns it back on when it "
            "hands this node to mig-manager",
            node=node.name,
        )
    if not running:
        return Finding(
            "MigManager",
            Severity.BLOCKING,
            f"no mig-manager pod ({settings.mig_manager}) in {settings.namespace} on this node: "
            "nobody would apply the configs migplan writes",
            f"enable it (--set migManager.enabled=true) and make sure the node has "
            f"{MIG_MANAGER_DEPLOY_LABEL}=true",
            node.name,
        )
    owner = "migplan's" if (config or "").startswith(CONFIG_PREFIX) else "not migplan's"
    return Finding(
        "MigManager",
        Severity.OK if owner == "migplan's" or not config else Severity.INFO,
        f"{MIG_CONFIG_LABEL}={config or '(unset)'} ({owner}); migplan points it at its own "
        "config when it changes the node",
        node=node.name,
    )


_COMPONENT_EFFECT = {
    "device-plugin": (
        "DevicePlugin",
        "new instances would not be advertised, so pending pods would not start",
        "device_plugin",
    ),
    "gpu-feature-discovery": (
        "FeatureDiscovery",
        "the node's nvidia.com/mig-* labels would go stale",
        "feature_discovery",
    ),
}


def _component(node: NodeFacts, component: str, settings: GpuOperatorSettings) -> Finding | None:
    if node.components is None:
        return None
    check, effect, attribute = _COMPONENT_EFFECT[component]
    selector = getattr(settings, attribute)
    if component in node.components:
        return Finding(check, Severity.OK, f"{component} runs here", node=node.name)
    return Finding(
        check,
        Severity.WARNING,
        f"no {component} pod ({selector}) in {settings.namespace} on this node: {effect}",
        f"check the GPU Operator's {component}, or tell migplan where it runs "
        "(--gpu-operator-namespace and the component's --*-selector option)",
        node.name,
    )


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), None)


def _agent(node: NodeFacts) -> list[Finding]:
    status = node.partition
    if status is None or not status.get("gpus"):
        nvml = _condition(status or {}, "NvmlReady")
        if nvml is not None and nvml.get("status") == "False":
            return [_nvml_finding(node.name, nvml)]
        return [
            Finding(
                "Agent",
                Severity.WARNING,
                "the migplan agent has not reported this node's GPUs: plans leave it out",
                "check the agent pod on the node: kubectl -n migplan-agent get pods -o wide "
                f"--field-selector spec.nodeName={node.name}",
                node.name,
            )
        ]
    found = [Finding("Agent", Severity.OK, f"reports phase {status.get('phase')}", node=node.name)]
    profiles = _condition(status, "ProfilesMatch")
    if profiles is not None and profiles.get("status") == "False":
        found.append(
            Finding(
                "Profiles",
                Severity.WARNING,
                f"NVML's profiles differ from migplan's catalog: {profiles.get('message')}",
                "update profiles/ (or pass --profiles-dir) so plans use what the GPU offers",
                node.name,
            )
        )
    return found


def _nvml_finding(node: str, condition: Mapping[str, Any]) -> Finding:
    return Finding(
        "Nvml",
        Severity.BLOCKING,
        f"the agent cannot use NVML: {condition.get('message')}",
        "run the agent with the NVIDIA container runtime (runtimeClassName: nvidia, "
        "NVIDIA_VISIBLE_DEVICES=all, NVIDIA_DRIVER_CAPABILITIES=utility, "
        "NVIDIA_MIG_CONFIG_DEVICES=all) on a node whose driver is loaded",
        node,
    )


def _cdi(policy: Mapping[str, Any] | None, live: bool) -> Finding | None:
    if not live:
        return None
    if policy is None:
        return Finding(
            "Cdi",
            Severity.INFO,
            "no GPU Operator ClusterPolicy found: CDI mode unknown",
            "if the NVIDIA container toolkit runs in CDI mode, give the agent --cdi-command",
        )
    if (policy.get("cdi") or {}).get("enabled"):
        return Finding(
            "Cdi",
            Severity.INFO,
            "CDI is on: after a change the CDI spec must list the new instances",
            "give the agent --cdi-command (e.g. nvidia-ctk cdi generate ...); it runs it "
            "after each change, before restarting the device plugin",
        )
    return Finding("Cdi", Severity.OK, "CDI is off in the ClusterPolicy")


def preflight(
    facts: ClusterFacts, *, actuator: Actuator, settings: GpuOperatorSettings
) -> list[Finding]:
    """Every finding on the cluster and on each node, cluster-wide ones first."""
    found: list[Finding] = []
    cdi = _cdi(facts.cluster_policy, facts.live)
    if cdi is not None:
        found.append(cdi)
    for node in sorted(facts.nodes, key=lambda n: n.name):
        found.append(_strategy(node, settings))
        for finding in (
            _mig_manager(node, actuator, settings),
            *(_component(node, component, settings) for component in _COMPONENT_EFFECT),
        ):
            if finding is not None:
                found.append(finding)
        if facts.live:
            found.extend(_agent(node))
    return found


def blocked_nodes(findings: Iterable[Finding]) -> dict[str, str]:
    """Node -> why migplan must not change it (its blocking findings)."""
    blocked: dict[str, list[str]] = {}
    for f in findings:
        if f.node and f.severity is Severity.BLOCKING:
            blocked.setdefault(f.node, []).append(f.message)
    return {node: "; ".join(why) for node, why in blocked.items()}


def worst(findings: Iterable[Finding]) -> Severity:
    """The most serious severity among `findings` (OK if none)."""
    return max((f.severity for f in findings), key=RANK.__getitem__, default=Severity.OK)


def summary(findings: Iterable[Finding]) -> tuple[bool, str, str]:
    """(passed, reason, message) for the plan's `Preflight` condition: it fails when a node
    is refused; warnings are listed but pass."""
    items = list(findings)
    blocking = [f for f in items if f.severity is Severity.BLOCKING]
    warnings = [f for f in items if f.severity is Severity.WARNING]
    checked = len({f.node for f in items if f.node})

    def listed(found: list[Finding], limit: int = 5) -> str:
        shown = "; ".join(f"{f.node or 'cluster'}: {f.message}" for f in found[:limit])
        more = len(found) - limit
        return shown + (f"; and {more} more" if more > 0 else "")

    if blocking:
        checks = sorted({f.check for f in blocking})
        nodes = len({f.node for f in blocking})
        return (
            False,
            "".join(checks) if len(checks) == 1 else "Several",
            f"{nodes} of {checked} nodes refused: {listed(blocking)}"
            + (f" (and {len(warnings)} warnings)" if warnings else ""),
        )
    if warnings:
        return (
            True,
            "Warnings",
            f"{checked} nodes checked, {len(warnings)} warnings: " + listed(warnings),
        )
    return True, "Passed", f"{checked} nodes checked: nothing in the way"
