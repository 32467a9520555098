"""The planning pass as the CLI and the operator run it."""

from __future__ import annotations

import time
from pathlib import Path

from migplan.operator.cli.files import load_inventory, load_plan_manifest
from migplan.planner.api.inventory import resolve_inventory
from migplan.planner.hardware.catalog import default_catalog
from migplan.planner.pipeline import plan_fleet

ROOT = Path(__file__).resolve().parents[2]


def test_the_plan_is_named_and_its_time_is_the_planning_alone() -> None:
    manifest = load_plan_manifest(ROOT / "examples" / "plan.yaml")
    inventory = load_inventory(ROOT / "examples" / "cluster.yaml")
    began = time.monotonic() - 30  # the command began long ago (imports, reading files)
    outcome = plan_fleet(manifest, inventory, default_catalog(), started=began)
    assert outcome.plan.name == "shared-pool"
    assert outcome.plan.solver.wall_seconds < 10  # the pass, not the 30 s before it


def test_gpus_the_caller_checked_give_the_same_plan_as_checking_them_again() -> None:
    manifest = load_plan_manifest(ROOT / "examples" / "plan.yaml")
    inventory = load_inventory(ROOT / "examples" / "cluster.yaml")
    catalog = default_catalog()
    first = inventory.nodes[1]  # a100-node-2; its second GPU is idle
    idle = first.gpus[1].model_copy(update={"uuid": "GPU-not-covered"})
    extra = first.model_copy(update={"name": "not-covered", "labels": {}, "gpus": (idle,)})
    inventory = inventory.model_copy(update={"nodes": (*inventory.nodes, extra)})
    resolved = resolve_inventory(inventory, catalog)  # every node, as the CLI checks a file
    again = plan_fleet(manifest, inventory, catalog).plan
    reused = plan_fleet(manifest, inventory, catalog, resolved=resolved).plan
    assert "not-covered" not in {gpu.node for gpu in reused.gpus}
    assert reused.model_dump(exclude={"solver"}) == again.model_dump(exclude={"solver"})
