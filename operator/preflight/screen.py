"""What a plan may change: the inventory less the nodes preflight refuses. The operator and
the CLI (`preview`, `export`) plan from the same screened inventory, so what the CLI shows is
what the operator would do."""

from __future__ import annotations

from dataclasses import dataclass

from migplan.operator.gpu_operator import GpuOperatorSettings
from migplan.operator.preflight.checks import (
    ClusterFacts,
    Finding,
    NodeFacts,
    blocked_nodes,
    preflight,
)
from migplan.planner.api.inventory import Inventory
from migplan.planner.api.spec import Actuator, GPUPartitionPlan


def inventory_facts(inventory: Inventory) -> ClusterFacts:
    """Facts an inventory file holds: the nodes' labels only."""
    return ClusterFacts(
        nodes=tuple(NodeFacts(name=n.name, labels=dict(n.labels)) for n in inventory.nodes),
        live=False,
    )


@dataclass(frozen=True)
class Screened:
    """The inventory a plan may change, what preflight found, and the nodes it refused."""

    inventory: Inventory
    findings: tuple[Finding, ...]
    refused: dict[str, str]
    """Node -> why preflight refused it."""


def screen(
    inventory: Inventory,
    facts: ClusterFacts,
    *,
    manifest: GPUPartitionPlan,
    settings: GpuOperatorSettings | None = None,
) -> Screened:
    """`inventory` without the nodes preflight refuses for `manifest`'s actuator."""
    settings = settings or GpuOperatorSettings()
    findings = preflight(
        facts, actuator=manifest.spec.actuator or Actuator.AGENT, settings=settings
    )
    refused = blocked_nodes(findings)
    kept = inventory
    if refused:
        kept = inventory.model_copy(
            update={"nodes": tuple(n for n in inventory.nodes if n.name not in refused)}
        )
    return Screened(kept, tuple(findings), refused)
